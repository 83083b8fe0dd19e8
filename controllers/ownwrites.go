package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
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

// ownStatus remembers, per server, the status the reconciler last wrote and the resourceVersion
// that write replaced, so that a reconcile that reads the server from a cache which has not yet
// seen that write decides from what it wrote, not from what it overwrote. Deciding from the
// overwritten status patched again what had been written and recorded its Events again: at 2.5
// servers declared a second, 1,137 `Ready` Events for 1,000 servers, 1,000 once it decides from
// its write (docs/performance.md, "Fleet scale"). A server the cache shows at any other
// resourceVersion is read as cached, and its entry is dropped; entries are forgotten after
// ownStatusForget.
type ownStatus struct {
	mu     sync.Mutex
	m      map[types.NamespacedName]statusWrite
	pruned time.Time
}

// statusWrite is one status write: the resourceVersion it replaced, the server it left, and when.
type statusWrite struct {
	over, rv string
	status   *mcpv1alpha1.MCPServerStatus
	at       time.Time
}

// ownStatusForget is how long a write is remembered: a cache lags its writes by moments, and a
// fleet's entries would otherwise stay until each server's next reconcile (1,000 status copies).
const ownStatusForget = 30 * time.Second

// wrote records that server (as the write's answer left it) was written over resourceVersion over.
func (o *ownStatus) wrote(over string, server *mcpv1alpha1.MCPServer) {
	if o == nil || over == "" || server.ResourceVersion == "" || server.ResourceVersion == over {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if o.m == nil {
		o.m = map[types.NamespacedName]statusWrite{}
	}
	if now.Sub(o.pruned) > ownStatusForget {
		for key, w := range o.m {
			if now.Sub(w.at) > ownStatusForget {
				delete(o.m, key)
			}
		}
		o.pruned = now
	}
	o.m[client.ObjectKeyFromObject(server)] = statusWrite{over: over, rv: server.ResourceVersion, status: server.Status.DeepCopy(), at: now}
}

// freshen gives server, as read from the cache, the status and resourceVersion of the
// reconciler's last write when the cache still shows the server that write replaced.
func (o *ownStatus) freshen(server *mcpv1alpha1.MCPServer) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	key := client.ObjectKeyFromObject(server)
	w, ok := o.m[key]
	if !ok {
		return
	}
	if server.ResourceVersion != w.over {
		delete(o.m, key)
		return
	}
	server.Status = *w.status.DeepCopy()
	server.ResourceVersion = w.rv
}

// forget drops what is remembered of a deleted server.
func (o *ownStatus) forget(key types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}
