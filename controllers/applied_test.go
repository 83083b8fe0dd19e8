package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

func TestHolds(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1", "extra": "kept"}, "resourceVersion": "7"},
		"spec": map[string]any{
			"replicas": int64(2),
			"ports":    []any{map[string]any{"port": int64(80), "protocol": "TCP"}},
		},
	}
	cases := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"subset with defaults filled in live", map[string]any{
			"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1"}},
			"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}},
		}, true},
		{"changed scalar", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{"changed label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "2"}}}, false},
		{"missing key", map[string]any{"spec": map[string]any{"paused": true}}, false},
		{"longer list", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}, map[string]any{"port": int64(81)}}}}, false},
		{"shorter list", map[string]any{"spec": map[string]any{"ports": []any{}}}, false},
		{"type differs", map[string]any{"spec": map[string]any{"replicas": "2"}}, false},
		{"map where live has a scalar", map[string]any{"spec": map[string]any{"replicas": map[string]any{"a": "b"}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(live, tc.desired); got != tc.want {
				t.Fatalf("holds = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestAppliedHashChangesWithEveryField(t *testing.T) {
	a := map[string]any{"spec": map[string]any{"replicas": int64(2), "paused": false}}
	b := map[string]any{"spec": map[string]any{"replicas": int64(2)}} // a field no longer set
	c := map[string]any{"spec": map[string]any{"paused": false, "replicas": int64(2)}}
	if appliedHash(a) == appliedHash(b) {
		t.Fatal("dropping a field must change the hash (an apply would remove it)")
	}
	if appliedHash(a) != appliedHash(c) {
		t.Fatal("the hash must not depend on map order")
	}
}

// writeCounter counts the writes a reconciler sends.
type writeCounter struct {
	client.Client
	n *atomic.Int32
}

func (c writeCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c writeCounter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c writeCounter) Status() client.SubResourceWriter { return statusCounter{c.Client.Status(), c.n} }

type statusCounter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (c statusCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (c statusCounter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

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
