package controllers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func builderServer() *mcpv1alpha1.MCPServer {
	s := newServer("tools", "weather", 3)
	s.UID = "uid-1"
	return s
}

func TestDeploymentFor(t *testing.T) {
	s := builderServer()
	s.Spec.Rollout = &mcpv1alpha1.Rollout{MaxSurge: ptr.To(intstr.FromString("50%"))}
	s.Spec.Pod = &mcpv1alpha1.PodOverrides{Labels: map[string]string{"team": "maps"}, ServiceAccountName: "custom",
		NodeSelector: map[string]string{"zone": "a"}}
	s.Spec.Sidecar = &mcpv1alpha1.SidecarSpec{Drain: &mcpv1alpha1.DrainSpec{BudgetSeconds: ptr.To[int32](60)}}
	n := inject.NamesFor(s)
	cfg := inject.ConfigFor(s, "sidecar:1")
	d, err := deploymentFor(s, n, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if *d.Spec.Replicas != 3 || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "50%" || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Fatalf("replicas/strategy: %+v", d.Spec)
	}
	if d.Spec.Selector.MatchLabels[inject.LabelServer] != "weather" || len(d.Spec.Selector.MatchLabels) != 2 {
		t.Fatalf("selector: %v", d.Spec.Selector.MatchLabels)
	}
	tmpl := d.Spec.Template
	if tmpl.Labels["team"] != "maps" || tmpl.Labels[inject.LabelManagedBy] != inject.ManagedBy || *tmpl.Spec.ServiceAccountName != "custom" || tmpl.Spec.NodeSelector["zone"] != "a" {
		t.Fatalf("pod overrides: %+v", tmpl)
	}
	// Only the sidecar holds API credentials: its projected token; nothing is automounted.
	if a := tmpl.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Fatal("a Managed pod must not automount its ServiceAccount token into the MCP server container")
	}
	// 5 s delay + 1 s jitter + 60 s budget + 5 s margin.
	if *tmpl.Spec.TerminationGracePeriodSeconds != 71 {
		t.Fatalf("grace %d", *tmpl.Spec.TerminationGracePeriodSeconds)
	}
	if tmpl.Annotations[inject.InjectedAnnotation] != inject.Hash(cfg) {
		t.Fatal("the pod template records the injected sidecar settings")
	}
	if c := tmpl.Spec.Containers[0]; *c.Image != "example/weather:1" || *c.Ports[0].ContainerPort != 9000 || *c.Lifecycle.PreStop.HTTPGet.Path != inject.DrainWaitPath {
		t.Fatalf("server container: %+v", c)
	}
	if *d.OwnerReferences[0].UID != "uid-1" || !*d.OwnerReferences[0].Controller {
		t.Fatalf("owner: %+v", d.OwnerReferences)
	}
	// The same spec builds the same template; catalog contents are not an input at all.
	again, _ := deploymentFor(s, n, inject.ConfigFor(s, "sidecar:1"))
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Fatal("deploymentFor is not deterministic")
	}
	// Only fields we own are applied: no status, no zero creationTimestamp from the typed pod
	// template the injection builds on.
	for _, field := range []string{`"status"`, `"creationTimestamp"`} {
		if strings.Contains(string(a), field) {
			t.Fatalf("the Deployment's apply configuration sends %s: %s", field, a)
		}
	}
}

