package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/golden"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestNetworkPolicyFor compares the policy of every mode and option with a golden file in
// testdata/networkpolicy (refresh with go test ./controllers -run TestNetworkPolicyFor -update,
// then review the diff). Cases that want no policy have no golden file and must say so.
func TestNetworkPolicyFor(t *testing.T) {
	prometheus := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
	}
	gateway := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "gateway"}},
	}
	external := func(s *mcpv1alpha1.MCPServer) {
		s.Spec.Mode, s.Spec.Replicas = mcpv1alpha1.WorkloadExternal, nil
		s.Spec.Container = &mcpv1alpha1.ServerContainer{Port: 9000}
	}
	cases := []struct {
		name   string
		mutate func(*mcpv1alpha1.MCPServer)
		want   bool
	}{
		{name: "managed-default", mutate: func(*mcpv1alpha1.MCPServer) {}, want: true},
		{name: "managed-enabled-explicitly", mutate: func(s *mcpv1alpha1.MCPServer) {
			s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
		}, want: true},
		{name: "managed-disabled", mutate: func(s *mcpv1alpha1.MCPServer) {
			s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}
		}},
		{name: "managed-admin-from-prometheus", mutate: func(s *mcpv1alpha1.MCPServer) {
			s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{AdminFrom: []networkingv1.NetworkPolicyPeer{prometheus}}
		}, want: true},
		{name: "managed-mcp-from-gateway", mutate: func(s *mcpv1alpha1.MCPServer) {
			s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{
				MCPFrom: []networkingv1.NetworkPolicyPeer{gateway}, AdminFrom: []networkingv1.NetworkPolicyPeer{prometheus}}
		}, want: true},
		{name: "external-default", mutate: external},
		{name: "external-opt-in", mutate: func(s *mcpv1alpha1.MCPServer) {
			external(s)
			s.Spec.NetworkPolicy = &mcpv1alpha1.NetworkPolicySpec{Enabled: ptr.To(true), AdminFrom: []networkingv1.NetworkPolicyPeer{prometheus}}
		}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := builderServer()
			tc.mutate(s)
			goldenPath := filepath.Join("testdata", "networkpolicy", tc.name+".yaml")
			if got := wantsNetworkPolicy(s); got != tc.want {
				t.Fatalf("wantsNetworkPolicy = %v, want %v", got, tc.want)
			}
			if !tc.want {
				if _, err := os.Stat(goldenPath); err == nil {
					t.Fatalf("%s exists but the case wants no policy", goldenPath)
				}
				return
			}
			ac := networkPolicyFor(s, inject.NamesFor(s))
			got, err := yaml.Marshal(ac)
			if err != nil {
				t.Fatal(err)
			}
			np := &networkingv1.NetworkPolicy{}
			if err := yaml.UnmarshalStrict(got, np); err != nil {
				t.Fatal(err)
			}
			checkNetworkPolicyInvariants(t, s, np)
			golden.Check(t, goldenPath, got)
		})
	}
}

// checkNetworkPolicyInvariants holds for every option: ingress isolation of every pod the
// Service selects, the sidecar's MCP port admitted, the admin port only from named peers, and
// the MCP server container's port never.
func checkNetworkPolicyInvariants(t *testing.T, s *mcpv1alpha1.MCPServer, np *networkingv1.NetworkPolicy) {
	t.Helper()
	// Every pod the Service selects is isolated (External: the policy also covers the labelled
	// pods the webhook did not inject, which the Service leaves out).
	svc := serviceFor(s, inject.NamesFor(s)).Spec.Selector
	for k, v := range np.Spec.PodSelector.MatchLabels {
		if svc[k] != v {
			t.Fatalf("the policy selects %v, not every pod the Service selects (%v)", np.Spec.PodSelector.MatchLabels, svc)
		}
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Fatalf("policyTypes %v", np.Spec.PolicyTypes)
	}
	serverPort := ptr.Deref(s.Spec.Container, mcpv1alpha1.ServerContainer{}).Port
	mcp := false
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) != 1 {
			t.Fatalf("a rule without exactly one port admits more than the sidecar: %+v", r)
		}
		switch p := r.Ports[0].Port.IntValue(); p {
		case mcpv1alpha1.SidecarMCPPort:
			mcp = true
		case mcpv1alpha1.SidecarAdminPort:
			if len(r.From) == 0 {
				t.Fatal("the admin port is open to everyone")
			}
		case int(serverPort):
			t.Fatalf("the MCP server container's port %d is admitted", p)
		default:
			t.Fatalf("unexpected port %d", p)
		}
	}
	if !mcp {
		t.Fatal("the sidecar's MCP port is not admitted")
	}
}

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
