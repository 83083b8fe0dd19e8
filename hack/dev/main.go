// Command dev is `make dev`: Switchboard's main job on a bare machine. It starts the test control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, built by
// hack/k8s-test-bins.sh), installs the CRDs, runs the manager, applies config/samples, and —
// since no kubelet runs containers here — runs, for every Ready replica pod, its own sample MCP
// server and a real sidecar process wired exactly as the pod spec says: the same flags, the
// pod's name, watching the same catalog ConfigMap through the API as the sidecar's own
// ServiceAccount, so every replica reports its propagation and the MCPServer turns Ready as in a
// cluster. kwok, the node's kubelet here, forwards each pod's ports to its replica's sidecar (a
// kwok PortForward per pod), so `kubectl port-forward` and `kubectl mcp SERVER` work as in a
// cluster, and a small front on the MCP address plays the Service. It prints the kubeconfig and
// the MCP URL and runs until interrupted, then stops everything it started.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/test/framework"
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
	plane      testenv.Options
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "Folder with the manager, sidecar and sample-server binaries (make build).")
	flag.StringVar(&o.mcpAddr, "mcp-listen", "127.0.0.1:8800", "Address the sidecar serves MCP on.")
	flag.StringVar(&o.adminAddr, "admin-listen", "127.0.0.1:8801", "Address of the sidecar's admin endpoints.")
	flag.StringVar(&o.serverAddr, "server-listen", "127.0.0.1:18080", "Address of the sample MCP server (the sidecar's upstream).")
	flag.DurationVar(&o.ready, "timeout", 2*time.Minute, "How long to wait for the sample server's pods.")
	o.plane.Controllers = true
	// Sized for a fleet of 1,000 single-replica servers (docs/performance.md, make bench-scale).
	flag.StringVar(&o.plane.ServiceCIDR, "service-cidr", testenv.DefaultServiceCIDR, "The API server's Service range (--service-cluster-ip-range).")
	flag.IntVar(&o.plane.Nodes, "nodes", 10, "How many fake kwok nodes run pods.")
	flag.IntVar(&o.plane.PodsPerNode, "pods-per-node", testenv.DefaultPodsPerNode, "Pod capacity of each kwok node.")
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

	say("Starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok with %d nodes of %d pods; Services in %s)",
		o.plane.Nodes, o.plane.PodsPerNode, o.plane.ServiceCIDR)
	env, err := testenv.Start(o.plane)
	if err != nil {
		return err
	}
	var procs, watched []*proc
	var front *http.Server
	defer func() {
		say("Stopping")
		// The sidecars first: SIGTERM runs their drain, so listening clients get their complete
		// result (through the front, which closes after them).
		for _, p := range slices.Backward(procs) {
			p.stop()
		}
		if front != nil {
			_ = front.Close()
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

	pods, err := readyPods(ctx, env.Client, o.ready, manager)
	if err != nil {
		return err
	}
	// No kubelet runs containers here, so each Ready (kwok) pod gets its containers as local
	// processes: its own sample server and its own sidecar, reporting under the pod's name, as
	// in a cluster. A small front plays the Service: it sends each request to a ready sidecar.
	var sidecars []*replica
	for i := range pods {
		pod := &pods[i]
		say("Pod %s is Ready (kwok); running its containers here", pod.Name)
		r := &replica{pod: pod.Name, serverAddr: o.serverAddr, adminAddr: o.adminAddr}
		if i > 0 {
			if r.serverAddr, err = freeAddr(); err != nil {
				return err
			}
			if r.adminAddr, err = freeAddr(); err != nil {
				return err
			}
		}
		if r.mcpAddr, err = freeAddr(); err != nil {
			return err
		}
		suffix := ""
		if i > 0 {
			suffix = fmt.Sprintf("-%d", i)
		}
		server, err := start(dir, "sample-server"+suffix, nil, filepath.Join(bin, "sample-server"), "--listen="+r.serverAddr, "--path=/mcp")
		if err != nil {
			return err
		}
		procs = append(procs, server)
		watched = append(watched, server)
		sidecarKubeconfig, err := framework.ImpersonatingKubeconfig(env.Environment.KubeConfig, dir, namespace, pod.Spec.ServiceAccountName)
		if err != nil {
			return err
		}
		args, err := framework.SidecarArgs(pod, r.mcpAddr, r.adminAddr, "http://"+r.serverAddr+"/mcp")
		if err != nil {
			return err
		}
		sidecar, err := start(dir, "sidecar"+suffix, append([]string{"KUBECONFIG=" + sidecarKubeconfig}, framework.SidecarEnv(pod)...), filepath.Join(bin, "sidecar"), args...)
		if err != nil {
			return err
		}
		procs = append(procs, sidecar)
		watched = append(watched, sidecar)
		if err := waitReady(ctx, "http://"+r.adminAddr+inject.ReadyzPath, sidecar); err != nil {
			return err
		}
		if err := portForward(ctx, env.Client, pod, r); err != nil {
			return err
		}
		sidecars = append(sidecars, r)
	}
	if front, err = serveFront(o.mcpAddr, sidecars); err != nil {
		return err
	}

	ready := waitServerReady(ctx, env.Client)
	var replicas strings.Builder
	for _, r := range sidecars {
		fmt.Fprintf(&replicas, "  Pod %s:  sidecar http://%s/mcp, admin http://%s/metrics, server http://%s/mcp\n", r.pod, r.mcpAddr, r.adminAddr, r.serverAddr)
	}
	kubectlPath := filepath.Join(env.Assets, "kubectl")
	fmt.Printf(`
Switchboard is running. MCPServer %s/%s: Ready=%s

  MCP endpoint:  http://%s/mcp   (the Service: each request goes to a ready replica's sidecar)
%s  Kubeconfig:    export KUBECONFIG=%s
  kubectl:       %s

Try: kubectl get mcp        (every Switchboard object)
     kubectl edit mcptool weather-forecast    (clients listening get tools/list_changed)
     kubectl mcp tools weather    (make build puts kubectl-mcp in bin/; it port-forwards to a
                                   ready pod: kwok plays the kubelet, the pod's sidecar answers)
     kubectl mcp watch weather --url http://%s/mcp    (through the Service front)

Press Ctrl-C to stop everything.
`, namespace, serverName, ready, o.mcpAddr, replicas.String(), kubeconfig, kubectlPath, o.mcpAddr)

	exited := make(chan *proc, len(watched)+1)
	for _, p := range append(watched, manager) {
		go func() {
			<-p.done
			exited <- p
		}()
	}
	select {
	case <-ctx.Done():
		return nil
	case p := <-exited:
		if ctx.Err() != nil { // interrupted: the child went down with us
			return nil
		}
		return fmt.Errorf("the %s exited: %s", p.name, p.tail())
	}
}

// replica is one Ready pod's containers, run here.
type replica struct {
	pod                            string
	mcpAddr, adminAddr, serverAddr string
}

// portForward tells kwok (the node's kubelet here) where the pod's sidecar ports are, so
// `kubectl port-forward` and `kubectl mcp SERVER` without --url reach this replica's processes.
// Without kwok's PortForward kind (an older control-plane cache) it does nothing.
func portForward(ctx context.Context, c client.Client, pod *corev1.Pod, r *replica) error {
	target := func(addr string) map[string]any {
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		return map[string]any{"port": int64(p), "address": "127.0.0.1"}
	}
	pf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
		"metadata": map[string]any{"name": pod.Name, "namespace": pod.Namespace},
		"spec": map[string]any{"forwards": []any{
			map[string]any{"ports": []any{int64(mcpv1alpha1.SidecarMCPPort)}, "target": target(r.mcpAddr)},
			map[string]any{"ports": []any{int64(mcpv1alpha1.SidecarAdminPort)}, "target": target(r.adminAddr)},
		}},
	}}
	if err := c.Create(ctx, pf); err != nil {
		if meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("PortForward for pod %s: %w", pod.Name, err)
	}
	return nil
}

