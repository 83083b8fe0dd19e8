//go:build e2e

package e2e

// An MCPServer with transport: Stdio through the whole product: the controller renders the pod
// (installer init container, bridge command, sidecar), and the pod's three command lines run as
// real processes on 127.0.0.1, rewritten only where this machine differs from a pod (the
// emptyDir's path, loopback ports): the installer copies the sidecar binary, the server
// container's command runs the bridge with the npm filesystem server as its child, and the
// sidecar container fronts it acting as its ServiceAccount. A 2026-07-28 client then gets the
// upstream's tools, calls them, hears an MCPTool edit, and the MCPServer's status reports the
// upstream's protocol.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

const stdioServerYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPServer
metadata:
  name: files
spec:
  replicas: 1
  container:
    image: node:22-alpine
    transport: Stdio
    command: %s
    args: [%q]
    port: 8080
    runAsUser: 1000
`

const stdioToolYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPTool
metadata:
  name: files-list
spec:
  serverRef: {name: files}
  name: ls
  upstreamName: list_directory
  description: %s
`

// runPodProcess starts one of the pod's command lines; it is stopped (SIGTERM, then SIGKILL) at
// cleanup, and its output goes to the test log on failure.
func runPodProcess(t *testing.T, name string, env []string, argv []string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s output:\n%s", name, b)
		}
	})
	return cmd
}

func container(cs []corev1.Container, name string) *corev1.Container {
	i := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	return &cs[i]
}

// literalEnv is a container's environment with a literal value, as the kubelet would set it.
func literalEnv(c *corev1.Container) []string {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env
}

