package inject

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/golden"
)

func testServer() *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: "weather", Namespace: "tools"},
		Spec: mcpv1alpha1.MCPServerSpec{
			Container: &mcpv1alpha1.ServerContainer{Image: "example/weather:1", Port: 9000, Path: "/rpc"},
			Sidecar: &mcpv1alpha1.SidecarSpec{
				AllowedHosts:   []string{"mcp.example.com"},
				AllowedOrigins: []string{"https://app.example.com"},
				Drain:          &mcpv1alpha1.DrainSpec{JitterMilliseconds: ptr.To[int32](2500)},
			},
		},
	}
}

func testConfig() Config {
	return ConfigFor(testServer(), "switchboard-sidecar:v0.1.0")
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args(testConfig()), " ")
	want := "--upstream=http://127.0.0.1:9000/rpc --listen=:8800 --admin-listen=:8801 " +
		"--allowed-hosts=weather,weather:80,weather.tools,weather.tools:80,weather.tools.svc,weather.tools.svc:80," +
		"weather.tools.svc.cluster.local,weather.tools.svc.cluster.local:80,mcp.example.com " +
		"--allowed-origins=https://app.example.com --max-listen-streams=10000 --keepalive=15s " +
		"--catalog-configmap=tools/weather-catalog --report-configmap=tools/weather-catalog-status " +
		"--pod-name=$(POD_NAME) --drain-delay=5s --drain-jitter=2.5s --drain-budget=30s " +
		"--drain-token-file=/var/run/switchboard/drain/token --legacy-clients=Serve"
	if got != want {
		t.Fatalf("args\n got: %s\nwant: %s", got, want)
	}
}

// TestArgsTracing: spec.sidecar.tracing becomes the sidecar's OTLP flags (sampling defaulted to
// 1%); without it there are none.
func TestArgsTracing(t *testing.T) {
	s := testServer()
	s.Spec.Sidecar.Tracing = &mcpv1alpha1.TracingSpec{Endpoint: "http://otel.observability:4318/v1/traces"}
	got := strings.Join(Args(ConfigFor(s, "x")), " ")
	if !strings.Contains(got, " --otlp-endpoint=http://otel.observability:4318/v1/traces --trace-sampling-per-million=10000 ") {
		t.Errorf("args lack the tracing flags: %s", got)
	}
	s.Spec.Sidecar.Tracing.SamplingPerMillion = ptr.To[int32](1000000)
	if got := strings.Join(Args(ConfigFor(s, "x")), " "); !strings.Contains(got, "--trace-sampling-per-million=1000000") {
		t.Errorf("args: %s", got)
	}
	if got := strings.Join(Args(testConfig()), " "); strings.Contains(got, "otlp") {
		t.Errorf("tracing is off by default: %s", got)
	}
}

// A CPU limit of two cores or more lets the sidecar serve requests on that many (whole cores);
// below that, or without a limit, the flag is absent and the sidecar's default (one) applies.
func TestArgsMaxProcs(t *testing.T) {
	for limit, want := range map[string]string{"": "", "500m": "", "1": "", "1999m": "", "2": "--max-procs=2", "3500m": "--max-procs=3"} {
		s := testServer()
		if limit != "" {
			s.Spec.Sidecar.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)}}
		}
		got := strings.Join(Args(ConfigFor(s, "x")), " ")
		if want == "" && strings.Contains(got, "max-procs") || want != "" && !strings.Contains(got, " "+want+" ") {
			t.Errorf("CPU limit %q: args %s, want %q", limit, got, want)
		}
	}
}

func TestTerminationGracePeriod(t *testing.T) {
	// 5 s delay + ceil(2.5 s) jitter + 30 s budget + 5 s margin.
	if got := TerminationGracePeriodSeconds(testConfig()); got != 43 {
		t.Fatalf("got %d, want 43", got)
	}
	cfg := testConfig()
	cfg.DrainJitterMillis = 0
	if got := TerminationGracePeriodSeconds(cfg); got != 40 {
		t.Fatalf("got %d, want 40", got)
	}
}

