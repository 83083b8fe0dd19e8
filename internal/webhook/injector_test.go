package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/golden"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// goldenDir is the injection cases, shared with internal/inject: each pod <case>.yaml has
// <case>.injected.yaml (inject.Pod) and <case>.admitted.yaml (this webhook) beside it.
const goldenDir = "../inject/testdata/inject"

const testImage = "switchboard-sidecar:test"

// fixtureServers are the MCPServers of namespace tools that the golden pods refer to.
func fixtureServers() []*mcpv1alpha1.MCPServer {
	return []*mcpv1alpha1.MCPServer{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: "tools"},
			Spec:       mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "weather", Namespace: "tools"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Mode:      mcpv1alpha1.WorkloadExternal,
				Container: &mcpv1alpha1.ServerContainer{Port: 9000, Path: "/rpc"},
				Sidecar: &mcpv1alpha1.SidecarSpec{
					AllowedHosts: []string{"weather.example.com"},
					Drain:        &mcpv1alpha1.DrainSpec{BudgetSeconds: ptr.To[int32](60)},
				},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "calendar", Namespace: "tools"},
			Spec: mcpv1alpha1.MCPServerSpec{
				Mode:      mcpv1alpha1.WorkloadManaged,
				Container: &mcpv1alpha1.ServerContainer{Image: "example/calendar:1"},
			},
		},
	}
}

func newInjector(t *testing.T, rec events.EventRecorder) *Injector {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(testenv.Scheme())
	for _, s := range fixtureServers() {
		b = b.WithObjects(s)
	}
	return &Injector{Reader: b.Build(), Recorder: rec, SidecarImage: testImage,
		ExcludedNamespaces: []string{"kube-system", "switchboard-system"}}
}

// admit sends the pod through controller-runtime's defaulting webhook, as the API server would,
// and applies the JSON patch it answers with.
func admit(t *testing.T, inj *Injector, pod *corev1.Pod, dryRun bool) (*corev1.Pod, admission.Response) {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	wh := admission.WithDefaulter[*corev1.Pod](testenv.Scheme(), inj)
	resp := wh.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "test",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: pod.Namespace, Name: pod.Name,
		Operation: admissionv1.Create,
		Object:    runtime.RawExtension{Raw: raw},
		DryRun:    &dryRun,
	}})
	if !resp.Allowed {
		t.Fatalf("pod denied: %+v", resp.Result)
	}
	out := raw
	if len(resp.Patches) > 0 {
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		if out, err = patch.Apply(raw); err != nil {
			t.Fatal(err)
		}
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got, resp
}

// TestGolden admits every injection case (goldenDir/<case>.yaml) through the webhook handler
// and compares the result, headed by the decision, with <case>.admitted.yaml. Every result is
// admitted again and must come back without a patch (idempotency). Refresh with:
//
//	go test ./internal/webhook -run TestGolden -update
func TestGolden(t *testing.T) {
	for _, in := range golden.Inputs(t, goldenDir) {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{}
			if err := yaml.UnmarshalStrict(raw, pod); err != nil {
				t.Fatal(err)
			}
			inj := newInjector(t, nil)
			d, err := inj.Decide(context.Background(), pod, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			once, _ := admit(t, inj, pod, false)
			twice, resp := admit(t, inj, once, false)
			if len(resp.Patches) > 0 || !reflect.DeepEqual(once, twice) {
				t.Fatalf("re-admitting the result must change nothing; patch: %+v", resp.Patches)
			}
			if d.Reason != "" && !reflect.DeepEqual(once, pod) {
				t.Fatalf("skipped (%s) but changed", d.Reason)
			}
			body, err := yaml.Marshal(once)
			if err != nil {
				t.Fatal(err)
			}
			header := "# result: injected\n"
			if d.Reason != "" {
				header = fmt.Sprintf("# result: skipped\n# reason: %s\n# message: %s\n", d.Reason, d.Message)
			}
			golden.Check(t, strings.TrimSuffix(in, ".yaml")+".admitted.yaml", []byte(header+string(body)))
		})
	}
}

func readPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := yaml.Unmarshal(raw, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestInjectedPodRunsTheControllersSidecar: the webhook's sidecar is the one the controller
// builds for the same server, and the server container is the one declaring the port.
func TestInjectedPodRunsTheControllersSidecar(t *testing.T) {
	pod, _ := admit(t, newInjector(t, nil), readPod(t, "custom-port.yaml"), false)
	weather := fixtureServers()[1]
	cfg := inject.ConfigFor(weather, testImage)
	if got, want := pod.Annotations[inject.InjectedAnnotation], inject.Hash(withServer(cfg, "weather")); got != want {
		t.Fatalf("injected %s, want %s", got, want)
	}
	if !reflect.DeepEqual(pod.Spec.InitContainers[0], inject.Container(cfg)) {
		t.Fatalf("the sidecar differs from the controller's:\n%+v", pod.Spec.InitContainers[0])
	}
	if pod.Spec.Containers[0].Lifecycle.PreStop.Exec == nil {
		t.Fatal("the user's own preStop hook must be kept")
	}
	if *pod.Spec.TerminationGracePeriodSeconds != inject.TerminationGracePeriodSeconds(cfg) {
		t.Fatalf("grace %d", *pod.Spec.TerminationGracePeriodSeconds)
	}
}

func withServer(cfg inject.Config, container string) inject.Config {
	cfg.ServerContainer = container
	return cfg
}

func counter(t *testing.T, result, reason string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := injections.WithLabelValues(result, reason).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestSkipsAreCountedAndExplained: every decision is counted by result and reason; skips of pods
// with a controller owner become a Warning Event on that owner, except the quiet ones; dry runs
// count nothing and record nothing.
// ("skipped" is the webhook's decision not to inject a pod, the outcome each case asserts; no
// test case is skipped.)
func TestSkipsAreCountedAndExplained(t *testing.T) {
	for _, tc := range []struct {
		file   string
		result string
		reason string
		event  string
	}{
		{"plain.yaml", resultInjected, ReasonInjected, ""},
		{"missing-server.yaml", resultSkipped, string(SkipServerNotFound), ""},
		{"port-not-found.yaml", resultSkipped, string(inject.SkipPortNotFound), ""},
		{"opted-out.yaml", resultSkipped, string(inject.SkipOptedOut), ""},
		{"managed.yaml", resultSkipped, string(SkipManagedByController), ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			pod := readPod(t, tc.file)
			pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-1", UID: "u1", Controller: ptr.To(true)}}
			rec := events.NewFakeRecorder(10)
			inj := newInjector(t, rec)

			before := counter(t, tc.result, tc.reason)
			admit(t, inj, pod, true)
			if counter(t, tc.result, tc.reason) != before || len(rec.Events) != 0 {
				t.Fatal("a dry run must count nothing and record nothing")
			}
			admit(t, inj, pod, false)
			if got := counter(t, tc.result, tc.reason); got != before+1 {
				t.Fatalf("switchboard_injections_total{result=%q,reason=%q} = %v, want %v", tc.result, tc.reason, got, before+1)
			}
			wantEvent := tc.result == resultSkipped && tc.reason != string(inject.SkipOptedOut) && tc.reason != string(SkipManagedByController)
			select {
			case e := <-rec.Events:
				if !wantEvent {
					t.Fatalf("unexpected event %q", e)
				}
				if !strings.HasPrefix(e, "Warning "+tc.reason+" ") {
					t.Fatalf("event %q, want a Warning with reason %s", e, tc.reason)
				}
			default:
				if wantEvent {
					t.Fatal("want an Event on the pod's owner")
				}
			}
		})
	}
}

// TestExcludedNamespace: even if the webhook configuration sent them, pods of the operator's
// namespace and kube-system are left alone.
func TestExcludedNamespace(t *testing.T) {
	for _, ns := range []string{"kube-system", "switchboard-system"} {
		pod := readPod(t, "plain.yaml")
		pod.Namespace = ns
		inj := newInjector(t, nil)
		if d, err := inj.Decide(context.Background(), pod, ns); err != nil || d.Reason != SkipExcludedNamespace {
			t.Fatalf("namespace %s: got %q, %v; want %s", ns, d.Reason, err, SkipExcludedNamespace)
		}
		got, resp := admit(t, inj, pod, false)
		if len(resp.Patches) > 0 || !reflect.DeepEqual(got, pod) {
			t.Fatalf("pod in %s was changed: %+v", ns, resp.Patches)
		}
	}
}

// TestSkippedPodLosesInjectedLabel: only injection marks a pod injected. A labelled pod the
// webhook skips (here PortConflict) that carries the injected label of its own is admitted
// without it, so the External server's Service does not select it.
func TestSkippedPodLosesInjectedLabel(t *testing.T) {
	pod := readPod(t, "plain.yaml")
	pod.Labels[inject.InjectedLabel] = "true"
	pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: mcpv1alpha1.SidecarMCPPort})
	got, _ := admit(t, newInjector(t, nil), pod, false)
	if len(got.Spec.InitContainers) != 0 {
		t.Fatal("a pod with a port conflict was injected")
	}
	if v, ok := got.Labels[inject.InjectedLabel]; ok {
		t.Fatalf("a skipped pod keeps %s=%s", inject.InjectedLabel, v)
	}
}
