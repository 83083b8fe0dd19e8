//go:build e2e

package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// The envtest suite runs a real kube-apiserver with the generated webhook configuration
// (config/webhook) installed by envtest, pointing at a manager that serves the injector locally.

var (
	env   *testenv.Env
	k8s   client.Client
	nsSeq atomic.Int32
)

func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// No ExcludedNamespaces: the generated configuration's namespaceSelector alone must keep
	// the operator's namespace and kube-system out.
	os.Exit(testenv.Main(m, testenv.Options{WebhookPaths: []string{filepath.Join(root, "config", "webhook", "manifests.yaml")}},
		func(e *testenv.Env) { env, k8s = e, e.Client },
		func(_ context.Context, mgr ctrl.Manager) error {
			inj := &Injector{Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
				Recorder: mgr.GetEventRecorder("switchboard-injector"), SidecarImage: testImage}
			return inj.SetupWithManager(mgr)
		}))
}

// namespace creates a namespace, named name or a fresh one.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if name == "" {
		name = fmt.Sprintf("inject-%d", nsSeq.Add(1))
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(context.Background(), ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	return name
}

func externalServer(t *testing.T, ns, name string) {
	t.Helper()
	s := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

func userPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		// envtest's API server runs without the ServiceAccount admission plugin, which would
		// set this before any webhook runs.
		Spec: corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{
			Name: "server", Image: "example/search:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
}

func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := k8s.Create(context.Background(), pod); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	got := &corev1.Pod{}
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func injected(p *corev1.Pod) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == inject.ContainerName {
			return p.Annotations[inject.InjectedAnnotation] != ""
		}
	}
	return false
}

// TestEnvLabelledPodIsInjected: a labelled pod of an External server comes out of the API server
// with the sidecar, the drain hook and the injected annotation, created right after its server
// (before the manager's cache can have seen it).
func TestEnvLabelledPodIsInjected(t *testing.T) {
	ns := namespace(t, "")
	externalServer(t, ns, "search")
	pod := createPod(t, userPod(ns, "search-0", map[string]string{inject.LabelServer: "search"}))
	if !injected(pod) {
		t.Fatalf("the labelled pod was not injected: %+v", pod.Spec)
	}
	if pod.Spec.InitContainers[0].Image != testImage {
		t.Fatalf("sidecar image %q", pod.Spec.InitContainers[0].Image)
	}
	if h := pod.Spec.Containers[0].Lifecycle; h == nil || h.PreStop == nil || h.PreStop.HTTPGet.Path != inject.DrainWaitPath {
		t.Fatalf("the MCP server container has no drain hook: %+v", h)
	}
}

// TestEnvUntouched: unlabelled pods, and labelled pods the injector skips, are stored as sent.
func TestEnvUntouched(t *testing.T) {
	ns := namespace(t, "")
	externalServer(t, ns, "search")
	for name, labels := range map[string]map[string]string{
		"unlabelled":     {"app": "search"},
		"missing-server": {inject.LabelServer: "nope"},
	} {
		pod := createPod(t, userPod(ns, name, labels))
		if len(pod.Spec.InitContainers) > 0 || pod.Annotations[inject.InjectedAnnotation] != "" {
			t.Fatalf("%s: the pod was changed: %+v", name, pod.Spec.InitContainers)
		}
	}
}

// TestEnvExcludedNamespaces: the webhook configuration never sends pods of the operator's
// namespace or kube-system, even labelled pods of an External server there (the injector under
// test has no exclusions of its own).
func TestEnvExcludedNamespaces(t *testing.T) {
	for _, ns := range []string{"switchboard-system", metav1.NamespaceSystem} {
		namespace(t, ns)
		externalServer(t, ns, "search-"+strings.ReplaceAll(ns, "-", ""))
		pod := createPod(t, userPod(ns, "labelled", map[string]string{inject.LabelServer: "search-" + strings.ReplaceAll(ns, "-", "")}))
		if injected(pod) {
			t.Fatalf("a pod in %s was injected", ns)
		}
		// The same pod in an ordinary namespace is injected: the namespace is what protects it.
		other := namespace(t, "")
		externalServer(t, other, "search-"+strings.ReplaceAll(ns, "-", ""))
		if !injected(createPod(t, userPod(other, "labelled", pod.Labels))) {
			t.Fatalf("control: the same pod in %s was not injected", other)
		}
	}
}

