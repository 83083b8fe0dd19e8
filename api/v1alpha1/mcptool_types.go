package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ToolState is Enabled or Disabled.
// +kubebuilder:validation:Enum=Enabled;Disabled
type ToolState string

const (
	// ToolEnabled tools are listed and callable.
	ToolEnabled ToolState = "Enabled"
	// ToolDisabled tools are hidden from tools/list and refused on tools/call.
	ToolDisabled ToolState = "Disabled"
)

// MCPToolSpec declares one tool a server exposes, or overrides, renames or disables one of its
// upstream tools.
// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || !has(self.annotations.readOnlyHint) || !has(self.annotations.destructiveHint) || !(self.annotations.readOnlyHint && self.annotations.destructiveHint)",message="annotations.readOnlyHint and annotations.destructiveHint cannot both be true: a read-only tool does not modify anything"
type MCPToolSpec struct {
	// serverRef names the MCPServer in this namespace that exposes the tool.
	// +required
	ServerRef ServerReference `json:"serverRef"`

	// name is the tool name clients see: 1 to 128 characters of A-Z, a-z, 0-9, _, - and .
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	Name string `json:"name"`

	// upstreamName is the tool's name on the MCP server when it differs from name (a rename);
	// tools/call for name is forwarded as upstreamName.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	UpstreamName string `json:"upstreamName,omitempty"`

	// title is a short human-readable name for the tool.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// description tells a model what the tool does and when to use it. Empty keeps the
	// upstream's description.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Description string `json:"description,omitempty"`

	// inputSchema is the JSON Schema (an object schema) of the tool's arguments, preserved as
	// given. Empty keeps the upstream's schema.
	// +optional
	InputSchema *JSONSchema `json:"inputSchema,omitempty"`

	// outputSchema is the JSON Schema (an object schema) of the tool's structured result,
	// preserved as given. Empty keeps the upstream's schema.
	// +optional
	OutputSchema *JSONSchema `json:"outputSchema,omitempty"`

	// annotations are the behaviour hints clients show to users. Unset hints keep the upstream's.
	// +optional
	Annotations *ToolAnnotations `json:"annotations,omitempty"`

	// state is Enabled or Disabled. A disabled tool is hidden and refused on tools/call.
	// +optional
	// +kubebuilder:default=Enabled
	State ToolState `json:"state,omitempty"`

	// upstreamDigest pins the tool's definition as the MCP server serves it: "sha256:" and 64
	// lowercase hex digits, the digest status.observedUpstreamDigest shows (docs/security.md).
	// When the server's definition changes (a new description or schema), the MCPServer's
	// spec.toolPinning decides: Warn flags it, Enforce withholds the tool. Review the new
	// definition, then copy status.observedUpstreamDigest here to accept it.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule="self.matches('^sha256:[0-9a-f]{64}$')",message="upstreamDigest must be sha256: followed by 64 lowercase hex digits; copy it from the MCPTool's status.observedUpstreamDigest"
	UpstreamDigest string `json:"upstreamDigest,omitempty"`
}

// PinState says how a tool's definition on the MCP server compares with its pin.
// +kubebuilder:validation:Enum=Pinned;Drifted;Unpinned;Unknown
type PinState string

const (
	// PinPinned means every reporting ready replica serves the definition spec.upstreamDigest pins.
	PinPinned PinState = "Pinned"
	// PinDrifted means a ready replica serves a definition other than the pinned one.
	PinDrifted PinState = "Drifted"
	// PinUnpinned means the tool has no spec.upstreamDigest.
	PinUnpinned PinState = "Unpinned"
	// PinUnknown means no ready replica has reported the tool's definition (yet), or the MCP server
	// does not list it.
	PinUnknown PinState = "Unknown"
)

// MCPToolStatus is the observed state of an MCPTool.
type MCPToolStatus struct {
	CatalogItemStatus `json:",inline"`

	// observedUpstreamDigest is the upstream digest of the tool's definition as the ready
	// replicas' MCP servers serve it (when they differ, one that does not match the pin).
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ObservedUpstreamDigest string `json:"observedUpstreamDigest,omitempty"`

	// pin is Pinned, Drifted, Unpinned or Unknown: how observedUpstreamDigest compares with
	// spec.upstreamDigest.
	// +optional
	Pin PinState `json:"pin,omitempty"`
}

// ToolAnnotations are the MCP tool behaviour hints.
type ToolAnnotations struct {
	// readOnlyHint: the tool does not modify its environment.
	// +optional
	ReadOnlyHint *bool `json:"readOnlyHint,omitempty"`
	// destructiveHint: the tool may perform destructive updates.
	// +optional
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	// idempotentHint: calling the tool again with the same arguments has no additional effect.
	// +optional
	IdempotentHint *bool `json:"idempotentHint,omitempty"`
	// openWorldHint: the tool interacts with an open world of external entities.
	// +optional
	OpenWorldHint *bool `json:"openWorldHint,omitempty"`
}

// MCPTool declares, overrides, renames or disables one tool of an MCPServer. Changes reach
// connected clients live, as notifications/tools/list_changed, without restarting pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpt,categories=mcp
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef.name`
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.spec.state`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Pin",type=string,JSONPath=`.status.pin`,description="Pinned, Drifted, Unpinned or Unknown: the MCP server's definition against spec.upstreamDigest"
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,priority=1
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Published")].status`,priority=1
// +kubebuilder:printcolumn:name="Observed",type=string,JSONPath=`.status.observedUpstreamDigest`,priority=1,description="The upstream digest the replicas observe"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPTool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the tool.
	// +required
	Spec MCPToolSpec `json:"spec"`

	// status is the tool's observed state.
	// The API server fills in status.observedGeneration -1 until the controller writes status,
	// so GitOps tools wait for the controller instead of taking an object without status as
	// done (kstatus computes such an object as Current).
	// +optional
	// +kubebuilder:default={}
	Status MCPToolStatus `json:"status,omitempty"`
}

// MCPToolList is a list of MCPTools.
// +kubebuilder:object:root=true
type MCPToolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPTool `json:"items"`
}
