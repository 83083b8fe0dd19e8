package controllers

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownWrites remembers, per child, the resourceVersion its last apply by the reconciler returned,
// so that the watch event of that write does not reconcile the server again: the reconcile that
// wrote it already knows what it holds. Without it every catalog change reconciled its server a
// second time right away, on the 2 cores the sidecars' fan-out of the change was using (in the
// profile of docs/performance.md, a reconcile of the sample server cost 2.6 ms of CPU on
// average). Any other write to the child (someone's edit, the child deleted and created again) is
// another resourceVersion, and reconciles as before.
//
// The Deployment (and the Secrets, which are created, not applied) are not filtered: the reconcile that applied a new pod template read the
// Deployment from the cache, which may not show the new generation yet, and the event of the
// write is what shows that a rollout is pending until the Deployment controller observes it.
type ownWrites struct {
	mu    sync.Mutex
	rv    map[childKey]string
	kinds map[[2]string]bool // apiVersion, kind: the kinds whose watch filters own writes (notOwnWrite)
}

// wrote records the resourceVersion an apply of the child returned, if its kind's events are
// filtered.
func (w *ownWrites) wrote(key childKey, resourceVersion string) {
	if w == nil || resourceVersion == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.kinds[[2]string{key.apiVersion, key.kind}] {
		return
	}
	if w.rv == nil {
		w.rv = map[childKey]string{}
	}
	w.rv[key] = resourceVersion
}

// own reports whether o, at its resourceVersion, is the child as the reconciler's last apply of
// it left it, and forgets that write: each write has one event, so a later resync of the child
// is reconciled. An event that came before the apply's answer was recorded reconciled as before;
// its entry then stays until the child's next write, and drops at most one resync of the child.
func (w *ownWrites) own(apiVersion, kind string, o client.Object) bool {
	if w == nil {
		return false
	}
	key := childKey{apiVersion: apiVersion, kind: kind, namespace: o.GetNamespace(), name: o.GetName()}
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.rv[key]
	if !ok || rv != o.GetResourceVersion() {
		return false
	}
	delete(w.rv, key)
	return true
}

// forget drops what is remembered of a deleted child.
func (w *ownWrites) forget(apiVersion, kind string, o client.Object) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, childKey{apiVersion: apiVersion, kind: kind, namespace: o.GetNamespace(), name: o.GetName()})
}

// notOwnWrite lets through every event of a child of kind but those of the reconciler's own
// writes (creations and updates; a deletion is never one).
func (w *ownWrites) notOwnWrite(apiVersion, kind string) predicate.Predicate {
	if w == nil {
		return predicate.Funcs{}
	}
	w.mu.Lock()
	if w.kinds == nil {
		w.kinds = map[[2]string]bool{}
	}
	w.kinds[[2]string{apiVersion, kind}] = true
	w.mu.Unlock()
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !w.own(apiVersion, kind, e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool { return !w.own(apiVersion, kind, e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			w.forget(apiVersion, kind, e.Object)
			return true
		},
	}
}
