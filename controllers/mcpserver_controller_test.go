//go:build e2e

package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func getCatalog(t *testing.T, ns, server string) (*catalog.Catalog, string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: server + "-catalog"}, cm); err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Decode([]byte(cm.Data[catalog.Key]))
	if err != nil {
		t.Fatalf("the stored catalog does not decode: %v", err)
	}
	if rev := catalog.Revision([]byte(cm.Data[catalog.Key])); rev != cm.Annotations[catalog.RevisionAnnotation] {
		t.Fatalf("revision annotation %q does not name the content (%s)", cm.Annotations[catalog.RevisionAnnotation], rev)
	}
	return c, cm.Annotations[catalog.RevisionAnnotation]
}

// TestServerReconcilesIntoChildren applies a server with a tool, resources and a prompt, and
// checks every child: the Deployment with its native sidecar, the Service, the RBAC, the PDB and
// the catalog; then deletes the server and sees the garbage collector remove them.
func TestServerReconcilesIntoChildren(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := newServer(ns, "weather", 2)
	server.Spec.Sidecar = &mcpv1alpha1.SidecarSpec{AllowedHosts: []string{"mcp.example.com"}}
	mustCreate(t, server,
		newTool(ns, "forecast", "weather", "get_forecast"),
		newResource(ns, "handbook", "weather", "docs://handbook", mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: "Be kind."}}),
		newResource(ns, "stations", "weather", "docs://stations", mcpv1alpha1.ResourceSource{ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "stations", Key: "list"}}),
		newResource(ns, "apikey", "weather", "secret://key", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "weather-key", Key: "token"}}),
		newPrompt(ns, "summary", "weather", []string{"city"}, "Summarise the weather in {{city}}."),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stations", Namespace: ns, Labels: map[string]string{ExposeToLabel: "weather"}},
			Data: map[string]string{"list": "a,b"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "weather-key", Namespace: ns, Labels: map[string]string{ExposeToLabel: "weather"}},
			StringData: map[string]string{"token": "s3cret"}},
	)
	key := client.ObjectKeyFromObject(server)
	for kind, name := range map[client.Object]string{&mcpv1alpha1.MCPTool{}: "forecast", &mcpv1alpha1.MCPResource{}: "handbook",
		&mcpv1alpha1.MCPPrompt{}: "summary"} {
		kind.SetNamespace(ns)
		kind.SetName(name)
		itemCondition(t, kind, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	}
	// No sidecar runs in this test, so no replica reports: propagation is pending.
	serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)

	// The catalog: everything, referenced sources, no Secret content.
	var c *catalog.Catalog
	var rev string
	eventually.Succeeds(t, "status describes the stored catalog", func() error {
		c, rev = getCatalog(t, ns, "weather")
		if err := k8s.Get(ctx, key, server); err != nil {
			return err
		}
		if server.Status.CatalogRevision != rev || server.Status.Tools != 1 || server.Status.Resources != 3 || server.Status.Prompts != 1 {
			return fmt.Errorf("status does not describe the catalog %s: %+v", rev, server.Status)
		}
		return nil
	})
	if len(c.Tools) != 1 || c.Tools[0].Name != "get_forecast" || !strings.Contains(string(c.Tools[0].InputSchema), `"city"`) {
		t.Fatalf("tools: %+v", c.Tools)
	}
	keys := []string{}
	for _, r := range c.Resources {
		keys = append(keys, r.Key())
	}
	if !slices.Equal(keys, []string{"docs://handbook", "docs://stations", "secret://key"}) {
		t.Fatalf("resources not in canonical order: %v", keys)
	}
	if c.Resources[2].Source.Secret == nil || c.Resources[2].Source.Secret.Name != "weather-key" || c.Resources[1].Source.ConfigMap == nil {
		t.Fatalf("ConfigMap and Secret sources must be referenced: %+v", c.Resources)
	}
	cm := &corev1.ConfigMap{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather-catalog"}, cm)
	if strings.Contains(cm.Data[catalog.Key], "s3cret") {
		t.Fatal("Secret content landed in the catalog ConfigMap")
	}

	// The Deployment: native sidecar first, probes, hooks, security, no catalog revision.
	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather"}, d); err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != inject.ContainerName ||
		ptr.Deref(pod.InitContainers[0].RestartPolicy, "") != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("want the native sidecar: %+v", pod.InitContainers)
	}
	sc := pod.InitContainers[0]
	if sc.Image != testSidecarImage || sc.StartupProbe == nil || sc.ReadinessProbe == nil ||
		sc.Lifecycle.PreStop.Exec == nil || sc.Lifecycle.PreStop.Exec.Command[1] != "drain" || !*sc.SecurityContext.ReadOnlyRootFilesystem {
		t.Fatalf("sidecar: %+v", sc)
	}
	args := strings.Join(sc.Args, " ")
	for _, want := range []string{"--upstream=http://127.0.0.1:9000/mcp", "--catalog-configmap=" + ns + "/weather-catalog",
		"--report-configmap=" + ns + "/weather-catalog-status", "--pod-name=$(POD_NAME)", "mcp.example.com", "weather." + ns + ".svc:80"} {
		if !strings.Contains(args, want) {
			t.Errorf("sidecar args lack %s: %s", want, args)
		}
	}
	main := pod.Containers[0]
	if main.Lifecycle == nil || main.Lifecycle.PreStop.HTTPGet.Port.IntVal != mcpv1alpha1.SidecarAdminPort ||
		*main.SecurityContext.AllowPrivilegeEscalation || main.SecurityContext.Capabilities.Drop[0] != "ALL" {
		t.Fatalf("server container: %+v", main)
	}
	if *pod.SecurityContext.RunAsNonRoot != true || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		*pod.TerminationGracePeriodSeconds != 41 || *pod.AutomountServiceAccountToken {
		t.Fatalf("pod security: %+v grace %d", pod.SecurityContext, *pod.TerminationGracePeriodSeconds)
	}
	if d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 || d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue() != 1 {
		t.Fatalf("strategy: %+v", d.Spec.Strategy)
	}
	tmpl, _ := json.Marshal(d.Spec.Template)
	if strings.Contains(string(tmpl), rev) {
		t.Fatal("the pod template must not contain the catalog revision")
	}

	// The Service targets the sidecar.
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather"}, svc); err != nil {
		t.Fatal(err)
	}
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].Name != "mcp" || *p[0].AppProtocol != "http" || p[0].TargetPort.IntVal != 8800 {
		t.Fatalf("service ports: %+v", p)
	}

	// RBAC: names only, exactly one catalog ConfigMap, and the sources.
	role := &rbacv1.Role{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather-sidecar"}, role); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{"weather-catalog", "stations"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"}, ResourceNames: []string{"weather-catalog-status"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{"weather-key"}},
	}
	if fmt.Sprint(role.Rules) != fmt.Sprint(want) {
		t.Fatalf("role rules\n got %+v\nwant %+v", role.Rules, want)
	}
	rb := &rbacv1.RoleBinding{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather-sidecar"}, rb); err != nil {
		t.Fatal(err)
	}
	if rb.Subjects[0].Name != "weather-sidecar" || pod.ServiceAccountName != "weather-sidecar" {
		t.Fatalf("binding %+v, pod SA %s", rb.Subjects, pod.ServiceAccountName)
	}

	// Every child is controlled by the server; the PDB exists with 2 replicas.
	children := []client.Object{d, svc, role, rb, cm, &corev1.ServiceAccount{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{}}
	names := []string{"weather", "weather", "weather-sidecar", "weather-sidecar", "weather-catalog", "weather-sidecar", "weather", "weather-catalog-status"}
	for i, obj := range children {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[i]}, obj); err != nil {
			t.Fatal(err)
		}
		if !metav1.IsControlledBy(obj, server) {
			t.Fatalf("%T %s is not controlled by the server", obj, names[i])
		}
	}

	// Items are accepted and published.
	itemCondition(t, &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Name: "forecast", Namespace: ns}}, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	tool := &mcpv1alpha1.MCPTool{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "forecast"}, tool)
	// It names the first revision that included it (the server's catalog may have grown since, as
	// the other objects arrived: TestEditWritesOnlyTheEditedItem), and the current one has it.
	published := findCondition(tool, mcpv1alpha1.ConditionPublished)
	if tool.Status.PublishedRevision == "" || !strings.HasSuffix(published.Message, tool.Status.PublishedRevision) ||
		tool.Status.CatalogRevision != tool.Status.PublishedRevision || //nolint:staticcheck // SA1019: the deprecated field still carries the value
		tool.Status.ObservedGeneration != tool.Generation {
		t.Fatalf("tool status %+v", tool.Status)
	}
	if c, _ := getCatalog(t, ns, "weather"); !slices.ContainsFunc(c.Tools, func(ct catalog.Tool) bool { return ct.Name == tool.Spec.Name }) {
		t.Fatalf("catalog %s lacks the published tool %s", rev, tool.Spec.Name)
	}

	// Garbage collection (kube-controller-manager runs) removes the children with the server.
	if err := k8s.Delete(ctx, server); err != nil {
		t.Fatal(err)
	}
	for i, obj := range children {
		eventually.Succeeds(t, fmt.Sprintf("%T %s garbage-collected", obj, names[i]), func() error {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[i]}, obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %w", err)
		})
	}
	// With the server gone, its tool is no longer accepted.
	itemCondition(t, tool, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
}

