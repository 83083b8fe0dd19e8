package controllers

import (
	"context"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// CatalogItemReconciler reconciles the catalog items of one kind T (MCPTool, MCPResource or
// MCPPrompt) whose MCPServer does not exist. While the server exists, its reconciler owns their
// status, because acceptance and publication are decided across all objects of the server.
// The two writers never overwrite each other's view: each patches an item's status with the
// resourceVersion it read it at (setItemStatus), so a patch computed from a stale cache (a server
// that has appeared meanwhile, whose reconciler accepted the item) fails with a conflict and is
// retried on a fresh read, instead of leaving a stale ServerNotFound that nothing re-triggers.
type CatalogItemReconciler[T mcpv1alpha1.CatalogItem] struct {
	client.Client
	Recorder events.EventRecorder
	// AppearGrace is how long after the object's creation a missing server is waited for
	// (DefaultAppearGrace).
	AppearGrace time.Duration
}

// Reconcile marks an object whose server is missing: Accepted=False ServerNotFound. When the
// server appears, its reconciler accepts the object.
// It is an ObjectReconciler: reconcile.AsReconciler reads the object.
func (r *CatalogItemReconciler[T]) Reconcile(ctx context.Context, obj T) (ctrl.Result, error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	server := &mcpv1alpha1.MCPServer{}
	err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetServerRef().Name}, server)
	if err == nil && server.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	if left := graceLeft(obj, time.Now(), min(serverAppearDelay, r.AppearGrace)); left > 0 {
		// Applied with its server, which is not there yet: look again then.
		return ctrl.Result{RequeueAfter: left}, nil
	}
	accepted := metav1.Condition{Type: string(mcpv1alpha1.ConditionAccepted), Status: metav1.ConditionFalse,
		Reason: string(mcpv1alpha1.ReasonServerNotFound),
		Message: "spec.serverRef names MCPServer " + obj.GetServerRef().Name + ", which does not exist in this namespace; " +
			"create it or fix the reference"}
	in := itemInputs{accepted: accepted}
	in.published, _ = publishedCondition(verdict{Reason: mcpv1alpha1.ReasonServerNotFound}, sourceProblem{}, false, "", "")
	var result ctrl.Result
	if left := graceLeft(obj, time.Now(), r.AppearGrace); left > 0 {
		// The server may be on its way (applied together with this object): Reconciling, and
		// Stalled when the grace ends.
		in.appearing = r.AppearGrace
		result.RequeueAfter = left
	}
	u := decideItemStatus(obj, in)
	u.pin = &toolPin{}
	return result, setItemStatus(ctx, r.Client, r.Recorder, u)
}

// serverGoneDelay is how long after its server went away an object is marked ServerNotFound. A
// server is often deleted together with its objects (a GitOps prune, kubectl delete -f): by then
// they are gone too, and no status patch or Warning Event is written for them (at 1,000 servers
// that was 20,000 writes while the API server was busy deleting, docs/performance.md).
const serverGoneDelay = 5 * time.Second

// serverAppearDelay is how long after its creation an object whose server does not exist is left
// without a status. A GitOps sync or a kubectl apply -f creates a server and its objects moments
// apart, in any order: an object created first would be marked ServerNotFound (a status patch
// and a Warning Event) and accepted a moment later. An object without a status reads as in
// progress (kstatus).
const serverAppearDelay = 5 * time.Second

// newItem returns an empty object of the kind T.
func newItem[T mcpv1alpha1.CatalogItem]() T {
	return reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
}

// SetupWithManager watches the kind and the MCPServers its objects reference. The controller is
// named after the kind (mcptool, mcpresource, mcpprompt).
func (r *CatalogItemReconciler[T]) SetupWithManager(mgr ctrl.Manager) error {
	enqueueItems := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		its, err := listItems(ctx, mgr.GetClient(), o.GetNamespace(), o.GetName())
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the objects of an MCPServer")
			return
		}
		for _, it := range its.objects() {
			if _, ofKind := it.(T); ofKind {
				q.AddAfter(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(it)}, serverGoneDelay)
			}
		}
	}
	fromServer := handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueItems(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueueItems(ctx, e.Object, q)
		},
	}
	// Status writes (the server's reconciler publishes every item) do not change the
	// generation, and do not need this reconciler: it would only find the server exists.
	return ctrl.NewControllerManagedBy(mgr).
		For(newItem[T](), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&mcpv1alpha1.MCPServer{}, fromServer, builder.WithPredicates(serverGone)).
		Named(strings.ToLower(reflect.TypeFor[T]().Elem().Name())).
		Complete(reconcile.AsReconciler[T](r.Client, r))
}

