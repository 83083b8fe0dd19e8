//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

const releaseNamespace = "switchboard-system"

// helmBin is the pinned Helm that `make test` installs into ./bin and passes as HELM.
func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		t.Fatal("HELM is not set: run the tests with `make test`, which installs the pinned Helm")
	}
	return h
}

func chartDir(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "charts", "switchboard")
}

// render runs helm template with the given --set values and returns the objects.
func render(t *testing.T, sets ...string) ([]*unstructured.Unstructured, []byte) {
	t.Helper()
	args := []string{"template", "sb", chartDir(t), "--namespace", releaseNamespace, "--include-crds"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helmBin(t), args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm %v: %v\n%s", args, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	return decodeStream(t, "helm output", out), out
}

// decodeStream decodes a stream of YAML (or JSON) documents, what a renderer prints.
func decodeStream(t *testing.T, what string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatalf("decoding %s: %v", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

func kinds(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func into(t *testing.T, u *unstructured.Unstructured, v any) {
	t.Helper()
	b, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// generated returns the documents of a generated manifest under config/.
func generated(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	root, _ := testenv.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return decodeStream(t, rel, b)
}

func TestChartLints(t *testing.T) {
	out, err := exec.Command(helmBin(t), "lint", "--strict", chartDir(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

func TestChartDefaults(t *testing.T) {
	objs, _ := render(t)

	if crds := kinds(objs, "CustomResourceDefinition"); len(crds) != 5 {
		t.Errorf("want the 5 CRDs, got %d", len(crds))
	}
	deployments := kinds(objs, "Deployment")
	if len(deployments) != 1 {
		t.Fatalf("want one Deployment, got %d", len(deployments))
	}
	for _, u := range deployments {
		var d appsv1.Deployment
		into(t, u, &d)
		assertRestricted(t, &d)
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--leader-elect=true", "--sidecar-image=switchboard-sidecar:0.1.0", "--webhook-cert-mode=self-signed",
			"--kube-api-qps=500", "--kube-api-burst=1000", "--max-concurrent-reconciles=32",
			"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"} {
			if !slices.Contains(args, want) {
				t.Errorf("manager args %v lack %s", args, want)
			}
		}
		memLimit := false
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			memLimit = memLimit || (e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
				e.ValueFrom.ResourceFieldRef.Resource == "limits.memory")
		}
		if !memLimit {
			t.Errorf("the manager's GOMEMLIMIT is not its memory limit: %+v", d.Spec.Template.Spec.Containers[0].Env)
		}
	}

	// RBAC: exactly the generated rules.
	gen := generated(t, "config/rbac/role.yaml")
	cr := find(objs, "ClusterRole", "sb-switchboard-manager")
	if cr == nil {
		t.Fatal("no ClusterRole sb-switchboard-manager")
	}
	if !reflect.DeepEqual(cr.Object["rules"], find(gen, "ClusterRole", "").Object["rules"]) {
		t.Errorf("the chart's ClusterRole rules differ from config/rbac/role.yaml")
	}
	// The sidecars' TokenReview role: the same as config/rbac's, under the name the manager binds.
	reviewer := find(objs, "ClusterRole", "switchboard-sidecar-tokenreviewer")
	if reviewer == nil || !reflect.DeepEqual(reviewer.Object["rules"], find(generated(t, "config/rbac/sidecar_tokenreviewer_role.yaml"), "ClusterRole", "").Object["rules"]) {
		t.Errorf("the chart's switchboard-sidecar-tokenreviewer differs from config/rbac: %v", reviewer)
	}
	role := find(objs, "Role", "sb-switchboard-manager-own")
	if role == nil || !reflect.DeepEqual(role.Object["rules"], find(gen, "Role", "").Object["rules"]) {
		t.Errorf("the chart's Role in the manager's namespace differs from config/rbac/role.yaml: %v", role)
	}

	// The webhook: the generated configuration, pointed at the release's Service.
	var chartWH, genWH map[string]any
	wh := find(objs, "MutatingWebhookConfiguration", "switchboard-injector")
	if wh == nil {
		t.Fatal("no MutatingWebhookConfiguration switchboard-injector")
	}
	chartWH = wh.Object["webhooks"].([]any)[0].(map[string]any)
	genWH = find(generated(t, "config/webhook/manifests.yaml"), "MutatingWebhookConfiguration", "").Object["webhooks"].([]any)[0].(map[string]any)
	for _, field := range []string{"name", "rules", "failurePolicy", "sideEffects", "matchPolicy", "reinvocationPolicy", "objectSelector", "namespaceSelector", "timeoutSeconds", "admissionReviewVersions"} {
		if !reflect.DeepEqual(chartWH[field], genWH[field]) {
			t.Errorf("webhook %s: chart %v, generated %v", field, chartWH[field], genWH[field])
		}
	}
	if svc := find(objs, "Service", "switchboard-webhook"); svc == nil {
		t.Error("no webhook Service")
	}
	if find(objs, "Certificate", "") != nil || find(objs, "ServiceMonitor", "") != nil {
		t.Error("cert-manager and ServiceMonitor objects must be opt-in")
	}
}

// TestLeasesOnlyInTheManagersNamespace (security review F16): leader election needs a Lease in
// the manager's own namespace only. The generated RBAC grants leases in a Role there and never
// cluster-wide (a compromised manager could otherwise take kube-system's leader leases), and the
// chart renders that Role whatever else is set: with the webhook off and in a namespace-scoped
// install, whose per-namespace Roles hold no leases either.
func TestLeasesOnlyInTheManagersNamespace(t *testing.T) {
	grantsLeases := func(u *unstructured.Unstructured) bool {
		for _, rule := range u.Object["rules"].([]any) {
			if slices.Contains(rule.(map[string]any)["resources"].([]any), any("leases")) {
				return true
			}
		}
		return false
	}
	gen := generated(t, "config/rbac/role.yaml")
	if grantsLeases(find(gen, "ClusterRole", "")) {
		t.Error("config/rbac/role.yaml grants leases in its ClusterRole")
	}
	if r := find(gen, "Role", ""); r == nil || r.GetNamespace() != releaseNamespace || !grantsLeases(r) {
		t.Errorf("config/rbac/role.yaml has no Role granting leases in %s: %v", releaseNamespace, r)
	}
	for _, sets := range [][]string{nil, {"webhook.enabled=false"}, {"watchNamespaces={team-a}"}} {
		objs, _ := render(t, sets...)
		var inOwn bool
		for _, r := range append(kinds(objs, "Role"), kinds(objs, "ClusterRole")...) {
			switch {
			case !grantsLeases(r):
			case r.GetKind() == "Role" && r.GetNamespace() == releaseNamespace:
				inOwn = true
			default:
				t.Errorf("%v: %s %s/%s grants leases", sets, r.GetKind(), r.GetNamespace(), r.GetName())
			}
		}
		if !inOwn {
			t.Errorf("%v: no Role grants leases in %s, so leader election fails", sets, releaseNamespace)
		}
	}
}

func TestChartNamespaceScoped(t *testing.T) {
	objs, _ := render(t, "watchNamespaces={team-a,team-b}")
	if find(objs, "ClusterRole", "sb-switchboard-manager") != nil {
		t.Error("a namespace-scoped install must not grant the manager's ClusterRole")
	}
	for _, ns := range []string{"team-a", "team-b"} {
		found := false
		for _, r := range kinds(objs, "Role") {
			if r.GetNamespace() == ns && r.GetName() == "sb-switchboard-manager" {
				found = true
				for _, rule := range r.Object["rules"].([]any) {
					if slices.Contains(rule.(map[string]any)["apiGroups"].([]any), any("admissionregistration.k8s.io")) {
						t.Errorf("Role in %s holds cluster-scoped webhook rules", ns)
					}
				}
			}
		}
		if !found {
			t.Errorf("no manager Role in %s", ns)
		}
	}
	if find(objs, "ClusterRole", "sb-switchboard-webhook") == nil {
		t.Error("the webhook still needs its small ClusterRole for the webhook configuration")
	}
	// Binding the sidecars' TokenReview role is cluster-scoped: a ClusterRole of exactly those
	// rules, and none of them in the namespaced Roles.
	binder := find(objs, "ClusterRole", "sb-switchboard-tokenreview-binder")
	if binder == nil || find(objs, "ClusterRoleBinding", "sb-switchboard-tokenreview-binder") == nil {
		t.Fatal("a namespace-scoped install lacks the ClusterRole (and binding) that lets the manager bind the TokenReview role")
	}
	for _, rule := range binder.Object["rules"].([]any) {
		res := rule.(map[string]any)["resources"].([]any)
		if !slices.Contains(res, any("clusterrolebindings")) && !slices.Contains(res, any("clusterroles")) {
			t.Errorf("the binder ClusterRole holds more than binding rights: %v", rule)
		}
	}
	for _, r := range kinds(objs, "Role") {
		for _, rule := range r.Object["rules"].([]any) {
			res := rule.(map[string]any)["resources"].([]any)
			if slices.Contains(res, any("clusterrolebindings")) || slices.Contains(res, any("clusterroles")) {
				t.Errorf("Role %s/%s holds cluster-scoped RBAC rules", r.GetNamespace(), r.GetName())
			}
		}
	}
	var d appsv1.Deployment
	into(t, find(objs, "Deployment", ""), &d)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--watch-namespaces=team-a,team-b") {
		t.Errorf("manager args lack --watch-namespaces: %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	wh := find(objs, "MutatingWebhookConfiguration", "")
	sel, _ := yaml.Marshal(wh.Object["webhooks"].([]any)[0].(map[string]any)["namespaceSelector"])
	if !strings.Contains(string(sel), "operator: In") || !strings.Contains(string(sel), "team-a") {
		t.Errorf("webhook must only intercept the watched namespaces: %s", sel)
	}
}

func TestChartCertManagerAndServiceMonitor(t *testing.T) {
	objs, _ := render(t, "webhook.certMode=cert-manager", "metrics.serviceMonitor.enabled=true")
	if find(objs, "Certificate", "switchboard-webhook") == nil || find(objs, "Issuer", "") == nil {
		t.Error("cert-manager mode needs an Issuer and a Certificate")
	}
	wh := find(objs, "MutatingWebhookConfiguration", "")
	if wh.GetAnnotations()["cert-manager.io/inject-ca-from"] != releaseNamespace+"/switchboard-webhook" {
		t.Errorf("cert-manager must inject the CA bundle: %v", wh.GetAnnotations())
	}
	if find(objs, "ServiceMonitor", "switchboard") == nil {
		t.Error("no ServiceMonitor")
	}
	var d appsv1.Deployment
	into(t, find(objs, "Deployment", ""), &d)
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--webhook-cert-mode=cert-manager") {
		t.Errorf("manager args lack --webhook-cert-mode=cert-manager")
	}
	if _, err := exec.Command(helmBin(t), "template", "sb", chartDir(t), "--set", "webhook.certMode=bogus").Output(); err == nil {
		t.Error("an unknown webhook.certMode must fail to render")
	}
}

// TestChartInstallsOnAPIServer applies the default rendering with server-side dry-run against
// the real API server (CRDs for real, since the rest needs them).
func TestChartInstallsOnAPIServer(t *testing.T) {
	_, out := render(t)
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNamespace}}); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "chart.yaml")
	if err := os.WriteFile(manifest, out, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := env.Kubectl(ctx, "apply", "--dry-run=server", "--server-side", "-f", manifest).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server of the chart: %v\n%s", err, res)
	}
	if !strings.Contains(string(res), "deployment.apps/switchboard-manager serverside-applied (server dry run)") {
		t.Errorf("unexpected apply output:\n%s", res)
	}
}

func assertRestricted(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("Deployment %s: pod securityContext is not restricted: %+v", d.Name, ps)
	}
	for _, c := range slices.Concat(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("Deployment %s container %s: securityContext is not restricted: %+v", d.Name, c.Name, sc)
		}
	}
}

