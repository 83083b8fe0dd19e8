package controllers

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// Pure builders of the objects an MCPServer reconciles into, as server-side apply
// configurations: they hold only the fields we own, and the controller applies them as they are.

// ownerReference makes the server the controller owner of a child, so the child is
// garbage-collected with it.
func ownerReference(s *mcpv1alpha1.MCPServer) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(mcpv1alpha1.GroupVersion.String()).
		WithKind("MCPServer").
		WithName(s.Name).
		WithUID(s.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// catalogConfigMapFor stores an encoded catalog and names its revision in an annotation.
func catalogConfigMapFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, encoded []byte) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(n.CatalogConfigMap, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithAnnotations(map[string]string{catalog.RevisionAnnotation: catalog.Revision(encoded)}).
		WithData(map[string]string{catalog.Key: string(encoded)})
}

// statusConfigMapFor is the ConfigMap the sidecars report into. The controller applies only its
// metadata; each sidecar owns its own key (field manager switchboard-sidecar-<pod>).
func statusConfigMapFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(n.StatusConfigMap, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s))
}

// sessionSecretFor is the Secret holding the key that signs the sidecars' 2025-era session ids:
// 32 random bytes, hex-encoded. Every replica's sidecar gets it through its environment
// (secretKeyRef, read by the kubelet), so a session minted by one replica works on all.
func sessionSecretFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.Secret {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	// Created once, never applied (see ensureSessionSecret), so it is a typed object.
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      n.SessionSecret,
			Namespace: n.Namespace,
			Labels:    inject.LabelsFor(s),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         mcpv1alpha1.GroupVersion.String(),
				Kind:               "MCPServer",
				Name:               s.Name,
				UID:                s.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{inject.SessionKeySecretKey: []byte(hex.EncodeToString(key))},
	}
}

func serviceAccountFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1ac.ServiceAccountApplyConfiguration {
	return corev1ac.ServiceAccount(n.ServiceAccount, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s))
}

// podServiceAccount is the ServiceAccount a Managed server's pods run as.
func podServiceAccount(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) string {
	if s.Spec.Pod != nil && s.Spec.Pod.ServiceAccountName != "" {
		return s.Spec.Pod.ServiceAccountName
	}
	return n.ServiceAccount
}

// sidecarServiceAccount is the ServiceAccount the sidecar Role is bound to. Managed: the pods'
// own, whose token only the sidecar gets (automounting is off, the token is projected into the
// sidecar). External: always <server>-sidecar, never the workload's: the kubelet automounts the
// workload's token into the MCP server container too, so that token must not carry the sidecar's
// rights (the Secrets of resources, the status ConfigMap). The sidecar gets <server>-sidecar's
// token from sidecarTokenSecretFor, mounted into the sidecar container only.
func sidecarServiceAccount(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) string {
	if s.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		return n.ServiceAccount
	}
	return podServiceAccount(s, n)
}

// sidecarTokenSecretFor asks the cluster's token controller for a token of <server>-sidecar
// (External servers). A projected token volume can only hold the pod's own ServiceAccount's
// token, and the pod's ServiceAccount is the user's; the alternative, minting tokens with the
// TokenRequest API, would need serviceaccounts/token create, i.e. the power to mint a token for
// any ServiceAccount the manager can see, and a refresh loop. This Secret needs nothing beyond
// creating Secrets; the token controller fills in token, ca.crt and namespace and deletes the
// Secret with the ServiceAccount. Its token does not expire: it is valid while the Secret
// exists, and grants only the sidecar Role.
func sidecarTokenSecretFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.SidecarTokenSecret,
			Namespace:   n.Namespace,
			Labels:      inject.LabelsFor(s),
			Annotations: map[string]string{corev1.ServiceAccountNameKey: n.ServiceAccount},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcpv1alpha1.GroupVersion.String(), Kind: "MCPServer", Name: s.Name, UID: s.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
}

// roleFor grants the sidecar exactly what it reads and writes, by name: the catalog ConfigMap
// and the ConfigMaps its resources reference (read), the status ConfigMap (read and patch its
// report), and the Secrets its resources reference (read). A rule with empty resourceNames
// would grant every object of the kind, so such rules are left out. list and watch by name need
// a metadata.name field selector.
func roleFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, c *catalog.Catalog) *rbacv1ac.RoleApplyConfiguration {
	configMaps, secrets := c.ContentRefs()
	read := []string{"get", "list", "watch"}
	role := rbacv1ac.Role(n.Role, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithRules(
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs(read...).
				WithResourceNames(append([]string{n.CatalogConfigMap}, configMaps...)...),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("configmaps").WithVerbs("get", "patch").
				WithResourceNames(n.StatusConfigMap),
		)
	if len(secrets) > 0 {
		role.WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("secrets").WithVerbs(read...).WithResourceNames(secrets...))
	}
	return role
}

func roleBindingFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(n.RoleBinding, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("Role").WithName(n.Role)).
		WithSubjects(rbacv1ac.Subject().WithKind(rbacv1.ServiceAccountKind).WithName(sidecarServiceAccount(s, n)).WithNamespace(n.Namespace))
}

