//go:build e2e

package v1alpha1_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// Every schema and CEL rule of the four CRDs is exercised here against the real API server:
// each case mutates a valid object and lists the messages the rejection must contain (none:
// the object must be accepted). Objects are created with dry-run, so cases do not interact.

type validationCase[T client.Object] struct {
	name       string
	mutate     func(T)
	wantErrors []string
}

func runValidation[T client.Object](t *testing.T, valid func() T, cases []validationCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := valid()
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			err := env.Client.Create(context.Background(), obj, client.DryRunAll)
			if len(tc.wantErrors) == 0 {
				if err != nil {
					t.Fatalf("want the object accepted, got: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a rejection containing %q, but the object was accepted", tc.wantErrors)
			}
			for _, want := range tc.wantErrors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("rejection lacks %q; got: %v", want, err)
				}
			}
		})
	}
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

func rawJSON(t *testing.T, s string) *v1.JSONSchema {
	t.Helper()
	out, err := v1.NewJSONSchema([]byte(s))
	if err != nil {
		t.Fatalf("invalid JSON object in test: %s: %v", s, err)
	}
	return out
}

func TestMCPServerValidation(t *testing.T) {
	valid := func() *v1.MCPServer {
		return &v1.MCPServer{
			ObjectMeta: meta("weather"),
			Spec:       v1.MCPServerSpec{Container: &v1.ServerContainer{Image: "acme/weather-mcp:1.2.0"}},
		}
	}
	hint := func(ttl int32, scope v1.CacheScope) *v1.CacheHint {
		return &v1.CacheHint{TTLSeconds: ptr.To(ttl), Scope: scope}
	}
	runValidation(t, valid, []validationCase[*v1.MCPServer]{
		{name: "minimal managed server"},
		{name: "everything set", mutate: func(s *v1.MCPServer) {
			s.Spec.Replicas = ptr.To[int32](3)
			s.Spec.Container.Port = 3000
			s.Spec.Container.Path = "/v1/mcp"
			s.Spec.Container.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
			s.Spec.Rollout = &v1.Rollout{MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
			s.Spec.Pod = &v1.PodOverrides{Labels: map[string]string{"team": "weather"}, NodeSelector: map[string]string{"pool": "mcp"}}
			s.Spec.Sidecar = &v1.SidecarSpec{
				MaxListenStreams: ptr.To[int32](20000), KeepaliveSeconds: ptr.To[int32](30),
				AllowedHosts:   []string{"mcp.example.com", "*.mcp.example.com:8443"},
				AllowedOrigins: []string{"https://app.example.com", "http://localhost:3000"},
				Drain:          &v1.DrainSpec{PropagationDelaySeconds: ptr.To[int32](10), JitterMilliseconds: ptr.To[int32](2000), BudgetSeconds: ptr.To[int32](60)},
			}
			s.Spec.ToolPolicy = v1.ToolPolicyDeclared
			s.Spec.Caching = &v1.CachingSpec{Tools: hint(300, v1.CacheScopePublic), ResourceRead: hint(0, v1.CacheScopePrivate)}
		}},
		{name: "external mode with port only", mutate: func(s *v1.MCPServer) {
			s.Spec.Mode = v1.WorkloadExternal
			s.Spec.Container = &v1.ServerContainer{Port: 9000}
		}},
		{name: "external mode without container", mutate: func(s *v1.MCPServer) {
			s.Spec.Mode = v1.WorkloadExternal
			s.Spec.Container = nil
		}},
		{name: "name starting with a digit", mutate: func(s *v1.MCPServer) { s.Name = "9lives" },
			wantErrors: []string{"metadata.name must be a DNS-1035 label"}},
		{name: "name of 64 characters", mutate: func(s *v1.MCPServer) { s.Name = strings.Repeat("a", 64) },
			wantErrors: []string{"metadata.name must be a DNS-1035 label"}},
		{name: "name of 63 characters", mutate: func(s *v1.MCPServer) { s.Name = strings.Repeat("a", 63) }},
		{name: "managed without container", mutate: func(s *v1.MCPServer) { s.Spec.Container = nil },
			wantErrors: []string{"spec.container.image is required when mode is Managed"}},
		{name: "managed without image", mutate: func(s *v1.MCPServer) { s.Spec.Container.Image = "" },
			wantErrors: []string{"spec.container.image is required when mode is Managed"}},
		{name: "external with image", mutate: func(s *v1.MCPServer) { s.Spec.Mode = v1.WorkloadExternal },
			wantErrors: []string{"spec.container.image must be empty when mode is External"}},
		{name: "external with replicas", mutate: func(s *v1.MCPServer) {
			s.Spec.Mode = v1.WorkloadExternal
			s.Spec.Container = nil
			s.Spec.Replicas = ptr.To[int32](2)
		}, wantErrors: []string{"spec.replicas must be empty when mode is External"}},
		{name: "unknown mode", mutate: func(s *v1.MCPServer) { s.Spec.Mode = "Hybrid" },
			wantErrors: []string{`spec.mode: Unsupported value: "Hybrid"`}},
		{name: "sidecar port", mutate: func(s *v1.MCPServer) { s.Spec.Container.Port = v1.SidecarMCPPort },
			wantErrors: []string{"port 8800 and 8801 are reserved for the Switchboard sidecar"}},
		{name: "sidecar admin port", mutate: func(s *v1.MCPServer) { s.Spec.Container.Port = v1.SidecarAdminPort },
			wantErrors: []string{"port 8800 and 8801 are reserved"}},
		{name: "port too large", mutate: func(s *v1.MCPServer) { s.Spec.Container.Port = 70000 },
			wantErrors: []string{"spec.container.port", "less than or equal to 65535"}},
		{name: "relative path", mutate: func(s *v1.MCPServer) { s.Spec.Container.Path = "mcp" },
			wantErrors: []string{"spec.container.path", "should match"}},
		{name: "stdio with command", mutate: func(s *v1.MCPServer) {
			s.Spec.Container.Transport = v1.TransportStdio
			s.Spec.Container.Command = []string{"npx", "-y", "@modelcontextprotocol/server-everything"}
		}},
		{name: "stdio without command", mutate: func(s *v1.MCPServer) { s.Spec.Container.Transport = v1.TransportStdio },
			wantErrors: []string{"spec.container.command is required when transport is Stdio"}},
		{name: "stdio with empty command", mutate: func(s *v1.MCPServer) {
			s.Spec.Container.Transport = v1.TransportStdio
			s.Spec.Container.Command = []string{}
		}, wantErrors: []string{"spec.container.command is required when transport is Stdio"}},
		{name: "stdio external (the pod's own command)", mutate: func(s *v1.MCPServer) {
			s.Spec.Mode = v1.WorkloadExternal
			s.Spec.Container = &v1.ServerContainer{Transport: v1.TransportStdio, Port: 9000}
		}},
		{name: "unknown transport", mutate: func(s *v1.MCPServer) { s.Spec.Container.Transport = "WebSocket" },
			wantErrors: []string{`spec.container.transport: Unsupported value: "WebSocket"`}},
		{name: "bad pull policy", mutate: func(s *v1.MCPServer) { s.Spec.Container.ImagePullPolicy = "Sometimes" },
			wantErrors: []string{"spec.container.imagePullPolicy: Unsupported value"}},
		{name: "negative replicas", mutate: func(s *v1.MCPServer) { s.Spec.Replicas = ptr.To[int32](-1) },
			wantErrors: []string{"spec.replicas", "greater than or equal to 0"}},
		{name: "rollout that cannot progress", mutate: func(s *v1.MCPServer) {
			s.Spec.Rollout = &v1.Rollout{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("0%"))}
		}, wantErrors: []string{"maxSurge and maxUnavailable cannot both be 0"}},
		{name: "rollout surge not a percentage", mutate: func(s *v1.MCPServer) {
			s.Spec.Rollout = &v1.Rollout{MaxSurge: ptr.To(intstr.FromString("a lot"))}
		}, wantErrors: []string{"maxSurge must be a non-negative integer or a percentage"}},
		{name: "rollout negative unavailable", mutate: func(s *v1.MCPServer) {
			s.Spec.Rollout = &v1.Rollout{MaxUnavailable: ptr.To(intstr.FromInt32(-1))}
		}, wantErrors: []string{"maxUnavailable must be a non-negative integer or a percentage"}},
		{name: "pod label in the selector's namespace", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{Labels: map[string]string{"app.kubernetes.io/name": "x"}}
		}, wantErrors: []string{"pod.labels must not set app.kubernetes.io/* or mcp.switchboard.dev/* keys"}},
		{name: "pod annotation opting out of injection", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{Annotations: map[string]string{"mcp.switchboard.dev/inject": "false"}}
		}, wantErrors: []string{"pod.annotations must not set mcp.switchboard.dev/* keys"}},
		{name: "pod annotation choosing the container", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{Annotations: map[string]string{"mcp.switchboard.dev/container": "other"}}
		}, wantErrors: []string{"pod.annotations must not set mcp.switchboard.dev/* keys"}},
		{name: "pod annotation forging the injected hash", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{Annotations: map[string]string{"mcp.switchboard.dev/injected": "v1-0"}}
		}, wantErrors: []string{"pod.annotations must not set mcp.switchboard.dev/* keys"}},
		{name: "other pod annotations", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{Annotations: map[string]string{"prometheus.io/scrape": "true", "example.com/mcp.switchboard.dev": "x"}}
		}},
		{name: "bad service account name", mutate: func(s *v1.MCPServer) {
			s.Spec.Pod = &v1.PodOverrides{ServiceAccountName: "Not_Valid"}
		}, wantErrors: []string{"spec.pod.serviceAccountName", "should match"}},
		{name: "zero listen streams", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{MaxListenStreams: ptr.To[int32](0)}
		}, wantErrors: []string{"spec.sidecar.maxListenStreams", "greater than or equal to 1"}},
		{name: "keepalive too long", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{KeepaliveSeconds: ptr.To[int32](301)}
		}, wantErrors: []string{"spec.sidecar.keepaliveSeconds", "less than or equal to 300"}},
		{name: "host with a path", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{AllowedHosts: []string{"mcp.example.com/path"}}
		}, wantErrors: []string{"spec.sidecar.allowedHosts[0]", "should match"}},
		{name: "duplicate hosts", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{AllowedHosts: []string{"a.example.com", "a.example.com"}}
		}, wantErrors: []string{"spec.sidecar.allowedHosts[1]", "Duplicate value"}},
		{name: "origin without scheme", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{AllowedOrigins: []string{"app.example.com"}}
		}, wantErrors: []string{"spec.sidecar.allowedOrigins[0]", "should match"}},
		{name: "drain delay too long", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{Drain: &v1.DrainSpec{PropagationDelaySeconds: ptr.To[int32](121)}}
		}, wantErrors: []string{"spec.sidecar.drain.propagationDelaySeconds", "less than or equal to 120"}},
		{name: "zero drain budget", mutate: func(s *v1.MCPServer) {
			s.Spec.Sidecar = &v1.SidecarSpec{Drain: &v1.DrainSpec{BudgetSeconds: ptr.To[int32](0)}}
		}, wantErrors: []string{"spec.sidecar.drain.budgetSeconds", "greater than or equal to 1"}},
		{name: "tool pinning Enforce", mutate: func(s *v1.MCPServer) { s.Spec.ToolPinning = v1.ToolPinningEnforce }},
		{name: "unknown tool pinning", mutate: func(s *v1.MCPServer) { s.Spec.ToolPinning = "Strict" },
			wantErrors: []string{`spec.toolPinning: Unsupported value: "Strict"`, `"Off", "Warn", "Enforce"`}},
		{name: "unknown tool policy", mutate: func(s *v1.MCPServer) { s.Spec.ToolPolicy = "Some" },
			wantErrors: []string{`spec.toolPolicy: Unsupported value: "Some"`}},
		{name: "ttl over a day", mutate: func(s *v1.MCPServer) {
			s.Spec.Caching = &v1.CachingSpec{Discover: hint(86401, v1.CacheScopePublic)}
		}, wantErrors: []string{"spec.caching.discover.ttlSeconds", "less than or equal to 86400"}},
		{name: "unknown cache scope", mutate: func(s *v1.MCPServer) {
			s.Spec.Caching = &v1.CachingSpec{Prompts: hint(10, "Shared")}
		}, wantErrors: []string{`spec.caching.prompts.scope: Unsupported value: "Shared"`}},
		{name: "network policy with peers", mutate: func(s *v1.MCPServer) {
			s.Spec.NetworkPolicy = &v1.NetworkPolicySpec{
				MCPFrom:   []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "agents"}}}},
				AdminFrom: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}},
			}
		}},
		{name: "network policy turned off", mutate: func(s *v1.MCPServer) {
			s.Spec.NetworkPolicy = &v1.NetworkPolicySpec{Enabled: ptr.To(false)}
		}},
		{name: "network policy off with peers", mutate: func(s *v1.MCPServer) {
			s.Spec.NetworkPolicy = &v1.NetworkPolicySpec{Enabled: ptr.To(false),
				AdminFrom: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}}}
		}, wantErrors: []string{"networkPolicy.mcpFrom and networkPolicy.adminFrom have no effect when networkPolicy.enabled is false"}},
		{name: "network policy with too many peers", mutate: func(s *v1.MCPServer) {
			s.Spec.NetworkPolicy = &v1.NetworkPolicySpec{MCPFrom: make([]networkingv1.NetworkPolicyPeer, 33)}
		}, wantErrors: []string{"spec.networkPolicy.mcpFrom", "must have at most 32 items"}},
	})
}

