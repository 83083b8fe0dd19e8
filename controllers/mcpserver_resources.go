package controllers

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// Pure builders of the objects an MCPServer reconciles into. They set only the fields we own,
// and the controller applies them with server-side apply.

// objectMeta is the metadata of every child: our labels and a controller owner reference.
func objectMeta(s *mcpv1alpha1.MCPServer, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: s.Namespace,
		Labels:    inject.LabelsFor(s),
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion:         mcpv1alpha1.GroupVersion.String(),
			Kind:               "MCPServer",
			Name:               s.Name,
			UID:                s.UID,
			Controller:         ptr.To(true),
			BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// catalogConfigMapFor stores an encoded catalog and names its revision in an annotation.
func catalogConfigMapFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, encoded []byte) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: objectMeta(s, n.CatalogConfigMap), Data: map[string]string{catalog.Key: string(encoded)}}
	cm.Annotations = map[string]string{catalog.RevisionAnnotation: catalog.Revision(encoded)}
	return cm
}

// statusConfigMapFor is the ConfigMap the sidecars report into. The controller applies only its
// metadata; each sidecar owns its own key (field manager switchboard-sidecar-<pod>).
func statusConfigMapFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: objectMeta(s, n.StatusConfigMap)}
}

// sessionSecretFor is the Secret holding the key that signs the sidecars' 2025-era session ids:
// 32 random bytes, hex-encoded. Every replica's sidecar gets it through its environment
// (secretKeyRef, read by the kubelet), so a session minted by one replica works on all.
func sessionSecretFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.Secret {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &corev1.Secret{
		ObjectMeta: objectMeta(s, n.SessionSecret),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{inject.SessionKeySecretKey: []byte(hex.EncodeToString(key))},
	}
}

func serviceAccountFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: objectMeta(s, n.ServiceAccount)}
}

// podServiceAccount is the ServiceAccount the pods run as, which the sidecar Role is bound to.
func podServiceAccount(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) string {
	if s.Spec.Pod != nil && s.Spec.Pod.ServiceAccountName != "" {
		return s.Spec.Pod.ServiceAccountName
	}
	return n.ServiceAccount
}

// roleFor grants the sidecar exactly what it reads and writes, by name: the catalog ConfigMap
// and the ConfigMaps its resources reference (read), the status ConfigMap (read and patch its
// report), and the Secrets its resources reference (read). A rule with empty resourceNames
// would grant every object of the kind, so such rules are left out. list and watch by name need
// a metadata.name field selector.
func roleFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, c *catalog.Catalog) *rbacv1.Role {
	configMaps, secrets := sourceRefs(c)
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{
		ObjectMeta: objectMeta(s, n.Role),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: read,
				ResourceNames: append([]string{n.CatalogConfigMap}, configMaps...)},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"},
				ResourceNames: []string{n.StatusConfigMap}},
		},
	}
	if len(secrets) > 0 {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: read, ResourceNames: secrets})
	}
	return role
}

func roleBindingFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: objectMeta(s, n.RoleBinding),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: n.Role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: podServiceAccount(s, n), Namespace: s.Namespace}},
	}
}

// serviceFor sends port 80 to the sidecar, never to the MCP server container.
func serviceFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: objectMeta(s, n.Service),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: inject.SelectorFor(s),
			Ports: []corev1.ServicePort{{
				Name: "mcp", Port: 80, Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("http"),
				TargetPort: intstr.FromInt32(mcpv1alpha1.SidecarMCPPort),
			}},
		},
	}
}

// urlFor is the in-cluster MCP endpoint.
func urlFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) string {
	return fmt.Sprintf("http://%s.%s.svc/mcp", n.Service, s.Namespace)
}

// deploymentFor runs the MCP server container behind the injected native sidecar. The pod
// template depends only on the server spec and the sidecar settings, never on the catalog, so
// catalog edits do not roll pods.
func deploymentFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, cfg inject.Config) *appsv1.Deployment {
	spec := s.Spec
	c := ptr.Deref(spec.Container, mcpv1alpha1.ServerContainer{})
	podOverrides := ptr.Deref(spec.Pod, mcpv1alpha1.PodOverrides{})

	server := corev1.Container{
		Name:            inject.ServerContainerName,
		Image:           c.Image,
		ImagePullPolicy: c.ImagePullPolicy,
		Command:         c.Command,
		Args:            c.Args,
		Env:             c.Env,
		EnvFrom:         c.EnvFrom,
		Ports: []corev1.ContainerPort{{
			Name: "upstream", ContainerPort: cfg.UpstreamPort, Protocol: corev1.ProtocolTCP,
		}},
		SecurityContext: inject.RestrictedContainerSecurity(false),
	}
	if c.Resources != nil {
		server.Resources = *c.Resources
	}

	podLabels := maps.Clone(podOverrides.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, inject.LabelsFor(s))
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: maps.Clone(podOverrides.Annotations)},
		Spec: corev1.PodSpec{
			ServiceAccountName: podServiceAccount(s, n),
			// Only the sidecar gets a token (inject mounts its own projected one): the MCP server
			// has no use for API credentials.
			AutomountServiceAccountToken: ptr.To(false),
			NodeSelector:                 podOverrides.NodeSelector,
			Tolerations:                  podOverrides.Tolerations,
			Affinity:                     podOverrides.Affinity,
			ImagePullSecrets:             podOverrides.ImagePullSecrets,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{server},
		},
	}
	// deploymentFor only builds valid pods, so injection cannot skip (reserved ports are
	// rejected by the CRD's validation, and there is always one container).
	_ = inject.Into(&tmpl.ObjectMeta, &tmpl.Spec, cfg)
	// The drain time wins over any earlier value: this template is rebuilt from scratch.
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To(inject.TerminationGracePeriodSeconds(cfg))

	strategy := appsv1.RollingUpdateDeployment{
		MaxSurge:       ptr.To(intstr.FromInt32(1)),
		MaxUnavailable: ptr.To(intstr.FromInt32(0)),
	}
	if r := spec.Rollout; r != nil {
		if r.MaxSurge != nil {
			strategy.MaxSurge = r.MaxSurge
		}
		if r.MaxUnavailable != nil {
			strategy.MaxUnavailable = r.MaxUnavailable
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: objectMeta(s, n.Deployment),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(spec.Replicas, 1)),
			Selector: &metav1.LabelSelector{MatchLabels: inject.SelectorFor(s)},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &strategy},
			Template: tmpl,
		},
	}
}

// wantsPDB: a budget only protects something when there is more than one replica.
func wantsPDB(s *mcpv1alpha1.MCPServer) bool {
	return s.Spec.Mode != mcpv1alpha1.WorkloadExternal && ptr.Deref(s.Spec.Replicas, 1) > 1
}

func pdbFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objectMeta(s, n.PodDisruptionBudget),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: inject.SelectorFor(s)},
		},
	}
}
