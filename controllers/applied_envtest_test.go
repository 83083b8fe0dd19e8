//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// TestSettledReconcileSendsNoRequest: once a server has settled, a reconcile sends no write at
// all — not even a no-op server-side apply — while a child someone changed is still put back.
func TestSettledReconcileSendsNoRequest(t *testing.T) {
	ns := newNamespace(t)
	server := newServer(ns, "quiet", 2)
	mustCreate(t, server, newTool(ns, "add", "quiet", "add"))
	key := client.ObjectKeyFromObject(server)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)

	var n atomic.Int32
	counting := *servers
	counting.Client = writeCounter{Client: servers.Client, n: &n}
	eventually.Succeeds(t, "a reconcile that sends no write", func() error {
		n.Store(0)
		if _, err := counting.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		if w := n.Load(); w > 0 {
			return fmt.Errorf("the reconcile sent %d writes", w)
		}
		return nil
	})
	for range 3 {
		n.Store(0)
		if _, err := counting.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		if w := n.Load(); w > 0 {
			t.Fatalf("a settled server's reconcile sent %d writes", w)
		}
	}

	// Drift is still corrected: a label the controller sets, changed by someone else, comes back.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quiet-sidecar"}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/name":"changed"}}}`))
	if err := k8s.Patch(context.Background(), role, patch); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "the changed label to be put back", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(role), role); err != nil {
			return err
		}
		if got := role.Labels["app.kubernetes.io/name"]; got != "quiet" {
			return fmt.Errorf("label is %q", got)
		}
		return nil
	})
}

// TestOwnWriteEventIsDropped: the resourceVersion an apply returns is the one the watch event of
// that write carries, so that event is dropped (ownWrites), and the next write by someone else
// still reconciles.
func TestOwnWriteEventIsDropped(t *testing.T) {
	ctx := context.Background()
	// The running manager filters the kinds it applies but the Deployment, under the apiVersion
	// and kind its apply configurations carry.
	servers.own.mu.Lock()
	filtered := maps.Clone(servers.own.kinds)
	servers.own.mu.Unlock()
	want := map[[2]string]bool{{"v1", "Service"}: true, {"v1", "ServiceAccount"}: true, {"v1", "ConfigMap"}: true,
		{"rbac.authorization.k8s.io/v1", "Role"}: true, {"rbac.authorization.k8s.io/v1", "RoleBinding"}: true,
		{"policy/v1", "PodDisruptionBudget"}: true, {"networking.k8s.io/v1", "NetworkPolicy"}: true}
	if !maps.Equal(filtered, want) {
		t.Fatalf("own writes filtered for %v, want %v", filtered, want)
	}

	ns := newNamespace(t)
	r := *servers
	r.own = &ownWrites{}
	drop := r.own.notOwnWrite("v1", "ConfigMap")
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := w.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": "mine"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	next := func() *corev1.ConfigMap {
		t.Helper()
		select {
		case ev := <-watcher.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				t.Fatalf("watch event %s %T", ev.Type, ev.Object)
			}
			return cm
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event")
			return nil
		}
	}
	server := types.NamespacedName{Namespace: ns, Name: "nobody"}
	if err := r.apply(ctx, server, corev1ac.ConfigMap("mine", ns).WithData(map[string]string{"k": "v1"})); err != nil {
		t.Fatal(err)
	}
	if drop.Create(event.CreateEvent{Object: next()}) {
		t.Fatal("the creation by the controller's apply would reconcile")
	}
	if err := r.apply(ctx, server, corev1ac.ConfigMap("mine", ns).WithData(map[string]string{"k": "v2"})); err != nil {
		t.Fatal(err)
	}
	if cm := next(); drop.Update(event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}) {
		t.Fatal("the controller's update would reconcile")
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"someone"}}`))
	if err := k8s.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mine"}}, patch); err != nil {
		t.Fatal(err)
	}
	if cm := next(); !drop.Update(event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}) {
		t.Fatal("someone else's edit was dropped")
	}
}
