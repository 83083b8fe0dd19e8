package rules

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/rules/rulestest"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

func keys(es []Entry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.Key)
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

func testCatalog(policy string, tools ...catalog.Tool) *catalog.Catalog {
	return rulestest.Catalog(EmptyCatalog, policy, tools...)
}

func TestMergeTools(t *testing.T) {
	tests := []struct {
		name        string
		cat         *catalog.Catalog
		up          []json.RawMessage
		want        []string
		wantMissing []string
		check       func(t *testing.T, got []Entry)
	}{{
		name: "All without declarations lists the upstream sorted",
		cat:  testCatalog(catalog.ToolPolicyAll), up: rulestest.UpstreamTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"},
	}, {
		name: "override replaces description and merges annotations",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_forecast", Title: "Forecast", Description: "better", Annotations: &catalog.ToolAnnotations{ReadOnlyHint: boolPtr(true)}}),
		up:   rulestest.UpstreamTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"},
		check: func(t *testing.T, got []Entry) {
			f := got[2].Raw
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
		up:   rulestest.UpstreamTools,
		want: []string{"celsius_to_fahrenheit", "get_alerts", "get_forecast"},
		check: func(t *testing.T, got []Entry) {
			if s := memberOf(t, got[0].Raw, "inputSchema"); s != `{"type":"object","required":["celsius"]}` {
				t.Errorf("schema = %s", s)
			}
		},
	}, {
		name: "disabled tools are hidden",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", Disabled: true}),
		up:   rulestest.UpstreamTools,
		want: []string{"convert_temperature", "get_forecast"},
	}, {
		name: "Declared lists only declared tools",
		cat:  testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast"}, catalog.Tool{Name: "c2f", UpstreamName: "convert_temperature"}),
		up:   rulestest.UpstreamTools,
		want: []string{"c2f", "get_forecast"},
	}, {
		name: "a declared tool missing upstream is not listed and is reported",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "ghost"}, catalog.Tool{Name: "off", Disabled: true}),
		up:   rulestest.UpstreamTools,
		want: []string{"convert_temperature", "get_alerts", "get_forecast"}, wantMissing: []string{"ghost"},
	}, {
		name: "unknown upstream list reports nothing missing",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "ghost"}),
		up:   nil,
		want: []string{},
	}, {
		name: "a declared name shadows an undeclared upstream tool of that name",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", UpstreamName: "get_forecast"}),
		up:   rulestest.UpstreamTools,
		want: []string{"convert_temperature", "get_alerts"},
		check: func(t *testing.T, got []Entry) {
			if memberOf(t, got[1].Raw, "description") != `"upstream forecast"` {
				t.Errorf("get_alerts should be the renamed forecast: %s", got[1].Raw)
			}
		},
	}, {
		name: "one upstream tool under two names",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "a", UpstreamName: "get_alerts"}, catalog.Tool{Name: "b", UpstreamName: "get_alerts"}),
		up:   rulestest.UpstreamTools,
		want: []string{"a", "b", "convert_temperature", "get_forecast"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, missing := MergeTools(tt.cat, tt.up)
			if !slices.Equal(keys(got), tt.want) {
				t.Errorf("tools = %v, want %v", keys(got), tt.want)
			}
			if !slices.Equal(missing, tt.wantMissing) {
				t.Errorf("missing = %v, want %v", missing, tt.wantMissing)
			}
			for _, e := range got {
				if n := memberOf(t, e.Raw, "name"); n != `"`+e.Key+`"` {
					t.Errorf("entry %s has name %s", e.Key, n)
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
		up, _, ok := RouteTool(tt.cat, tt.name)
		if ok != tt.ok || (ok && up != tt.upstream) {
			t.Errorf("%s RouteTool(%q) = %q, %v; want %q, %v", tt.cat.Server.ToolPolicy, tt.name, up, ok, tt.upstream, tt.ok)
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
	up := rulestest.Raws(`{"uri":"weather://stations","name":"st","size":10}`, `{"uri":"inline://x","name":"upstream-x"}`, `{"uri":"a://other","name":"other"}`)
	got := MergeResources(c, up, "uri")
	if want := []string{"a://other", "docs://handbook", "inline://x", "weather://stations"}; !slices.Equal(keys(got), want) {
		t.Fatalf("resources = %v, want %v", keys(got), want)
	}
	if n := memberOf(t, got[2].Raw, "name"); n != `"x"` {
		t.Errorf("sidecar-served resource must replace the upstream's: %s", got[2].Raw)
	}
	if s := got[3].Raw; memberOf(t, s, "title") != `"Stations"` || memberOf(t, s, "size") != "10" || memberOf(t, s, "name") != `"stations"` {
		t.Errorf("declared upstream resource = %s", s)
	}
	tpl := MergeResources(c, rulestest.Raws(`{"uriTemplate":"a://{x}","name":"a"}`), "uriTemplate")
	if want := []string{"a://{x}", "weather://station/{id}"}; !slices.Equal(keys(tpl), want) {
		t.Errorf("templates = %v, want %v", keys(tpl), want)
	}
}

func TestMergePromptsAndRender(t *testing.T) {
	c := testCatalog(catalog.ToolPolicyAll)
	c.Prompts = []catalog.Prompt{{Name: "trip_brief", Description: "d",
		Arguments: []catalog.PromptArgument{{Name: "city", Required: true}, {Name: "days"}},
		Messages:  []catalog.PromptMessage{{Role: "user", Text: "Go to {{city}} for {{days}} days; {{city}}!"}}}}
	got := MergePrompts(c, rulestest.Raws(`{"name":"trip_brief","description":"upstream"}`, `{"name":"a_prompt"}`))
	if want := []string{"a_prompt", "trip_brief"}; !slices.Equal(keys(got), want) {
		t.Fatalf("prompts = %v", keys(got))
	}
	if memberOf(t, got[1].Raw, "description") != `"d"` {
		t.Errorf("declared prompt must shadow the upstream's: %s", got[1].Raw)
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
		out, e := RenderPrompt(&c.Prompts[0], tt.args)
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
	var list []Entry
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		list = append(list, Entry{k, json.RawMessage(`{}`)})
	}
	var got []string
	cursor := ""
	for range 10 {
		off, ok := ParseCursor("tools/list", cursor)
		if !ok {
			t.Fatalf("own cursor %q refused", cursor)
		}
		items, next, more := Page(list, off, 2)
		got = append(got, keys(items)...)
		if !more {
			break
		}
		cursor = MintCursor("tools/list", next)
	}
	if !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("pages = %v", got)
	}
	for _, bad := range []string{"x", MintCursor("prompts/list", 2), "c2IxfHRvb2xzL2xpc3R8LTE", "c2IxfHRvb2xzL2xpc3R8MDE"} {
		if _, ok := ParseCursor("tools/list", bad); ok {
			t.Errorf("cursor %q accepted", bad)
		}
	}
	if items, _, more := Page(list, 9, 2); len(items) != 0 || more {
		t.Errorf("offset past the end = %v, %v", items, more)
	}
}
