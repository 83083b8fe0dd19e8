package inject

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContainerAnnotation names the MCP server container of a pod of the user's own workload, when
// it is not the one that declares the upstream port (spec.container.port, default 8080).
const ContainerAnnotation = "mcp.switchboard.dev/container"

// Reasons FindServerContainer gives.
const (
	// SkipContainerNotFound: the annotation mcp.switchboard.dev/container names no container.
	SkipContainerNotFound SkipReason = "ContainerNotFound"
	// SkipPortNotFound: no container declares the upstream port, so which container is the MCP
	// server cannot be told.
	SkipPortNotFound SkipReason = "PortNotFound"
)

// FindServerContainer picks the MCP server container of a pod: the one ContainerAnnotation
// names, or else the first that declares the upstream port (TCP). The webhook sets
// Config.ServerContainer to it, and the controller uses it to recompute the hash a pod's
// sidecar should have.
func FindServerContainer(meta *metav1.ObjectMeta, spec *corev1.PodSpec, port int32) (string, SkipReason, string) {
	if name, ok := meta.Annotations[ContainerAnnotation]; ok {
		for _, c := range spec.Containers {
			if c.Name == name {
				return name, "", ""
			}
		}
		return "", SkipContainerNotFound, fmt.Sprintf("annotation %s names container %q, which the pod does not have", ContainerAnnotation, name)
	}
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.ContainerPort == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
				return c.Name, "", ""
			}
		}
	}
	return "", SkipPortNotFound, fmt.Sprintf(
		"no container declares containerPort %d (the MCPServer's spec.container.port); declare it on the MCP server container, "+
			"or name that container with the annotation %s", port, ContainerAnnotation)
}
