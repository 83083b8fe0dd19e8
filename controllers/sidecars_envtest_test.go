//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestStaleSidecarsReported: a pod of an External server counts in status although it lacks the
// managed-by label; when the server's sidecar settings change, it is reported stale with the
// command to roll it, and the controller does not touch it.
func TestStaleSidecarsReported(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal}}
	mustCreate(t, server)
	key := client.ObjectKeyFromObject(server)
	cfg := inject.ConfigFor(server, testSidecarImage)
	pod := externalPod(ns, "search-5d4c3b2a1-x1", "search", &cfg)
	// No owner: the garbage collector would delete a pod whose ReplicaSet does not exist.
	pod.OwnerReferences = nil
	mustCreate(t, pod)
	eventually.Succeeds(t, "the pod counted in status.replicas", func() error {
		if err := k8s.Get(ctx, key, server); err != nil {
			return err
		}
		if server.Status.Replicas != 1 || server.Status.Selector != inject.LabelServer+"=search" {
			return fmt.Errorf("replicas %d, selector %q", server.Status.Replicas, server.Status.Selector)
		}
		return nil
	})
	serverCondition(t, key, mcpv1alpha1.ConditionSidecarsUpToDate, metav1.ConditionTrue, mcpv1alpha1.ReasonSidecarsUpToDate)

	patch := client.MergeFrom(server.DeepCopy())
	server.Spec.Sidecar = &mcpv1alpha1.SidecarSpec{MaxListenStreams: ptr.To[int32](10)}
	if err := k8s.Patch(ctx, server, patch); err != nil {
		t.Fatal(err)
	}
	serverCondition(t, key, mcpv1alpha1.ConditionSidecarsUpToDate, metav1.ConditionFalse, mcpv1alpha1.ReasonStaleSidecars)
	if err := k8s.Get(ctx, key, server); err != nil {
		t.Fatal(err)
	}
	c := findConditionIn(server.Status.Conditions, mcpv1alpha1.ConditionSidecarsUpToDate)
	if server.Status.StaleSidecarReplicas != 1 || !strings.Contains(c.Message, "kubectl delete pod -n "+ns+" "+pod.Name) {
		t.Fatalf("stale %d, message %q", server.Status.StaleSidecarReplicas, c.Message)
	}
	eventRecorded(t, server, mcpv1alpha1.ReasonStaleSidecars)
	got := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil || got.UID != pod.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the controller must not restart user pods: %v %+v", err, got.ObjectMeta)
	}
}