func TestMCPServerDefaults(t *testing.T) {
	s := &v1.MCPServer{ObjectMeta: meta("defaults"), Spec: v1.MCPServerSpec{
		Container: &v1.ServerContainer{Image: "img"},
		Sidecar:   &v1.SidecarSpec{Drain: &v1.DrainSpec{}},
		Caching:   &v1.CachingSpec{Tools: &v1.CacheHint{}},
	}}
	if err := env.Client.Create(context.Background(), s, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	got := s.Spec
	checks := []struct {
		what      string
		got, want any
	}{
		{"mode", got.Mode, v1.WorkloadManaged},
		{"toolPolicy", got.ToolPolicy, v1.ToolPolicyAll},
		{"toolPinning", got.ToolPinning, v1.ToolPinningWarn},
		{"container.port", got.Container.Port, int32(8080)},
		{"container.path", got.Container.Path, "/mcp"},
		{"sidecar.maxListenStreams", *got.Sidecar.MaxListenStreams, int32(10000)},
		{"sidecar.keepaliveSeconds", *got.Sidecar.KeepaliveSeconds, int32(15)},
		{"drain.propagationDelaySeconds", *got.Sidecar.Drain.PropagationDelaySeconds, int32(5)},
		{"drain.jitterMilliseconds", *got.Sidecar.Drain.JitterMilliseconds, int32(1000)},
		{"drain.budgetSeconds", *got.Sidecar.Drain.BudgetSeconds, int32(30)},
		{"caching.tools.ttlSeconds", *got.Caching.Tools.TTLSeconds, int32(0)},
		{"caching.tools.scope", got.Caching.Tools.Scope, v1.CacheScopePrivate},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("default %s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestMCPToolValidation(t *testing.T) {
	valid := func() *v1.MCPTool {
		return &v1.MCPTool{ObjectMeta: meta("forecast"), Spec: v1.MCPToolSpec{
			ServerRef: v1.ServerReference{Name: "weather"}, Name: "get_forecast",
		}}
	}
	runValidation(t, valid, []validationCase[*v1.MCPTool]{
		{name: "minimal tool"},
		{name: "rename with schemas and hints", mutate: func(tl *v1.MCPTool) {
			tl.Spec.Name = "weather.forecast-v2"
			tl.Spec.UpstreamName = "forecast"
			tl.Spec.Title = "Forecast"
			tl.Spec.Description = "Seven-day forecast for a city."
			tl.Spec.InputSchema = rawJSON(t, `{"type":"object","properties":{"city":{"type":"string","x-mcp-header":"City"}},"required":["city"]}`)
			tl.Spec.OutputSchema = rawJSON(t, `{"type":"object","properties":{"days":{"type":"array"}}}`)
			tl.Spec.Annotations = &v1.ToolAnnotations{ReadOnlyHint: ptr.To(true), DestructiveHint: ptr.To(false), OpenWorldHint: ptr.To(true)}
			tl.Spec.State = v1.ToolDisabled
		}},
		{name: "server reference starting with a digit", mutate: func(tl *v1.MCPTool) { tl.Spec.ServerRef.Name = "1weather" },
			wantErrors: []string{"spec.serverRef.name", "should match"}},
		{name: "name with a space", mutate: func(tl *v1.MCPTool) { tl.Spec.Name = "get forecast" },
			wantErrors: []string{"spec.name", "should match"}},
		{name: "name too long", mutate: func(tl *v1.MCPTool) { tl.Spec.Name = strings.Repeat("a", 129) },
			wantErrors: []string{"spec.name", "may not be more than 128"}},
		{name: "empty name", mutate: func(tl *v1.MCPTool) { tl.Spec.Name = "" },
			wantErrors: []string{"spec.name", "at least 1 chars long"}},
		{name: "bad upstream name", mutate: func(tl *v1.MCPTool) { tl.Spec.UpstreamName = "get/forecast" },
			wantErrors: []string{"spec.upstreamName", "should match"}},
		{name: "missing server", mutate: func(tl *v1.MCPTool) { tl.Spec.ServerRef.Name = "" },
			wantErrors: []string{"spec.serverRef.name", "at least 1 chars long"}},
		{name: "server name not a DNS label", mutate: func(tl *v1.MCPTool) { tl.Spec.ServerRef.Name = "Weather_Server" },
			wantErrors: []string{"spec.serverRef.name", "should match"}},
		{name: "input schema not an object schema", mutate: func(tl *v1.MCPTool) {
			tl.Spec.InputSchema = rawJSON(t, `{"type":"string"}`)
		}, wantErrors: []string{`spec.inputSchema.type: Unsupported value: "string": supported values: "object"`}},
		{name: "input schema without type", mutate: func(tl *v1.MCPTool) {
			tl.Spec.InputSchema = rawJSON(t, `{"properties":{}}`)
		}, wantErrors: []string{"spec.inputSchema.type: Required value"}},
		{name: "output schema not an object schema", mutate: func(tl *v1.MCPTool) {
			tl.Spec.OutputSchema = rawJSON(t, `{"type":"array"}`)
		}, wantErrors: []string{`spec.outputSchema.type: Unsupported value: "array"`}},
		{name: "read-only and destructive", mutate: func(tl *v1.MCPTool) {
			tl.Spec.Annotations = &v1.ToolAnnotations{ReadOnlyHint: ptr.To(true), DestructiveHint: ptr.To(true)}
		}, wantErrors: []string{"annotations.readOnlyHint and annotations.destructiveHint cannot both be true"}},
		{name: "unknown state", mutate: func(tl *v1.MCPTool) { tl.Spec.State = "Off" },
			wantErrors: []string{`spec.state: Unsupported value: "Off"`}},
		{name: "description too long", mutate: func(tl *v1.MCPTool) { tl.Spec.Description = strings.Repeat("x", 16385) },
			wantErrors: []string{"spec.description", "Too long"}},
		{name: "pinned", mutate: func(tl *v1.MCPTool) { tl.Spec.UpstreamDigest = "sha256:" + strings.Repeat("0a", 32) }},
		{name: "digest without its algorithm", mutate: func(tl *v1.MCPTool) { tl.Spec.UpstreamDigest = strings.Repeat("0a", 32) },
			wantErrors: []string{"spec.upstreamDigest", "upstreamDigest must be sha256: followed by 64 lowercase hex digits; copy it from the MCPTool's status.observedUpstreamDigest"}},
		{name: "digest in upper case", mutate: func(tl *v1.MCPTool) { tl.Spec.UpstreamDigest = "sha256:" + strings.Repeat("0A", 32) },
			wantErrors: []string{"upstreamDigest must be sha256: followed by 64 lowercase hex digits"}},
		{name: "digest too long", mutate: func(tl *v1.MCPTool) { tl.Spec.UpstreamDigest = "sha256:" + strings.Repeat("0a", 33) },
			wantErrors: []string{"spec.upstreamDigest", "Too long"}},
	})
}

func TestMCPToolSchemaPreserved(t *testing.T) {
	schema := `{"type":"object","properties":{"city":{"type":"string","minLength":1,"x-mcp-header":"City"}},"additionalProperties":false,"$defs":{"unit":{"enum":["C","F"]}}}`
	tl := &v1.MCPTool{ObjectMeta: meta("preserved"), Spec: v1.MCPToolSpec{
		ServerRef: v1.ServerReference{Name: "weather"}, Name: "t", InputSchema: rawJSON(t, schema),
	}}
	if err := env.Client.Create(context.Background(), tl, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	var want, got any
	_ = json.Unmarshal([]byte(schema), &want)
	gotRaw, err := json.Marshal(tl.Spec.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(gotRaw, &got); err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want)
	gotJSON, _ := json.Marshal(got)
	if string(wantJSON) != string(gotJSON) {
		t.Errorf("inputSchema was not preserved:\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if tl.Spec.State != v1.ToolEnabled {
		t.Errorf("default state = %q, want Enabled", tl.Spec.State)
	}
}

func TestMCPResourceValidation(t *testing.T) {
	valid := func() *v1.MCPResource {
		return &v1.MCPResource{ObjectMeta: meta("handbook"), Spec: v1.MCPResourceSpec{
			ServerRef: v1.ServerReference{Name: "weather"},
			URI:       "docs://handbook", Name: "handbook", MimeType: "text/markdown",
			Source: v1.ResourceSource{Inline: &v1.InlineSource{Text: "# Handbook"}},
		}}
	}
	private := func() *v1.CacheHint { return &v1.CacheHint{Scope: v1.CacheScopePrivate} }
	runValidation(t, valid, []validationCase[*v1.MCPResource]{
		{name: "inline resource"},
		{name: "configmap resource with hint", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{ConfigMapKeyRef: &v1.KeyReference{Name: "handbook", Key: "handbook.md"}}
			r.Spec.Caching = &v1.CacheHint{TTLSeconds: ptr.To[int32](600), Scope: v1.CacheScopePublic}
		}},
		{name: "secret resource, private", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "creds", Key: "token"}}
			r.Spec.Caching = private()
		}},
		{name: "secret resource without caching", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "creds", Key: "token"}}
		}},
		{name: "upstream template", mutate: func(r *v1.MCPResource) {
			r.Spec.URI = ""
			r.Spec.URITemplate = "docs://pages/{id}{?lang}"
			r.Spec.Source = v1.ResourceSource{Upstream: &v1.UpstreamSource{}}
		}},
		{name: "mime type with parameters", mutate: func(r *v1.MCPResource) { r.Spec.MimeType = "text/plain; charset=utf-8" }},
		{name: "both uri and template", mutate: func(r *v1.MCPResource) {
			r.Spec.URITemplate = "docs://pages/{id}"
			r.Spec.Source = v1.ResourceSource{Upstream: &v1.UpstreamSource{}}
		}, wantErrors: []string{"set exactly one of uri or uriTemplate"}},
		{name: "neither uri nor template", mutate: func(r *v1.MCPResource) { r.Spec.URI = "" },
			wantErrors: []string{"set exactly one of uri or uriTemplate"}},
		{name: "uri without scheme", mutate: func(r *v1.MCPResource) { r.Spec.URI = "handbook.md" },
			wantErrors: []string{"uri must be an absolute URI with a scheme"}},
		{name: "uri with a space", mutate: func(r *v1.MCPResource) { r.Spec.URI = "docs://hand book" },
			wantErrors: []string{"uri must be an absolute URI with a scheme"}},
		{name: "template without a variable", mutate: func(r *v1.MCPResource) {
			r.Spec.URI = ""
			r.Spec.URITemplate = "docs://pages"
			r.Spec.Source = v1.ResourceSource{Upstream: &v1.UpstreamSource{}}
		}, wantErrors: []string{"uriTemplate must be an absolute RFC 6570 template"}},
		{name: "template served inline", mutate: func(r *v1.MCPResource) {
			r.Spec.URI = ""
			r.Spec.URITemplate = "docs://pages/{id}"
		}, wantErrors: []string{"a uriTemplate can only be served by the upstream"}},
		{name: "two sources", mutate: func(r *v1.MCPResource) {
			r.Spec.Source.Upstream = &v1.UpstreamSource{}
		}, wantErrors: []string{"set exactly one of source.upstream, source.inline, source.configMapKeyRef or source.secretKeyRef"}},
		{name: "no source", mutate: func(r *v1.MCPResource) { r.Spec.Source = v1.ResourceSource{} },
			wantErrors: []string{"set exactly one of source.upstream"}},
		{name: "secret resource, public", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "creds", Key: "token"}}
			r.Spec.Caching = &v1.CacheHint{Scope: v1.CacheScopePublic}
		}, wantErrors: []string{"a Secret-backed resource must use caching.scope Private"}},
		// Security review F1: Switchboard's own Secrets are never served, whatever their labels.
		{name: "secret resource of a drain token", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "weather-drain-token", Key: "token"}}
		}, wantErrors: []string{"source.secretKeyRef names a Switchboard Secret"}},
		{name: "secret resource of a session key", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "other-sidecar-session", Key: "key"}}
		}, wantErrors: []string{"source.secretKeyRef names a Switchboard Secret"}},
		{name: "secret resource named like one only in the middle", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{SecretKeyRef: &v1.KeyReference{Name: "weather-drain-token-notes", Key: "token"}}
		}},
		{name: "configmap resource with a reserved Secret suffix", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{ConfigMapKeyRef: &v1.KeyReference{Name: "weather-drain-token", Key: "token"}}
		}},
		{name: "inline text too large", mutate: func(r *v1.MCPResource) {
			r.Spec.Source.Inline.Text = strings.Repeat("x", v1.MaxInlineResourceBytes+1)
		}, wantErrors: []string{"spec.source.inline.text", "Too long"}},
		{name: "mime type without subtype", mutate: func(r *v1.MCPResource) { r.Spec.MimeType = "markdown" },
			wantErrors: []string{"spec.mimeType", "should match"}},
		{name: "configmap key with a slash", mutate: func(r *v1.MCPResource) {
			r.Spec.Source = v1.ResourceSource{ConfigMapKeyRef: &v1.KeyReference{Name: "handbook", Key: "a/b"}}
		}, wantErrors: []string{"spec.source.configMapKeyRef.key", "should match"}},
		{name: "ttl over a day", mutate: func(r *v1.MCPResource) {
			r.Spec.Caching = &v1.CacheHint{TTLSeconds: ptr.To[int32](90000)}
		}, wantErrors: []string{"spec.caching.ttlSeconds", "less than or equal to 86400"}},
		{name: "missing name", mutate: func(r *v1.MCPResource) { r.Spec.Name = "" },
			wantErrors: []string{"spec.name", "at least 1 chars long"}},
	})
}

