package controllers

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// wantsNetworkPolicy: on by default for Managed servers, opt-in for External ones (their pods
// belong to the user's workload and may serve other ports on purpose).
func wantsNetworkPolicy(s *mcpv1alpha1.MCPServer) bool {
	def := s.Spec.Mode != mcpv1alpha1.WorkloadExternal
	if np := s.Spec.NetworkPolicy; np != nil && np.Enabled != nil {
		return *np.Enabled
	}
	return def
}

// networkPolicyFor makes the sidecar the only way into the server's pods. It selects the pods
// like the Service does and declares ingress isolation, so any port no rule names, the MCP
// server container's included, is closed to other pods:
//   - the MCP port (8800) admits spec.networkPolicy.mcpFrom, or anyone when that is empty;
//   - the admin port (8801) admits spec.networkPolicy.adminFrom only, and no rule is written
//     when it is empty (an empty from would admit anyone). The kubelet's probes and preStop
//     hooks come from the pod's own node, which NetworkPolicies always admit.
//
// Egress is not restricted.
func networkPolicyFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *networkingv1ac.NetworkPolicyApplyConfiguration {
	np := ptr.Deref(s.Spec.NetworkPolicy, mcpv1alpha1.NetworkPolicySpec{})
	rule := func(port int32, from []networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration {
		r := networkingv1ac.NetworkPolicyIngressRule().WithPorts(networkingv1ac.NetworkPolicyPort().
			WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port)))
		for i := range from {
			r.WithFrom(peerFor(from[i]))
		}
		return r
	}
	spec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(inject.SelectorFor(s))).
		WithPolicyTypes(networkingv1.PolicyTypeIngress).
		WithIngress(rule(mcpv1alpha1.SidecarMCPPort, np.MCPFrom))
	if len(np.AdminFrom) > 0 {
		spec.WithIngress(rule(mcpv1alpha1.SidecarAdminPort, np.AdminFrom))
	}
	return networkingv1ac.NetworkPolicy(n.NetworkPolicy, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithSpec(spec)
}

// peerFor turns a peer of the spec into its apply configuration. The two share their JSON form
// (apply configurations are the API types with every field optional), so this cannot lose a
// field the API server validated.
func peerFor(p networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyPeerApplyConfiguration {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a typed API object always marshals
	}
	ac := networkingv1ac.NetworkPolicyPeer()
	if err := json.Unmarshal(b, ac); err != nil {
		panic(err)
	}
	return ac
}
