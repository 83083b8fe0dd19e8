//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestNetworkPolicyApplied: against the real API server the policy exists, is owned by the
// server, follows spec.networkPolicy, is removed when turned off, and is opt-in for External.
func TestNetworkPolicyApplied(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newServer(ns, "np", 1)
	mustCreate(t, s)
	key := client.ObjectKeyFromObject(s)
	np := &networkingv1.NetworkPolicy{}
	eventually.Succeeds(t, "the NetworkPolicy", func() error { return k8s.Get(ctx, key, np) })
	if err := k8s.Get(ctx, key, s); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(np, s) {
		t.Fatalf("the policy is not controlled by the server: %+v", np.OwnerReferences)
	}
	if len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != mcpv1alpha1.SidecarMCPPort || len(np.Spec.Ingress[0].From) != 0 {
		t.Fatalf("default policy: %+v", np.Spec.Ingress)
	}

	prometheus := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}
	edit(t, s, func() {
		s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{AdminFrom: []networkingv1.NetworkPolicyPeer{prometheus}}
	})
	eventually.Succeeds(t, "the admin rule", func() error {
		if err := k8s.Get(ctx, key, np); err != nil {
			return err
		}
		if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[1].Ports[0].Port.IntValue() != mcpv1alpha1.SidecarAdminPort {
			return fmt.Errorf("ingress %+v", np.Spec.Ingress)
		}
		return nil
	})

	edit(t, s, func() { s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)} })
	eventually.Succeeds(t, "the policy removed", func() error {
		if err := k8s.Get(ctx, key, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})

	ext := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal, Container: &mcpv1alpha1.ServerContainer{Port: 7000}}}
	mustCreate(t, ext)
	extKey := client.ObjectKeyFromObject(ext)
	serverCondition(t, extKey, mcpv1alpha1.ConditionAvailable, metav1.ConditionFalse, mcpv1alpha1.ReasonExternalWorkload)
	if err := k8s.Get(ctx, extKey, &networkingv1.NetworkPolicy{}); !apierrors.IsNotFound(err) {
		t.Fatalf("External mode got a policy without opting in: %v", err)
	}
	edit(t, ext, func() { ext.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)} })
	eventually.Succeeds(t, "the External opt-in policy", func() error {
		if err := k8s.Get(ctx, extKey, np); err != nil {
			return err
		}
		if fmt.Sprint(np.Spec.PodSelector.MatchLabels) != fmt.Sprint(map[string]string{inject.LabelServer: "ext"}) {
			return fmt.Errorf("selector %v", np.Spec.PodSelector.MatchLabels)
		}
		return nil
	})
}
