package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MCPAccessPolicy is modelled on SIG Network's kube-agentic-networking AccessPolicy
// (targetRefs, rules[].source, rules[].tools) and reports its status in the Gateway API policy
// shape (GEP-713: status.ancestors), so tools that read Gateway API policies read it too.

// PolicyControllerName is the controllerName of every status.ancestors entry Switchboard writes.
const PolicyControllerName = "mcp.switchboard.dev/controller"

// Limits of MCPAccessPolicy.
const (
	// MaxPolicyTargets bounds spec.targetRefs.
	MaxPolicyTargets = 16
	// MaxAccessRules bounds spec.rules.
	MaxAccessRules = 64
	// MaxRuleEntries bounds each list of a rule (each source list, tools, resources, prompts).
	MaxRuleEntries = 64
)

// MCPAccessPolicySpec says which callers may use which tools, resources and prompts of the
// MCPServers it targets.
type MCPAccessPolicySpec struct {
	// targetRefs are the MCPServers in this namespace the policy applies to, as Gateway API
	// local policy target references: {group: mcp.switchboard.dev, kind: MCPServer, name}.
	// Once any policy targets a server, a caller may use exactly the union of what the rules
	// matching it grant (default deny), like NetworkPolicy isolation. A server no policy
	// targets lets every authenticated caller use its whole catalog.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, self.filter(x, x.name == r.name).size() == 1)",message="targetRefs names the same MCPServer twice; list each server once"
	TargetRefs []PolicyTargetReference `json:"targetRefs"`

	// rules grant tools, resources and prompts to callers. A caller may use what any rule whose
	// source matches it grants.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.name) || self.filter(x, has(x.name) && x.name == r.name).size() == 1)",message="two rules have the same name; rule names must be unique within a policy"
	Rules []AccessRule `json:"rules"`
}