// serveFront plays the Service on addr: each request goes to the next replica whose sidecar is
// ready (as endpoints drop a pod that fails readiness), streamed through unbuffered (listen
// streams are SSE).
func serveFront(addr string, replicas []*replica) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	next := 0
	proxies := make([]*httputil.ReverseProxy, len(replicas))
	for i, r := range replicas {
		proxies[i] = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: r.mcpAddr})
		proxies[i].FlushInterval = -1
		proxies[i].ErrorLog = log.New(io.Discard, "", 0) // clients hanging up are not news
	}
	ready := func(r *replica) bool {
		resp, err := http.Get("http://" + r.adminAddr + inject.ReadyzPath)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		for range replicas {
			mu.Lock()
			i := next % len(replicas)
			next++
			mu.Unlock()
			if ready(replicas[i]) {
				proxies[i].ServeHTTP(w, req)
				return
			}
		}
		http.Error(w, "no ready replica", http.StatusServiceUnavailable)
	})}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}

// waitServerReady waits (bounded) until the sample MCPServer's Ready condition is True, and
// returns its status as the first line people read.
func waitServerReady(ctx context.Context, c client.Client) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	status := "Unknown"
	for {
		var s mcpv1alpha1.MCPServer
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: serverName}, &s); err == nil {
			if cond := meta.FindStatusCondition(s.Status.Conditions, string(mcpv1alpha1.ConditionReady)); cond != nil {
				status = fmt.Sprintf("%s (%s)", cond.Status, cond.Reason)
				if cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == s.Generation {
					return status
				}
			}
		}
		select {
		case <-ctx.Done():
			return status
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freeAddr() (string, error) { return freeport.Addr() }

// readyPods waits until the sample MCPServer has as many Ready pods as it asks for replicas and
// returns them sorted by name.
func readyPods(ctx context.Context, c client.Client, timeout time.Duration, manager *proc) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var s mcpv1alpha1.MCPServer
		var pods corev1.PodList
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: serverName}, &s); err == nil {
			want := int32(1)
			if s.Spec.Replicas != nil {
				want = *s.Spec.Replicas
			}
			if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{inject.LabelServer: serverName}); err == nil {
				var ready []corev1.Pod
				for i := range pods.Items {
					if kube.PodReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
						ready = append(ready, pods.Items[i])
					}
				}
				if want > 0 && int32(len(ready)) == want {
					slices.SortFunc(ready, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
					return ready, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("MCPServer %s has not got its Ready pods (status %+v): %s", serverName, s.Status.Conditions, manager.tail())
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
