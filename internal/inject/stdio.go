package inject

import (
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// The stdio bridge in a pod: an init container from the sidecar image copies the sidecar's one
// static binary into an emptyDir, which the MCP server container mounts; the server container's
// command becomes `<binary> stdio --listen 127.0.0.1:<port> --path <path> -- <command>` (its
// args are kept, so they follow the command). The binary has no dependencies, so this works in
// any image (distroless, alpine, node, python). See docs/upstreams.md.
const (
	// TransportAnnotation set to "Stdio" on a pod of the user's own workload (External mode)
	// runs its MCP server container's command behind the stdio bridge, like
	// spec.container.transport: Stdio does for every pod of the MCPServer.
	TransportAnnotation = "mcp.switchboard.dev/transport"
	// StdioInstallContainerName is the init container that copies the bridge.
	StdioInstallContainerName = "switchboard-stdio-install"
	// StdioVolume is the emptyDir that holds the bridge.
	StdioVolume = "switchboard-bin"
	// StdioBinDir is where StdioVolume is mounted, in both containers.
	StdioBinDir = "/switchboard/bin"
	// StdioBridgePath is the bridge binary inside the pod.
	StdioBridgePath = StdioBinDir + "/sidecar"

	// stdioVolumeLimit bounds the emptyDir (the binary is about 20 MiB).
	stdioVolumeLimit = "64Mi"
)

// SkipStdioCommandMissing means the pod asks for the stdio bridge but its MCP server container has
// no command, and the image's entrypoint cannot be read at admission.
const SkipStdioCommandMissing SkipReason = "StdioCommandMissing"

// CheckStdio says why a pod that asks for the stdio bridge cannot have it (empty: it can, or it
// does not ask), with a message for the Event.
func CheckStdio(meta *metav1.ObjectMeta, spec *corev1.PodSpec, cfg Config) (SkipReason, string) {
	if !stdioWanted(meta.Annotations, cfg) {
		return "", ""
	}
	for _, c := range spec.Containers {
		if c.Name == cfg.ServerContainer && len(c.Command) == 0 {
			return SkipStdioCommandMissing, fmt.Sprintf("container %q runs behind the stdio bridge (%s=Stdio, or the MCPServer's "+
				"spec.container.transport) but sets no command: the image's entrypoint cannot be read at admission; "+
				"set command (and args) to start the stdio MCP server", c.Name, TransportAnnotation)
		}
	}
	return "", ""
}

// stdioWanted reports whether the pod's server runs behind the stdio bridge.
func stdioWanted(annotations map[string]string, cfg Config) bool {
	return cfg.Stdio || annotations[TransportAnnotation] == string(mcpv1alpha1.TransportStdio)
}

// isBridged reports whether the container already runs the bridge.
func isBridged(c *corev1.Container) bool {
	return len(c.Command) > 0 && c.Command[0] == StdioBridgePath
}

// BridgeCommand is the server container's command behind the bridge.
func BridgeCommand(cfg Config, command []string) []string {
	return append([]string{StdioBridgePath, "stdio",
		"--listen", "127.0.0.1:" + strconv.Itoa(int(cfg.UpstreamPort)),
		"--path", cfg.UpstreamPath, "--"}, command...)
}

// stdioInstaller is the init container that copies the bridge into StdioVolume.
func stdioInstaller(cfg Config) corev1.Container {
	sc := RestrictedContainerSecurity(true)
	sc.RunAsUser = ptr.To[int64](sidecarUID)
	return corev1.Container{
		Name:         StdioInstallContainerName,
		Image:        cfg.Image,
		Args:         []string{"install", StdioBridgePath},
		VolumeMounts: []corev1.VolumeMount{{Name: StdioVolume, MountPath: StdioBinDir}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		SecurityContext:          sc,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// intoStdio puts the bridge into the pod (in place, idempotent): the installer right after the
// sidecar among the init containers, the volume, and the server container's command and mount.
func intoStdio(spec *corev1.PodSpec, cfg Config, server int) {
	spec.InitContainers = slices.DeleteFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == StdioInstallContainerName })
	at := 0
	for i, c := range spec.InitContainers {
		if c.Name == ContainerName {
			at = i + 1
		}
	}
	spec.InitContainers = slices.Insert(spec.InitContainers, at, stdioInstaller(cfg))

	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == StdioVolume })
	limit := resource.MustParse(stdioVolumeLimit)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: StdioVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}})

	c := &spec.Containers[server]
	if !isBridged(c) {
		c.Command = BridgeCommand(cfg, c.Command)
	}
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == StdioVolume })
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: StdioVolume, MountPath: StdioBinDir, ReadOnly: true})
}