// TestInputOnlyChangeRollsNothing: sidecar settings that differ only in the injector's input
// (here legacyClients left to its default instead of set to it, and a trace sampling rate
// without tracing) build the same Deployment, AppliedAnnotation included: nothing is applied
// and no pod rolls.
func TestInputOnlyChangeRollsNothing(t *testing.T) {
	s := builderServer()
	n := inject.NamesFor(s)
	cfg := inject.ConfigFor(s, "sidecar:1")
	changed := cfg
	changed.LegacyClients = ""
	changed.TraceSamplingPerMillion = 5000
	a, err := deploymentFor(s, n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := deploymentFor(s, n, changed)
	if err != nil {
		t.Fatal(err)
	}
	sa, err := stampApplied(a)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := stampApplied(b)
	if err != nil {
		t.Fatal(err)
	}
	if ha, hb := sa.GetAnnotations()[AppliedAnnotation], sb.GetAnnotations()[AppliedAnnotation]; ha != hb {
		ja, _ := json.Marshal(a.Spec.Template)
		jb, _ := json.Marshal(b.Spec.Template)
		t.Fatalf("an input-only change re-applies the Deployment (%s, then %s):\n%s\n%s", ha, hb, ja, jb)
	}
}

// TestDeploymentForRefusesSkippedInjection: a pod template the sidecar cannot be injected into
// (here an MCPServer stored before the CEL rule on spec.pod.annotations, or with it bypassed) is
// an error that says what to fix, never a Deployment that serves clients without the sidecar.
func TestDeploymentForRefusesSkippedInjection(t *testing.T) {
	s := builderServer()
	s.Spec.Pod = &mcpv1alpha1.PodOverrides{Annotations: map[string]string{inject.InjectAnnotation: "false"}}
	d, err := deploymentFor(s, inject.NamesFor(s), inject.ConfigFor(s, "sidecar:1"))
	if err == nil {
		t.Fatalf("a pod template without the sidecar was built: %+v", d.Spec.Template.Spec.InitContainers)
	}
	for _, want := range []string{string(inject.SkipOptedOut), "spec.pod.annotations", inject.InjectAnnotation} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// TestExternalSidecarCredentials: an External server's sidecar Role is bound to the dedicated
// ServiceAccount <server>-sidecar, never to the workload's (whose token the kubelet also mounts
// into the MCP server container), whatever spec.pod.serviceAccountName says; the sidecar gets
// that ServiceAccount's token from a token Secret the token controller fills in. A Managed
// server's pods run as the bound ServiceAccount, with its token projected into the sidecar only.
func TestExternalSidecarCredentials(t *testing.T) {
	s := builderServer()
	s.Spec.Mode = mcpv1alpha1.WorkloadExternal
	s.Spec.Replicas, s.Spec.Container.Image = nil, ""
	s.Spec.Pod = &mcpv1alpha1.PodOverrides{ServiceAccountName: "workload"}
	n := inject.NamesFor(s)
	if sub := roleBindingFor(s, n).Subjects[0]; *sub.Name != "weather-sidecar" {
		t.Fatalf("External sidecar Role bound to %q, the workload's ServiceAccount", *sub.Name)
	}
	sec := sidecarTokenSecretFor(s, n)
	if sec.Type != corev1.SecretTypeServiceAccountToken || sec.Annotations[corev1.ServiceAccountNameKey] != "weather-sidecar" ||
		sec.Name != inject.ConfigFor(s, "x").APITokenSecret {
		t.Fatalf("token Secret: %+v", sec)
	}
	s.Spec.Mode = mcpv1alpha1.WorkloadManaged
	if sub := roleBindingFor(s, n).Subjects[0]; *sub.Name != "workload" {
		t.Fatalf("Managed sidecar Role bound to %q, not the pods' ServiceAccount", *sub.Name)
	}
}

func TestRoleFor(t *testing.T) {
	s := builderServer()
	n := inject.NamesFor(s)
	// No referenced Secrets: no secrets rule at all (empty resourceNames would mean all).
	role := roleFor(s, n, &catalog.Catalog{Resources: []catalog.Resource{
		{URI: "a://1", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "b", Key: "k"}}},
		{URI: "a://2", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "a", Key: "k"}}},
		{URI: "a://3", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "a", Key: "j"}}},
	}})
	if len(role.Rules) != 2 {
		t.Fatalf("rules: %+v", role.Rules)
	}
	for _, r := range role.Rules {
		if len(r.ResourceNames) == 0 || r.Resources[0] == "secrets" {
			t.Fatalf("rule without names or with secrets: %+v", r)
		}
	}
	if strings.Join(role.Rules[0].ResourceNames, ",") != "weather-catalog,a,b" || strings.Join(role.Rules[1].Verbs, ",") != "get,patch" {
		t.Fatalf("rules: %+v", role.Rules)
	}
}

func TestServiceFor(t *testing.T) {
	svc := serviceFor(builderServer(), inject.NamesFor(builderServer()))
	p := svc.Spec.Ports[0]
	if *p.Port != 80 || p.TargetPort.IntValue() != mcpv1alpha1.SidecarMCPPort || *p.Name != "mcp" || *p.AppProtocol != "http" {
		t.Fatalf("port: %+v", p)
	}
}

func TestPDB(t *testing.T) {
	s := builderServer()
	if !wantsPDB(s) {
		t.Fatal("3 replicas want a PDB")
	}
	s.Spec.Replicas = ptr.To[int32](1)
	if wantsPDB(s) {
		t.Fatal("1 replica wants no PDB")
	}
	s.Spec.Replicas = nil
	s.Spec.Mode = mcpv1alpha1.WorkloadExternal
	if wantsPDB(s) {
		t.Fatal("External servers get no PDB")
	}
}

