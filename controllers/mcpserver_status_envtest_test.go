//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// TestItemConditions reaches every reason of MCPTool, MCPResource and MCPPrompt against the
// real API server: ServerNotFound (fixed when the server appears), NameConflict naming the
// winner (and the loser taking over when the winner goes), InvalidSpec for undeclared prompt
// placeholders, SourceNotExposed and SourceNotFound (fixed when the Secret appears, exposed, and
// gets its key), NotAccepted and Published.
func TestItemConditions(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)

	// A tool whose server does not exist yet.
	early := newTool(ns, "early", "maps", "route")
	mustCreate(t, early)
	itemCondition(t, early, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
	itemCondition(t, early, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonNotAccepted)
	eventRecorded(t, early, mcpv1alpha1.ReasonServerNotFound)

	// The server appears; the tool is accepted. A later tool with the same name loses.
	mustCreate(t, newServer(ns, "maps", 1))
	itemCondition(t, early, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	itemCondition(t, early, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	// Creation timestamps have one-second resolution: the loser may share the winner's second,
	// and then the object name decides ("early" < "late"), so "early" wins either way (the age
	// rule itself is TestResolve's).
	late := newTool(ns, "late", "maps", "route")
	mustCreate(t, late)
	itemCondition(t, late, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonNameConflict)
	itemCondition(t, late, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonNotAccepted)
	if msg := findCondition(late, mcpv1alpha1.ConditionAccepted).Message; !strings.Contains(msg, `"early"`) {
		t.Fatalf("the NameConflict message must name the winner: %s", msg)
	}
	eventRecorded(t, late, mcpv1alpha1.ReasonNameConflict)

	// The winner goes; the loser takes over.
	if err := k8s.Delete(ctx, early); err != nil {
		t.Fatal(err)
	}
	itemCondition(t, late, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	itemCondition(t, late, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)

	// A prompt with a placeholder its arguments do not declare.
	bad := newPrompt(ns, "directions", "maps", []string{"from"}, "Route from {{from}} to {{to}}.")
	mustCreate(t, bad)
	itemCondition(t, bad, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonInvalidSpec)
	if msg := findCondition(bad, mcpv1alpha1.ConditionAccepted).Message; !strings.Contains(msg, "to") {
		t.Fatalf("the message must name the undeclared placeholder: %s", msg)
	}
	eventRecorded(t, bad, mcpv1alpha1.ReasonInvalidSpec)
	edit(t, bad, func() { bad.Spec.Arguments = append(bad.Spec.Arguments, mcpv1alpha1.PromptArgument{Name: "to"}) })
	itemCondition(t, bad, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)

	// A Secret-backed resource whose Secret is missing: SourceNotExposed, not in the catalog.
	res := newResource(ns, "token", "maps", "secret://token", mcpv1alpha1.ResourceSource{
		SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "maps-token", Key: "value"}})
	mustCreate(t, res)
	itemCondition(t, res, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonSourceNotExposed)
	itemCondition(t, res, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	eventRecorded(t, res, mcpv1alpha1.ReasonSourceNotExposed)
	// The Secret appears, exposed to the server but without the key: in the catalog, but
	// SourceNotFound. Nothing else changes: the controller sees it through its watch.
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "maps-token", Namespace: ns, Labels: map[string]string{ExposeToLabel: "maps"}},
		StringData: map[string]string{"other": "x"}}
	mustCreate(t, sec)
	itemCondition(t, res, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonSourceNotFound)
	eventRecorded(t, res, mcpv1alpha1.ReasonSourceNotFound)
	// The key is added: published, again through the watch alone.
	edit(t, sec, func() { sec.Data["value"] = []byte("x") })
	itemCondition(t, res, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
}

func findCondition(obj client.Object, typ mcpv1alpha1.ConditionType) metav1.Condition {
	return findConditionIn(itemStatus(obj).Conditions, typ)
}

// TestCatalogTooLarge: past the ConfigMap size limit the controller keeps the previous catalog
// and says why; removing the bulk recovers.
func TestCatalogTooLarge(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := newServer(ns, "big", 1)
	mustCreate(t, server)
	key := client.ObjectKeyFromObject(server)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
	_, before := getCatalog(t, ns, "big")

	text := strings.Repeat("x", mcpv1alpha1.MaxInlineResourceBytes-1024)
	var bulk []client.Object
	for i := range 17 {
		bulk = append(bulk, newResource(ns, fmt.Sprintf("chunk-%02d", i), "big", fmt.Sprintf("docs://chunk/%d", i),
			mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: text}}))
	}
	mustCreate(t, bulk...)
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogTooLarge)
	serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogTooLarge)
	eventRecorded(t, server, mcpv1alpha1.ReasonCatalogTooLarge)
	itemCondition(t, bulk[16], mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogTooLarge)
	// The stored catalog is the last one that fit (the cache may have seen some chunks before
	// others), status names it, and reconciling again keeps it.
	c, kept := getCatalog(t, ns, "big")
	if len(c.Resources) >= 17 || kept == before && len(c.Resources) != 0 {
		t.Fatalf("the stored catalog holds %d resources", len(c.Resources))
	}
	reconcileServer(t, key)
	if _, rev := getCatalog(t, ns, "big"); rev != kept {
		t.Fatalf("the previous catalog must stay: %s -> %s", kept, rev)
	}
	if err := k8s.Get(ctx, key, server); err != nil || server.Status.CatalogRevision != kept {
		t.Fatalf("status.catalogRevision must name the catalog that is served, %s: %s (%v)", kept, server.Status.CatalogRevision, err)
	}

	for _, o := range bulk[:4] {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	itemCondition(t, bulk[16], mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
}

// TestWorkloadReasons: External mode (no Deployment), scaling to zero (and the PDB coming and
// going with the replica count), unschedulable pods, a Deployment name taken by someone else,
// and a name that cannot become a Service.
func TestWorkloadReasons(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)

	ext := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal, Container: &mcpv1alpha1.ServerContainer{Port: 7000}}}
	mustCreate(t, ext)
	serverCondition(t, client.ObjectKeyFromObject(ext), mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonExternalWorkload)
	serverCondition(t, client.ObjectKeyFromObject(ext), mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonNoReadyReplicas)
	// External mode still gets its Service and its catalog.
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ext"}, &corev1.Service{}); err != nil {
		t.Fatalf("External mode still gets its Service: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ext-catalog"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("External mode still gets its catalog: %v", err)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ext"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Fatalf("External mode must not get a Deployment: %v", err)
	}

	scaled := newServer(ns, "scaled", 2)
	mustCreate(t, scaled)
	key := client.ObjectKeyFromObject(scaled)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
	eventually.Succeeds(t, "a PDB with 2 replicas", func() error {
		return k8s.Get(ctx, key, &policyv1.PodDisruptionBudget{})
	})
	edit(t, scaled, func() { scaled.Spec.Replicas = ptr.To[int32](0) })
	// Scaled to zero is Ready (as asked), though not Available, and neither Stalled nor
	// Reconciling once the pods are gone.
	serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonScaledToZero)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonScaledToZero)
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonNoReadyReplicas)
	eventually.Succeeds(t, "scaled: no Stalled or Reconciling", func() error {
		if err := k8s.Get(ctx, key, scaled); err != nil {
			return err
		}
		for _, typ := range []string{string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ConditionReconciling)} {
			if c := findConditionIn(scaled.Status.Conditions, mcpv1alpha1.ConditionType(typ)); c.Type != "" {
				return fmt.Errorf("%+v", c)
			}
		}
		return nil
	})
	eventRecorded(t, scaled, mcpv1alpha1.ReasonScaledToZero)
	eventually.Succeeds(t, "the PDB removed at 0 replicas", func() error {
		if err := k8s.Get(ctx, key, &policyv1.PodDisruptionBudget{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PDB still there: %w", err)
		}
		return nil
	})

	// Pods that cannot be scheduled: the rollout is in progress, not available.
	stuck := newServer(ns, "stuck", 1)
	stuck.Spec.Pod = &mcpv1alpha1.PodOverrides{NodeSelector: map[string]string{"zone": "nowhere"}}
	mustCreate(t, stuck)
	eventually.Succeeds(t, "stuck: Available=False DeploymentProgressing with the Deployment observed", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(stuck), stuck); err != nil {
			return err
		}
		if err := conditionIs(stuck.Status.Conditions, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonDeploymentProgressing); err != nil {
			return err
		}
		if msg := findConditionIn(stuck.Status.Conditions, mcpv1alpha1.ConditionAvailable).Message; !strings.HasPrefix(msg, "0 of 1 replicas ready") {
			return fmt.Errorf("the Deployment is not observed yet: %s", msg)
		}
		return nil
	})
	serverCondition(t, client.ObjectKeyFromObject(stuck), mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonDeploymentProgressing)
	serverCondition(t, client.ObjectKeyFromObject(stuck), mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonNoReadyReplicas)

	// A Deployment of the server's name that someone else made, with another (immutable)
	// selector: applying ours fails, and the status says so.
	squat := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "squatted", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example/other:1"}}}},
		},
	}
	mustCreate(t, squat, newServer(ns, "squatted", 1))
	serverCondition(t, client.ObjectKeyFromObject(squat), mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonReconcileFailed)
	eventRecorded(t, &mcpv1alpha1.MCPServer{ObjectMeta: squat.ObjectMeta}, mcpv1alpha1.ReasonReconcileFailed)

	// A name that starts with a digit is a valid object name but not a valid Service name: the
	// API server refuses the MCPServer (CEL), so nothing is made for it.
	if err := k8s.Create(ctx, newServer(ns, "9lives", 1)); err == nil || !strings.Contains(err.Error(), "metadata.name must be a DNS-1035 label") {
		t.Fatalf("want the MCPServer 9lives refused by the API server, got %v", err)
	}
}

