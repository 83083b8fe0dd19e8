//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
