package sidecar

import (
	"encoding/json"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

func raws(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func keys(es []entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.key)
	}
	return out
}

func memberOf(t *testing.T, raw json.RawMessage, name string) string {
	t.Helper()
	m := decodeObject(raw)
	if m == nil {
		t.Fatalf("not an object: %s", raw)
	}
	return string(m[name])
}

func boolPtr(b bool) *bool { return &b }

var upTools = raws(
	`{"name":"get_forecast","description":"upstream forecast","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}`,
	`{"name":"get_alerts","description":"alerts","inputSchema":{"type":"object"}}`,
	`{"name":"convert_temperature","description":"convert","inputSchema":{"type":"object"}}`,
)

func testCatalog(policy string, tools ...catalog.Tool) *catalog.Catalog {
	c := *emptyCatalog
	c.Server.Name, c.Server.Namespace, c.Server.ToolPolicy = "weather", "default", policy
	c.Tools = tools
	return &c
}

func TestMergeTools(t *testing.T) {
	tests := []struct {
		name        string
		cat         *catalog.Catalog
		up          []json.RawMessage
		want        []string
		wantMissing []string
		check       func(t *testing.T, got []entry)
	}{{
		name: "All without declarations lists the upstream sorted",
		cat:  testCatalog(catalog.ToolPolicyAll), up: upTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"},
	}, {
		name: "override replaces description and merges annotations",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_forecast", Title: "Forecast", Description: "better", Annotations: &catalog.ToolAnnotations{ReadOnlyHint: boolPtr(true)}}),
		up:   upTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"},
		check: func(t *testing.T, got []entry) {
			f := got[2].raw
			if memberOf(t, f, "description") != `"better"` || memberOf(t, f, "title") != `"Forecast"` {
				t.Errorf("override not applied: %s", f)
			}
			if a := memberOf(t, f, "annotations"); a != `{"destructiveHint":false,"readOnlyHint":true}` {
				t.Errorf("annotations = %s", a)
			}
			if memberOf(t, f, "inputSchema") != `{"type":"object"}` {
				t.Errorf("upstream schema lost: %s", f)
			}
		},
	}, {
		name: "rename hides the upstream name and lists the new one",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "celsius_to_fahrenheit", UpstreamName: "convert_temperature", InputSchema: json.RawMessage(`{"type":"object","required":["celsius"]}`)}),
		up:   upTools,
		want: []string{"celsius_to_fahrenheit", "get_alerts", "get_forecast"},
		check: func(t *testing.T, got []entry) {
			if s := memberOf(t, got[0].raw, "inputSchema"); s != `{"type":"object","required":["celsius"]}` {
				t.Errorf("schema = %s", s)
			}
		},
	}, {
		name: "disabled tools are hidden",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", Disabled: true}),
		up:   upTools,
		want: []string{"convert_temperature", "get_forecast"},
	}, {
		name: "Declared lists only declared tools",
		cat:  testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast"}, catalog.Tool{Name: "c2f", UpstreamName: "convert_temperature"}),
		up:   upTools,
		want: []string{"c2f", "get_forecast"},
	}, {
		name: "a declared tool missing upstream is not listed and is reported",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "ghost"}, catalog.Tool{Name: "off", Disabled: true}),
		up:   upTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"}, wantMissing: []string{"ghost"},
	}, {
		name: "unknown upstream list reports nothing missing",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "ghost"}),
		up:   nil,
		want: []string{},
	}, {
		name: "a declared name shadows an undeclared upstream tool of that name",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", UpstreamName: "get_forecast"}),
		up:   upTools,
		want: []string{"convert_temperature", "get_alerts"},
		check: func(t *testing.T, got []entry) {
			if memberOf(t, got[1].raw, "description") != `"upstream forecast"` {
				t.Errorf("get_alerts should be the renamed forecast: %s", got[1].raw)
			}
		},
	}, {
		name: "one upstream tool under two names",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "a", UpstreamName: "get_alerts"}, catalog.Tool{Name: "b", UpstreamName: "get_alerts"}),
		up:   upTools,
		want: []string{"a", "b", "convert_temperature", "get_forecast"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing := mergeTools(tt.cat, tt.up)
			if !slices.Equal(keys(got), tt.want) {
				t.Errorf("tools = %v, want %v", keys(got), tt.want)
			}
			if !slices.Equal(missing, tt.wantMissing) {
				t.Errorf("missing = %v, want %v", missing, tt.wantMissing)
			}
			for _, e := range got {
				if n := memberOf(t, e.raw, "name"); n != `"`+e.key+`"` {
					t.Errorf("entry %s has name %s", e.key, n)
				}
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

func TestRouteTool(t *testing.T) {
	all := testCatalog(catalog.ToolPolicyAll,
		catalog.Tool{Name: "celsius_to_fahrenheit", UpstreamName: "convert_temperature"},
		catalog.Tool{Name: "get_alerts", Disabled: true},
		catalog.Tool{Name: "get_forecast", Description: "x"})
	declared := testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast"})
	tests := []struct {
		cat      *catalog.Catalog
		name     string
		upstream string
		ok       bool
	}{
		{all, "celsius_to_fahrenheit", "convert_temperature", true},
		{all, "convert_temperature", "", false}, // renamed away
		{all, "get_alerts", "get_alerts", false},
		{all, "get_forecast", "get_forecast", true},
		{all, "undeclared", "undeclared", true},
		{declared, "get_forecast", "get_forecast", true},
		{declared, "get_alerts", "get_alerts", false},
	}
	for _, tt := range tests {
		up, _, ok := routeTool(tt.cat, tt.name)
		if ok != tt.ok || (ok && up != tt.upstream) {
			t.Errorf("%s routeTool(%q) = %q, %v; want %q, %v", tt.cat.Server.ToolPolicy, tt.name, up, ok, tt.upstream, tt.ok)
		}
	}
}

func TestMergeResources(t *testing.T) {
	c := testCatalog(catalog.ToolPolicyDeclared)
	c.Resources = []catalog.Resource{
		{URI: "docs://handbook", Name: "handbook", MimeType: "text/markdown", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "cm", Key: "k"}}},
		{URI: "weather://stations", Name: "stations", Title: "Stations", Source: catalog.Source{Upstream: true}},
		{URI: "inline://x", Name: "x", Source: catalog.Source{Inline: &catalog.Inline{Text: "hi"}}},
		{URITemplate: "weather://station/{id}", Name: "station", Description: "one station", Source: catalog.Source{Upstream: true}},
	}
	up := raws(`{"uri":"weather://stations","name":"st","size":10}`, `{"uri":"inline://x","name":"upstream-x"}`, `{"uri":"a://other","name":"other"}`)
	got := mergeResources(c, up, "uri")
	if want := []string{"a://other", "docs://handbook", "inline://x", "weather://stations"}; !slices.Equal(keys(got), want) {
		t.Fatalf("resources = %v, want %v", keys(got), want)
	}
	if n := memberOf(t, got[2].raw, "name"); n != `"x"` {
		t.Errorf("sidecar-served resource must replace the upstream's: %s", got[2].raw)
	}
	if s := got[3].raw; memberOf(t, s, "title") != `"Stations"` || memberOf(t, s, "size") != "10" || memberOf(t, s, "name") != `"stations"` {
		t.Errorf("declared upstream resource = %s", s)
	}
	tpl := mergeResources(c, raws(`{"uriTemplate":"a://{x}","name":"a"}`), "uriTemplate")
	if want := []string{"a://{x}", "weather://station/{id}"}; !slices.Equal(keys(tpl), want) {
		t.Errorf("templates = %v, want %v", keys(tpl), want)
	}
}

