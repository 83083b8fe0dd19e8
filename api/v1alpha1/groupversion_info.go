// Package v1alpha1 contains the Switchboard API: MCPServer, the MCPTool, MCPResource and
// MCPPrompt objects that declare its catalog, and the MCPAccessPolicies that say which caller
// may use what.
// +kubebuilder:object:generate=true
// +groupName=mcp.switchboard.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Switchboard kind.
	GroupVersion = schema.GroupVersion{Group: "mcp.switchboard.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Switchboard kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Switchboard kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&MCPServer{}, &MCPServerList{},
		&MCPTool{}, &MCPToolList{},
		&MCPResource{}, &MCPResourceList{},
		&MCPPrompt{}, &MCPPromptList{},
		&MCPAccessPolicy{}, &MCPAccessPolicyList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
