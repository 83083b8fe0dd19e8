// Package testenv starts a real Kubernetes control plane for tests: etcd and kube-apiserver
// through envtest, with the Switchboard CRDs installed, and, on request, kube-controller-manager,
// kube-scheduler and kwok with fake nodes, so Deployments get pods that become Ready.
//
// It is sized for fleets: the Service range is a /16 (envtest's default /24 holds 254 Services)
// and the number of kwok nodes and their pod capacity are options; the defaults keep small tests
// as fast as one node makes them.
//
// The binaries come from hack/k8s-test-bins.sh (built from Go modules); `make test` builds them
// and sets KUBEBUILDER_ASSETS. Start one Env per test package, in TestMain, with Main.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
)

// NodeName is the first fake node kwok manages when Options.Controllers is set; the others
// are kwok-node-1, kwok-node-2, ...
const NodeName = "kwok-node-0"

// kwokPortForwardCRD is kwok's PortForward CRD, put next to the binaries by hack/k8s-test-bins.sh.
const kwokPortForwardCRD = "kwok-portforward-crd.yaml"

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func freePort() (string, error) {
	a, err := freeport.Addr()
	if err != nil {
		return "", err
	}
	_, port, err := net.SplitHostPort(a)
	return port, err
}

// Defaults for the sizing options.
const (
	// DefaultServiceCIDR holds 65,534 ClusterIPs, a realistic range (kubeadm's default is a /12).
	DefaultServiceCIDR = "10.0.0.0/16"
	// DefaultPodsPerNode is the kubelet's default --max-pods.
	DefaultPodsPerNode = 110
)

// Options selects what runs besides etcd and kube-apiserver.
type Options struct {
	// Controllers starts kube-controller-manager, kube-scheduler and kwok (with Nodes fake
	// nodes), so Deployments create ReplicaSets and pods that become Ready and roll.
	Controllers bool
	// ServiceCIDR is the API server's --service-cluster-ip-range; DefaultServiceCIDR when empty.
	ServiceCIDR string
	// Nodes is how many fake kwok nodes to create with Controllers; 1 when zero.
	Nodes int
	// PodsPerNode is each fake node's pod capacity; DefaultPodsPerNode when zero.
	PodsPerNode int
	// APIServerFlags are extra kube-apiserver flags (name without dashes -> value), e.g. an
	// audit log for a benchmark.
	APIServerFlags map[string]string
	// WebhookPaths are folders or files of webhook configurations that envtest installs,
	// pointing at a local webhook server with its own serving certificate (see
	// Env.Environment.WebhookInstallOptions for the host, port and certificate folder).
	WebhookPaths []string
}

// Env is a running control plane.
type Env struct {
	Environment *envtest.Environment
	Config      *rest.Config
	Client      client.Client
	Scheme      *runtime.Scheme
	// Assets is the folder of the control-plane binaries (KUBEBUILDER_ASSETS).
	Assets string
	// KubeconfigPath is a kubeconfig file for the API server (for kubectl and subprocesses).
	KubeconfigPath string

	dir   string
	procs []*process
}

