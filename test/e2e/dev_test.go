//go:build e2e

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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/kubectlmcp"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestDevLoop runs the README's main job (`make dev`, i.e. hack/dev with the binaries `make
// build` produces) as a real process, twice: the sample MCPServer is Ready=True at once (every
// replica's sidecar reports), `kubectl mcp tools` lists the sample tools with the declared ones
// marked (through the front, and through a port-forward to a pod: kwok plays the kubelet), an MCP
// client and `kubectl mcp watch` listen on the printed URL, an edited MCPTool is applied with
// kubectl, and both receive tools/list_changed; `kubectl mcp call` calls a tool (port-forward);
// Ctrl-C (SIGINT) drains the sidecars (watch prints complete and relisten), stops everything and
// frees every port, so the second run starts cleanly.
func TestDevLoop(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/manager", "./cmd/sidecar", "./cmd/sample-server", "./cmd/kubectl-mcp", "./hack/dev")
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
	readyRE := regexp.MustCompile(`MCPServer \S+: Ready=(\S+)`)
	var kubeconfig, kubectl, ready string
	for kubectl == "" || kubeconfig == "" || ready == "" {
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
			if m := readyRE.FindStringSubmatch(l); m != nil {
				ready = m[1]
			}
		case <-ctx.Done():
			t.Fatal("make dev did not print its kubeconfig and kubectl")
		}
	}

	// The first thing people see: the sample is Ready, every replica having applied the catalog.
	if ready != "True" {
		t.Errorf("make dev printed Ready=%s, want True", ready)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "get", "mcpserver", "weather",
		"-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`).CombinedOutput()
	if err != nil || string(out) != "True" {
		t.Errorf("kubectl get mcpserver weather: Ready=%q (%v), want True", out, err)
	}

	url := "http://" + ports[0] + "/mcp"
	kmcp := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, filepath.Join(bin, "kubectl-mcp"), append(args, "--url", url, "--kubeconfig", kubeconfig, "-n", "default")...)
	}
	kubectlMCPTools(t, kmcp)
	// Without --url the plugin finds a ready pod of the MCPServer through the API and
	// port-forwards to it (client-go, through the API server, to kwok acting as the node's
	// kubelet, to that pod's sidecar process).
	noURL := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-mcp"), "tools", "weather", "--kubeconfig", kubeconfig, "-n", "default")
	if out, err := noURL.CombinedOutput(); err != nil || !strings.Contains(string(out), "via port-forward to pod default/weather-") ||
		!strings.Contains(string(out), "MCPTool/weather-forecast") {
		t.Errorf("kubectl mcp tools weather (port-forward): %v\n%s", err, out)
	} else {
		t.Logf("kubectl mcp tools weather (port-forward):\n%s", out)
	}
	watch := startWatch(t, kmcp)

	// A client listens for tool list changes on the printed MCP URL.
	mcp := mcptest.New(url)
	stream, err := mcp.Listen(ctx, map[string]any{"toolsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()

	patch := `{"spec":{"description":"Forecast edited by TestDevLoop"}}`
	out, err = exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "patch", "mcptool", "weather-forecast",
		"--type=merge", "-p", patch).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	deadline := time.After(30 * time.Second)
	for got := false; !got; {
		select {
		case n, ok := <-stream.C:
			if !ok {
				t.Fatalf("the listen stream ended before tools/list_changed (%s)", stream.Ended())
			}
			got = n.Method == "notifications/tools/list_changed"
		case <-deadline:
			t.Fatal("the listening client got no tools/list_changed after the MCPTool edit")
		}
	}

	watch.expect(t, "notifications/tools/list_changed")

	// kubectl mcp call reaches the tool through a port-forward to a pod's sidecar.
	call := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-mcp"), "call", "weather", "get_forecast", "--args", `{"city":"Oslo","days":1}`,
		"--kubeconfig", kubeconfig, "-n", "default")
	if out, err := call.CombinedOutput(); err != nil || !strings.Contains(string(out), "Oslo") {
		t.Errorf("kubectl mcp call weather get_forecast: %v\n%s", err, out)
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
	// Ctrl-C drains the sidecars one by one: the watching client gets complete and listens
	// again (through the front, on a replica still serving), and kubectl mcp watch says so.
	watch.expect(t, "complete")
	watch.expect(t, "relisten")
	watch.stop(t)
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
	out := make([]string, n)
	for i := range out {
		out[i] = freeport.ForTest(t)
	}
	return out
}

// kubectlMCPTools runs `kubectl mcp tools weather -o json` and checks the sample's tools are
// listed with their TTL and scope, and the declared ones marked with their MCPTool.
func kubectlMCPTools(t *testing.T, kmcp func(...string) *exec.Cmd) {
	t.Helper()
	cmd := kmcp("tools", "weather", "-o", "json")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl mcp tools weather: %v\n%s", err, out)
	}
	var l kubectlmcp.Listing
	if err := json.Unmarshal(out, &l); err != nil {
		t.Fatalf("kubectl mcp tools -o json: %v\n%s", err, out)
	}
	if len(l.Lists) != 1 || l.Lists[0].CacheScope == "" || l.ProtocolVersion != "2026-07-28" {
		t.Fatalf("kubectl mcp tools: %s", out)
	}
	i := slices.IndexFunc(l.Lists[0].Items, func(e kubectlmcp.Entry) bool { return e.Name == "get_forecast" })
	if i < 0 || l.Lists[0].Items[i].Source != "declared" || l.Lists[0].Items[i].DeclaredBy != "MCPTool/weather-forecast" {
		t.Fatalf("kubectl mcp tools does not show get_forecast declared by MCPTool/weather-forecast: %s", out)
	}
}

// watcher is a running `kubectl mcp watch -o json`.
type watcher struct {
	cmd   *exec.Cmd
	lines chan kubectlmcp.WatchEvent
}

func startWatch(t *testing.T, kmcp func(...string) *exec.Cmd) *watcher {
	t.Helper()
	w := &watcher{cmd: kmcp("watch", "weather", "-o", "json"), lines: make(chan kubectlmcp.WatchEvent, 100)}
	w.cmd.Stderr = os.Stderr
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e kubectlmcp.WatchEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				w.lines <- e
			}
		}
		close(w.lines)
	}()
	w.expect(t, "acknowledged")
	return w
}

// expect waits for an event of that type (or a notification with that method).
func (w *watcher) expect(t *testing.T, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.lines:
			if !ok {
				t.Fatalf("kubectl mcp watch ended before %s", what)
			}
			if e.Type == what || e.Method == what {
				return
			}
		case <-deadline:
			t.Fatalf("kubectl mcp watch printed no %s", what)
		}
	}
}

func (w *watcher) stop(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("kubectl mcp watch exited with %v after Ctrl-C", err)
	}
}