// serviceFor sends port 80 to the sidecar, never to the MCP server container.
func serviceFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(n.Service, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(inject.ServiceSelectorFor(s)).
			WithPorts(corev1ac.ServicePort().
				WithName("mcp").WithPort(80).WithProtocol(corev1.ProtocolTCP).WithAppProtocol("http").
				WithTargetPort(intstr.FromInt32(mcpv1alpha1.SidecarMCPPort))))
}

// urlFor is the in-cluster MCP endpoint.
func urlFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) string {
	return fmt.Sprintf("http://%s.%s.svc/mcp", n.Service, s.Namespace)
}

// deploymentFor runs the MCP server container behind the injected native sidecar. The pod
// template depends only on the server spec and the sidecar settings, never on the catalog, so
// catalog edits do not roll pods.
//
// A pod template the sidecar cannot be injected into is an error, never a Deployment without
// the sidecar: the Service and the NetworkPolicy would send clients to the bare MCP server. The
// CRD's validation rejects what causes a skip (mcp.switchboard.dev/* pod annotations, reserved
// ports), so this catches objects stored before those rules, or rules bypassed.
func deploymentFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames, cfg inject.Config) (*appsv1ac.DeploymentApplyConfiguration, error) {
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
		SecurityContext: serverSecurity(c),
	}
	if c.Resources != nil {
		server.Resources = *c.Resources
	}

	podLabels := maps.Clone(podOverrides.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	maps.Copy(podLabels, inject.PodLabelsFor(s))
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
	if reason := inject.Into(&tmpl.ObjectMeta, &tmpl.Spec, cfg); reason != "" {
		return nil, fmt.Errorf("the sidecar cannot be injected into the pod template (%s): %s", reason, skipFix(reason))
	}
	// The drain time wins over any earlier value: this template is rebuilt from scratch.
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To(inject.TerminationGracePeriodSeconds(cfg))

	strategy := appsv1ac.RollingUpdateDeployment().
		WithMaxSurge(intstr.FromInt32(1)).
		WithMaxUnavailable(intstr.FromInt32(0))
	if r := spec.Rollout; r != nil {
		if r.MaxSurge != nil {
			strategy.WithMaxSurge(*r.MaxSurge)
		}
		if r.MaxUnavailable != nil {
			strategy.WithMaxUnavailable(*r.MaxUnavailable)
		}
	}
	return appsv1ac.Deployment(n.Deployment, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(ptr.Deref(spec.Replicas, 1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(inject.SelectorFor(s))).
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).WithRollingUpdate(strategy)).
			WithTemplate(podTemplateApplyConfiguration(tmpl))), nil
}

// skipFix says which MCPServer field made injection skip and how to fix it.
func skipFix(reason inject.SkipReason) string {
	switch reason {
	case inject.SkipOptedOut:
		return "spec.pod.annotations sets " + inject.InjectAnnotation + `="false"; remove it: a Managed server always runs behind the sidecar`
	case inject.SkipPortConflict:
		return "spec.container.port is 8800 or 8801, which the sidecar uses; serve MCP on another port"
	case inject.SkipStdioCommandMissing:
		return "spec.container.transport is Stdio without spec.container.command; set the command"
	}
	return "remove the mcp.switchboard.dev/* keys from spec.pod.annotations"
}

// podTemplateApplyConfiguration turns the pod template, which the MCPServer's typed pod fields
// and inject.Into (a pure function over typed pods, shared with the webhook) build, into its
// apply configuration. Apply configurations mirror the API types' JSON with every field
// optional, so a JSON round trip converts it exactly, leaving out what the template leaves empty
// (such as the zero creationTimestamp a typed object would send as null).
func podTemplateApplyConfiguration(tmpl corev1.PodTemplateSpec) *corev1ac.PodTemplateSpecApplyConfiguration {
	b, err := json.Marshal(tmpl)
	if err != nil {
		panic(fmt.Sprintf("encoding a pod template: %v", err)) // typed API objects always encode
	}
	ac := corev1ac.PodTemplateSpec()
	if err := json.Unmarshal(b, ac); err != nil {
		panic(fmt.Sprintf("decoding a pod template into its apply configuration: %v", err))
	}
	return ac
}

// wantsPDB: a budget only protects something when there is more than one replica.
func wantsPDB(s *mcpv1alpha1.MCPServer) bool {
	return s.Spec.Mode != mcpv1alpha1.WorkloadExternal && ptr.Deref(s.Spec.Replicas, 1) > 1
}

func pdbFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	return policyv1ac.PodDisruptionBudget(n.PodDisruptionBudget, n.Namespace).
		WithLabels(inject.LabelsFor(s)).
		WithOwnerReferences(ownerReference(s)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithMaxUnavailable(intstr.FromInt32(1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(inject.SelectorFor(s))))
}

// serverSecurity is the MCP server container's restricted security context, with the user id
// spec.container.runAsUser names.
func serverSecurity(c mcpv1alpha1.ServerContainer) *corev1.SecurityContext {
	sc := inject.RestrictedContainerSecurity(false)
	sc.RunAsUser = c.RunAsUser
	return sc
}
