//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	lua "github.com/yuin/gopher-lua"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// The GitOps view of status: what Argo CD's health check (docs/gitops/argocd-health.lua) makes
// of every state the controller produces, computed on the objects the real controller wrote to
// the real API server.

const argoHealthScript = "../docs/gitops/argocd-health.lua"

// gitopsCase is one state of one object: the condition the controller has to show first, then
// what a GitOps tool has to make of the object.
type gitopsCase struct {
	name string
	obj  client.Object
	// The condition that says the controller has reached the state.
	condType   string
	condStatus metav1.ConditionStatus
	condReason string
	// Argo CD health status, and a substring of its message.
	argo, argoMessage string
	// kstatus (cli-utils status.Compute) status, and a substring of its message.
	kstatus        kstatus.Status
	kstatusMessage string
	// condMessage, when set, is a substring the condition's message must have too (a state
	// that passes through others with the same reason).
	condMessage string
}

// gitopsScenarios creates, in a new namespace, one object in every state the controller can
// produce for each kind, and returns the cases in the order to check them. Setup steps that
// need the controller first (sidecar reports) run in step, after the objects exist.
func gitopsScenarios(t *testing.T) (cases []gitopsCase, step func()) {
	ns := newNamespace(t)

	ready := newServer(ns, "ready", 1)
	published := newTool(ns, "forecast", "ready", "get_forecast")
	pending := newServer(ns, "pending", 1)
	propagating := newTool(ns, "clock", "pending", "get_time")
	rejected := newServer(ns, "rejected", 1)
	inRejected := newPrompt(ns, "summary", "rejected", []string{"topic"}, "Summarise {{topic}}.")
	// Ready, then edited so that the new pod cannot be scheduled: the old pod keeps serving
	// (maxUnavailable 0) while the rollout cannot finish.
	rolling := newServer(ns, "rolling", 1)
	// Pinned under Enforce; the MCP server serves another definition than the pin.
	pinning := newServer(ns, "pinning", 1)
	pinning.Spec.ToolPinning = mcpv1alpha1.ToolPinningEnforce
	pinned := newTool(ns, "lookup", "pinning", "lookup")
	pinned.Spec.UpstreamDigest = "sha256:" + strings.Repeat("a", 64)
	stuck := newServer(ns, "stuck", 1)
	stuck.Spec.Pod = &mcpv1alpha1.PodOverrides{NodeSelector: map[string]string{"zone": "nowhere"}}
	scaled := newServer(ns, "scaled", 0)
	external := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal, Container: &mcpv1alpha1.ServerContainer{Port: 7000}}}
	// A Deployment of the server's name that someone else made, with another (immutable)
	// selector: the API server refuses ours.
	squat := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "squatted", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example/other:1"}}}},
		},
	}
	squatted := newServer(ns, "squatted", 1)
	big := newServer(ns, "big", 1)
	text := strings.Repeat("x", mcpv1alpha1.MaxInlineResourceBytes-1024)
	var chunks []client.Object
	for i := range 17 {
		chunks = append(chunks, newResource(ns, fmt.Sprintf("chunk-%02d", i), "big", fmt.Sprintf("docs://chunk/%d", i),
			mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: text}}))
	}
	orphan := newTool(ns, "orphan", "nowhere", "route")
	winner := newTool(ns, "winner", "ready", "route")
	loser := newTool(ns, "younger", "ready", "route")
	badPrompt := newPrompt(ns, "directions", "ready", []string{"from"}, "Route from {{from}} to {{to}}.")
	noSource := newResource(ns, "token", "ready", "secret://token", mcpv1alpha1.ResourceSource{
		SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "missing", Key: "value"}})

	mustCreate(t, ready, published, pending, propagating, rejected, inRejected, rolling, pinning, pinned, stuck, scaled, external, squat, squatted, big,
		orphan, winner, badPrompt, noSource)
	mustCreate(t, chunks...)
	// Creation timestamps have one-second resolution: when both share a second, the object name
	// decides ("winner" < "younger"), so the loser loses either way.
	mustCreate(t, loser)

	step = func() {
		// The sidecars of "ready" apply the current revision; the one of "rejected" refuses it.
		for _, s := range []*mcpv1alpha1.MCPServer{ready, rejected, rolling, pinning} {
			key := client.ObjectKeyFromObject(s)
			serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
			var pods []corev1.Pod
			eventually.Succeeds(t, s.Name+": one ready pod", func() error {
				if pods = readyPods(t, ns, s.Name); len(pods) != 1 {
					return fmt.Errorf("%d ready pods", len(pods))
				}
				return nil
			})
			n := inject.NamesFor(s)
			_, rev := getCatalog(t, ns, s.Name)
			r := catalog.Report{Revision: rev}
			switch s {
			case rejected:
				r = catalog.Report{Revision: "older", RejectedRevision: rev, Reason: "tools[0]: bad schema"}
			case pinning:
				r = catalog.Report{Revision: rev, ToolsChecked: true, ToolDigests: map[string]string{"lookup": "sha256:" + strings.Repeat("b", 64)},
					WithheldTools: []string{"lookup"}, WithheldToolCount: 1}
			}
			report(t, sidecarClient(t, ns, n.ServiceAccount), ns, n.StatusConfigMap, pods[0].Name, r)
		}
		key := client.ObjectKeyFromObject(rolling)
		serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
		eventually.Succeeds(t, "moving rolling to a node that does not exist", func() error {
			if err := k8s.Get(context.Background(), key, rolling); err != nil {
				return err
			}
			rolling.Spec.Pod = &mcpv1alpha1.PodOverrides{NodeSelector: map[string]string{"zone": "nowhere"}}
			return k8s.Update(context.Background(), rolling)
		})
	}

	const (
		T = metav1.ConditionTrue
	)
	const (
		current    = kstatus.CurrentStatus
		inProgress = kstatus.InProgressStatus
		failed     = kstatus.FailedStatus
	)
	cases = []gitopsCase{
		{"MCPServer ready", ready, string(mcpv1alpha1.ConditionReady), T, string(mcpv1alpha1.ReasonReady), "Healthy", "every ready replica serves", current, "Ready", ""},
		{"MCPServer propagation pending", pending, string(mcpv1alpha1.ConditionReconciling), T, string(mcpv1alpha1.ReasonPropagationPending), "Progressing", "0 of 1 ready replicas", inProgress, "0 of 1 ready replicas", ""},
		{"MCPServer catalog rejected", rejected, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonCatalogRejected), "Degraded", "bad schema", failed, "bad schema", ""},
		{name: "MCPServer rolling out", obj: rolling, condType: string(mcpv1alpha1.ConditionReconciling), condStatus: T, condReason: string(mcpv1alpha1.ReasonRollingOut),
			condMessage: "old replicas", argo: "Progressing", argoMessage: "1 old replicas are still being replaced",
			kstatus: inProgress, kstatusMessage: "1 old replicas are still being replaced"},
		{"MCPServer rollout stuck", stuck, string(mcpv1alpha1.ConditionReconciling), T, string(mcpv1alpha1.ReasonDeploymentProgressing), "Progressing", "replicas ready", inProgress, "0 of 1 replicas ready", ""},
		{"MCPServer scaled to zero", scaled, string(mcpv1alpha1.ConditionReady), T, string(mcpv1alpha1.ReasonScaledToZero), "Healthy", "spec.replicas is 0", current, "Ready", ""},
		{"MCPServer external without pods", external, string(mcpv1alpha1.ConditionReconciling), T, string(mcpv1alpha1.ReasonExternalWorkload), "Progressing", "your own workload", inProgress, "your own workload", ""},
		{"MCPServer child refused", squatted, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonReconcileFailed), "Degraded", "field is immutable", failed, "field is immutable", ""},
		{"MCPServer catalog too large", big, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonCatalogTooLarge), "Degraded", "CatalogTooLarge", failed, "more than the", ""},
		{"MCPTool published", published, string(mcpv1alpha1.ConditionReady), T, string(mcpv1alpha1.ReasonReady), "Healthy", "published since catalog revision", current, "Ready", ""},
		{"MCPTool propagation pending", propagating, string(mcpv1alpha1.ConditionReconciling), T, string(mcpv1alpha1.ReasonPropagationPending), "Progressing", "waiting for every ready replica", inProgress, "waiting for every ready replica", ""},
		{"MCPTool server not found", orphan, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonServerNotFound), "Degraded", "nowhere, which does not exist", failed, "nowhere, which does not exist", ""},
		{"MCPTool name conflict", loser, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonNameConflict), "Degraded", `"winner"`, failed, `"winner"`, ""},
		{"MCPPrompt invalid spec", badPrompt, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonInvalidSpec), "Degraded", "to", failed, "to", ""},
		{"MCPPrompt catalog rejected", inRejected, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonCatalogRejected), "Degraded", "bad schema", failed, "bad schema", ""},
		{"MCPTool withheld by its pin", pinned, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonToolWithheld), "Degraded", "set spec.upstreamDigest to sha256:bbbb", failed, "differs from spec.upstreamDigest", ""},
		{"MCPResource source not exposed", noSource, string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonSourceNotExposed), "Degraded", `"missing"`, failed, `"missing"`, ""},
		{"MCPResource catalog too large", chunks[16], string(mcpv1alpha1.ConditionStalled), T, string(mcpv1alpha1.ReasonCatalogTooLarge), "Degraded", "CatalogTooLarge", failed, "more than the", ""},
	}
	return cases, step
}

