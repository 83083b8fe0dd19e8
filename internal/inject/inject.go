// Package inject adds the Switchboard sidecar to a pod. It is a pure function over typed
// Kubernetes objects, used by the MCPServer controller for its Deployment's pod template and by
// the injection webhook for pods of External servers.
//
// The sidecar is a native sidecar (an init container with restartPolicy Always): it starts
// before the MCP server container and stops after it. Injection is idempotent: the sidecar is
// upserted by name, and the settings it was built from are recorded in one annotation.
package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// Sidecar command-line flags: the controller writes them, and cmd/sidecar registers them by these
// names (TestInjectedFlagsAreRegistered checks that every one is).
const (
	FlagUpstream         = "upstream"
	FlagListen           = "listen"
	FlagAdminListen      = "admin-listen"
	FlagAllowedHosts     = "allowed-hosts"
	FlagAllowedOrigins   = "allowed-origins"
	FlagMaxListenStreams = "max-listen-streams"
	FlagKeepalive        = "keepalive"
	FlagCatalogConfigMap = "catalog-configmap"
	FlagReportConfigMap  = "report-configmap"
	FlagPodName          = "pod-name"
	FlagDrainDelay       = "drain-delay"
	FlagDrainJitter      = "drain-jitter"
	FlagDrainBudget      = "drain-budget"
	FlagDrainTokenFile   = "drain-token-file"
	FlagLegacyClients    = "legacy-clients"
	FlagOTLPEndpoint     = "otlp-endpoint"
	FlagTraceSampling    = "trace-sampling-per-million"
	FlagMaxProcs         = "max-procs"
)

// SessionKeyEnv carries the key that signs 2025-era session ids, from the server's session
// Secret (the same name as sidecar/legacy.SessionKeyEnv), and SessionKeySecretKey is its key there.
const (
	SessionKeyEnv       = "SWITCHBOARD_SESSION_KEY"
	SessionKeySecretKey = "key"
)

// Names and paths inside the pod.
const (
	// ContainerName is the sidecar's init container name.
	ContainerName = "switchboard-sidecar"
	// InjectedAnnotation records Hash: the version and the hash of the rendered injection.
	InjectedAnnotation = "mcp.switchboard.dev/injected"
	// InjectedLabel ("true") marks a pod the sidecar was injected into; only injection sets it
	// (the webhook removes it from pods it skips). An External server's Service selects by it,
	// so a labelled pod without the sidecar never gets Service traffic.
	InjectedLabel = "mcp.switchboard.dev/injected"
	// InjectAnnotation set to "false" on a pod opts it out of injection.
	InjectAnnotation = "mcp.switchboard.dev/inject"
	// PodNameEnv is the downward-API variable holding the pod name.
	PodNameEnv = "POD_NAME"
	// DrainTokenEnv is the sidecar's variable for a drain token outside Kubernetes (the sidecar
	// package reads the same name). Injection never sets it: the pod spec is readable with view.
	DrainTokenEnv = "SWITCHBOARD_DRAIN_TOKEN"
	// DrainPath on the admin port starts the drain (with the drain token) and answers when it is
	// done; the sidecar's exec preStop (`/sidecar drain`) calls it on loopback.
	DrainPath = "/drain"
	// DrainWaitPath on the admin port waits for the drain without starting one: the MCP server
	// container's preStop, which holds no token, so that container is stopped only once the
	// calls in flight are done.
	DrainWaitPath = "/drain/wait"
	HealthzPath   = "/healthz"
	ReadyzPath    = "/readyz"
	// SidecarBinary is the sidecar image's program (Dockerfile).
	SidecarBinary = "/sidecar"
	// AuditVolume is the emptyDir the sidecar writes its audit file into, mounted at
	// mcpv1alpha1.AuditDir in the sidecar container only (Config.AuditFile).
	AuditVolume = "switchboard-audit"
	// auditVolumeLimit bounds it: the kubelet evicts the pod past it, so rotate or ship the
	// file before (docs/audit.md).
	auditVolumeLimit = "256Mi"
	// DrainTokenVolume is the Secret <server>-drain-token, mounted into the sidecar container
	// only, at drainTokenDir; DrainTokenSecretKey is the token's key in it.
	DrainTokenVolume    = "switchboard-drain-token"
	DrainTokenSecretKey = "token"
	drainTokenDir       = "/var/run/switchboard/drain"
	// TokenVolume holds the sidecar's own API credentials, mounted into the sidecar only, where
	// the kubelet would automount them. Managed: the pod's ServiceAccount (<server>-sidecar by
	// default) token, projected; Managed pods turn off automounting, so the MCP server holds
	// none. External: the pod's ServiceAccount is the user's, automounted into the server
	// container too, so the sidecar instead gets the token Secret of the dedicated
	// ServiceAccount <server>-sidecar, which the sidecar Role is bound to (Config.APITokenSecret).
	TokenVolume = "switchboard-sidecar-token"
	tokenPath   = "/var/run/secrets/kubernetes.io/serviceaccount"
	// tokenExpirationSeconds matches the kubelet's default for automounted tokens.
	tokenExpirationSeconds = 3607
	// sidecarUID is the distroless "nonroot" user the sidecar image runs as.
	sidecarUID = 65532
	// version bumps when the shape of the injected container changes or Hash is computed
	// differently (v2: drain token from a mounted Secret, exec preStop, /drain/wait, the
	// injected label; v3: Hash covers the rendered injection instead of Config).
	version = "v3"
)