// PolicyTargetReference names an MCPServer in the policy's namespace (Gateway API
// LocalPolicyTargetReference).
// +kubebuilder:validation:XValidation:rule="self.group == 'mcp.switchboard.dev' && self.kind == 'MCPServer'",message="targetRefs must name an MCPServer: group mcp.switchboard.dev, kind MCPServer"
type PolicyTargetReference struct {
	// group of the target: mcp.switchboard.dev.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group"`

	// kind of the target: MCPServer.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`

	// name of the MCPServer in the policy's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// AccessRule grants tools, resources and prompts to the callers its source matches.
// +kubebuilder:validation:XValidation:rule="(has(self.tools) && size(self.tools) > 0) || (has(self.resources) && size(self.resources) > 0) || (has(self.prompts) && size(self.prompts) > 0)",message="the rule grants nothing: list tools, resources or prompts (\"*\" grants every one of a kind)"
type AccessRule struct {
	// name of the rule, unique within the policy; it names the rule in the compiled catalog and
	// in the sidecars' logs (default: its index).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`

	// source says whom the rule applies to: a caller matching any entry.
	// +required
	Source AccessRuleSource `json:"source"`

	// tools the rule grants, by the names clients see (after MCPTool renames); "*" grants every
	// tool.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9_.-]+|\*)$`
	Tools []string `json:"tools,omitempty"`

	// resources the rule grants: resource URIs and URI templates exactly as the MCPResources
	// (or the MCP server) declare them; "*" grants every resource.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=2048
	Resources []string `json:"resources,omitempty"`

	// prompts the rule grants, by the names clients see; "*" grants every prompt.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^([A-Za-z0-9_.-]+|\*)$`
	Prompts []string `json:"prompts,omitempty"`
}

// AccessRuleSource says whom a rule applies to. Any entry matching the caller is a match.
// +kubebuilder:validation:XValidation:rule="(has(self.serviceAccounts) && size(self.serviceAccounts) > 0) || (has(self.identities) && size(self.identities) > 0) || (has(self.users) && size(self.users) > 0) || (has(self.groups) && size(self.groups) > 0)",message="rules[].source matches no caller: list serviceAccounts, identities, users or groups"
type AccessRuleSource struct {
	// serviceAccounts are ServiceAccounts of this cluster: <namespace>/<name>, <namespace>/*
	// (every ServiceAccount of the namespace), or <name> (in the policy's namespace). They
	// match callers authenticated with a ServiceAccount token (spec.auth.serviceAccountTokens).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?(\*|[a-z0-9]([-a-z0-9.]*[a-z0-9])?)$`
	// +kubebuilder:validation:XValidation:rule="self.all(x, x.contains('/') || x != '*')",message="serviceAccounts entry * needs a namespace: write <namespace>/* for every ServiceAccount of a namespace"
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`

	// identities are SPIFFE IDs of ServiceAccounts,
	// spiffe://<trust domain>/ns/<namespace>/sa/<name>; the trust domain is the manager's
	// --trust-domain (default cluster.local).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^spiffe://[a-z0-9._-]+/ns/[a-z0-9]([-a-z0-9]*[a-z0-9])?/sa/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Identities []string `json:"identities,omitempty"`

	// users are OIDC callers' usernames after claim mapping, prefix included
	// (spec.auth.jwt[].claimMappings.username).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.all(x, !x.startsWith('system:'))",message="users never start with system: (no OIDC caller can have such a name); grant ServiceAccounts with serviceAccounts or identities"
	Users []string `json:"users,omitempty"`

	// groups are OIDC callers' groups after claim mapping, prefix included
	// (spec.auth.jwt[].claimMappings.groups).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.all(x, !x.startsWith('system:'))",message="groups never start with system: (no OIDC caller can be in such a group); grant ServiceAccounts with serviceAccounts (<namespace>/* for a whole namespace)"
	Groups []string `json:"groups,omitempty"`
}

// ParentReference names the object a policy status entry is about (Gateway API
// ParentReference): here the targeted MCPServer.
type ParentReference struct {
	// group of the object: mcp.switchboard.dev.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`

	// kind of the object: MCPServer.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`

	// namespace of the object: the policy's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PolicyAncestorStatus is the status of the policy for one target (Gateway API
// PolicyAncestorStatus, GEP-713).
type PolicyAncestorStatus struct {
	// ancestorRef is the MCPServer this entry is about.
	// +required
	AncestorRef ParentReference `json:"ancestorRef"`

	// controllerName is the controller that wrote the entry: mcp.switchboard.dev/controller.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ControllerName string `json:"controllerName"`

	// conditions: Accepted, True when the policy is compiled into the server's catalog; False
	// with a reason that says what to fix (TargetNotFound, AuthenticationOff, Invalid).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MCPAccessPolicyStatus is the observed state of an MCPAccessPolicy.
type MCPAccessPolicyStatus struct {
	// conditions: Ready (True when every target accepts the policy; False with the reason of
	// the first target that does not); Stalled while only a change by a person helps (a target
	// that does not exist, one whose spec.auth.mode is not Required, an invalid entry) and
	// Reconciling while a target is waited for, present only while True. They summarise
	// ancestors for GitOps tools (kstatus, Argo CD).
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

	// ancestors is the policy's status for each target, in the order of spec.targetRefs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Ancestors []PolicyAncestorStatus `json:"ancestors,omitempty"`
}

// MCPAccessPolicy grants callers of MCPServers with spec.auth.mode Required the tools,
// resources and prompts they may use. Once a policy targets a server, every caller is denied
// what no matching rule grants. Edits apply live, without restarting pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpap,categories=mcp
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRefs[0].name`,description="The first targeted MCPServer"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPAccessPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says who may use what.
	// +required
	Spec MCPAccessPolicySpec `json:"spec"`

	// status says whether each target enforces the policy.
	// +optional
	// +kubebuilder:default={}
	Status MCPAccessPolicyStatus `json:"status,omitempty"`
}

// MCPAccessPolicyList is a list of MCPAccessPolicies.
// +kubebuilder:object:root=true
type MCPAccessPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPAccessPolicy `json:"items"`
}
