//go:build e2e

package controllers

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// TestPrunedServerWritesNothingOnItsItems: a server deleted together with its tools (a GitOps
// prune deletes them one after the other, within seconds) costs no ServerNotFound status patch
// and no Warning Event for the tools; a tool that stays is marked ServerNotFound once
// serverGoneDelay has passed.
func TestPrunedServerWritesNothingOnItsItems(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	server := newServer(ns, "pruned", 1)
	pruned := []*mcpv1alpha1.MCPTool{newTool(ns, "a", "pruned", "a"), newTool(ns, "b", "pruned", "b")}
	stays := newTool(ns, "stays", "pruned", "stays")
	mustCreate(t, server, pruned[0], pruned[1], stays)
	for _, tool := range append(pruned, stays) {
		itemCondition(t, tool, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	}
	deleted := time.Now()
	if err := k8s.Delete(ctx, server); err != nil {
		t.Fatal(err)
	}
	time.Sleep(serverGoneDelay / 5) // the prune reaches the tools a moment later
	for _, tool := range pruned {
		if err := k8s.Delete(ctx, tool); err != nil {
			t.Fatal(err)
		}
	}
	itemCondition(t, stays, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
	if waited := time.Since(deleted); waited < serverGoneDelay {
		t.Fatalf("the remaining tool was marked ServerNotFound %v after the server's deletion, before serverGoneDelay", waited)
	}
	eventRecorded(t, stays, mcpv1alpha1.ReasonServerNotFound)
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == string(mcpv1alpha1.ReasonServerNotFound) && e.Regarding.Name != stays.Name {
			t.Errorf("pruned tool %s got a %s Event: %s", e.Regarding.Name, e.Reason, e.Note)
		}
	}
}

// TestItemsAppliedBeforeTheirServerWriteNoServerNotFound: a GitOps sync or a kubectl apply -f
// creates a server's tools a moment before or after the server itself. A tool created first is
// not marked ServerNotFound, with a status patch and a Warning Event, when its server follows
// within serverAppearDelay: its first status is the server's reconciler's, Accepted.
func TestItemsAppliedBeforeTheirServerWriteNoServerNotFound(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := w.Watch(ctx, &mcpv1alpha1.MCPToolList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	tool := newTool(ns, "first", "second", "first")
	mustCreate(t, tool)
	time.Sleep(serverAppearDelay / 2)
	mustCreate(t, newServer(ns, "second", 0))
	itemCondition(t, tool, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	time.Sleep(serverAppearDelay / 2) // past the delay: a ServerNotFound decided late would land now
	for {
		select {
		case e := <-watcher.ResultChan():
			if got, ok := e.Object.(*mcpv1alpha1.MCPTool); ok {
				if c := findConditionIn(got.Status.Conditions, mcpv1alpha1.ConditionAccepted); c.Reason == string(mcpv1alpha1.ReasonServerNotFound) {
					t.Fatalf("the tool was marked %s although its server came %v after it", c.Reason, serverAppearDelay/2)
				}
			}
			continue
		case <-time.After(time.Second):
		}
		break
	}
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == string(mcpv1alpha1.ReasonServerNotFound) {
			t.Errorf("a %s Event for %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}
}

// staleCache is the cache as an item reconciler may read it while the server's reconciler writes
// the item's status: the item as it was before that write, and no MCPServer yet (or any more).
// Everything else, and every write, goes to the API server.
type staleCache struct {
	client.Client
	tool *mcpv1alpha1.MCPTool
}

func (c staleCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *mcpv1alpha1.MCPServer:
		return apierrors.NewNotFound(mcpv1alpha1.GroupVersion.WithResource("mcpservers").GroupResource(), key.Name)
	case *mcpv1alpha1.MCPTool:
		if key == client.ObjectKeyFromObject(c.tool) {
			c.tool.DeepCopyInto(o)
			return nil
		}
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// TestStaleServerNotFoundDoesNotOverwriteAccepted drives the sequence of the two writers of an
// item's status: the item reconciler reads "server absent" (and the item as it was), the
// server's reconciler accepts the item, then the item reconciler's patch from its stale read
// lands (here when the item's appear grace ended). Nothing re-triggers either reconciler
// afterwards (status writes are filtered), so a stale ServerNotFound that lands stays until some
// unrelated server event. The stale write must not land (it conflicts), and its retry, reading
// the world as it is, must leave the tool accepted.
func TestStaleServerNotFoundDoesNotOverwriteAccepted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	tool := newTool(ns, "early", "late", "early")
	mustCreate(t, tool)
	// The tool was applied before its server: ServerNotFound (Reconciling during the grace).
	itemCondition(t, tool, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
	stale := tool.DeepCopy()

	mustCreate(t, newServer(ns, "late", 0))
	itemCondition(t, tool, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)

	// The item reconciler looks again when the grace ends (its RequeueAfter): it then decides
	// Stalled, which differs from the status it read, so it writes.
	time.Sleep(time.Until(stale.CreationTimestamp.Add(testAppearGrace)))
	key := client.ObjectKeyFromObject(tool)
	cache := staleCache{Client: k8s, tool: stale}
	r := &CatalogItemReconciler[*mcpv1alpha1.MCPTool]{Client: cache, AppearGrace: testAppearGrace}
	_, staleErr := reconcile.AsReconciler[*mcpv1alpha1.MCPTool](cache, r).Reconcile(ctx, reconcile.Request{NamespacedName: key})
	got := &mcpv1alpha1.MCPTool{}
	if err := k8s.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if err := conditionIs(got.Status.Conditions, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted); err != nil {
		t.Fatalf("after a reconcile from a stale cache (it returned %v): %v", staleErr, err)
	}
	if !apierrors.IsConflict(staleErr) {
		t.Errorf("the reconcile from a stale cache returned %v, want a conflict (so it is retried)", staleErr)
	}

	// The retry reads the world as it is and writes nothing.
	r.Client = k8s
	if _, err := reconcile.AsReconciler[*mcpv1alpha1.MCPTool](k8s, r).Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if err := conditionIs(got.Status.Conditions, mcpv1alpha1.ConditionAccepted, metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted); err != nil {
		t.Fatalf("after the retry: %v", err)
	}
}
