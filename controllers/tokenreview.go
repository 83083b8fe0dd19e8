package controllers

import (
	"maps"

	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TokenReviewerClusterRole is the ClusterRole, shipped with the manager (config/rbac and the
// chart), that grants only create on tokenreviews: what a sidecar needs to validate
// ServiceAccount tokens the way the API server does. The manager may bind exactly this role.
const TokenReviewerClusterRole = "switchboard-sidecar-tokenreviewer"

// LabelServerNamespace is the label that, with inject.LabelServer, names the server a cluster-scoped object
// (the TokenReview ClusterRoleBinding) belongs to, since it cannot carry an owner reference to
// a namespaced object.
const LabelServerNamespace = "mcp.switchboard.dev/server-namespace"

// tokenReviewBindingName names a server's ClusterRoleBinding. Namespaces and server names are
// DNS labels, which never contain ':', so no two servers share a name.
func tokenReviewBindingName(namespace, name string) string {
	return "switchboard-tokenreview:" + namespace + ":" + name
}

// tokenReviewBindingFor binds TokenReviewerClusterRole to the ServiceAccount whose token the
// server's sidecars hold (sidecarServiceAccount: the pod's in Managed mode, <server>-sidecar in
// External mode), so they can create TokenReviews. Cluster-scoped, so no owner reference: the
// reconciler deletes it when the server stops wanting it or is gone (removeTokenReviewBinding),
// and the labels say which server it belongs to.
func tokenReviewBindingFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *rbacv1ac.ClusterRoleBindingApplyConfiguration {
	labels := maps.Clone(inject.LabelsFor(s))
	labels[LabelServerNamespace] = s.Namespace
	return rbacv1ac.ClusterRoleBinding(tokenReviewBindingName(s.Namespace, s.Name)).
		WithLabels(labels).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(TokenReviewerClusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sidecarServiceAccount(s, n)).WithNamespace(n.Namespace))
}

// bindingServer returns the server a TokenReview binding belongs to, from its labels.
func bindingServer(o client.Object) (namespace, name string, ok bool) {
	l := o.GetLabels()
	namespace, name = l[LabelServerNamespace], l[inject.LabelServer]
	return namespace, name, namespace != "" && name != "" && l[inject.LabelManagedBy] == inject.ManagedBy
}

// boundFor reports whether crb is the TokenReview binding of server namespace/name.
func boundFor(crb *rbacv1.ClusterRoleBinding, namespace, name string) bool {
	ns, n, ok := bindingServer(crb)
	return ok && ns == namespace && n == name && crb.RoleRef.Name == TokenReviewerClusterRole
}

// enqueueTargets enqueues the servers an MCPAccessPolicy targets, before and after an update,
// so a server a policy stops targeting is compiled again too.
func enqueueTargets() handler.EventHandler { return enqueueServersOf(policyTargets) }