// edit changes an object's spec with a merge patch, so it does not race the controller's status
// writes.
func edit(t *testing.T, obj client.Object, mutate func()) {
	t.Helper()
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	before := obj.DeepCopyObject().(client.Object)
	mutate()
	if err := k8s.Patch(context.Background(), obj, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}

// TestEditWritesOnlyTheEditedItem: an edit of one tool publishes a new catalog revision, but the
// server's other tools, its resource and its prompt are not written (their resourceVersions stay):
// they keep the revision they were first published in, and the server's status names the new one.
func TestEditWritesOnlyTheEditedItem(t *testing.T) {
	ns := newNamespace(t)
	server := newServer(ns, "fleet", 1)
	tools := []*mcpv1alpha1.MCPTool{newTool(ns, "a", "fleet", "a"), newTool(ns, "b", "fleet", "b"), newTool(ns, "c", "fleet", "c")}
	prompt := newPrompt(ns, "explain", "fleet", []string{"x"}, "Explain {{x}}")
	resource := newResource(ns, "readme", "fleet", "docs://readme", mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: "hi"}})
	mustCreate(t, server, tools[0], tools[1], tools[2], prompt, resource)
	others := []client.Object{tools[0], tools[2], prompt, resource}
	ctx := context.Background()
	for _, obj := range append(others, tools[1]) {
		itemCondition(t, obj, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	}
	// Once the replica is ready, the items of the revision wait for it (Reconciling): the world
	// has settled only then.
	serverCondition(t, client.ObjectKeyFromObject(server), mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
	var rev1 string
	eventually.Succeeds(t, "the server to name the catalog of all five objects", func() error {
		c, rev := getCatalog(t, ns, "fleet")
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), s); err != nil {
			return err
		}
		if len(c.Tools) != 3 || len(c.Prompts) != 1 || len(c.Resources) != 1 || s.Status.CatalogRevision != rev {
			return fmt.Errorf("catalog %s with %d tools; server names %s", rev, len(c.Tools), s.Status.CatalogRevision)
		}
		rev1 = rev
		return nil
	})
	versions := map[string]string{}
	for _, obj := range others {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		versions[obj.GetName()] = obj.GetResourceVersion()
	}

	edit(t, tools[1], func() { tools[1].Spec.Description = "edited" })
	var rev2 string
	eventually.Succeeds(t, "the edited tool and the server to name a new revision", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tools[1]), tools[1]); err != nil {
			return err
		}
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), s); err != nil {
			return err
		}
		rev2 = s.Status.CatalogRevision
		if rev2 == rev1 || tools[1].Status.PublishedRevision != rev2 || tools[1].Status.ObservedGeneration != tools[1].Generation {
			return fmt.Errorf("server names %s (before the edit %s), the edited tool %s at generation %d of %d",
				rev2, rev1, tools[1].Status.PublishedRevision, tools[1].Status.ObservedGeneration, tools[1].Generation)
		}
		return nil
	})
	if c := findCondition(tools[1], mcpv1alpha1.ConditionPublished); !strings.Contains(c.Message, rev2) {
		t.Fatalf("the edited tool's Published message %q does not name %s", c.Message, rev2)
	}
	// The server's status is written after every item's, so the others' writes, if any, are done.
	for _, obj := range others {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != versions[obj.GetName()] {
			t.Errorf("%T %s was written although it did not change (status %+v)", obj, obj.GetName(), *itemStatus(obj))
		}
		if st := itemStatus(obj); st.PublishedRevision == "" || st.PublishedRevision == rev2 {
			t.Errorf("%s names revision %q; want the one it was published in", obj.GetName(), st.PublishedRevision)
		}
	}
}
