//go:build e2e

package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

const testSidecarImage = "example/switchboard-sidecar:test"

// testAppearGrace is long enough to see an object in its grace on a loaded machine, short enough
// not to slow the tests that wait for Stalled.
const testAppearGrace = 8 * time.Second

var (
	env *testenv.Env
	// k8s reads and writes straight to the API server, never through the manager's cache.
	k8s client.Client
	// servers is the running manager's MCPServer reconciler, for calling Reconcile directly.
	servers *MCPServerReconciler
	nsSeq   atomic.Int32
)

// TestMain starts one control plane (with kube-controller-manager, kube-scheduler and kwok, so
// Deployments get Ready pods and garbage collection runs) and one manager for the package.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Controllers: true},
		func(e *testenv.Env) { env, k8s = e, e.Client },
		func(ctx context.Context, mgr ctrl.Manager) (err error) {
			servers, err = Setup(ctx, mgr, Options{SidecarImage: testSidecarImage, AppearGrace: testAppearGrace})
			return err
		}))
}

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(name) > 60 {
		name = name[:60]
	}
	name = strings.TrimRight(name, "-")
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func mustCreate(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func serverCondition(t *testing.T, key client.ObjectKey, typ mcpv1alpha1.ConditionType, status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) {
	t.Helper()
	eventually.Succeeds(t, fmt.Sprintf("MCPServer %s %s=%s/%s", key, typ, status, reason), func() error {
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(context.Background(), key, s); err != nil {
			return err
		}
		return conditionIs(s.Status.Conditions, typ, status, reason)
	})
}

func itemCondition(t *testing.T, obj client.Object, typ mcpv1alpha1.ConditionType, status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) {
	t.Helper()
	eventually.Succeeds(t, fmt.Sprintf("%T %s %s=%s/%s", obj, obj.GetName(), typ, status, reason), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		return conditionIs(itemStatus(obj).Conditions, typ, status, reason)
	})
}

// reconcileServer runs one reconcile of the server, as the manager would: the running manager may
// write an item's status between the reconcile's read and its write, and the reconcile then
// returns errItemChanged to be retried (the optimistic lock on item status).
func reconcileServer(t *testing.T, key client.ObjectKey) {
	t.Helper()
	for range 10 {
		_, err := servers.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
		if errors.Is(err, errItemChanged) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("reconciling %s: item status changed under 10 reconciles in a row", key)
}

// eventRecorded waits for an Event about obj with the given reason.
func eventRecorded(t *testing.T, obj client.Object, reason mcpv1alpha1.ConditionReason) {
	t.Helper()
	eventually.Succeeds(t, fmt.Sprintf("event %s on %s", reason, obj.GetName()), func() error {
		var list eventsv1.EventList
		if err := k8s.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == string(reason) && e.Regarding.Name == obj.GetName() {
				return nil
			}
		}
		return fmt.Errorf("no event with reason %s among %d events", reason, len(list.Items))
	})
}