// Defaults of the drain and stream settings, equal to the API's defaults.
const (
	DefaultDrainDelaySeconds  = 5
	DefaultDrainJitterMillis  = 1000
	DefaultDrainBudgetSeconds = 30
	DefaultMaxListenStreams   = 10000
	DefaultKeepaliveSeconds   = 15
	// DefaultTraceSamplingPerMillion is spec.sidecar.tracing.samplingPerMillion's default (1%).
	DefaultTraceSamplingPerMillion = 10000
	terminationMarginSeconds       = 5
	defaultUpstreamPort            = 8080
	defaultUpstreamPath            = "/mcp"
	sidecarStartupPeriod           = 1
	sidecarStartupFailures         = 60
	sidecarReadinessPeriod         = 2
	sidecarReadinessFailures       = 2
	sidecarDefaultCPURequest       = "10m"
	sidecarDefaultMemRequest       = "32Mi"
	sidecarDefaultMemoryLimits     = "256Mi"
)

// Config is everything the sidecar container is built from. It never holds the catalog
// revision: catalog changes reach the sidecar live and must not change the pod template. It is
// an input only: Hash covers what injection renders from it, never the struct itself, so
// renaming, reordering or adding a field rolls no pod unless the rendered pod changes.
type Config struct {
	Image            string
	UpstreamPort     int32
	UpstreamPath     string
	AllowedHosts     []string
	AllowedOrigins   []string
	MaxListenStreams int32
	KeepaliveSeconds int32
	// CatalogConfigMap and ReportConfigMap are "<namespace>/<name>".
	CatalogConfigMap   string
	ReportConfigMap    string
	DrainDelaySeconds  int32
	DrainJitterMillis  int32
	DrainBudgetSeconds int32
	Resources          *corev1.ResourceRequirements
	// ServerContainer names the MCP server container that gets the draining preStop hook;
	// empty means the first container.
	ServerContainer string
	// LegacyClients is Serve or Reject (spec.sidecar.legacyClients).
	LegacyClients string
	// SessionSecret holds the key that signs 2025-era session ids (none when empty).
	SessionSecret string
	// Stdio runs the server container's command behind the stdio bridge
	// (spec.container.transport: Stdio, or the pod's TransportAnnotation).
	Stdio bool
	// DrainTokenSecret names the Secret holding the server's drain token (<server>-drain-token):
	// mounted into the sidecar container only; the sidecar accepts /drain only with it, and its
	// exec preStop reads it from there. The pod spec names the Secret, never the token.
	DrainTokenSecret string
	// APITokenSecret, for External servers, names the token Secret of the dedicated
	// ServiceAccount <server>-sidecar (<server>-sidecar-token): the sidecar's API credentials.
	// Empty (Managed): the pod's own ServiceAccount token, projected into the sidecar.
	APITokenSecret string
	// OTLPEndpoint turns the sidecar's traces on (spec.sidecar.tracing); TraceSamplingPerMillion
	// is their sampling.
	OTLPEndpoint            string
	TraceSamplingPerMillion int32
	// AuditFile mounts the audit volume (an emptyDir) into the sidecar container at
	// mcpv1alpha1.AuditDir: spec.audit.sink.file is set. The file's path itself reaches the
	// sidecar live, with the catalog.
	AuditFile bool
}