func TestContainer(t *testing.T) {
	c := Container(testConfig())
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatal("the sidecar must be a native sidecar (restartPolicy Always)")
	}
	if c.StartupProbe == nil || c.ReadinessProbe == nil || c.StartupProbe.HTTPGet.Port.StrVal != "admin" {
		t.Fatal("startup and readiness probes on the admin port are required")
	}
	if h := c.Lifecycle.PreStop.Exec; h == nil || h.Command[0] != SidecarBinary || h.Command[1] != "drain" {
		t.Fatalf("preStop must run the drain command: %+v", c.Lifecycle.PreStop)
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Fatalf("not restricted: %+v", sc)
	}
}

func TestDecide(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*corev1.Pod)
		want   SkipReason
	}{
		"injectable":    {func(*corev1.Pod) {}, ""},
		"opted out":     {func(p *corev1.Pod) { p.Annotations = map[string]string{InjectAnnotation: "false"} }, SkipOptedOut},
		"no containers": {func(p *corev1.Pod) { p.Spec.Containers = nil }, SkipNoContainers},
		"host network":  {func(p *corev1.Pod) { p.Spec.HostNetwork = true }, SkipHostNetwork},
		"port conflict": {func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8801}} }, SkipPortConflict},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "x"}}}}
			tc.mutate(p)
			out, got := Pod(p, testConfig())
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if got != "" && !reflect.DeepEqual(out, p) {
				t.Fatal("a skipped pod must be returned unchanged")
			}
		})
	}
}

// TestGolden injects every testdata/inject/<case>.yaml and compares with <case>.injected.yaml.
// The same pods go through the webhook in internal/webhook (<case>.admitted.yaml). Refresh with:
//
//	go test ./internal/inject -run TestGolden -update
func TestGolden(t *testing.T) {
	cases := golden.Inputs(t, "testdata/inject")
	for _, in := range cases {
		t.Run(filepath.Base(in), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			var pod corev1.Pod
			if err := yaml.UnmarshalStrict(raw, &pod); err != nil {
				t.Fatal(err)
			}
			once, _ := Pod(&pod, testConfig())
			twice, _ := Pod(once, testConfig())
			if !reflect.DeepEqual(once, twice) {
				t.Fatal("injection is not idempotent: inject(inject(p)) != inject(p)")
			}
			got, err := yaml.Marshal(once)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, strings.TrimSuffix(in, ".yaml")+".injected.yaml", got)
		})
	}
}

func TestReinjectWithNewSettingsReplacesTheSidecar(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "x"}}}}
	first, _ := Pod(p, testConfig())
	cfg := testConfig()
	cfg.Image = "switchboard-sidecar:v0.2.0"
	second, _ := Pod(first, cfg)
	if len(second.Spec.InitContainers) != 1 || second.Spec.InitContainers[0].Image != cfg.Image {
		t.Fatalf("want one sidecar with the new image: %+v", second.Spec.InitContainers)
	}
	if first.Annotations[InjectedAnnotation] == second.Annotations[InjectedAnnotation] {
		t.Fatal("the injected annotation must change with the settings")
	}
}

