package controllers

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// followPriority is the work queue priority of an MCPServer reconcile that follows what others
// did (a child's or a pod's change, a sidecar's report in the status ConfigMap, a wait that ends),
// below the default priority (0) of one that changes what a running server serves (an edit of
// the server's spec, an edit or deletion of its tools, resources and prompts, the policies and
// sources that reach it; the creation of a server or an item follows, createsFollow). The queue
// (controller-runtime's priority queue) hands out higher priorities first and raises a queued
// server to the highest priority it was added with, so a catalog edit is compiled and published
// before the reconciles that only update statuses. A fleet-wide MCPTool edit queues one reconcile
// per server for the edit and more for the sidecars' reports of it: in arrival order, the servers
// edited last waited behind the reports of those edited first, and at 1,000 servers the last
// catalogs came 7-13 s after the last edit, 1.1-1.6 s with edits first (docs/performance.md,
// "Fleet scale"). It is above handler.LowPriority, which the informers' initial lists get.
const followPriority = -10

// followDelay is how long a request added at followPriority waits before it is handed out: the
// events that follow from one change arrive in a burst (a GitOps sync's or a fleet's creations of
// a server and its items; a new server's Deployment, ReplicaSet, pod and reports), and in a queue
// that is short they were each reconciled apart: declared at 4.5 servers a second, 1,000 servers
// were reconciled 7.8 times each (2.1 declared at once, where a long queue folds them), 3.2 with
// the delay, and the manager's CPU per server fell by a tenth; at 5.5 a second, 3.2-4.9 against
// 2.6-3.3 (docs/performance.md, "Fleet scale"). It adds up to followDelay to each step of a new
// server's way to Ready, never to an edit's. The queue keeps a waiting request's place and its
// earliest time: a request added again while one waits is folded into it, and an add without a
// delay (an edit at the default priority) makes it ready at once.
const followDelay = 500 * time.Millisecond

// following adds the requests of h at followPriority, unless h gives a priority of its own (the
// informers' initial lists). With a queue that is not a priority queue it is h.
func following(h handler.EventHandler) handler.EventHandler {
	wrap := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
			return followQueue{pq}
		}
		return q
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Create(ctx, e, wrap(q))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Update(ctx, e, wrap(q))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Delete(ctx, e, wrap(q))
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			h.Generic(ctx, e, wrap(q))
		},
	}
}

// createsFollow adds the requests of h for a created object at followPriority, and those for an
// updated or deleted one at h's. A server or item created is usually one of many a GitOps sync or
// a fleet creates at once: at the default priority a burst of them kept every sidecar's report,
// and so every server's Ready, waiting until the burst ended (at 1,000 servers, each server's p99
// from declared to Ready: 171-193 s with items' creations at the default priority, 224 s with
// servers' creations at it, 102-111 s with both following, 79-105 s with no priorities at all).
// An edit or deletion changes what a running server serves, and goes first.
func createsFollow(h handler.EventHandler) handler.EventHandler {
	f := following(h)
	return handler.Funcs{
		CreateFunc:  f.Create,
		UpdateFunc:  h.Update,
		DeleteFunc:  h.Delete,
		GenericFunc: h.Generic,
	}
}

// followQueue is a priority queue whose adds without a priority are at followPriority, after
// followDelay unless they name a delay of their own.
type followQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q followQueue) Add(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, r)
}

func (q followQueue) AddAfter(r reconcile.Request, after time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: after}, r)
}

func (q followQueue) AddRateLimited(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
}

func (q followQueue) AddWithOpts(o priorityqueue.AddOpts, rs ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = new(followPriority)
		if o.After == 0 && !o.RateLimited {
			o.After = followDelay
		}
	}
	q.PriorityQueue.AddWithOpts(o, rs...)
}

// owned enqueues the MCPServer that controls an object, at followPriority: a child changed.
func owned(c client.Client) handler.EventHandler {
	return following(handler.EnqueueRequestForOwner(c.Scheme(), c.RESTMapper(), &mcpv1alpha1.MCPServer{}, handler.OnlyControllerOwner()))
}