func TestResolve(t *testing.T) {
	at := func(sec int) metav1.Time { return metav1.NewTime(time.Unix(int64(1_700_000_000+sec), 0)) }
	tool := func(name, exposed string, created int) mcpv1alpha1.MCPTool {
		tl := *newTool("ns", name, "s", exposed)
		tl.CreationTimestamp = at(created)
		return tl
	}
	in := items{
		Tools: []mcpv1alpha1.MCPTool{tool("young", "x", 5), tool("b-old", "x", 1), tool("a-old", "x", 1), tool("other", "y", 9)},
		Prompts: []mcpv1alpha1.MCPPrompt{*newPrompt("ns", "bad", "s", []string{"a"}, "{{a}} {{b}} {{b}}"),
			*newPrompt("ns", "good", "s", nil, "hello")},
	}
	res := resolve(in)
	v := func(name string) verdict { return res.verdicts[itemKey{reflect.TypeFor[*mcpv1alpha1.MCPTool](), name}] }
	if !v("a-old").Accepted || v("b-old").Reason != mcpv1alpha1.ReasonNameConflict || v("young").Reason != mcpv1alpha1.ReasonNameConflict ||
		!strings.Contains(v("young").Message, `"a-old"`) || !v("other").Accepted {
		t.Fatalf("verdicts: %+v", res.verdicts)
	}
	if len(res.accepted.Tools) != 2 {
		t.Fatalf("accepted: %d", len(res.accepted.Tools))
	}
	p := func(name string) verdict {
		return res.verdicts[itemKey{reflect.TypeFor[*mcpv1alpha1.MCPPrompt](), name}]
	}
	if p("bad").Reason != mcpv1alpha1.ReasonInvalidSpec || !strings.Contains(p("bad").Message, "b") || strings.Contains(p("bad").Message, "b, b") || !p("good").Accepted {
		t.Fatalf("prompt verdicts: %+v", res.verdicts)
	}
}

func TestCatalogFor(t *testing.T) {
	s := builderServer()
	s.Spec.ToolPolicy = mcpv1alpha1.ToolPolicyDeclared
	s.Spec.Caching = &mcpv1alpha1.CachingSpec{Tools: &mcpv1alpha1.CacheHint{TTLSeconds: ptr.To[int32](60), Scope: mcpv1alpha1.CacheScopePublic}}
	off := *newTool("tools", "off", "weather", "dangerous")
	off.Spec.State = mcpv1alpha1.ToolDisabled
	renamed := *newTool("tools", "renamed", "weather", "forecast")
	renamed.Spec.UpstreamName = "get_weather_forecast"
	res := *newResource("tools", "doc", "weather", "docs://a", mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: "hi"}})
	res.Spec.Caching = &mcpv1alpha1.CacheHint{TTLSeconds: ptr.To[int32](5)}
	c := catalogFor(s, items{Tools: []mcpv1alpha1.MCPTool{off, renamed}, Resources: []mcpv1alpha1.MCPResource{res}})
	if err := catalog.Validate(c); err != nil {
		t.Fatal(err)
	}
	if c.Server.ToolPolicy != "Declared" || c.Server.Caching.Tools != (catalog.CacheHint{TTLMs: 60000, CacheScope: "public"}) ||
		c.Server.Caching.Prompts != (catalog.CacheHint{TTLMs: 0, CacheScope: "private"}) {
		t.Fatalf("server: %+v", c.Server)
	}
	if c.Tools[0].Name != "dangerous" || !c.Tools[0].Disabled || c.Tools[1].UpstreamName != "get_weather_forecast" {
		t.Fatalf("tools: %+v", c.Tools)
	}
	if *c.Resources[0].Cache != (catalog.CacheHint{TTLMs: 5000, CacheScope: "private"}) || c.Resources[0].Source.Inline.Text != "hi" {
		t.Fatalf("resource: %+v", c.Resources[0])
	}
	// Metadata that is not content does not change the revision.
	renamed.ResourceVersion, renamed.Generation = "999", 7
	a, _ := catalog.Encode(c)
	b, _ := catalog.Encode(catalogFor(s, items{Tools: []mcpv1alpha1.MCPTool{renamed, off}, Resources: []mcpv1alpha1.MCPResource{res}}))
	if catalog.Revision(a) != catalog.Revision(b) {
		t.Fatal("the revision depends on more than the content")
	}
}

// TestCatalogForSecretReadIsPrivate (security review F15): the server's caching.resourceRead is
// Public and the Secret-backed MCPResource sets no caching (its CEL only checks its own): the
// compiled catalog still stamps the Secret-backed resource Private, keeping the server's TTL,
// while a ConfigMap-backed one without caching falls back to the server's Public default.
func TestCatalogForSecretReadIsPrivate(t *testing.T) {
	s := builderServer()
	s.Spec.Caching = &mcpv1alpha1.CachingSpec{ResourceRead: &mcpv1alpha1.CacheHint{TTLSeconds: ptr.To[int32](60), Scope: mcpv1alpha1.CacheScopePublic}}
	secret := *newResource("ns", "token", "weather", "secret://token", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "creds", Key: "token"}})
	cm := *newResource("ns", "doc", "weather", "docs://doc", mcpv1alpha1.ResourceSource{ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "cm", Key: "k"}})
	c := catalogFor(s, items{Resources: []mcpv1alpha1.MCPResource{secret, cm}})
	if err := catalog.Validate(c); err != nil {
		t.Fatal(err)
	}
	byURI := map[string]catalog.Resource{}
	for _, r := range c.Resources {
		byURI[r.URI] = r
	}
	if h := byURI["secret://token"].Cache; h == nil || *h != (catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePrivate}) {
		t.Errorf("Secret-backed resource hint %+v, want ttl 60000 private", h)
	}
	if h := byURI["docs://doc"].Cache; h != nil {
		t.Errorf("ConfigMap-backed resource without caching got its own hint %+v; want the server's default", h)
	}
}