// TestServerContainerHoldsNoSecrets: the injected pod spec carries no secret, and the MCP
// server container (untrusted: a rug-pulled image) gets neither the drain token nor the
// sidecar's API credentials. The drain token is the Secret <server>-drain-token mounted into
// the sidecar only, read by its exec preStop; the server container's preStop only waits for the
// drain (GET /drain/wait, which cannot start one). The sidecar's API token is its own: the
// pod's ServiceAccount token projected into the sidecar only (Managed pods turn automounting
// off), or, in External pods, whose ServiceAccount is the user's and is automounted into the
// server container, the token Secret of the dedicated ServiceAccount <server>-sidecar.
func TestServerContainerHoldsNoSecrets(t *testing.T) {
	external := testServer()
	external.Spec.Mode = mcpv1alpha1.WorkloadExternal
	external.Spec.Container.Image = ""
	for name, cfg := range map[string]Config{"managed": testConfig(), "external": ConfigFor(external, "switchboard-sidecar:v0.1.0")} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "server", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 9000}}},
				{Name: "helper", Image: "y"},
			}}}
			out, reason := Pod(pod, cfg)
			if reason != "" {
				t.Fatal(reason)
			}
			raw, _ := yaml.Marshal(out)
			for _, secret := range []string{"Bearer", DrainTokenEnv, "test-drain-token"} {
				if strings.Contains(string(raw), secret) {
					t.Errorf("the pod spec, readable with view, holds %q:\n%s", secret, raw)
				}
			}
			vols := map[string]corev1.Volume{}
			for _, v := range out.Spec.Volumes {
				vols[v.Name] = v
			}
			if v := vols[DrainTokenVolume]; v.Secret == nil || v.Secret.SecretName != "weather-drain-token" {
				t.Fatalf("drain token volume: %+v", v)
			}
			api := vols[TokenVolume]
			if api.Projected == nil {
				t.Fatalf("API token volume: %+v", api)
			}
			for _, src := range api.Projected.Sources {
				switch {
				case name == "managed" && src.Secret != nil:
					t.Errorf("a Managed sidecar's token is the pod's own ServiceAccount's: %+v", src)
				case name == "external" && src.ServiceAccountToken != nil:
					t.Errorf("an External pod's ServiceAccount is the user's, also held by the server container: %+v", src)
				case name == "external" && src.Secret != nil && src.Secret.Name != "weather-sidecar-token":
					t.Errorf("External sidecar token from %q", src.Secret.Name)
				}
			}
			sidecar := out.Spec.InitContainers[0]
			mounted := map[string]bool{}
			for _, m := range sidecar.VolumeMounts {
				mounted[m.Name] = true
			}
			if !mounted[DrainTokenVolume] || !mounted[TokenVolume] {
				t.Fatalf("sidecar mounts: %+v", sidecar.VolumeMounts)
			}
			if h := sidecar.Lifecycle.PreStop; h.Exec == nil || strings.Join(h.Exec.Command[:2], " ") != SidecarBinary+" drain" {
				t.Fatalf("sidecar preStop: %+v", h)
			}
			for _, c := range out.Spec.Containers {
				for _, m := range c.VolumeMounts {
					if m.Name == DrainTokenVolume || m.Name == TokenVolume {
						t.Errorf("container %s mounts %s", c.Name, m.Name)
					}
				}
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
						t.Errorf("container %s gets Secret %s", c.Name, e.ValueFrom.SecretKeyRef.Name)
					}
				}
			}
			h := out.Spec.Containers[0].Lifecycle.PreStop.HTTPGet
			if h == nil || h.Path != DrainWaitPath || len(h.HTTPHeaders) != 0 {
				t.Fatalf("server preStop: %+v", out.Spec.Containers[0].Lifecycle.PreStop)
			}
		})
	}
}

// TestDrainHookReinjected: a pod injected by an earlier version (httpGet /drain with the token
// in a header) gets the current hooks when injected again.
func TestDrainHookReinjected(t *testing.T) {
	old := &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/drain", Port: intstr.FromInt32(mcpv1alpha1.SidecarAdminPort),
		HTTPHeaders: []corev1.HTTPHeader{{Name: "Authorization", Value: "Bearer old"}}}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Lifecycle: &corev1.Lifecycle{PreStop: old}}}}}
	out, _ := Pod(pod, testConfig())
	if h := out.Spec.Containers[0].Lifecycle.PreStop.HTTPGet; h == nil || h.Path != DrainWaitPath || len(h.HTTPHeaders) != 0 {
		t.Fatalf("server preStop: %+v", out.Spec.Containers[0].Lifecycle.PreStop)
	}
	// A hook of the user's own stays.
	own := &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/stop"}}}
	pod.Spec.Containers[0].Lifecycle.PreStop = own
	out, _ = Pod(pod, testConfig())
	if !reflect.DeepEqual(out.Spec.Containers[0].Lifecycle.PreStop, own) {
		t.Fatalf("the user's preStop was replaced: %+v", out.Spec.Containers[0].Lifecycle.PreStop)
	}
}

