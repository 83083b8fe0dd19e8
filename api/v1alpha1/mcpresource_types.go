package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxInlineResourceBytes bounds spec.source.inline.text.
const MaxInlineResourceBytes = 65536

// MCPResourceSpec declares one resource (uri) or resource template (uriTemplate) of a server.
// +kubebuilder:validation:XValidation:rule="has(self.uri) != has(self.uriTemplate)",message="set exactly one of uri or uriTemplate"
// +kubebuilder:validation:XValidation:rule="!has(self.uriTemplate) || has(self.source.upstream)",message="a uriTemplate can only be served by the upstream: set source.upstream"
// +kubebuilder:validation:XValidation:rule="!has(self.source.secretKeyRef) || !has(self.caching) || !has(self.caching.scope) || self.caching.scope == 'Private'",message="a Secret-backed resource must use caching.scope Private: its content must never be shared across callers"
type MCPResourceSpec struct {
	// serverRef names the MCPServer in this namespace that serves the resource.
	// +required
	ServerRef ServerReference `json:"serverRef"`

	// uri identifies a single resource, e.g. file:///etc/app/config.json or docs://handbook.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9+.-]*:[^\\\\s]*$')",message="uri must be an absolute URI with a scheme, such as docs://handbook, and no spaces"
	URI string `json:"uri,omitempty"`

	// uriTemplate is an RFC 6570 URI template, e.g. docs://pages/{id}, for a family of resources
	// the upstream serves.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9+.-]*:[^\\\\s]*\\\\{[^}]+\\\\}[^\\\\s]*$')",message="uriTemplate must be an absolute RFC 6570 template with a scheme and at least one {variable}, such as docs://pages/{id}"
	URITemplate string `json:"uriTemplate,omitempty"`

	// name is the resource's programmatic name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// title is a short human-readable name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// description says what the resource holds.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Description string `json:"description,omitempty"`

	// mimeType of the content, e.g. text/markdown.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(\s*;.*)?$`
	MimeType string `json:"mimeType,omitempty"`

	// source says where the content comes from. A ConfigMap or Secret is served only when it
	// carries the label mcp.switchboard.dev/expose-to=<this server> (several servers: their
	// names joined by '.'); until then the Published condition (reason SourceNotExposed) gives
	// the kubectl label command. ServiceAccount tokens and Switchboard's own Secrets are never
	// served (SourceRefused).
	// +required
	Source ResourceSource `json:"source"`

	// caching is the hint stamped on resources/read results of this resource; unset fields fall
	// back to the server's caching.resourceRead.
	// +optional
	Caching *CacheHint `json:"caching,omitempty"`
}

// ResourceSource says where a resource's content comes from: exactly one field is set.
//
// The sidecar serves a ConfigMap or Secret only when its owner exposed it to the server with the
// label mcp.switchboard.dev/expose-to=<server> (several servers: their names joined by '.'), for
// example `kubectl label secret weather-credentials mcp.switchboard.dev/expose-to=weather`.
// Otherwise the sidecar gets no access to it, the resource is not in the catalog, and the
// MCPResource's Published condition (reason SourceNotExposed) gives that command. ServiceAccount
// tokens and Switchboard's own Secrets are never served (reason SourceRefused).
// +kubebuilder:validation:XValidation:rule="[has(self.upstream), has(self.inline), has(self.configMapKeyRef), has(self.secretKeyRef)].filter(x, x).size() == 1",message="set exactly one of source.upstream, source.inline, source.configMapKeyRef or source.secretKeyRef"
// +kubebuilder:validation:XValidation:rule="!has(self.secretKeyRef) || !(self.secretKeyRef.name.endsWith('-drain-token') || self.secretKeyRef.name.endsWith('-sidecar-session'))",message="source.secretKeyRef names a Switchboard Secret (<server>-drain-token or <server>-sidecar-session), which is never served; point it at a Secret of your own"
type ResourceSource struct {
	// upstream: the MCP server serves the content; resources/read is forwarded to it.
	// +optional
	Upstream *UpstreamSource `json:"upstream,omitempty"`

	// inline: the sidecar serves this text.
	// +optional
	Inline *InlineSource `json:"inline,omitempty"`

	// configMapKeyRef: the sidecar serves one key of a ConfigMap in this namespace that carries
	// the label mcp.switchboard.dev/expose-to naming the server. Editing it sends
	// notifications/resources/updated to subscribers.
	// +optional
	ConfigMapKeyRef *KeyReference `json:"configMapKeyRef,omitempty"`

	// secretKeyRef: the sidecar serves one key of a Secret in this namespace that carries the
	// label mcp.switchboard.dev/expose-to naming the server. The sidecar answers resources/read
	// with it to every client that reaches the server (it does not authorize callers itself), so
	// expose only what those clients may read. Answers are always cacheScope private, whatever
	// the caching hints say.
	// +optional
	SecretKeyRef *KeyReference `json:"secretKeyRef,omitempty"`
}

// UpstreamSource marks a resource the MCP server itself serves.
type UpstreamSource struct{}

// InlineSource is text content held in the MCPResource itself.
type InlineSource struct {
	// text is the resource content.
	// +required
	// +kubebuilder:validation:MaxLength=65536
	Text string `json:"text"`
}

// KeyReference names one key of a ConfigMap or Secret in the same namespace.
type KeyReference struct {
	// name of the ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`

	// key within it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._A-Za-z0-9]+$`
	Key string `json:"key"`
}

// MCPResource declares one resource or resource template of an MCPServer, served by the
// upstream, inline, or from a ConfigMap or Secret key, with its own cache hints.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpr,categories=mcp
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef.name`
// +kubebuilder:printcolumn:name="URI",type=string,JSONPath=`.spec.uri`
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.uriTemplate`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,priority=1
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Published")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the resource.
	// +required
	Spec MCPResourceSpec `json:"spec"`

	// status is the resource's observed state.
	// The API server fills in status.observedGeneration -1 until the controller writes status,
	// so GitOps tools wait for the controller instead of taking an object without status as
	// done (kstatus computes such an object as Current).
	// +optional
	// +kubebuilder:default={}
	Status CatalogItemStatus `json:"status,omitempty"`
}

// MCPResourceList is a list of MCPResources.
// +kubebuilder:object:root=true
type MCPResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPResource `json:"items"`
}
