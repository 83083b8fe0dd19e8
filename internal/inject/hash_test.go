package inject

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// hashPod is a pod whose MCP server container is the one cfg names, with a command (for the
// stdio bridge).
func hashPod(cfg Config) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "tools"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: cfg.ServerContainer, Image: "example/weather:1", Command: []string{"weather", "serve"}},
		}},
	}
}

// injectedWithoutHash injects cfg into hashPod and returns the pod without the annotation that
// records the hash: what a change of the settings would roll.
func injectedWithoutHash(t *testing.T, cfg Config, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, reason := Pod(pod, cfg)
	if reason != "" {
		t.Fatalf("not injected: %s", reason)
	}
	delete(out.Annotations, InjectedAnnotation)
	return out
}

// TestHashIgnoresInputOnlyChanges: settings that inject the same pod have the same hash, so a
// change of the injector's input alone (a default applied in another place, a value that
// renders nothing) rolls no Deployment and marks no External pod stale.
func TestHashIgnoresInputOnlyChanges(t *testing.T) {
	defaults := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(sidecarDefaultCPURequest),
			corev1.ResourceMemory: resource.MustParse(sidecarDefaultMemRequest),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(sidecarDefaultMemoryLimits)},
	}
	for name, mutate := range map[string]func(*Config){
		"legacyClients left to its default": func(c *Config) { c.LegacyClients = "" },
		"a sampling rate without tracing":   func(c *Config) { c.TraceSamplingPerMillion = 5000 },
		"the default resources spelled out": func(c *Config) { c.Resources = defaults.DeepCopy() },
	} {
		t.Run(name, func(t *testing.T) {
			base := testConfig()
			changed := testConfig()
			mutate(&changed)
			if reflect.DeepEqual(base, changed) {
				t.Fatal("the case changes nothing")
			}
			if a, b := injectedWithoutHash(t, base, hashPod(base)), injectedWithoutHash(t, changed, hashPod(changed)); !equality.Semantic.DeepEqual(a, b) {
				t.Fatalf("the case changes the injected pod; it belongs in TestHashFollowsTheInjectedPod")
			}
			if Hash(base) != Hash(changed) {
				t.Errorf("the same injected pod has two hashes: %s and %s", Hash(base), Hash(changed))
			}
		})
	}
}

// mutateField changes one field of Config to another value of its type. A new field of a kind
// it does not know fails the test, so every field is covered.
func mutateField(t *testing.T, f reflect.Value, name string) {
	t.Helper()
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int32:
		f.SetInt(f.Int() + 1)
	case reflect.Bool:
		f.SetBool(!f.Bool())
	case reflect.Slice:
		f.Set(reflect.Append(f, reflect.ValueOf("extra.example.com")))
	case reflect.Pointer:
		if f.Type() != reflect.TypeFor[*corev1.ResourceRequirements]() {
			t.Fatalf("Config.%s: no mutation for %s; add one", name, f.Type())
		}
		if f.IsNil() {
			f.Set(reflect.ValueOf(&corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}))
		} else {
			f.Set(reflect.Zero(f.Type()))
		}
	default:
		t.Fatalf("Config.%s: no mutation for kind %s; add one", name, f.Kind())
	}
}

// TestHashFollowsTheInjectedPod changes each field of Config in turn, from two starting points
// (default settings, and tracing, stdio and resources on): the hash changes exactly when the
// injected pod does. A field that renders nothing in a state changes no hash there.
func TestHashFollowsTheInjectedPod(t *testing.T) {
	full := testServer()
	full.Spec.Container.Transport = mcpv1alpha1.TransportStdio
	full.Spec.Sidecar.Tracing = &mcpv1alpha1.TracingSpec{Endpoint: "http://otel.observability:4318/v1/traces"}
	full.Spec.Sidecar.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	rolled, kept := 0, 0
	for start, base := range map[string]Config{"defaults": testConfig(), "full": ConfigFor(full, "switchboard-sidecar:v0.1.0")} {
		typ := reflect.TypeFor[Config]()
		for i := range typ.NumField() {
			name := typ.Field(i).Name
			changed := base
			changed.AllowedHosts, changed.AllowedOrigins = append([]string(nil), base.AllowedHosts...), append([]string(nil), base.AllowedOrigins...)
			mutateField(t, reflect.ValueOf(&changed).Elem().Field(i), name)
			podChanged := !equality.Semantic.DeepEqual(injectedWithoutHash(t, base, hashPod(base)), injectedWithoutHash(t, changed, hashPod(changed)))
			hashChanged := Hash(base) != Hash(changed)
			if podChanged != hashChanged {
				t.Errorf("%s, Config.%s changed: injected pod changed %v, hash changed %v", start, name, podChanged, hashChanged)
			}
			if podChanged {
				rolled++
			} else {
				kept++
			}
		}
	}
	// Both outcomes occur, so the comparison above is not vacuous.
	if rolled == 0 || kept == 0 {
		t.Fatalf("%d changes changed the pod, %d did not; want some of each", rolled, kept)
	}
}