// ConfigFor derives the sidecar settings of an MCPServer: the controller injects it into the
// Deployment's pod template (Managed), the webhook into the pods of the user's own workload
// (External). defaultImage is the manager's --sidecar-image, used unless spec.sidecar.image
// overrides it.
func ConfigFor(s *mcpv1alpha1.MCPServer, defaultImage string) Config {
	names := NamesFor(s)
	cfg := Config{
		Image:              defaultImage,
		UpstreamPort:       defaultUpstreamPort,
		UpstreamPath:       defaultUpstreamPath,
		MaxListenStreams:   DefaultMaxListenStreams,
		KeepaliveSeconds:   DefaultKeepaliveSeconds,
		CatalogConfigMap:   names.Namespace + "/" + names.CatalogConfigMap,
		ReportConfigMap:    names.Namespace + "/" + names.StatusConfigMap,
		DrainDelaySeconds:  DefaultDrainDelaySeconds,
		DrainJitterMillis:  DefaultDrainJitterMillis,
		DrainBudgetSeconds: DefaultDrainBudgetSeconds,
		ServerContainer:    ServerContainerName,
		LegacyClients:      string(mcpv1alpha1.LegacyClientsServe),
		SessionSecret:      names.SessionSecret,
		DrainTokenSecret:   names.DrainTokenSecret,
	}
	if s.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		cfg.APITokenSecret = names.SidecarTokenSecret
	}
	if a := s.Spec.Audit; a != nil && a.Sink != nil && a.Sink.File != "" {
		cfg.AuditFile = true
	}
	// The server's imagePullPolicy is for the server's image; the sidecar's follows its tag.
	if c := s.Spec.Container; c != nil {
		if c.Port != 0 {
			cfg.UpstreamPort = c.Port
		}
		if c.Path != "" {
			cfg.UpstreamPath = c.Path
		}
		cfg.Stdio = c.Transport == mcpv1alpha1.TransportStdio
	}
	svc, ns := names.Service, names.Namespace
	for _, h := range []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"} {
		cfg.AllowedHosts = append(cfg.AllowedHosts, h, h+":80")
	}
	if sc := s.Spec.Sidecar; sc != nil {
		if sc.Image != "" {
			cfg.Image = sc.Image
		}
		cfg.MaxListenStreams = ptr.Deref(sc.MaxListenStreams, cfg.MaxListenStreams)
		cfg.KeepaliveSeconds = ptr.Deref(sc.KeepaliveSeconds, cfg.KeepaliveSeconds)
		for _, h := range sc.AllowedHosts {
			if !slices.Contains(cfg.AllowedHosts, h) {
				cfg.AllowedHosts = append(cfg.AllowedHosts, h)
			}
		}
		cfg.AllowedOrigins = slices.Clone(sc.AllowedOrigins)
		if d := sc.Drain; d != nil {
			cfg.DrainDelaySeconds = ptr.Deref(d.PropagationDelaySeconds, cfg.DrainDelaySeconds)
			cfg.DrainJitterMillis = ptr.Deref(d.JitterMilliseconds, cfg.DrainJitterMillis)
			cfg.DrainBudgetSeconds = ptr.Deref(d.BudgetSeconds, cfg.DrainBudgetSeconds)
		}
		cfg.Resources = sc.Resources
		if sc.LegacyClients != "" {
			cfg.LegacyClients = string(sc.LegacyClients)
		}
		if tr := sc.Tracing; tr != nil {
			cfg.OTLPEndpoint = tr.Endpoint
			cfg.TraceSamplingPerMillion = ptr.Deref(tr.SamplingPerMillion, DefaultTraceSamplingPerMillion)
		}
	}
	return cfg
}