// serverGone passes only the MCPServer events that change what this reconciler decides: a
// server deleted, or its deletion started. A server's creation, spec edits and status patches
// are its own reconciler's business, which writes its items' status while it exists.
var serverGone = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// listItems lists the tools, resources and prompts that reference a server, through the field
// index on spec.serverRef.name.
func listItems(ctx context.Context, c client.Reader, namespace, server string) (items, error) {
	var out items
	opts := []client.ListOption{client.InNamespace(namespace), client.MatchingFields{serverRefIndex: server}}
	var tools mcpv1alpha1.MCPToolList
	if err := c.List(ctx, &tools, opts...); err != nil {
		return out, err
	}
	var resources mcpv1alpha1.MCPResourceList
	if err := c.List(ctx, &resources, opts...); err != nil {
		return out, err
	}
	var prompts mcpv1alpha1.MCPPromptList
	if err := c.List(ctx, &prompts, opts...); err != nil {
		return out, err
	}
	out.Tools, out.Resources, out.Prompts = tools.Items, resources.Items, prompts.Items
	return out, nil
}

// objects returns pointers to every object, for code that treats the kinds alike.
func (it items) objects() []mcpv1alpha1.CatalogItem {
	var out []mcpv1alpha1.CatalogItem
	for i := range it.Tools {
		out = append(out, &it.Tools[i])
	}
	for i := range it.Resources {
		out = append(out, &it.Resources[i])
	}
	for i := range it.Prompts {
		out = append(out, &it.Prompts[i])
	}
	return out
}

// serverRefOf returns spec.serverRef.name of a tool, resource or prompt ("" for another object).
func serverRefOf(o client.Object) string {
	if it, ok := o.(mcpv1alpha1.CatalogItem); ok {
		return it.GetServerRef().Name
	}
	return ""
}

// setItemStatus writes the decided conditions (newItemStatus) and catalogRevision, patching
// only when something changed, and records an Event for each condition that changed to a
// reason a user must act on (a Warning). Items record no Normal Events: a fleet of 1,000
// servers with 12 items each would write 24,000 of them on creation and 12,000 on every
// catalog-wide change, while the status already says the same (docs/performance.md).
//
// u.pin, for an MCPTool, is its observed digest and pin state (nil: left as they are).
//
// An item's status has two writers (the server's reconciler, and CatalogItemReconciler while
// the server is missing), and a merge patch replaces the whole conditions list: the patch
// carries the resourceVersion the status was decided from, so a write from a stale read fails
// with a conflict (and is retried) instead of landing over the other writer's.
func setItemStatus(ctx context.Context, c client.Client, rec events.EventRecorder, u itemStatusUpdate) error {
	obj, pin := u.object, u.pin
	before := obj.DeepCopyObject().(mcpv1alpha1.CatalogItem)
	st := obj.GetCatalogItemStatus()
	gen := obj.GetGeneration()
	set, remove := u.conditions()
	for _, cond := range set {
		cond.ObservedGeneration = gen
		meta.SetStatusCondition(&st.Conditions, cond)
	}
	for _, typ := range remove {
		meta.RemoveStatusCondition(&st.Conditions, typ)
	}
	st.ObservedGeneration = gen
	// The deprecated field is written until v1alpha2, for readers of v1alpha1.
	st.PublishedRevision, st.CatalogRevision = u.revision, u.revision //nolint:staticcheck // SA1019: written on purpose
	beforeStatus := before.GetCatalogItemStatus()
	same := equality.Semantic.DeepEqual(beforeStatus, st)
	if t, ok := obj.(*mcpv1alpha1.MCPTool); ok && pin != nil {
		bt := before.(*mcpv1alpha1.MCPTool)
		t.Status.ObservedUpstreamDigest, t.Status.Pin = pin.Observed, pin.State
		same = same && bt.Status.ObservedUpstreamDigest == pin.Observed && bt.Status.Pin == pin.State
	}
	if same {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	// Recorded once the status is written: a patch that conflicts is decided again, and its
	// retry records them.
	emitConditionEvents(rec, obj, beforeStatus.Conditions, warnings(st.Conditions))
	return nil
}

// enqueueServerOf enqueues the server a catalog item references, before and after an update, so
// a changed serverRef reconciles both servers.
func enqueueServerOf() handler.EventHandler {
	return enqueueServersOf(func(o client.Object) []string {
		if name := serverRefOf(o); name != "" {
			return []string{name}
		}
		return nil
	})
}

// enqueueServersOf enqueues the servers (of the object's namespace) an object names, before and
// after an update.
func enqueueServersOf(refs func(client.Object) []string) handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
		for _, name := range refs(o) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld)
			add(q, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object)
		},
	}
}

// warnings keeps the conditions whose reason is a Warning.
func warnings(conds []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if eventType(c.Reason) == corev1.EventTypeWarning {
			out = append(out, c)
		}
	}
	return out
}