// TestEnvWebhookDown: with the injector unreachable, pods that did not opt in are still created,
// and opted-in pods are rejected (failurePolicy Fail) rather than started without the sidecar.
// It installs a copy of the generated configuration pointing at a closed port.
func TestEnvWebhookDown(t *testing.T) {
	ctx := context.Background()
	list := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := k8s.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("want the one generated configuration installed, got %d", len(list.Items))
	}
	down := list.Items[0].DeepCopy()
	down.ObjectMeta = metav1.ObjectMeta{Name: "switchboard-injector-down"}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + closed.Addr().String() + Path
	_ = closed.Close()
	for i := range down.Webhooks {
		down.Webhooks[i].Name = "down." + down.Webhooks[i].Name
		down.Webhooks[i].ClientConfig.URL = &url
		down.Webhooks[i].ClientConfig.Service = nil
	}
	if err := k8s.Create(ctx, down); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, down) })

	ns := namespace(t, "")
	externalServer(t, ns, "search")
	// The API server picks up webhook configurations asynchronously: wait until opted-in pods
	// fail, which proves the dead webhook is in effect.
	i := 0
	eventually.Succeeds(t, "opted-in pods refused with the webhook down", func() error {
		i++
		err := k8s.Create(ctx, userPod(ns, fmt.Sprintf("opted-in-%d", i), map[string]string{inject.LabelServer: "search"}))
		if err == nil {
			return errors.New("an opted-in pod was created")
		}
		if !strings.Contains(err.Error(), "down.inject.mcp.switchboard.dev") {
			t.Fatalf("unexpected error: %v", err)
		}
		return nil
	})
	pod := createPod(t, userPod(ns, "not-opted-in", map[string]string{"app": "other"}))
	if len(pod.Spec.InitContainers) > 0 {
		t.Fatal("a pod that did not opt in was changed")
	}
}

// TestEnvSkippedPodGetsNoServiceTraffic: through the real API server and webhook, a labelled pod
// the webhook cannot inject (its container declares the sidecar's port 8800: PortConflict) and
// that even claims to be injected is stored without the injected label, so the External
// server's Service selector (inject.ServiceSelectorFor) does not select it; an injected pod of
// the same server is selected.
func TestEnvSkippedPodGetsNoServiceTraffic(t *testing.T) {
	ns := namespace(t, "")
	externalServer(t, ns, "search")
	server := &mcpv1alpha1.MCPServer{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "search"}, server); err != nil {
		t.Fatal(err)
	}
	createPod(t, userPod(ns, "search-ok", map[string]string{inject.LabelServer: "search"}))
	bad := userPod(ns, "search-conflict", map[string]string{inject.LabelServer: "search", inject.InjectedLabel: "true"})
	bad.Spec.Containers[0].Ports = append(bad.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: mcpv1alpha1.SidecarMCPPort})
	if got := createPod(t, bad); injected(got) {
		t.Fatal("a pod whose container serves 8800 was injected")
	}
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(inject.ServiceSelectorFor(server))); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "search-ok" {
		t.Fatalf("the Service selects %v, want only the injected pod search-ok", names)
	}
}

// TestEnvSidecarServiceAccountDenied: a pod of an External server that runs as the server's
// sidecar ServiceAccount (bound to the sidecar Role) is rejected: its automounted token would
// give the MCP server container the sidecar's rights.
func TestEnvSidecarServiceAccountDenied(t *testing.T) {
	ns := namespace(t, "")
	externalServer(t, ns, "search")
	pod := userPod(ns, "search-0", map[string]string{inject.LabelServer: "search"})
	pod.Spec.ServiceAccountName = "search-sidecar"
	err := k8s.Create(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), "search-sidecar") {
		t.Fatalf("want the pod rejected naming the ServiceAccount, got %v", err)
	}
}