// snapshotVersions returns the resourceVersion of every object in the namespace that
// Switchboard reads or writes, Events included.
func snapshotVersions(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	lists := []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{}, &corev1.ConfigMapList{},
		&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &policyv1.PodDisruptionBudgetList{},
		&mcpv1alpha1.MCPServerList{}, &mcpv1alpha1.MCPToolList{}, &mcpv1alpha1.MCPResourceList{}, &mcpv1alpha1.MCPPromptList{},
		&eventsv1.EventList{}}
	for _, l := range lists {
		if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		items, _ := metaItems(l)
		for _, o := range items {
			out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetResourceVersion()
		}
	}
	return out
}

// TestSecondReconcileWritesNothing proves idempotency: once the world has settled, reconciling
// again changes no object (every resourceVersion stays the same), applies no child that differs,
// patches no status and records no Event.
func TestSecondReconcileWritesNothing(t *testing.T) {
	ns := newNamespace(t)
	server := newServer(ns, "calc", 1)
	mustCreate(t, server, newTool(ns, "add", "calc", "add"), newPrompt(ns, "explain", "calc", []string{"x"}, "Explain {{x}}"),
		newResource(ns, "readme", "calc", "docs://readme", mcpv1alpha1.ResourceSource{Upstream: &mcpv1alpha1.UpstreamSource{}}))
	key := client.ObjectKeyFromObject(server)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
	// Every item's status written: a first status waits for the replicas' reports
	// (DefaultItemSettle), which no sidecar sends here, and is written when the wait ends.
	itemCondition(t, &mcpv1alpha1.MCPPrompt{ObjectMeta: metav1.ObjectMeta{Name: "explain", Namespace: ns}}, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	itemCondition(t, &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Name: "add", Namespace: ns}}, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	itemCondition(t, &mcpv1alpha1.MCPResource{ObjectMeta: metav1.ObjectMeta{Name: "readme", Namespace: ns}}, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)

	// Wait until two snapshots a reconcile apart agree (the Deployment controller and kwok may
	// still be finishing), then require a further reconcile to change nothing.
	var before map[string]string
	eventually.Succeeds(t, "the world settles", func() error {
		before = snapshotVersions(t, ns)
		if _, err := servers.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		after := snapshotVersions(t, ns)
		if fmt.Sprint(before) != fmt.Sprint(after) {
			return fmt.Errorf("changed: %v -> %v", before, after)
		}
		return nil
	})
	// The Events recorder folds repeated Events into a series it writes only later, so the
	// further reconciles record into a recorder of their own, which must stay empty.
	quiet := *servers
	rec := events.NewFakeRecorder(100)
	quiet.Recorder = rec
	for range 3 {
		if _, err := quiet.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Events) > 0 {
		t.Errorf("a reconcile over an unchanged world recorded %d Events, the first: %s", len(rec.Events), <-rec.Events)
	}
	after := snapshotVersions(t, ns)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s was written: resourceVersion %s -> %s", k, v, after[k])
		}
	}
	if len(before) < 11 {
		t.Fatalf("snapshot too small to mean anything: %v", before)
	}
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := apimeta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(client.Object))
	}
	return out, nil
}
