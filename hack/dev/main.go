// Command dev is `make dev`: Switchboard's main job on a bare machine. It starts the test control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, built by
// hack/k8s-test-bins.sh), installs the CRDs, runs the manager, applies config/samples, and —
// since no kubelet runs containers here — runs the sample MCP server and a real sidecar process
// wired exactly as the sample's pod spec says: the same flags, watching the same catalog
// ConfigMap through the API as the sidecar's own ServiceAccount. It prints the kubeconfig and
// the MCP URL and runs until interrupted, then stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/controllers"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

const (
	namespace  = "default"
	serverName = "weather" // the sample MCPServer in config/samples
)

type options struct {
	bin        string
	mcpAddr    string
	adminAddr  string
	serverAddr string
	ready      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "Folder with the manager, sidecar and sample-server binaries (make build).")
	flag.StringVar(&o.mcpAddr, "mcp-listen", "127.0.0.1:8800", "Address the sidecar serves MCP on.")
	flag.StringVar(&o.adminAddr, "admin-listen", "127.0.0.1:8801", "Address of the sidecar's admin endpoints.")
	flag.StringVar(&o.serverAddr, "server-listen", "127.0.0.1:18080", "Address of the sample MCP server (the sidecar's upstream).")
	flag.DurationVar(&o.ready, "timeout", 2*time.Minute, "How long to wait for the sample server's pods.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	for _, addr := range []string{o.mcpAddr, o.adminAddr, o.serverAddr} {
		if err := portFree(addr); err != nil {
			return err
		}
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "switchboard-dev-")
	if err != nil {
		return err
	}
	say("Logs and kubeconfigs in %s", dir)

	say("Starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)")
	env, err := testenv.Start(testenv.Options{Controllers: true})
	if err != nil {
		return err
	}
	var procs []*proc
	defer func() {
		say("Stopping")
		// The sidecar first: SIGTERM runs its drain, so listening clients get their complete result.
		for _, p := range slices.Backward(procs) {
			p.stop()
		}
		if err := env.Stop(); err != nil {
			say("Stopping the control plane: %v", err)
		}
		say("Stopped everything; logs stay in %s", dir)
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.Environment.KubeConfig, 0o600); err != nil {
		return err
	}

	say("Starting the manager")
	manager, err := start(dir, "manager", []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(bin, "manager"),
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--sidecar-image=switchboard-sidecar:dev",
		// Pods here come from the manager's own Deployment only; no webhook to serve.
		"--webhook-cert-mode=none")
	if err != nil {
		return err
	}
	procs = append(procs, manager)

	say("Applying config/samples")
	if out, err := env.Kubectl(ctx, "apply", "--namespace="+namespace, "-k", filepath.Join(root, "config", "samples")).CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply -k config/samples: %w\n%s", err, out)
	}

	pod, err := firstReadyPod(ctx, env.Client, o.ready, manager)
	if err != nil {
		return err
	}
	say("Pod %s is Ready (kwok); running its containers here", pod.Name)

	sidecarKubeconfig, err := mcptest.ImpersonatingKubeconfig(env.Environment.KubeConfig, dir, namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return err
	}
	server, err := start(dir, "sample-server", nil, filepath.Join(bin, "sample-server"), "--listen="+o.serverAddr, "--path=/mcp")
	if err != nil {
		return err
	}
	procs = append(procs, server)

	args, err := mcptest.SidecarArgs(pod, o.mcpAddr, o.adminAddr, "http://"+o.serverAddr+"/mcp")
	if err != nil {
		return err
	}
	sidecar, err := start(dir, "sidecar", []string{"KUBECONFIG=" + sidecarKubeconfig}, filepath.Join(bin, "sidecar"), args...)
	if err != nil {
		return err
	}
	procs = append(procs, sidecar)
	if err := waitReady(ctx, "http://"+o.adminAddr+inject.ReadyzPath, sidecar); err != nil {
		return err
	}

	fmt.Printf(`
Switchboard is running.

  MCP endpoint:  http://%s/mcp   (the sidecar in front of the sample weather server)
  Admin:         http://%s/metrics
  Kubeconfig:    export KUBECONFIG=%s
  kubectl:       %s

Try: kubectl get mcp        (every Switchboard object)
     kubectl edit mcptool weather-forecast    (clients listening get tools/list_changed)

Press Ctrl-C to stop everything.
`, o.mcpAddr, o.adminAddr, kubeconfig, filepath.Join(env.Assets, "kubectl"))

	var exited *proc
	select {
	case <-ctx.Done():
		return nil
	case <-sidecar.done:
		exited = sidecar
	case <-server.done:
		exited = server
	case <-manager.done:
		exited = manager
	}
	if ctx.Err() != nil { // interrupted: the child went down with us
		return nil
	}
	return fmt.Errorf("the %s exited: %s", exited.name, exited.tail())
}

func firstReadyPod(ctx context.Context, c client.Client, timeout time.Duration, manager *proc) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{controllers.LabelServer: serverName}); err == nil {
			slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
			for i := range pods.Items {
				if controllers.PodReady(&pods.Items[i]) {
					return &pods.Items[i], nil
				}
			}
		}
		select {
		case <-ctx.Done():
			var s mcpv1alpha1.MCPServer
			_ = c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: serverName}, &s)
			return nil, fmt.Errorf("no Ready pod of MCPServer %s (status %+v): %s", serverName, s.Status.Conditions, manager.tail())
		case <-manager.done:
			return nil, fmt.Errorf("the manager exited: %s", manager.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func waitReady(ctx context.Context, url string, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sidecar did not become ready at %s: %s", url, p.tail())
		case <-p.done:
			return fmt.Errorf("the sidecar exited: %s", p.tail())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func portFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (is another make dev running?): %w", addr, err)
	}
	return ln.Close()
}

func say(format string, args ...any) {
	fmt.Printf("make dev: "+format+"\n", args...)
}

// proc is a child process logging to a file in the dev folder.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(dir, name string, env []string, path string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Children die with this process even if it is killed, and sit in their own process group, so
	// a terminal's Ctrl-C reaches only this process, which stops them in order (sidecar first).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM and waits, then SIGKILL after a grace period.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return p.name + " log tail:\n" + strings.Join(lines, "\n")
}
