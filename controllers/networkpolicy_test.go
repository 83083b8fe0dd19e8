package controllers

import (
	"os"
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
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