func TestStdioMCPServerRunsBehindTheBridge(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "hello.txt"), []byte("hello from the pod"), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := testservers.FilesystemServer(root)
	if err != nil {
		t.Fatal(err)
	}
	command, _ := json.Marshal(fs[:2])
	if _, err := stack.Kubectl(ctx, fmt.Sprintf(stdioServerYAML, command, fs[2]), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = stack.Kubectl(context.Background(), "", "delete", "mcpserver", "files", "--wait=false") })

	// The pod the controller built (kwok makes it Ready).
	var pod corev1.Pod
	eventually.True(t, "a Ready pod of MCPServer files", func() bool {
		var pods corev1.PodList
		if err := stack.Env.Client.List(ctx, &pods, client.InNamespace(stack.Namespace), client.MatchingLabels{inject.LabelServer: "files"}); err != nil {
			return false
		}
		if len(pods.Items) == 1 && kube.PodReady(&pods.Items[0]) {
			pod = pods.Items[0]
			return true
		}
		return false
	})

	// The emptyDir is a directory here; its mount path is the only part of the command lines
	// that changes (with the loopback ports).
	binDir := filepath.Join(t.TempDir(), "switchboard-bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	local := func(a string) string {
		if rest, ok := strings.CutPrefix(a, inject.StdioBinDir); ok {
			return binDir + rest
		}
		return a
	}

	// 1. The installer init container (its image's entrypoint is the sidecar binary).
	inst := container(pod.Spec.InitContainers, inject.StdioInstallContainerName)
	if inst == nil {
		t.Fatalf("pod %s has no %s init container", pod.Name, inject.StdioInstallContainerName)
	}
	argv := []string{sidecarBin}
	for _, a := range inst.Args {
		argv = append(argv, local(a))
	}
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("installer %q: %v\n%s", argv, err, out)
	}

	// 2. The server container: the bridge from the emptyDir, the filesystem server its child.
	srv := container(pod.Spec.Containers, inject.ServerContainerName)
	if srv == nil {
		t.Fatalf("pod %s has no %s container", pod.Name, inject.ServerContainerName)
	}
	bridgeAddr := freeport.ForTest(t)
	argv = nil
	listenNext := false
	for _, a := range append(slices.Clone(srv.Command), srv.Args...) {
		switch {
		case listenNext:
			a, listenNext = bridgeAddr, false
		case a == "--listen":
			listenNext = true
		}
		argv = append(argv, local(a))
	}
	want := append([]string{filepath.Join(binDir, "sidecar"), "stdio", "--listen", bridgeAddr, "--path", "/mcp", "--"}, fs...)
	if !slices.Equal(argv, want) {
		t.Fatalf("server container runs %q, want %q", argv, want)
	}
	runPodProcess(t, "bridge", literalEnv(srv), argv)

	// 3. The sidecar container, as the pod's ServiceAccount.
	kubeconfig, err := framework.ImpersonatingKubeconfig(stack.Env.Environment.KubeConfig, t.TempDir(), stack.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	mcpAddr, adminAddr := freeport.ForTest(t), freeport.ForTest(t)
	args, err := framework.SidecarArgs(&pod, mcpAddr, adminAddr, "http://"+bridgeAddr+"/mcp")
	if err != nil {
		t.Fatal(err)
	}
	runPodProcess(t, "sidecar", append(framework.SidecarEnv(&pod), "KUBECONFIG="+kubeconfig), append([]string{sidecarBin}, args...))
	eventually.True(t, "the sidecar in front of the bridge to be ready", func() bool {
		r, err := http.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})

	// A 2026-07-28 client: the filesystem server's tools, a call, an MCPTool edit heard.
	c := mcptest.New("http://" + mcpAddr + "/mcp")
	names := func() []string {
		r, err := c.Call(ctx, "tools/list", nil)
		if err != nil || r.Error != nil {
			t.Fatalf("tools/list: %v %+v", err, r)
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		}
		_ = json.Unmarshal(r.Result, &res)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	if got := names(); !slices.Contains(got, "read_text_file") || !slices.Contains(got, "list_directory") {
		t.Fatalf("tools/list %q: want the filesystem server's tools", got)
	}
	r, err := c.Call(ctx, "tools/call", map[string]any{"name": "read_text_file", "arguments": map[string]any{"path": filepath.Join(root, "hello.txt")}})
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "hello from the pod") || !strings.Contains(string(r.Result), `"resultType":"complete"`) {
		t.Fatalf("tools/call read_text_file: %v %+v %s", err, r, r.Result)
	}

	l, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := stack.Kubectl(ctx, fmt.Sprintf(stdioToolYAML, "List a directory."), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = stack.Kubectl(context.Background(), "", "delete", "mcptool", "files-list", "--wait=false")
	})
	eventually.True(t, "tools/list_changed after the MCPTool edit", func() bool {
		for _, n := range l.Collect(200 * time.Millisecond) {
			if n.Method == "notifications/tools/list_changed" {
				return true
			}
		}
		return false
	})
	if got := names(); !slices.Contains(got, "ls") || slices.Contains(got, "list_directory") {
		t.Errorf("tools/list after the MCPTool %q: want ls in place of list_directory", got)
	}
	r, err = c.Call(ctx, "tools/call", map[string]any{"name": "ls", "arguments": map[string]any{"path": root}})
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "hello.txt") {
		t.Fatalf("tools/call ls: %v %+v", err, r)
	}

	// The sidecar's report reaches the MCPServer's status: the upstream speaks 2025-11-25.
	eventually.True(t, "status.upstream.protocolVersion 2025-11-25", func() bool {
		var s mcpv1alpha1.MCPServer
		if err := stack.Env.Client.Get(ctx, client.ObjectKey{Namespace: stack.Namespace, Name: "files"}, &s); err != nil {
			return false
		}
		return s.Status.Upstream != nil && s.Status.Upstream.ProtocolVersion == "2025-11-25"
	})
	out, err := stack.Kubectl(ctx, "", "get", "mcpserver", "files", "-o", "wide")
	if err != nil || !strings.Contains(out, "2025-11-25") {
		t.Errorf("kubectl get mcpserver files -o wide: %v\n%s", err, out)
	}
}