func TestMergePromptsAndRender(t *testing.T) {
	c := testCatalog(catalog.ToolPolicyAll)
	c.Prompts = []catalog.Prompt{{Name: "trip_brief", Description: "d",
		Arguments: []catalog.PromptArgument{{Name: "city", Required: true}, {Name: "days"}},
		Messages:  []catalog.PromptMessage{{Role: "user", Text: "Go to {{city}} for {{days}} days; {{city}}!"}}}}
	got := mergePrompts(c, raws(`{"name":"trip_brief","description":"upstream"}`, `{"name":"a_prompt"}`))
	if want := []string{"a_prompt", "trip_brief"}; !slices.Equal(keys(got), want) {
		t.Fatalf("prompts = %v", keys(got))
	}
	if memberOf(t, got[1].raw, "description") != `"d"` {
		t.Errorf("declared prompt must shadow the upstream's: %s", got[1].raw)
	}
	tests := []struct {
		args    map[string]string
		want    string
		wantErr string
	}{
		{map[string]string{"city": "Oslo", "days": "3"}, "Go to Oslo for 3 days; Oslo!", ""},
		{map[string]string{"city": "Oslo"}, "Go to Oslo for  days; Oslo!", ""},
		{map[string]string{"days": "3"}, "", `missing required argument "city"`},
		{map[string]string{"city": "Oslo", "x": "1"}, "", `has no argument "x"`},
	}
	for _, tt := range tests {
		out, e := renderPrompt(&c.Prompts[0], tt.args)
		if tt.wantErr != "" {
			if e == nil || e.Code != wire.CodeInvalidParams || !strings.Contains(e.Message, tt.wantErr) {
				t.Errorf("render(%v) error = %v, want -32602 %q", tt.args, e, tt.wantErr)
			}
			continue
		}
		var r struct {
			ResultType string
			Messages   []struct {
				Role    string
				Content struct{ Type, Text string }
			}
		}
		if e != nil || json.Unmarshal(out, &r) != nil || r.ResultType != "complete" || r.Messages[0].Content.Text != tt.want || r.Messages[0].Role != "user" {
			t.Errorf("render(%v) = %s, %v; want text %q", tt.args, out, e, tt.want)
		}
	}
}