var gitops struct {
	once  sync.Once
	cases []gitopsCase
}

// sharedGitopsScenarios creates the scenarios once for the package: TestArgoCDHealth and
// TestKstatus judge the same objects.
func sharedGitopsScenarios(t *testing.T) []gitopsCase {
	gitops.once.Do(func() {
		cases, step := gitopsScenarios(t)
		step()
		gitops.cases = cases
	})
	if gitops.cases == nil {
		t.Fatal("creating the GitOps scenarios failed in an earlier test")
	}
	return gitops.cases
}

// TestKstatus computes kstatus (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, what Flux's
// health checks and kustomize-controller's wait run) for every state of every kind the
// controller produced against the real API server: a broken object is Failed with the message
// of its Stalled condition (a pipeline waiting on it fails, saying what to fix), a change
// being rolled out or propagated is InProgress, a done one is Current.
func TestKstatus(t *testing.T) {
	for _, c := range sharedGitopsScenarios(t) {
		t.Run(c.name, func(t *testing.T) {
			u := awaitCase(t, c)
			res, err := kstatus.Compute(u)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != c.kstatus || !strings.Contains(res.Message, c.kstatusMessage) {
				t.Fatalf("kstatus %s (%s), want %s with a message containing %q; status: %v",
					res.Status, res.Message, c.kstatus, c.kstatusMessage, u.Object["status"])
			}
		})
	}

	// Before the controller writes status, every kind is InProgress: the API server defaults
	// status.observedGeneration to -1 (without it, kstatus takes an object without status as
	// Current). Create answers the object as stored, before the controller saw it.
	t.Run("fresh", func(t *testing.T) {
		ns := newNamespace(t)
		for _, obj := range []client.Object{newServer(ns, "fresh", 1), newTool(ns, "fresh", "fresh", "t"),
			newPrompt(ns, "fresh", "fresh", nil, "Hello."), newResource(ns, "fresh", "fresh", "docs://fresh",
				mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: "hi"}})} {
			gvk, err := apiutil.GVKForObject(obj, env.Scheme)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: raw}
			u.SetGroupVersionKind(gvk)
			if err := k8s.Create(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(u)
			if err != nil || res.Status != kstatus.InProgressStatus || !strings.Contains(res.Message, "latest observed generation is -1") {
				t.Errorf("%s without status: %+v %v; status %v", gvk.Kind, res, err, u.Object["status"])
			}
		}
	})

	// A status that describes an older generation is InProgress, whatever its conditions say:
	// the controller has not looked at the change yet.
	t.Run("older generation", func(t *testing.T) {
		u := awaitCase(t, sharedGitopsScenarios(t)[0])
		u.SetGeneration(u.GetGeneration() + 1)
		res, err := kstatus.Compute(u)
		if err != nil || res.Status != kstatus.InProgressStatus || !strings.Contains(res.Message, "observed generation") {
			t.Fatalf("status of an older generation: %+v %v", res, err)
		}
	})
}

