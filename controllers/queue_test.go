package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// TestFollowingReconcilesComeAfterCatalogChanges: in controller-runtime's priority queue, a
// server queued by a change that follows (a child, a pod, a report) waits behind a server queued
// by a change of what it serves (an MCPTool edit), even when it was queued first; a server queued
// for both is handed out at the higher priority; an informer's initial list stays below both.
func TestFollowingReconcilesComeAfterCatalogChanges(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	byName := func(name string) handler.EventHandler {
		return handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{req(name)}
		})
	}
	obj := func(rv string) client.Object {
		return &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: rv}}
	}
	// In the order they arrive: a report of server a, the initial list's server c, an edit of
	// server b, a report and then an edit of server d.
	following(byName("a")).Update(ctx, event.UpdateEvent{ObjectOld: obj("1"), ObjectNew: obj("2")}, q)
	following(byName("c")).Create(ctx, event.CreateEvent{Object: obj("1"), IsInInitialList: true}, q)
	byName("b").Update(ctx, event.UpdateEvent{ObjectOld: obj("1"), ObjectNew: obj("2")}, q)
	following(byName("d")).Update(ctx, event.UpdateEvent{ObjectOld: obj("1"), ObjectNew: obj("2")}, q)
	byName("d").Update(ctx, event.UpdateEvent{ObjectOld: obj("2"), ObjectNew: obj("3")}, q)
	time.Sleep(followDelay + 100*time.Millisecond) // a's request waits followDelay; then all are ready

	want := []struct {
		name     string
		priority int
	}{{"b", 0}, {"d", 0}, {"a", followPriority}, {"c", handler.LowPriority}}
	for i, w := range want {
		got, priority, shutdown := q.GetWithPriority()
		if shutdown {
			t.Fatal("queue shut down")
		}
		q.Done(got)
		if got != req(w.name) || priority != w.priority {
			t.Errorf("request %d: server %s at priority %d, want %s at %d", i, got.Name, priority, w.name, w.priority)
		}
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d requests left", n)
	}
}

// TestFollowingRequestsFold: the requests that follow from one change, added within followDelay,
// are handed out once, after followDelay; an edit's request (the default priority, no delay)
// makes a waiting server ready at once.
func TestFollowingRequestsFold(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	h := following(enqueueServerOf())
	start := time.Now()
	for i := range 5 {
		if i == 2 {
			time.Sleep(followDelay / 2) // the rest arrive while the first waits
		}
		h.Create(ctx, event.CreateEvent{Object: toolOf("burst", fmt.Sprint(i))}, q)
	}
	got, priority, _ := q.GetWithPriority()
	q.Done(got)
	if waited := time.Since(start); got.Name != "burst" || priority != followPriority || waited < followDelay {
		t.Errorf("server %s at priority %d after %s, want burst at %d after %s or more", got.Name, priority, waited, followPriority, followDelay)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d requests left after the burst's one", n)
	}

	h.Create(ctx, event.CreateEvent{Object: toolOf("edited", "1")}, q)
	start = time.Now()
	enqueueServerOf().Update(ctx, event.UpdateEvent{ObjectOld: toolOf("edited", "1"), ObjectNew: toolOf("edited", "2")}, q)
	got, priority, _ = q.GetWithPriority()
	q.Done(got)
	if waited := time.Since(start); got.Name != "edited" || priority != 0 || waited >= followDelay {
		t.Errorf("server %s at priority %d after %s, want edited at 0 at once", got.Name, priority, waited)
	}
	if n := q.Len(); n != 0 {
		t.Errorf("%d requests left after the edit's one", n)
	}
}

// toolOf is an MCPTool of server at resourceVersion rv.
func toolOf(server, rv string) *mcpv1alpha1.MCPTool {
	return &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t-" + server, ResourceVersion: rv},
		Spec: mcpv1alpha1.MCPToolSpec{ServerRef: mcpv1alpha1.ServerReference{Name: server}}}
}

// TestCreatedItemsFollow: an item's creation queues its server at followPriority, its edit at
// the default priority.
func TestCreatedItemsFollow(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	ctx := context.Background()
	h := createsFollow(enqueueServerOf())
	h.Create(ctx, event.CreateEvent{Object: toolOf("created", "1")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: toolOf("edited", "1"), ObjectNew: toolOf("edited", "2")}, q)
	for _, w := range []struct {
		name     string
		priority int
	}{{"edited", 0}, {"created", followPriority}} {
		got, priority, _ := q.GetWithPriority()
		q.Done(got)
		if got.Name != w.name || priority != w.priority {
			t.Errorf("server %s at priority %d, want %s at %d", got.Name, priority, w.name, w.priority)
		}
	}
}

// TestWaitEndsFollows: a reconcile that looks again after a wait does so at followPriority; one
// that does not look again sets no priority.
func TestWaitEndsFollows(t *testing.T) {
	if r := waitEnds(reconcile.Result{RequeueAfter: 5e9}); r.Priority == nil || *r.Priority != followPriority {
		t.Errorf("a wait: priority %v, want %d", r.Priority, followPriority)
	}
	if r := waitEnds(reconcile.Result{}); r.Priority != nil {
		t.Errorf("no wait: priority %d, want none", *r.Priority)
	}
}