func TestPagination(t *testing.T) {
	var list []entry
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		list = append(list, entry{k, json.RawMessage(`{}`)})
	}
	var got []string
	cursor := ""
	for range 10 {
		off, ok := parseCursor("tools/list", cursor)
		if !ok {
			t.Fatalf("own cursor %q refused", cursor)
		}
		items, next, more := page(list, off, 2)
		got = append(got, keys(items)...)
		if !more {
			break
		}
		cursor = mintCursor("tools/list", next)
	}
	if !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("pages = %v", got)
	}
	for _, bad := range []string{"x", mintCursor("prompts/list", 2), "c2IxfHRvb2xzL2xpc3R8LTE", "c2IxfHRvb2xzL2xpc3R8MDE"} {
		if _, ok := parseCursor("tools/list", bad); ok {
			t.Errorf("cursor %q accepted", bad)
		}
	}
	if items, _, more := page(list, 9, 2); len(items) != 0 || more {
		t.Errorf("offset past the end = %v, %v", items, more)
	}
}

func TestHints(t *testing.T) {
	o := NewOverlay(OverlayOptions{})
	if ttl, scope := o.hints("tools/list", nil); ttl != 0 || scope != "private" {
		t.Errorf("before a catalog: %d %s", ttl, scope)
	}
	c := testCatalog(catalog.ToolPolicyAll)
	c.Server.Caching.Discover = catalog.CacheHint{TTLMs: 3600000, CacheScope: "public"}
	c.Server.Caching.Tools = catalog.CacheHint{TTLMs: 300000, CacheScope: "public"}
	c.Server.Caching.ResourceRead = catalog.CacheHint{TTLMs: 5, CacheScope: "private"}
	c.Resources = []catalog.Resource{
		{URI: "docs://h", Name: "h", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 600000, CacheScope: "public"}},
		{URITemplate: "weather://station/{id}", Name: "station", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 60000, CacheScope: "public"}},
		{URITemplate: "files://{+path}", Name: "files", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 7000, CacheScope: "private"}},
		{URITemplate: "logs://{day}", Name: "logs", Source: catalog.Source{Upstream: true}}, // no hint of its own
	}
	data, err := catalog.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(data, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, params string
		ttl            int64
		scope          string
	}{
		{"server/discover", `{}`, 3600000, "public"},
		{"tools/list", `{}`, 300000, "public"},
		{"prompts/list", `{}`, 0, "private"},
		{"resources/read", `{"uri":"docs://h"}`, 600000, "public"},
		{"resources/read", `{"uri":"docs://other"}`, 5, "private"},
		// Reads of URIs a declared template matches get that template's
		// hint; the template syntax is RFC 6570's, as the go-sdk matches it.
		{"resources/read", `{"uri":"weather://station/KSEA"}`, 60000, "public"},
		{"resources/read", `{"uri":"weather://station/KSEA/history"}`, 5, "private"}, // {id} does not span "/"
		{"resources/read", `{"uri":"files://etc/app/config.yaml"}`, 7000, "private"}, // {+path} does
		{"resources/read", `{"uri":"logs://2026-11-29"}`, 5, "private"},              // a template without a hint: the default
	}
	for _, tt := range tests {
		if ttl, scope := o.hints(tt.method, []byte(tt.params)); ttl != tt.ttl || scope != tt.scope {
			t.Errorf("hints(%s %s) = %d %s, want %d %s", tt.method, tt.params, ttl, scope, tt.ttl, tt.scope)
		}
	}
}