// ServerContainerName is the name of the MCP server container in managed Deployments.
const ServerContainerName = "server"

// TerminationGracePeriodSeconds is the time a pod needs to drain:
//
//	propagation delay (endpoints drop the pod before streams end)
//	+ jitter, rounded up (listen streams get `complete` spread over it)
//	+ budget (in-flight requests finish)
//	+ 5 s margin (hooks returning, the sidecar's own exit).
//
// With the defaults: 5 + 1 + 30 + 5 = 41 s.
func TerminationGracePeriodSeconds(cfg Config) int64 {
	jitter := (int64(cfg.DrainJitterMillis) + 999) / 1000
	return int64(cfg.DrainDelaySeconds) + jitter + int64(cfg.DrainBudgetSeconds) + terminationMarginSeconds
}

// Args returns the sidecar's command line.
func Args(cfg Config) []string {
	flag := func(name, value string) string { return "--" + name + "=" + value }
	args := []string{
		flag(FlagUpstream, fmt.Sprintf("http://127.0.0.1:%d%s", cfg.UpstreamPort, cfg.UpstreamPath)),
		flag(FlagListen, fmt.Sprintf(":%d", mcpv1alpha1.SidecarMCPPort)),
		flag(FlagAdminListen, fmt.Sprintf(":%d", mcpv1alpha1.SidecarAdminPort)),
		flag(FlagAllowedHosts, strings.Join(cfg.AllowedHosts, ",")),
	}
	if len(cfg.AllowedOrigins) > 0 {
		args = append(args, flag(FlagAllowedOrigins, strings.Join(cfg.AllowedOrigins, ",")))
	}
	if cfg.OTLPEndpoint != "" {
		args = append(args, flag(FlagOTLPEndpoint, cfg.OTLPEndpoint),
			flag(FlagTraceSampling, strconv.Itoa(int(cfg.TraceSamplingPerMillion))))
	}
	if n := maxProcs(cfg); n > 0 {
		args = append(args, flag(FlagMaxProcs, strconv.FormatInt(n, 10)))
	}
	return append(args,
		flag(FlagMaxListenStreams, strconv.Itoa(int(cfg.MaxListenStreams))),
		flag(FlagKeepalive, seconds(int64(cfg.KeepaliveSeconds)*1000)),
		flag(FlagCatalogConfigMap, cfg.CatalogConfigMap),
		flag(FlagReportConfigMap, cfg.ReportConfigMap),
		flag(FlagPodName, "$("+PodNameEnv+")"),
		flag(FlagDrainDelay, seconds(int64(cfg.DrainDelaySeconds)*1000)),
		flag(FlagDrainJitter, seconds(int64(cfg.DrainJitterMillis))),
		flag(FlagDrainBudget, seconds(int64(cfg.DrainBudgetSeconds)*1000)),
		flag(FlagDrainTokenFile, drainTokenDir+"/"+DrainTokenSecretKey),
		flag(FlagLegacyClients, legacyClients(cfg)),
	)
}