// TestServiceSelectsInjectedPodsOnly: an External server's Service selects only pods the
// webhook injected (label InjectedLabel, which only a successful injection sets): a labelled
// pod the webhook skipped (e.g. PortConflict: its own container serves 8800) gets no Service
// traffic. The NetworkPolicy still covers every labelled pod.
func TestServiceSelectsInjectedPodsOnly(t *testing.T) {
	s := testServer()
	s.Spec.Mode = mcpv1alpha1.WorkloadExternal
	sel := labels.SelectorFromSet(ServiceSelectorFor(s))
	opted := map[string]string{LabelServer: s.Name}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: opted}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server"}}}}
	injected, _ := Pod(pod, ConfigFor(s, "x"))
	if !sel.Matches(labels.Set(injected.Labels)) {
		t.Fatalf("the Service (%s) does not select an injected pod %v", sel, injected.Labels)
	}
	conflict := pod.DeepCopy()
	conflict.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: mcpv1alpha1.SidecarMCPPort}}
	skipped, reason := Pod(conflict, ConfigFor(s, "x"))
	if reason != SkipPortConflict || sel.Matches(labels.Set(skipped.Labels)) {
		t.Fatalf("the Service (%s) selects a pod the webhook skipped (%s): %v", sel, reason, skipped.Labels)
	}
	if !labels.SelectorFromSet(SelectorFor(s)).Matches(labels.Set(skipped.Labels)) {
		t.Fatal("the NetworkPolicy must still cover every opted-in pod")
	}
}

// TestAuditFileVolume: a file sink mounts the audit emptyDir into the sidecar only; turning it
// off takes the volume away again; stdout needs none.
func TestAuditFileVolume(t *testing.T) {
	s := testServer()
	s.Spec.Audit = &mcpv1alpha1.AuditSpec{Sink: &mcpv1alpha1.AuditSink{File: mcpv1alpha1.AuditDir + "/audit.jsonl"}}
	cfg := ConfigFor(s, "switchboard-sidecar:v0.1.0")
	if !cfg.AuditFile {
		t.Fatal("a file sink must ask for the audit volume")
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server", Image: "x"}}}}
	on, _ := Pod(p, cfg)
	twice, _ := Pod(on, cfg)
	if !reflect.DeepEqual(on, twice) {
		t.Fatal("not idempotent")
	}
	mounted := func(c corev1.Container) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == AuditVolume && m.MountPath == mcpv1alpha1.AuditDir && !m.ReadOnly
		})
	}
	hasVolume := func(p *corev1.Pod) bool {
		return slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == AuditVolume && v.EmptyDir != nil })
	}
	if !mounted(on.Spec.InitContainers[0]) || !hasVolume(on) || mounted(on.Spec.Containers[0]) {
		t.Fatalf("want the audit volume mounted into the sidecar only: %+v", on.Spec)
	}
	s.Spec.Audit.Sink = nil
	off, _ := Pod(on, ConfigFor(s, "switchboard-sidecar:v0.1.0"))
	if mounted(off.Spec.InitContainers[0]) || hasVolume(off) {
		t.Fatalf("stdout needs no audit volume: %+v", off.Spec)
	}
	if on.Annotations[InjectedAnnotation] == off.Annotations[InjectedAnnotation] {
		t.Fatal("the injected annotation must change with the audit volume")
	}
}
