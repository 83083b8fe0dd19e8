package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestDevLoop runs the README's main job (`make dev`, i.e. hack/dev with the binaries `make
// build` produces) as a real process, twice: an MCP client listens on the printed URL, an
// edited MCPTool is applied with kubectl, and the client receives tools/list_changed; Ctrl-C
// (SIGINT) stops everything and frees every port, so the second run starts cleanly.
func TestDevLoop(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/manager", "./cmd/sidecar", "./cmd/sample-server", "./hack/dev")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ports := freePorts(t, 3)
	for run := 1; run <= 2; run++ {
		t.Run(fmt.Sprintf("run%d", run), func(t *testing.T) { devRun(t, root, bin, ports) })
	}
}

func devRun(t *testing.T, root, bin string, ports []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "dev"), "--bin="+bin,
		"--mcp-listen="+ports[0], "--admin-listen="+ports[1], "--server-listen="+ports[2])
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			t.Log(sc.Text())
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()

	kubeRE := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	kubectlRE := regexp.MustCompile(`kubectl:\s+(\S+)`)
	var kubeconfig, kubectl string
	for kubectl == "" || kubeconfig == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("make dev exited before it was ready: %v", <-exited)
			}
			if m := kubeRE.FindStringSubmatch(l); m != nil {
				kubeconfig = m[1]
			}
			if m := kubectlRE.FindStringSubmatch(l); m != nil {
				kubectl = m[1]
			}
		case <-ctx.Done():
			t.Fatal("make dev did not print its kubeconfig and kubectl")
		}
	}

	// A client listens for tool list changes on the printed MCP URL.
	mcp := mcptest.New("http://" + ports[0] + "/mcp")
	stream, err := mcp.Listen(ctx, map[string]any{"toolsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	patch := `{"spec":{"description":"Forecast edited by TestDevLoop"}}`
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "patch", "mcptool", "weather-forecast",
		"--type=merge", "-p", patch).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case n, ok := <-stream.C:
			if !ok {
				t.Fatal("the listen stream ended before tools/list_changed")
			}
			got = n.Method == "notifications/tools/list_changed"
		case <-deadline:
			t.Fatal("the listening client got no tools/list_changed after the MCPTool edit")
		}
	}

	// The edit is visible in tools/list, through the sidecar.
	res, err := mcp.Call(ctx, "tools/list", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []struct{ Name, Description string } `json:"tools"`
	}
	if err := json.Unmarshal(res.Result, &list); err != nil {
		t.Fatalf("tools/list: %v: %s", err, res.Result)
	}
	if i := slices.IndexFunc(list.Tools, func(tl struct{ Name, Description string }) bool { return tl.Name == "get_forecast" }); i < 0 ||
		list.Tools[i].Description != "Forecast edited by TestDevLoop" {
		t.Errorf("tools/list does not show the edited get_forecast: %s", res.Result)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines { // drain the output until the process exits
	}
	if err := <-exited; err != nil {
		t.Fatalf("make dev exited with %v after Ctrl-C", err)
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", p)
		if err != nil {
			t.Errorf("port %s still taken after make dev stopped: %v", p, err)
			continue
		}
		_ = ln.Close()
	}
}

func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}