// maxProcs is the sidecar's --max-procs for a CPU limit of two cores or more: the whole cores
// of it. Without one the sidecar serves requests on one core (its default), which costs the
// least per request (docs/performance.md); large notification fan-outs use the container's CPUs
// either way.
func maxProcs(cfg Config) int64 {
	if cfg.Resources == nil {
		return 0
	}
	q, ok := cfg.Resources.Limits[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	if n := q.MilliValue() / 1000; n >= 2 {
		return n
	}
	return 0
}

func legacyClients(cfg Config) string {
	if cfg.LegacyClients == "" {
		return string(mcpv1alpha1.LegacyClientsServe)
	}
	return cfg.LegacyClients
}

// env is the sidecar's environment: its pod name, and the session key from the server's
// session Secret (read by the kubelet: the sidecar's ServiceAccount needs no access to it).
func env(cfg Config) []corev1.EnvVar {
	e := []corev1.EnvVar{{Name: PodNameEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}
	if cfg.SessionSecret != "" {
		e = append(e, corev1.EnvVar{Name: SessionKeyEnv, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cfg.SessionSecret},
				Key:                  SessionKeySecretKey,
			}}})
	}
	return e
}

// seconds formats milliseconds as a Go duration: 15s, 1.5s, 0s.
func seconds(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() }

// sidecarDrainHook is the sidecar's preStop: `/sidecar drain` reads the drain token from the
// mounted Secret and drains the sidecar on loopback, so the token is in no hook, header or
// variable of the pod spec. (KEP-753 runs a native sidecar's preStop when the pod starts
// terminating, alongside the main containers' hooks.)
func sidecarDrainHook() *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{
		SidecarBinary, "drain",
		fmt.Sprintf("--admin=127.0.0.1:%d", mcpv1alpha1.SidecarAdminPort),
		"--token-file=" + drainTokenDir + "/" + DrainTokenSecretKey,
	}}}
}

// serverDrainHook is the MCP server container's preStop: it waits for the drain the sidecar's
// hook started (it cannot start one, and holds no token), so the server gets its TERM only once
// the calls in flight are answered.
func serverDrainHook() *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: DrainWaitPath, Port: intstr.FromInt32(mcpv1alpha1.SidecarAdminPort), Scheme: corev1.URISchemeHTTP}}
}

// isDrainHook recognises a hook injection wrote, now or before (v1: GET /drain with the token
// in a header), so re-injection replaces it while a hook of the user's own stays.
func isDrainHook(h *corev1.LifecycleHandler) bool {
	return h != nil && h.HTTPGet != nil && (h.HTTPGet.Path == DrainPath || h.HTTPGet.Path == DrainWaitPath) &&
		h.HTTPGet.Port.IntValue() == mcpv1alpha1.SidecarAdminPort
}

func probe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("admin"), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: period, FailureThreshold: failures, TimeoutSeconds: 1, SuccessThreshold: 1,
	}
}

// RestrictedContainerSecurity is the restricted Pod Security profile for one container.
func RestrictedContainerSecurity(readOnlyRoot bool) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if readOnlyRoot {
		sc.ReadOnlyRootFilesystem = ptr.To(true)
	}
	return sc
}

// Container builds the sidecar container.
func Container(cfg Config) corev1.Container {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(sidecarDefaultCPURequest),
			corev1.ResourceMemory: resource.MustParse(sidecarDefaultMemRequest),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(sidecarDefaultMemoryLimits)},
	}
	if cfg.Resources != nil {
		res = *cfg.Resources.DeepCopy()
	}
	sc := RestrictedContainerSecurity(true)
	sc.RunAsUser = ptr.To[int64](sidecarUID)
	mounts := []corev1.VolumeMount{
		{Name: TokenVolume, MountPath: tokenPath, ReadOnly: true},
		{Name: DrainTokenVolume, MountPath: drainTokenDir, ReadOnly: true},
	}
	if cfg.AuditFile {
		mounts = append(mounts, corev1.VolumeMount{Name: AuditVolume, MountPath: mcpv1alpha1.AuditDir})
	}
	return corev1.Container{
		Name:  ContainerName,
		Image: cfg.Image,
		Args:  Args(cfg),
		Env:   env(cfg),
		Ports: []corev1.ContainerPort{
			{Name: "mcp", ContainerPort: mcpv1alpha1.SidecarMCPPort, Protocol: corev1.ProtocolTCP},
			{Name: "admin", ContainerPort: mcpv1alpha1.SidecarAdminPort, Protocol: corev1.ProtocolTCP},
		},
		VolumeMounts:             mounts,
		Resources:                res,
		RestartPolicy:            ptr.To(corev1.ContainerRestartPolicyAlways),
		StartupProbe:             probe(HealthzPath, sidecarStartupPeriod, sidecarStartupFailures),
		ReadinessProbe:           probe(ReadyzPath, sidecarReadinessPeriod, sidecarReadinessFailures),
		Lifecycle:                &corev1.Lifecycle{PreStop: sidecarDrainHook()},
		SecurityContext:          sc,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}

