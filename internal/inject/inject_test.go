package inject

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cfg := ConfigFor(testServer(), "switchboard-sidecar:v0.1.0")
	cfg.DrainToken = "test-drain-token"
	return cfg
}

func TestArgs(t *testing.T) {
	got := strings.Join(Args(testConfig()), " ")
	want := "--upstream=http://127.0.0.1:9000/rpc --listen=:8800 --admin-listen=:8801 " +
		"--allowed-hosts=weather,weather:80,weather.tools,weather.tools:80,weather.tools.svc,weather.tools.svc:80," +
		"weather.tools.svc.cluster.local,weather.tools.svc.cluster.local:80,mcp.example.com " +
		"--allowed-origins=https://app.example.com --max-listen-streams=10000 --keepalive=15s " +
		"--catalog-configmap=tools/weather-catalog --report-configmap=tools/weather-catalog-status " +
		"--pod-name=$(POD_NAME) --drain-delay=5s --drain-jitter=2.5s --drain-budget=30s --legacy-clients=Serve"
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
	if h := c.Lifecycle.PreStop.HTTPGet; h == nil || h.Path != DrainPath || h.Port.IntVal != mcpv1alpha1.SidecarAdminPort {
		t.Fatalf("preStop must GET the drain endpoint: %+v", c.Lifecycle.PreStop)
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

// TestDrainTokenReinjected: injecting again with another drain token replaces the hook the
// first injection gave the server container (a stale token would make its preStop fail), and
// the sidecar gets the new token too.
func TestDrainTokenReinjected(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "server"}}}}
	cfg := testConfig()
	once, _ := Pod(pod, cfg)
	cfg.DrainToken = "rotated"
	twice, _ := Pod(once, cfg)
	hdr := twice.Spec.Containers[0].Lifecycle.PreStop.HTTPGet.HTTPHeaders
	if len(hdr) != 1 || hdr[0].Value != "Bearer rotated" {
		t.Fatalf("server preStop headers %v", hdr)
	}
	sc := twice.Spec.InitContainers[0]
	if h := sc.Lifecycle.PreStop.HTTPGet.HTTPHeaders; len(h) != 1 || h[0].Value != "Bearer rotated" {
		t.Fatalf("sidecar preStop headers %v", h)
	}
	if e := sc.Env[len(sc.Env)-1]; e.Name != DrainTokenEnv || e.Value != "rotated" {
		t.Fatalf("sidecar env %v", sc.Env)
	}
	// Without a token (the Secret not created yet) the hooks send no header.
	cfg.DrainToken = ""
	bare, _ := Pod(pod, cfg)
	if h := bare.Spec.Containers[0].Lifecycle.PreStop.HTTPGet.HTTPHeaders; len(h) != 0 {
		t.Fatalf("headers without a token: %v", h)
	}
}