// TestChartShards: shards={shard1,shard2} renders one more manager Deployment per shard, each
// selecting its shard and running no webhook, with its own pods and metrics Service; the default
// Deployment selects the unlabelled objects and alone serves the webhook, whose Service selects
// its pods only.
func TestChartShards(t *testing.T) {
	objs, _ := render(t, "shards={shard1,shard2}")
	deployments := kinds(objs, "Deployment")
	if len(deployments) != 3 {
		t.Fatalf("want 3 manager Deployments, got %d", len(deployments))
	}
	want := map[string]struct{ selector, webhook string }{
		"switchboard-manager":        {"--watch-label-selector=!sharding.switchboard.dev/key", "--webhook-cert-mode=self-signed"},
		"switchboard-manager-shard1": {"--watch-label-selector=sharding.switchboard.dev/key=shard1", "--webhook-cert-mode=none"},
		"switchboard-manager-shard2": {"--watch-label-selector=sharding.switchboard.dev/key=shard2", "--webhook-cert-mode=none"},
	}
	podLabels := map[string]map[string]string{}
	for _, u := range deployments {
		var d appsv1.Deployment
		into(t, u, &d)
		assertRestricted(t, &d)
		w, ok := want[d.Name]
		if !ok {
			t.Errorf("unexpected Deployment %s", d.Name)
			continue
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, a := range []string{w.selector, w.webhook, "--leader-elect=true"} {
			if !slices.Contains(args, a) {
				t.Errorf("%s args %v lack %s", d.Name, args, a)
			}
		}
		podLabels[d.Name] = d.Spec.Template.Labels
	}
	// No Deployment's selector, nor the webhook Service's, selects another Deployment's pods.
	for _, u := range deployments {
		var d appsv1.Deployment
		into(t, u, &d)
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		for name, l := range podLabels {
			if got := sel.Matches(labelsSet(l)); got != (name == d.Name) {
				t.Errorf("the selector of %s selects the pods of %s: %t", d.Name, name, got)
			}
		}
	}
	var svc corev1.Service
	into(t, find(objs, "Service", "switchboard-webhook"), &svc)
	for name, l := range podLabels {
		if got := labelsSet(svc.Spec.Selector).AsSelector().Matches(labelsSet(l)); got != (name == "switchboard-manager") {
			t.Errorf("the webhook Service selects the pods of %s: %t", name, got)
		}
	}
	for _, shard := range []string{"shard1", "shard2"} {
		m := find(objs, "Service", "switchboard-metrics-"+shard)
		if m == nil {
			t.Fatalf("no metrics Service of %s", shard)
		}
		var ms corev1.Service
		into(t, m, &ms)
		if !labelsSet(ms.Spec.Selector).AsSelector().Matches(labelsSet(podLabels["switchboard-manager-"+shard])) {
			t.Errorf("the metrics Service of %s does not select its pods", shard)
		}
	}
	// Invalid shard names fail the render.
	out, err := exec.Command(helmBin(t), "template", "sb", chartDir(t), "--set", "shards={Shard_1}").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not a lowercase DNS label") {
		t.Errorf("shards={Shard_1} rendered: %v\n%s", err, out)
	}
}

func labelsSet(m map[string]string) labels.Set { return labels.Set(m) }