// tokenVolume is what the kubelet would automount: a token, the cluster CA and the namespace.
// The token is the pod ServiceAccount's, bound to the pod (Managed), or the one the token
// controller keeps in the Secret cfg.APITokenSecret (External; a projected token can only be
// the pod's own ServiceAccount's).
func tokenVolume(cfg Config) corev1.Volume {
	token := corev1.VolumeProjection{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
		Path: "token", ExpirationSeconds: ptr.To[int64](tokenExpirationSeconds)}}
	if cfg.APITokenSecret != "" {
		token = corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: cfg.APITokenSecret},
			Items:                []corev1.KeyToPath{{Key: corev1.ServiceAccountTokenKey, Path: "token"}},
		}}
	}
	return corev1.Volume{Name: TokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o644),
		Sources: []corev1.VolumeProjection{
			token,
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{
				Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
			}}}},
		},
	}}}
}

// drainTokenVolume is the drain-token Secret's token, for the sidecar container. Not optional:
// a sidecar without it could not be drained by its preStop, so the pod waits for the Secret
// (the controller creates it on its first reconcile of the server).
func drainTokenVolume(cfg Config) corev1.Volume {
	return corev1.Volume{Name: DrainTokenVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  cfg.DrainTokenSecret,
		Items:       []corev1.KeyToPath{{Key: DrainTokenSecretKey, Path: DrainTokenSecretKey}},
		DefaultMode: ptr.To[int32](0o444), // the sidecar's user is not the files' owner; only its container mounts it
	}}}
}

// Hash names what injection renders for cfg, as Kubernetes' pod-template-hash (ComputeHash)
// names a rendered PodTemplateSpec: it changes exactly when the injected pod would, and never
// for a change of Config alone (a field renamed, reordered, added or defaulted elsewhere). The
// rendering is rendered(cfg), hashed as its JSON: the field names of Kubernetes API types,
// which do not change.
func Hash(cfg Config) string {
	b, err := json.Marshal(rendered(cfg))
	if err != nil {
		panic("inject: encoding a PodSpec: " + err.Error()) // a corev1.PodSpec always encodes
	}
	sum := sha256.Sum256(b)
	return version + "-" + hex.EncodeToString(sum[:8])
}

// renderedCommand stands for the MCP server container's own command in rendered: the stdio
// bridge wraps the pod's command, which is the pod's, not the injection's.
const renderedCommand = "$(COMMAND)"

// rendered is what Into adds to a pod for cfg, independent of the pod: Into applied to a pod
// spec that holds only the MCP server container (named cfg.ServerContainer, with a placeholder
// command). It holds the sidecar container, its volumes, the server container's drain hook, the
// termination grace period, and the stdio bridge when cfg.Stdio.
func rendered(cfg Config) corev1.PodSpec {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: cfg.ServerContainer, Command: []string{renderedCommand}}}}
	render(&metav1.ObjectMeta{}, &spec, cfg)
	return spec
}

// SkipReason explains why a pod was not injected. Empty means it was injected.
type SkipReason string

const (
	// SkipOptedOut means the pod has the annotation mcp.switchboard.dev/inject=false.
	SkipOptedOut SkipReason = "OptedOut"
	// SkipNoContainers means the pod has no container to put behind the sidecar.
	SkipNoContainers SkipReason = "NoContainers"
	// SkipHostNetwork means the sidecar's fixed ports would collide on the node's network.
	SkipHostNetwork SkipReason = "HostNetwork"
	// SkipPortConflict means a container already uses port 8800 or 8801.
	SkipPortConflict SkipReason = "PortConflict"
)