// recorder is a Publisher that remembers what it was told.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) Publish(k Kind, uri string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, kindMethod[k]+" "+uri)
	return 1
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got = nil
	slices.Sort(g)
	return g
}

type mapContents map[string]string

func (m mapContents) Content(secret bool, name, key string) ([]byte, bool) {
	v, ok := m[name+"/"+key]
	return []byte(v), ok
}
func (mapContents) SetRefs(_, _ []string) {}

func TestOverlayDiff(t *testing.T) {
	rec := &recorder{}
	contents := mapContents{"cm/k": "v1"}
	o := NewOverlay(OverlayOptions{Hub: rec, Contents: contents})
	o.upLists = map[string][]json.RawMessage{"tools/list": upTools, "prompts/list": {}, "resources/list": raws(`{"uri":"up://a","name":"a"}`), "resources/templates/list": {}}
	base := testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", Disabled: true, Description: "one"})
	base.Resources = []catalog.Resource{{URI: "docs://h", Name: "h", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "cm", Key: "k"}}}}
	apply := func(mut func(c *catalog.Catalog)) {
		t.Helper()
		c := *base
		c.Tools = slices.Clone(base.Tools)
		c.Resources = slices.Clone(base.Resources)
		mut(&c)
		data, err := catalog.Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Apply(data, ""); err != nil {
			t.Fatal(err)
		}
	}
	step := func(upURIs ...string) []string {
		next := o.compute()
		o.publishDiff(o.last, next, upURIs, 0)
		o.last = next
		return rec.take()
	}
	apply(func(*catalog.Catalog) {})
	o.last = o.compute()
	tests := []struct {
		name   string
		change func()
		upURIs []string
		want   []string
	}{
		{"nothing changed", func() {}, nil, nil},
		{"a disabled tool's description", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Description = "two" })
		}, nil, nil},
		{"enabling a tool", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Disabled = false })
		}, nil, []string{notifToolsListChanged + " "}},
		{"a prompt and a tool at once", func() {
			apply(func(c *catalog.Catalog) {
				c.Prompts = []catalog.Prompt{{Name: "p", Messages: []catalog.PromptMessage{{Role: "user", Text: "x"}}}}
			})
		}, nil, []string{notifPromptsListChanged + " ", notifToolsListChanged + " "}},
		{"ConfigMap content", func() { contents["cm/k"] = "v2" }, nil, []string{notifResourcesUpdated + " docs://h"}},
		{"upstream update of an upstream URI passes, of a sidecar URI is dropped", func() {}, []string{"up://a", "docs://h"},
			[]string{notifResourcesUpdated + " up://a"}},
		{"upstream tool change that is hidden", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Disabled = true })
			rec.take()
			step()
			o.upLists["tools/list"] = raws(`{"name":"get_alerts","description":"changed"}`, string(upTools[0]), string(upTools[2]))
		}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.change()
			if got := step(tt.upURIs...); !slices.Equal(got, tt.want) {
				t.Errorf("published %q, want %q", got, tt.want)
			}
		})
	}
}

func TestApplyRejectsAndKeepsServing(t *testing.T) {
	var reports []catalog.Report
	o := NewOverlay(OverlayOptions{Report: func(r catalog.Report) { reports = append(reports, r) }})
	good, _ := catalog.Encode(testCatalog(catalog.ToolPolicyDeclared))
	if err := o.Apply(good, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := o.Apply([]byte(`{"schemaVersion":1,"server":{},"bogus":true}`), "r2"); err == nil {
		t.Fatal("a bad catalog was applied")
	}
	c, rev := o.Catalog()
	if rev != "r1" || c.Server.ToolPolicy != catalog.ToolPolicyDeclared {
		t.Errorf("serving %s %s after a rejection", rev, c.Server.ToolPolicy)
	}
	want := []catalog.Report{{Revision: "r1"}, {Revision: "r1", RejectedRevision: "r2", Reason: reports[1].Reason}}
	if !slices.EqualFunc(reports, want, catalog.Report.Equal) || !strings.Contains(reports[1].Reason, "bogus") {
		t.Errorf("reports = %+v", reports)
	}
}
