package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServerReference names an MCPServer in the same namespace.
type ServerReference struct {
	// name of the MCPServer in this namespace (a DNS-1035 label, as every MCPServer's name is).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// CacheScope says who may reuse a cached result.
// +kubebuilder:validation:Enum=Public;Private
type CacheScope string

const (
	// CacheScopePublic results hold no caller-specific data: any client or shared cache may reuse them.
	CacheScopePublic CacheScope = "Public"
	// CacheScopePrivate results may be reused only within the same authorization context.
	CacheScopePrivate CacheScope = "Private"
)

// CacheHint is the caching hint the sidecar stamps on a result as `ttlMs` and `cacheScope`.
type CacheHint struct {
	// ttlSeconds is how long a client may treat the result as fresh (sent as ttlMs). 0 means
	// immediately stale. Change notifications invalidate cached results sooner.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +kubebuilder:default=0
	TTLSeconds *int32 `json:"ttlSeconds,omitempty"`

	// scope is Public when the result is the same for every caller and may be shared across
	// authorization contexts, Private otherwise.
	// +optional
	// +kubebuilder:default=Private
	Scope CacheScope `json:"scope,omitempty"`
}

// CatalogItemStatus is the observed state shared by MCPTool, MCPResource and MCPPrompt.
type CatalogItemStatus struct {
	// conditions: Accepted, Published, and Ready (Accepted, Published, and the server's ready
	// replicas serve it); Stalled while only a change by a person helps (the server does not
	// exist, a name conflict, an invalid spec, a tool withheld by its pin, a missing resource source, a catalog too large, or
	// rejected in the revision that changed this object), Reconciling while ready replicas still
	// serve a revision older than the one that changed it. Stalled and Reconciling are present
	// only while True.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation this status describes; -1 until the controller
	// first writes status.
	// +optional
	// +kubebuilder:default=-1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// publishedRevision is the first revision of the server's catalog that included this object
	// as it is now (at observedGeneration). Later revisions include it too while Published is
	// True; the MCPServer's status.catalogRevision names the current one.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PublishedRevision string `json:"publishedRevision,omitempty"`

	// catalogRevision holds the same value as publishedRevision.
	//
	// Deprecated: read publishedRevision. On an MCPServer, status.catalogRevision is the current
	// revision; on this object it meant the first revision that published it, so the name is
	// being retired. The controller writes both until v1alpha2.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CatalogRevision string `json:"catalogRevision,omitempty"`
}
