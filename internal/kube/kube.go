// Package kube holds the small Kubernetes helpers the manager's parts share (the controllers,
// the webhook, cmd/manager, the test stack and hack/dev): the manager's cache selection and pod
// readiness. It imports only api/ and internal/inject, never the controllers.
package kube

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// CacheOptions keeps the manager's cache small: of the built-in kinds it holds only the
// objects Switchboard manages (label app.kubernetes.io/managed-by=switchboard), so of Secrets only
// its own drain tokens, never users' Secrets. Pods are selected by the label mcp.switchboard.dev/server instead: pods of External
// servers come from the user's own workload, whose managed-by label (often "Helm") is theirs.
func CacheOptions() cache.Options {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{inject.LabelManagedBy: inject.ManagedBy})}
	serverPods, err := labels.Parse(inject.LabelServer)
	if err != nil {
		panic(err)
	}
	return cache.Options{
		// Nothing reads managedFields from the cache; they are a large share of every object.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: serverPods, Transform: TrimPod},
			&corev1.ConfigMap{}:             ours,
			&corev1.Service{}:               ours,
			&corev1.ServiceAccount{}:        ours,
			&appsv1.Deployment{}:            ours,
			&rbacv1.Role{}:                  ours,
			&rbacv1.RoleBinding{}:           ours,
			&rbacv1.ClusterRoleBinding{}:    ours,
			&policyv1.PodDisruptionBudget{}: ours,
			&networkingv1.NetworkPolicy{}:   ours,
			&corev1.Secret{}:                ours,
		}}
}

// TrimPod is the cache's transform for pods: it keeps what the controller reads of them — the
// metadata (labels, annotations, owners, deletion), each container's name and ports
// (inject.FindServerContainer) and the status conditions (PodReady) — and drops the rest, the
// larger part of a pod (volumes, env, probes, resources, init containers, container statuses) and
// its managedFields. Code that needs more of a pod reads it from the API server.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta}
	out.ManagedFields = nil
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Ports: c.Ports})
	}
	out.Status.Phase, out.Status.Conditions = p.Status.Phase, p.Status.Conditions
	return out, nil
}

// PodReady reports whether a pod is Ready and not being deleted.
func PodReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
