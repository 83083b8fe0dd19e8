package controllers

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func TestOwnWritesDropOnlyTheirOwnEvent(t *testing.T) {
	w := &ownWrites{}
	cms := w.notOwnWrite("v1", "ConfigMap")
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "weather-catalog", ResourceVersion: rv}}
	}
	key := childKey{apiVersion: "v1", kind: "ConfigMap", namespace: "team", name: "weather-catalog"}

	w.wrote(key, "7")
	if cms.Update(event.UpdateEvent{ObjectOld: cm("6"), ObjectNew: cm("6")}) != true {
		t.Fatal("an event of another resourceVersion was dropped")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("6"), ObjectNew: cm("7")}) != false {
		t.Fatal("the event of the controller's own write reconciles")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("7"), ObjectNew: cm("7")}) != true {
		t.Fatal("a second event at the same resourceVersion (a resync) was dropped")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("7"), ObjectNew: cm("8")}) != true {
		t.Fatal("someone else's write was dropped")
	}

	w.wrote(key, "9")
	if cms.Create(event.CreateEvent{Object: cm("9")}) != false {
		t.Fatal("the creation by the controller's own apply reconciles")
	}
	w.wrote(key, "10")
	if cms.Delete(event.DeleteEvent{Object: cm("10")}) != true || len(w.rv) != 0 {
		t.Fatalf("a deletion: dropped, or the write still remembered (%v)", w.rv)
	}

	// Kinds whose watch does not filter (the Deployment) are not remembered.
	w.wrote(childKey{apiVersion: "apps/v1", kind: "Deployment", namespace: "team", name: "weather"}, "11")
	if len(w.rv) != 0 {
		t.Fatalf("a Deployment's write is remembered: %v", w.rv)
	}
	// A nil ownWrites filters nothing.
	var none *ownWrites
	none.wrote(key, "12")
	if !none.notOwnWrite("apps/v1", "Deployment").Update(event.UpdateEvent{ObjectOld: &appsv1.Deployment{}, ObjectNew: &appsv1.Deployment{}}) {
		t.Fatal("a nil ownWrites dropped an event")
	}
}

// A reconcile that reads the server from a cache which has not seen the reconciler's last status
// write yet decides from that write, not from the status it overwrote: it writes nothing again.
// Without the memory (ownStatus nil) the same stale read writes the status a second time (the
// control, which shows the stale read is reproduced).
func TestStatusDecidedFromOwnWriteOverAStaleCache(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := mcpv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, remember := range []bool{true, false} {
		server := newServer("team", "stale", 1)
		server.Generation = 1
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(server).WithStatusSubresource(&mcpv1alpha1.MCPServer{}).Build()
		r := &MCPServerReconciler{Client: c}
		if remember {
			r.ownStatus = &ownStatus{}
		}
		cached := &mcpv1alpha1.MCPServer{} // what the cache shows until it sees the write
		if err := c.Get(ctx, client.ObjectKeyFromObject(server), cached); err != nil {
			t.Fatal(err)
		}
		reconcile := func() {
			t.Helper()
			read := cached.DeepCopy()
			r.ownStatus.freshen(read)
			s := &scope{server: read, before: read.DeepCopy(), names: inject.NamesFor(read), now: time.Now()}
			if _, err := r.patchStatus(ctx, s, nil); err != nil {
				t.Fatal(err)
			}
		}
		live := func() *mcpv1alpha1.MCPServer {
			t.Helper()
			got := &mcpv1alpha1.MCPServer{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(server), got); err != nil {
				t.Fatal(err)
			}
			return got
		}
		reconcile()
		written := live()
		if written.Status.URL == "" || written.ResourceVersion == cached.ResourceVersion {
			t.Fatalf("the first status was not written: %+v", written.Status)
		}
		reconcile()
		again := live()
		if remember && again.ResourceVersion != written.ResourceVersion {
			t.Fatalf("the status was written again over a stale read (resourceVersion %s → %s)", written.ResourceVersion, again.ResourceVersion)
		}
		if !remember && again.ResourceVersion == written.ResourceVersion {
			t.Fatal("control: without the memory the stale read did not write again; the test reproduces nothing")
		}

		// Once the cache shows the write (or anyone's later one), it is read as it is.
		if remember {
			cached = again
			reconcile()
			if r.ownStatus.m[client.ObjectKeyFromObject(server)].rv != "" {
				t.Fatal("the memory of the write outlived the cache's catching up")
			}
		}
	}
}
