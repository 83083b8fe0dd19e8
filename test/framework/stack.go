// Package framework is the test stack of the end-to-end tests, hack/dev and the benchmarks: the
// test control plane (internal/testenv), the manager's controllers in process, the sample MCP
// server and a real sidecar process wired the way a pod runs it. The raw MCP client it is
// driven with is internal/mcptest.
package framework

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/switchboard-mcp/switchboard/controllers"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/sampleserver"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// Stack is the whole product on one machine: the test control plane (with kwok), the manager's
// controllers in process, config/samples applied with one replica, the sample weather server in
// process, and a real sidecar process started with the exact arguments of the kwok pod's sidecar
// container, acting as the sidecar's ServiceAccount (impersonation), so its least-privilege RBAC
// is exercised for real.
type Stack struct {
	Env       *testenv.Env
	Namespace string
	Server    string // MCPServer name
	Pod       string // the pod whose name the sidecar reports under
	MCPURL    string
	AdminURL  string
	Dir       string // logs and kubeconfigs
	// UpstreamURL is the sample MCP server's endpoint the sidecar fronts.
	UpstreamURL string
	// Upstream records the requests the sample MCP server receives.
	Upstream *Recorder

	stopMgr  context.CancelFunc
	mgrDone  chan error
	upstream *httptest.Server
	sidecar  *exec.Cmd
	sideDone chan struct{}
}

// StackOptions configure StartStack.
type StackOptions struct {
	SidecarBin string // a built cmd/sidecar
	Namespace  string // created; default "e2e"
	ExtraArgs  []string
}

// StartStack starts everything and returns once the sidecar is ready.
func StartStack(ctx context.Context, o StackOptions) (s *Stack, err error) {
	if o.Namespace == "" {
		o.Namespace = "e2e"
	}
	dir, err := os.MkdirTemp("", "switchboard-stack-")
	if err != nil {
		return nil, err
	}
	ctrllog.SetLogger(logr.Discard()) // the stack's own failures are returned; its logs are noise here
	env, err := testenv.Start(testenv.Options{Controllers: true})
	if err != nil {
		return nil, err
	}
	s = &Stack{Env: env, Namespace: o.Namespace, Server: "weather", Dir: dir}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: kube.CacheOptions(),
	})
	if err != nil {
		return s, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	s.stopMgr, s.mgrDone = cancel, make(chan error, 1)
	if _, err := controllers.Setup(mctx, mgr, controllers.Options{SidecarImage: "switchboard-sidecar:test"}); err != nil {
		return s, err
	}
	go func() { s.mgrDone <- mgr.Start(mctx) }()

	root, err := testenv.RepoRoot()
	if err != nil {
		return s, err
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}); err != nil {
		return s, err
	}
	// The ClusterRole an install ships for sidecars that validate ServiceAccount tokens (the
	// controller binds it per server).
	if out, err := env.Kubectl(ctx, "apply", "-f", filepath.Join(root, "config", "rbac", "sidecar_tokenreviewer_role.yaml")).CombinedOutput(); err != nil {
		return s, fmt.Errorf("kubectl apply the TokenReview ClusterRole: %w\n%s", err, out)
	}
	if out, err := env.Kubectl(ctx, "apply", "--namespace="+o.Namespace, "-k", filepath.Join(root, "config", "samples")).CombinedOutput(); err != nil {
		return s, fmt.Errorf("kubectl apply -k config/samples: %w\n%s", err, out)
	}
	if out, err := env.Kubectl(ctx, "patch", "--namespace="+o.Namespace, "mcpserver", s.Server, "--type=merge",
		"-p", `{"spec":{"replicas":1,"sidecar":{"drain":{"propagationDelaySeconds":0}}}}`).CombinedOutput(); err != nil {
		return s, fmt.Errorf("scaling to one replica: %w\n%s", err, out)
	}
	pod, err := s.onlyReadyPod(ctx)
	if err != nil {
		return s, err
	}
	s.Pod = pod.Name

	s.Upstream = &Recorder{}
	s.upstream = httptest.NewServer(s.Upstream.Wrap(sampleserver.Handler()))
	s.UpstreamURL = s.upstream.URL + "/mcp"
	kubeconfig, err := ImpersonatingKubeconfig(s.Env.Environment.KubeConfig, s.Dir, s.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return s, err
	}
	mcpAddr, adminAddr := freeAddr(), freeAddr()
	args, err := SidecarArgs(pod, mcpAddr, adminAddr, s.UpstreamURL)
	if err != nil {
		return s, err
	}
	args = append(args, o.ExtraArgs...)
	logf, err := os.Create(filepath.Join(dir, "sidecar.log"))
	if err != nil {
		return s, err
	}
	s.sidecar = exec.Command(o.SidecarBin, args...)
	s.sidecar.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), SidecarEnv(pod)...)
	s.sidecar.Stdout, s.sidecar.Stderr = logf, logf
	s.sidecar.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.sidecar.Start(); err != nil {
		return s, err
	}
	s.sideDone = make(chan struct{})
	go func() { _ = s.sidecar.Wait(); _ = logf.Close(); close(s.sideDone) }()
	s.MCPURL, s.AdminURL = "http://"+mcpAddr+"/mcp", "http://"+adminAddr
	if err := s.waitReady(ctx); err != nil {
		return s, err
	}
	return s, nil
}

