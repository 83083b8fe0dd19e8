// Package v1alpha1 contains the Switchboard API: MCPServer and the MCPTool, MCPResource and
// MCPPrompt objects that declare its catalog.
// +kubebuilder:object:generate=true
// +groupName=mcp.switchboard.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Switchboard kind.
	GroupVersion = schema.GroupVersion{Group: "mcp.switchboard.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Switchboard kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Switchboard kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
