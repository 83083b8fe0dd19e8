package controllers

import (
	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// FieldOwner is the server-side apply field manager of everything the controller writes.
const FieldOwner = "switchboard"

// Labels on every object the controller creates and on the pods of managed servers.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelServer    = "mcp.switchboard.dev/server"

	ComponentMCPServer = "mcp-server"
	ManagedBy          = "switchboard"
)

// serverRefIndex is the field index on MCPTool, MCPResource and MCPPrompt by spec.serverRef.name.
const serverRefIndex = "spec.serverRef.name"

// objectNames holds the names of one server's children, all derived here and nowhere else.
type objectNames struct {
	Namespace string
	// Deployment, Service and PodDisruptionBudget are named like the server, so the in-cluster
	// URL is http://<server>.<namespace>.svc/mcp.
	Deployment, Service, PodDisruptionBudget string
	// ServiceAccount, Role and RoleBinding of the sidecar: <server>-sidecar.
	ServiceAccount, Role, RoleBinding string
	// CatalogConfigMap holds the compiled catalog: <server>-catalog.
	CatalogConfigMap string
	// StatusConfigMap receives the sidecars' propagation reports: <server>-catalog-status.
	StatusConfigMap string
}

func namesFor(s *mcpv1alpha1.MCPServer) objectNames {
	n := s.Name
	return objectNames{
		Namespace:  s.Namespace,
		Deployment: n, Service: n, PodDisruptionBudget: n,
		ServiceAccount: n + "-sidecar", Role: n + "-sidecar", RoleBinding: n + "-sidecar",
		CatalogConfigMap: n + "-catalog",
		StatusConfigMap:  n + "-catalog-status",
	}
}

func (n objectNames) inject() inject.Names {
	return inject.Names{Namespace: n.Namespace, Service: n.Service, CatalogConfigMap: n.CatalogConfigMap, ReportConfigMap: n.StatusConfigMap}
}

// labelsFor are the labels of every child and of the pods.
func labelsFor(s *mcpv1alpha1.MCPServer) map[string]string {
	return map[string]string{
		LabelName:      s.Name,
		LabelInstance:  s.Name,
		LabelComponent: ComponentMCPServer,
		LabelManagedBy: ManagedBy,
		LabelServer:    s.Name,
	}
}

// selectorFor is the stable subset of labelsFor that selects the pods; it never changes, since
// a Deployment's selector is immutable. Pods of External servers come from the user's workload,
// whose own selector usually includes app.kubernetes.io/instance (a Helm release name): they
// are selected by the opt-in label alone, which the webhook never rewrites.
func selectorFor(s *mcpv1alpha1.MCPServer) map[string]string {
	if s.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		return map[string]string{LabelServer: s.Name}
	}
	return map[string]string{LabelInstance: s.Name, LabelServer: s.Name}
}

// SidecarConfig is the sidecar the pods of a server get: the controller injects it into the
// Deployment's pod template (Managed), the injection webhook into the pods of the user's own
// workload (External). defaultImage is the manager's --sidecar-image.
func SidecarConfig(s *mcpv1alpha1.MCPServer, defaultImage string) inject.Config {
	return inject.ConfigFor(s, namesFor(s).inject(), defaultImage)
}