func TestMCPPromptValidation(t *testing.T) {
	valid := func() *v1.MCPPrompt {
		return &v1.MCPPrompt{ObjectMeta: meta("summarise"), Spec: v1.MCPPromptSpec{
			ServerRef: v1.ServerReference{Name: "weather"},
			Name:      "summarise_forecast",
			Arguments: []v1.PromptArgument{{Name: "city", Required: true}, {Name: "days"}},
			Messages: []v1.PromptMessage{
				{Role: "user", Text: "Summarise the {{days}}-day forecast for {{city}}."},
				{Role: "assistant", Text: "Here is the summary for {{city}}:"},
			},
		}}
	}
	runValidation(t, valid, []validationCase[*v1.MCPPrompt]{
		{name: "prompt with arguments"},
		{name: "prompt without placeholders or arguments", mutate: func(p *v1.MCPPrompt) {
			p.Spec.Arguments = nil
			p.Spec.Messages = []v1.PromptMessage{{Role: "user", Text: "Say hello."}}
		}},
		{name: "placeholder and no arguments at all", mutate: func(p *v1.MCPPrompt) { p.Spec.Arguments = nil },
			wantErrors: []string{"messages use {{placeholders}} but spec.arguments declares none"}},
		{name: "too many placeholders in a message", mutate: func(p *v1.MCPPrompt) {
			p.Spec.Messages[0].Text = strings.Repeat("{{city}} ", v1.MaxPromptPlaceholders+1)
		}, wantErrors: []string{"a message may hold at most 16 {{placeholders}}"}},
		{name: "as many placeholders as allowed", mutate: func(p *v1.MCPPrompt) {
			p.Spec.Messages[0].Text = strings.Repeat("{{city}} ", v1.MaxPromptPlaceholders)
		}},
		{name: "no messages", mutate: func(p *v1.MCPPrompt) { p.Spec.Messages = nil },
			wantErrors: []string{"spec.messages"}},
		{name: "system role", mutate: func(p *v1.MCPPrompt) { p.Spec.Messages[0].Role = "system" },
			wantErrors: []string{`spec.messages[0].role: Unsupported value: "system"`}},
		{name: "empty message", mutate: func(p *v1.MCPPrompt) { p.Spec.Messages[1].Text = "" },
			wantErrors: []string{"spec.messages[1].text", "at least 1 chars long"}},
		{name: "argument name starting with a digit", mutate: func(p *v1.MCPPrompt) {
			p.Spec.Arguments = append(p.Spec.Arguments, v1.PromptArgument{Name: "1st"})
		}, wantErrors: []string{"spec.arguments[2].name", "should match"}},
		{name: "duplicate argument", mutate: func(p *v1.MCPPrompt) {
			p.Spec.Arguments = append(p.Spec.Arguments, v1.PromptArgument{Name: "city"})
		}, wantErrors: []string{"spec.arguments[2]", "Duplicate value"}},
		{name: "bad prompt name", mutate: func(p *v1.MCPPrompt) { p.Spec.Name = "summarise forecast" },
			wantErrors: []string{"spec.name", "should match"}},
	})
}