// awaitCase waits until the controller shows the case's condition and returns the object as
// the API server serves it.
func awaitCase(t *testing.T, c gitopsCase) *unstructured.Unstructured {
	t.Helper()
	gvk, err := apiutil.GVKForObject(c.obj, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	eventually.Succeeds(t, fmt.Sprintf("%s: %s=%s/%s", c.name, c.condType, c.condStatus, c.condReason), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(c.obj), u); err != nil {
			return err
		}
		var st struct {
			Conditions []metav1.Condition `json:"conditions"`
		}
		raw, _, _ := unstructured.NestedMap(u.Object, "status")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &st); err != nil {
			return err
		}
		cond := findConditionIn(st.Conditions, mcpv1alpha1.ConditionType(c.condType))
		if cond.ObservedGeneration != u.GetGeneration() {
			return fmt.Errorf("%s: observedGeneration %d of generation %d", c.condType, cond.ObservedGeneration, u.GetGeneration())
		}
		if !strings.Contains(cond.Message, c.condMessage) {
			return fmt.Errorf("%s: message %q does not say %q yet", c.condType, cond.Message, c.condMessage)
		}
		return conditionIs(st.Conditions, mcpv1alpha1.ConditionType(c.condType), c.condStatus, mcpv1alpha1.ConditionReason(c.condReason))
	})
	return u
}