// Decide says whether a pod can take the sidecar.
func Decide(meta *metav1.ObjectMeta, spec *corev1.PodSpec) SkipReason {
	if meta.Annotations[InjectAnnotation] == "false" {
		return SkipOptedOut
	}
	if len(spec.Containers) == 0 {
		return SkipNoContainers
	}
	if spec.HostNetwork {
		return SkipHostNetwork
	}
	for _, c := range slices.Concat(spec.Containers, spec.InitContainers) {
		if c.Name == ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if p.ContainerPort == mcpv1alpha1.SidecarMCPPort || p.ContainerPort == mcpv1alpha1.SidecarAdminPort {
				return SkipPortConflict
			}
		}
	}
	return ""
}

// Into injects the sidecar into a pod's metadata and spec in place, and returns why it did not
// when it skips. Applying it twice gives the same result as applying it once:
//   - the sidecar init container is upserted by name, first among the init containers;
//   - the server container's preStop hook is set to the drain hook (with the current token)
//     unless the user set another;
//   - terminationGracePeriodSeconds is raised to the drain time, never lowered;
//   - InjectedAnnotation records Hash(cfg), and InjectedLabel marks the pod as injected.
func Into(meta *metav1.ObjectMeta, spec *corev1.PodSpec, cfg Config) SkipReason {
	if reason := Decide(meta, spec); reason != "" {
		return reason
	}
	if stdioWanted(meta.Annotations, cfg) {
		cfg.Stdio = true // the annotation's opt-in is part of what was injected
	}
	if reason := render(meta, spec, cfg); reason != "" {
		return reason
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[InjectedAnnotation] = Hash(cfg)
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[InjectedLabel] = "true"
	return ""
}

// render puts what cfg asks for into the pod spec, in place: Into without the checks of Decide
// and without the annotation and label that record the injection.
func render(meta *metav1.ObjectMeta, spec *corev1.PodSpec, cfg Config) SkipReason {
	server := 0
	for i, c := range spec.Containers {
		if c.Name == cfg.ServerContainer {
			server = i
		}
	}
	if stdioWanted(meta.Annotations, cfg) {
		if c := &spec.Containers[server]; len(c.Command) == 0 {
			return SkipStdioCommandMissing
		}
		intoStdio(spec, cfg, server)
	}
	sidecar := Container(cfg)
	spec.InitContainers = slices.DeleteFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == ContainerName })
	spec.InitContainers = append([]corev1.Container{sidecar}, spec.InitContainers...)

	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool {
		return v.Name == TokenVolume || v.Name == DrainTokenVolume || v.Name == AuditVolume
	})
	spec.Volumes = append(spec.Volumes, tokenVolume(cfg), drainTokenVolume(cfg))
	if cfg.AuditFile {
		limit := resource.MustParse(auditVolumeLimit)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: AuditVolume,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}})
	}

	c := &spec.Containers[server]
	if c.Lifecycle == nil {
		c.Lifecycle = &corev1.Lifecycle{}
	}
	if c.Lifecycle.PreStop == nil || isDrainHook(c.Lifecycle.PreStop) {
		c.Lifecycle.PreStop = serverDrainHook()
	}

	grace := TerminationGracePeriodSeconds(cfg)
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds < grace {
		spec.TerminationGracePeriodSeconds = ptr.To(grace)
	}
	return ""
}

// Pod returns an injected copy of pod, and the skip reason when it was left unchanged.
func Pod(pod *corev1.Pod, cfg Config) (*corev1.Pod, SkipReason) {
	out := pod.DeepCopy()
	if reason := Into(&out.ObjectMeta, &out.Spec, cfg); reason != "" {
		return pod.DeepCopy(), reason
	}
	return out, ""
}