type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Scheme returns a scheme with the built-in kinds and the Switchboard kinds.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := mcpv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// RepoRoot returns the folder holding go.mod, searching upwards from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start starts a control plane with the Switchboard CRDs installed.
func Start(opts Options) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"which builds the control plane with hack/k8s-test-bins.sh and sets it")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "switchboard-testenv-")
	if err != nil {
		return nil, err
	}
	e := &Env{
		Assets: assets,
		Scheme: Scheme(),
		dir:    dir,
		Environment: &envtest.Environment{
			CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
			ErrorIfCRDPathMissing: true,
			BinaryAssetsDirectory: assets,
			WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: opts.WebhookPaths},
		},
	}
	if opts.Controllers {
		// kwok is the node's kubelet for port-forwards (PortForward objects say where each pod's
		// port goes): the API server reaches it at the node's InternalIP.
		e.Environment.ControlPlane.GetAPIServer().Configure().Set("kubelet-preferred-address-types", "InternalIP")
		if crd := filepath.Join(assets, kwokPortForwardCRD); fileExists(crd) {
			e.Environment.CRDDirectoryPaths = append(e.Environment.CRDDirectoryPaths, crd)
		}
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = DefaultServiceCIDR
	}
	apiServer := e.Environment.ControlPlane.GetAPIServer().Configure()
	apiServer.Set("service-cluster-ip-range", opts.ServiceCIDR)
	for name, value := range opts.APIServerFlags {
		apiServer.Set(name, value)
	}
	cfg, err := e.Environment.Start()
	if err != nil {
		// Start can fail after etcd and kube-apiserver run (e.g. a CRD is refused): stop them.
		_ = e.Environment.Stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	e.Config = cfg
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		_ = e.Stop()
		return nil, err
	}
	e.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.Environment.KubeConfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if opts.Controllers {
		if err := e.startControllers(opts); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

func (e *Env) startControllers(opts Options) error {
	kc := "--kubeconfig=" + e.KubeconfigPath
	saKey := filepath.Join(e.Environment.ControlPlane.APIServer.CertDir, "sa-signer.key")
	if err := e.run("kube-controller-manager", kc, "--leader-elect=false", "--secure-port=0",
		"--controllers=*", "--use-service-account-credentials=false",
		"--service-account-private-key-file="+saKey,
		"--kube-api-qps=1000", "--kube-api-burst=2000",
		// Deployments roll fast in tests: no minimum wait between syncs.
		"--concurrent-deployment-syncs=5", "--concurrent-replicaset-syncs=5"); err != nil {
		return err
	}
	if err := e.run("kube-scheduler", kc, "--authentication-kubeconfig="+e.KubeconfigPath,
		"--authorization-kubeconfig="+e.KubeconfigPath, "--leader-elect=false", "--secure-port=0",
		// Fleets: the default 50 QPS binds 1,000 pods in 20 s.
		"--kube-api-qps=1000", "--kube-api-burst=2000"); err != nil {
		return err
	}
	kwokArgs := []string{kc, "--manage-all-nodes=true",
		"--config=" + filepath.Join(e.Assets, "kwok-stages.yaml"), "--node-lease-duration-seconds=40"}
	if fileExists(filepath.Join(e.Assets, kwokPortForwardCRD)) {
		// kwok serves the node's kubelet API (HTTPS, its own certificate; the API server does
		// not verify kubelets without --kubelet-certificate-authority) on a known port, so
		// `kubectl port-forward` to a pod reaches whatever its PortForward object names.
		port, err := freePort()
		if err != nil {
			return err
		}
		kwokArgs = append(kwokArgs, "--server-address=127.0.0.1:"+port, "--node-ip=127.0.0.1", "--node-port="+port,
			"--enable-crds=PortForward")
	} else {
		kwokArgs = append(kwokArgs, "--server-address=127.0.0.1:0")
	}
	if err := e.run("kwok", kwokArgs...); err != nil {
		return err
	}
	nodes, pods := max(opts.Nodes, 1), opts.PodsPerNode
	if pods <= 0 {
		pods = DefaultPodsPerNode
	}
	errs := make(chan error, nodes)
	for i := range nodes {
		go func() { errs <- e.createNode(fmt.Sprintf("kwok-node-%d", i), pods) }()
	}
	var err error
	for range nodes {
		err = errors.Join(err, <-errs)
	}
	return err
}

// createNode creates one fake node with room for pods pods and waits until kwok marks it Ready.
func (e *Env) createNode(name string, pods int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: name},
		},
	}
	if err := e.Client.Create(ctx, node); err != nil {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	// kwok writes the node's status too (its conditions), so a stale copy conflicts: re-read and
	// set the capacity again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return err
		}
		node.Status.Capacity = capacity
		node.Status.Allocatable = capacity
		return e.Client.Status().Update(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("setting node %s capacity: %w", name, err)
	}
	// kwok marks the node Ready within a fraction of a second.
	for {
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s did not become Ready: %s", name, e.Logs("kwok"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// run starts one control-plane binary from the assets folder, logging to a file.
func (e *Env) run(name string, args ...string) error {
	bin := filepath.Join(e.Assets, name)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is missing from %s: run hack/k8s-test-bins.sh: %w", name, e.Assets, err)
	}
	logPath := filepath.Join(e.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = f.Close(); close(p.done) }()
	e.procs = append(e.procs, p)
	return nil
}

// Logs returns the last lines a started control-plane binary logged, for failure messages.
func (e *Env) Logs(name string) string {
	for _, p := range e.procs {
		if p.name != name {
			continue
		}
		b, err := os.ReadFile(p.log)
		if err != nil {
			return err.Error()
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		return name + " log tail:\n" + strings.Join(lines, "\n")
	}
	return name + " was not started"
}

// Kubectl returns a command running the control plane's kubectl against this API server.
func (e *Env) Kubectl(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(e.Assets, "kubectl"),
		append([]string{"--kubeconfig=" + e.KubeconfigPath}, args...)...)
}

// Stop stops the controllers first (the API server's graceful shutdown would otherwise wait on
// their watches), then the API server and etcd, and removes the temporary files.
func (e *Env) Stop() error {
	for _, p := range e.procs {
		_ = p.cmd.Process.Kill()
	}
	for _, p := range e.procs {
		<-p.done
	}
	e.procs = nil
	err := e.Environment.Stop()
	_ = os.RemoveAll(e.dir)
	return err
}

// APIServerPID returns the process id of this control plane's kube-apiserver (found by its
// certificate folder), for benchmarks that read its memory and CPU from /proc.
func (e *Env) APIServerPID() (int, error) {
	return findProcess("kube-apiserver", e.Environment.ControlPlane.APIServer.CertDir)
}

// ProcessPIDs returns the process id of every binary of this control plane by name: etcd,
// kube-apiserver and, with Options.Controllers, kube-controller-manager, kube-scheduler and kwok.
// Benchmarks read their CPU from /proc to say where a machine's time went.
func (e *Env) ProcessPIDs() (map[string]int, error) {
	out := map[string]int{}
	api, err := e.APIServerPID()
	if err != nil {
		return nil, err
	}
	out["kube-apiserver"] = api
	if out["etcd"], err = findProcess("etcd", e.Environment.ControlPlane.Etcd.DataDir); err != nil {
		return nil, err
	}
	for _, p := range e.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out, nil
}

// findProcess returns the process id of the binary named name whose command line holds marker
// (a folder only this control plane's process is started with).
func findProcess(name, marker string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == name && strings.Contains(string(cmdline), marker) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process started with %s", name, marker)
}