// TestArgoCDHealth runs docs/gitops/argocd-health.lua the way Argo CD runs health checks (a
// gopher-lua state with the safe libraries, the object as the global obj, a returned table of
// status and message) on every state of every kind the controller produced against the real
// API server, and checks that argocd-cm.yaml installs exactly that script for each kind.
func TestArgoCDHealth(t *testing.T) {
	script, err := os.ReadFile(argoHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	cases := sharedGitopsScenarios(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := awaitCase(t, c)
			h, err := argoHealth(string(script), u)
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != c.argo || !strings.Contains(h.Message, c.argoMessage) {
				t.Fatalf("health %s (%s), want %s with a message containing %q; status: %v",
					h.Status, h.Message, c.argo, c.argoMessage, u.Object["status"])
			}
		})
	}

	// Before the controller writes status, and when status describes an older generation, the
	// object is Progressing whatever its conditions say.
	t.Run("fresh", func(t *testing.T) {
		fresh := newServer(newNamespace(t), "fresh", 1)
		mustCreate(t, fresh) // Create answers the object as stored: no status yet.
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fresh)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: raw}
		if h, err := argoHealth(string(script), u); err != nil || h.Status != "Progressing" {
			t.Fatalf("no status: %+v %v", h, err)
		}
	})
	t.Run("older generation", func(t *testing.T) {
		u := awaitCase(t, cases[0])
		u.SetGeneration(u.GetGeneration() + 1)
		h, err := argoHealth(string(script), u)
		if err != nil || h.Status != "Progressing" || !strings.Contains(h.Message, "generation") {
			t.Fatalf("status of an older generation: %+v %v", h, err)
		}
	})

	t.Run("argocd-cm.yaml", func(t *testing.T) {
		raw, err := os.ReadFile("../docs/gitops/argocd-cm.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(raw, &cm); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"MCPServer", "MCPTool", "MCPResource", "MCPPrompt", "MCPAccessPolicy"} {
			key := "resource.customizations.health." + mcpv1alpha1.GroupVersion.Group + "_" + kind
			if cm.Data[key] != string(script) {
				t.Errorf("%s is not argocd-health.lua verbatim", key)
			}
		}
		if len(cm.Data) != 5 {
			t.Errorf("argocd-cm.yaml has %d keys, want the 5 health checks", len(cm.Data))
		}
	})
}

// argoStatus is the table a health script returns.
type argoStatus struct{ Status, Message string }

// argoHealth runs a health script as Argo CD does: a fresh state with only the base, table,
// string and math libraries, the object as the global obj, bounded in time, and a returned
// table whose status must be one of Argo CD's health statuses.
func argoHealth(script string, obj *unstructured.Unstructured) (argoStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return argoStatus{}, err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return argoStatus{}, fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	h := argoStatus{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	switch h.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return h, nil
	}
	return h, fmt.Errorf("%q is not an Argo CD health status", h.Status)
}

// toLua converts a decoded JSON value into Lua values: objects and arrays become tables (arrays
// 1-based), numbers LNumber.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	panic(fmt.Sprintf("toLua: %T", v))
}

// kstatusOf computes kstatus for an object as the API server serves it now.
func kstatusOf(t *testing.T, obj client.Object) *kstatus.Result {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAppliedTogether: a pipeline applies an MCPTool before its MCPServer, and an MCPResource
// before the ConfigMap behind it (in an order of its own choosing). While the controller has
// seen only the first of each pair, kstatus says InProgress, not Failed (Flux fails a
// Kustomization at once on Failed), and once the second exists both become Current. After the
// grace, the same missing server is Stalled (the "server not found" case of the scenarios).
func TestAppliedTogether(t *testing.T) {
	ns := newNamespace(t)
	tool := newTool(ns, "forecast", "late", "get_forecast")
	res := newResource(ns, "stations", "late", "docs://stations", mcpv1alpha1.ResourceSource{
		ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "stations", Key: "list"}})

	mustCreate(t, tool)
	itemCondition(t, tool, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
	if r := kstatusOf(t, tool); r.Status != kstatus.InProgressStatus || !strings.Contains(r.Message, "does not exist") {
		t.Fatalf("a tool whose server is not there yet: %s (%s)", r.Status, r.Message)
	}

	mustCreate(t, newServer(ns, "late", 0), res)
	itemCondition(t, res, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonSourceNotExposed)
	if r := kstatusOf(t, res); r.Status != kstatus.InProgressStatus || !strings.Contains(r.Message, `"stations" is not exposed`) {
		t.Fatalf("a resource whose ConfigMap is not there yet: %s (%s)", r.Status, r.Message)
	}
	mustCreate(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stations", Namespace: ns, Labels: map[string]string{ExposeToLabel: "late"}},
		Data: map[string]string{"list": "a,b"}})

	for _, obj := range []client.Object{tool, res} {
		eventually.Succeeds(t, obj.GetName()+" Current", func() error {
			if r := kstatusOf(t, obj); r.Status != kstatus.CurrentStatus {
				return fmt.Errorf("%s (%s)", r.Status, r.Message)
			}
			return nil
		})
	}
}