func (s *Stack) onlyReadyPod(ctx context.Context) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		// The Deployment rolled out first: a pod Ready while a newer template is on its way is
		// replaced, and a sidecar reporting under its name reports for a pod that is gone.
		var pods corev1.PodList
		var dep appsv1.Deployment
		if err := s.Env.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Server}, &dep); err == nil && rolledOut(&dep) &&
			s.Env.Client.List(ctx, &pods, client.InNamespace(s.Namespace), client.MatchingLabels{inject.LabelServer: s.Server}) == nil {
			if len(pods.Items) == 1 && kube.PodReady(&pods.Items[0]) && pods.Items[0].DeletionTimestamp == nil {
				return &pods.Items[0], nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no single Ready pod of MCPServer %s", s.Server)
		case err := <-s.mgrDone:
			return nil, fmt.Errorf("the manager stopped: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rolledOut reports whether every replica of d runs its current template and is available.
func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.Replicas == want && st.UpdatedReplicas == want && st.AvailableReplicas == want
}

// ImpersonatingKubeconfig writes dir/sidecar-kubeconfig: the admin kubeconfig acting as the
// sidecar's ServiceAccount, so a local sidecar has exactly the rights the controller granted.
func ImpersonatingKubeconfig(admin []byte, dir, namespace, serviceAccount string) (string, error) {
	cfg, err := clientcmd.Load(admin)
	if err != nil {
		return "", err
	}
	for _, auth := range cfg.AuthInfos {
		auth.Impersonate = "system:serviceaccount:" + namespace + ":" + serviceAccount
	}
	path := filepath.Join(dir, "sidecar-kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// SidecarArgs takes the sidecar container's arguments from the pod the controller built and
// rewrites only what differs on this machine: listen addresses on loopback, the upstream address,
// the pod name the downward API would fill in, and the drain timing (no endpoints to propagate).
func SidecarArgs(pod *corev1.Pod, mcpAddr, adminAddr, upstream string) ([]string, error) {
	i := slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == inject.ContainerName })
	if i < 0 {
		return nil, fmt.Errorf("pod %s has no %s container", pod.Name, inject.ContainerName)
	}
	set := func(name string) string { return "--" + name + "=" }
	var args []string
	for _, a := range pod.Spec.InitContainers[i].Args {
		switch {
		case strings.HasPrefix(a, set(inject.FlagListen)):
			a = set(inject.FlagListen) + mcpAddr
		case strings.HasPrefix(a, set(inject.FlagAdminListen)):
			a = set(inject.FlagAdminListen) + adminAddr
		case strings.HasPrefix(a, set(inject.FlagUpstream)):
			a = set(inject.FlagUpstream) + upstream
		case strings.HasPrefix(a, set(inject.FlagPodName)):
			a = set(inject.FlagPodName) + pod.Name
		case strings.HasPrefix(a, set(inject.FlagDrainDelay)):
			a = set(inject.FlagDrainDelay) + "0s"
		case strings.HasPrefix(a, set(inject.FlagDrainJitter)):
			a = set(inject.FlagDrainJitter) + "0s"
		}
		args = append(args, a)
	}
	return args, nil
}

// SidecarEnv is the sidecar container's environment as the kubelet would set it, for the
// variables with a literal value; the pod name comes from SidecarArgs. (The drain token is a
// file mounted from a Secret, not a variable: these tests never drain over HTTP.)
func SidecarEnv(pod *corev1.Pod) []string {
	var env []string
	for _, c := range pod.Spec.InitContainers {
		if c.Name != inject.ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	return env
}

func (s *Stack) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.AdminURL+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the sidecar did not become ready: %s", s.SidecarLog(20))
		case <-s.sideDone:
			return fmt.Errorf("the sidecar exited: %s", s.SidecarLog(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SidecarLog returns the last n lines of the sidecar's log.
func (s *Stack) SidecarLog(n int) string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "sidecar.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kubectl runs kubectl in the stack's namespace and returns its combined output.
func (s *Stack) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := s.Env.Kubectl(ctx, append([]string{"--namespace=" + s.Namespace}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Stop stops the sidecar, the manager and the control plane.
func (s *Stack) Stop() {
	if s.sidecar != nil && s.sidecar.Process != nil {
		_ = s.sidecar.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.sideDone:
		case <-time.After(10 * time.Second):
			_ = s.sidecar.Process.Kill()
			<-s.sideDone
		}
	}
	if s.upstream != nil {
		s.upstream.Close()
	}
	if s.stopMgr != nil {
		s.stopMgr()
		if err := <-s.mgrDone; err != nil {
			fmt.Fprintln(os.Stderr, "framework: the manager stopped with", err)
		}
	}
	if s.Env != nil {
		_ = s.Env.Stop()
	}
}

func freeAddr() string {
	a, err := freeport.Addr()
	if err != nil {
		panic(err)
	}
	return a
}
