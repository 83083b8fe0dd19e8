package inject

import (
	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// Labels on every object the controller creates and on the pods of servers. LabelServer is also
// the opt-in label the webhook injects pods of External servers by.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelServer    = "mcp.switchboard.dev/server"

	ComponentMCPServer = "mcp-server"
	ManagedBy          = "switchboard"

	// LabelShard assigns an MCPServer, its MCPTools, MCPResources, MCPPrompts and the
	// MCPAccessPolicies that target it to one manager shard (the manager's
	// --watch-label-selector, after Flux's sharding.fluxcd.io/key). The controller copies it
	// from the server onto every child except the pods, so a shard's cache holds its servers'
	// children only; pods keep their labels, so moving a server between shards rolls none.
	LabelShard = "sharding.switchboard.dev/key"
)

// ObjectNames holds the names of one server's children, all derived here and nowhere else: the
// controller creates the objects, the sidecar's flags name some of them.
type ObjectNames struct {
	Namespace string
	// Deployment, Service and PodDisruptionBudget are named like the server, so the in-cluster
	// URL is http://<server>.<namespace>.svc/mcp.
	Deployment, Service, PodDisruptionBudget string
	// NetworkPolicy admits ingress to the sidecar only: <server>.
	NetworkPolicy string
	// ServiceAccount, Role and RoleBinding of the sidecar: <server>-sidecar.
	ServiceAccount, Role, RoleBinding string
	// CatalogConfigMap holds the compiled catalog: <server>-catalog.
	CatalogConfigMap string
	// StatusConfigMap receives the sidecars' propagation reports: <server>-catalog-status.
	StatusConfigMap string
	// SessionSecret holds the key that signs the sidecars' 2025-era session ids:
	// <server>-sidecar-session.
	SessionSecret string
	// DrainTokenSecret holds the token the sidecar's preStop sends to /drain: <server>-drain-token.
	DrainTokenSecret string
	// SidecarTokenSecret is the token Secret (kubernetes.io/service-account-token) of the
	// ServiceAccount <server>-sidecar, for the sidecars of External servers: <server>-sidecar-token.
	SidecarTokenSecret string
}

// NamesFor returns the names of the children of s.
func NamesFor(s *mcpv1alpha1.MCPServer) ObjectNames {
	n := s.Name
	return ObjectNames{
		Namespace:  s.Namespace,
		Deployment: n, Service: n, PodDisruptionBudget: n, NetworkPolicy: n,
		ServiceAccount: n + "-sidecar", Role: n + "-sidecar", RoleBinding: n + "-sidecar",
		CatalogConfigMap:   n + "-catalog",
		StatusConfigMap:    n + "-catalog-status",
		SessionSecret:      n + "-sidecar-session",
		DrainTokenSecret:   n + "-drain-token",
		SidecarTokenSecret: n + "-sidecar-token",
	}
}

// ServiceSelectorFor selects the pods the Service sends clients to. Managed: SelectorFor (every
// pod of the Deployment has the sidecar in its template). External: the opt-in label and
// InjectedLabel, which only the webhook's successful injection sets, so a labelled pod the
// webhook skipped never receives the Service's traffic.
func ServiceSelectorFor(s *mcpv1alpha1.MCPServer) map[string]string {
	sel := SelectorFor(s)
	if s.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		sel[InjectedLabel] = "true"
	}
	return sel
}

// LabelsFor are the labels of every child of s: PodLabelsFor, and the server's LabelShard
// when it has one.
func LabelsFor(s *mcpv1alpha1.MCPServer) map[string]string {
	l := PodLabelsFor(s)
	if shard, ok := s.Labels[LabelShard]; ok {
		l[LabelShard] = shard
	}
	return l
}

// PodLabelsFor are the labels of the pods of a Managed server (its Deployment's pod template).
func PodLabelsFor(s *mcpv1alpha1.MCPServer) map[string]string {
	return map[string]string{
		LabelName:      s.Name,
		LabelInstance:  s.Name,
		LabelComponent: ComponentMCPServer,
		LabelManagedBy: ManagedBy,
		LabelServer:    s.Name,
	}
}

// SelectorFor is the stable subset of LabelsFor that selects the pods; it never changes, since
// a Deployment's selector is immutable. Pods of External servers come from the user's workload,
// whose own selector usually includes app.kubernetes.io/instance (a Helm release name): they
// are selected by the opt-in label alone, which the webhook never rewrites.
func SelectorFor(s *mcpv1alpha1.MCPServer) map[string]string {
	if s.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		return map[string]string{LabelServer: s.Name}
	}
	return map[string]string{LabelInstance: s.Name, LabelServer: s.Name}
}
