package main_test

// 2025-era clients through a real sidecar process in front of go-sdk v1.8.0's
// everything-server: the catalog holds for them exactly as for 2026-07-28
// clients.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// declaredCatalog: policy Declared; simple_text is test_simple_text renamed,
// with its own description; test_image_content is declared but disabled;
// one declared prompt and one inline resource.
func declaredCatalog(t *testing.T) []byte {
	t.Helper()
	h := catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "local", Name: "everything", ToolPolicy: catalog.ToolPolicyDeclared,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools: []catalog.Tool{
			{Name: "simple_text", UpstreamName: "test_simple_text", Description: "Declared description."},
			{Name: "test_image_content", Disabled: true},
		},
		Prompts: []catalog.Prompt{{Name: "declared_prompt", Description: "Declared.",
			Arguments: []catalog.PromptArgument{{Name: "who", Required: true}},
			Messages:  []catalog.PromptMessage{{Role: "user", Text: "hello {{who}}"}}}},
		Resources: []catalog.Resource{{URI: "switchboard://declared", Name: "declared", MimeType: "text/plain",
			Source: catalog.Source{Inline: &catalog.Inline{Text: "declared content"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// legacyReq builds a 2025-era request: no _meta claim; headers as given
// (MCP-Protocol-Version, Mcp-Session-Id, Mcp-Name, …).
func legacyReq(t *testing.T, url string, id any, method, params string, hdr ...string) *http.Request {
	t.Helper()
	var body string
	if id == nil {
		body = fmt.Sprintf(`{"jsonrpc":"2.0","method":%q`, method)
	} else {
		idj, _ := json.Marshal(id)
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, idj, method)
	}
	if params != "" {
		body += `,"params":` + params
	}
	body += "}"
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

func connectLegacy(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	return cs
}

// TestLegacyClientsGetTheCatalog: go-sdk clients pinned to each 2025-era
// revision see exactly the declared tools (renamed, with the declared
// description), the declared prompt and resource, and cannot call a
// disabled, renamed-away or undeclared tool.
func TestLegacyClientsGetTheCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, declaredCatalog(t))
	e := newEnv(t, "--catalog-file", path)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(v, func(t *testing.T) {
			cs := connectLegacy(t, e.mcp, v)
			init := cs.InitializeResult()
			if init.Capabilities.Tools == nil || !init.Capabilities.Tools.ListChanged || init.Capabilities.Prompts == nil ||
				init.Capabilities.Resources == nil || !init.Capabilities.Resources.Subscribe {
				t.Errorf("initialize capabilities = %+v, want tools/prompts/resources with listChanged and subscribe", init.Capabilities)
			}
			if init.ServerInfo == nil || init.ServerInfo.Name == "" || init.ServerInfo.Name == "switchboard-sidecar" {
				t.Errorf("serverInfo = %+v, want the upstream's", init.ServerInfo)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != 1 || tools.Tools[0].Name != "simple_text" || tools.Tools[0].Description != "Declared description." {
				b, _ := json.Marshal(tools.Tools)
				t.Fatalf("tools/list = %s, want exactly simple_text with the declared description", b)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "simple_text", Arguments: map[string]any{}})
			if err != nil || res.IsError || len(res.Content) == 0 {
				t.Fatalf("calling simple_text: %v %+v", err, res)
			}
			if txt, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(txt.Text, "simple text") {
				t.Errorf("simple_text answered %+v, want test_simple_text's text", res.Content[0])
			}
			for _, name := range []string{"test_image_content", "test_simple_text", "test_audio_content"} {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
				if err == nil {
					t.Errorf("calling %s succeeded (%+v), want it refused", name, res)
				}
			}
			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil || !slices.ContainsFunc(prompts.Prompts, func(p *mcp.Prompt) bool { return p.Name == "declared_prompt" }) {
				t.Errorf("prompts/list = %+v (%v), want declared_prompt", prompts, err)
			}
			got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "declared_prompt", Arguments: map[string]string{"who": "legacy"}})
			if err != nil || len(got.Messages) != 1 || !strings.Contains(fmt.Sprint(got.Messages[0].Content), "hello legacy") {
				t.Errorf("prompts/get declared_prompt = %+v (%v)", got, err)
			}
			resources, err := cs.ListResources(ctx, nil)
			if err != nil || !slices.ContainsFunc(resources.Resources, func(r *mcp.Resource) bool { return r.URI == "switchboard://declared" }) {
				t.Errorf("resources/list = %+v (%v), want switchboard://declared", resources, err)
			}
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "switchboard://declared"})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "declared content" {
				t.Errorf("resources/read switchboard://declared = %+v (%v)", read, err)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
}

// TestLegacyRequestsCannotBypassTheCatalog sends raw 2025-era requests with
// every combination of names, headers and missing initialize: a tool the
// catalog hides is refused under every name, and never runs upstream.
func TestLegacyRequestsCannotBypassTheCatalog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, declaredCatalog(t))
	e := newEnv(t, "--catalog-file", path)
	call := func(name string) string { return `{"name":"` + name + `","arguments":{}}` }
	headerSets := map[string][]string{
		"no headers":                  nil,
		"2025-11-25":                  {"MCP-Protocol-Version", "2025-11-25"},
		"2025-06-18":                  {"MCP-Protocol-Version", "2025-06-18"},
		"2025-03-26":                  {"MCP-Protocol-Version", "2025-03-26"},
		"Mcp-Name of a visible tool":  {"MCP-Protocol-Version", "2025-11-25", "Mcp-Name", "simple_text", "Mcp-Method", "tools/call"},
		"Mcp-Name of the hidden tool": {"MCP-Protocol-Version", "2025-11-25", "Mcp-Name", "test_image_content"},
		"a session id never issued":   {"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", "made-up"},
	}
	bodies := map[string]string{
		"disabled":                 call("test_image_content"),
		"renamed away":             call("test_simple_text"),
		"undeclared":               call("test_audio_content"),
		"duplicate name":           `{"name":"simple_text","name":"test_image_content","arguments":{}}`,
		"name in another case":     `{"name":"simple_text","NAME":"test_image_content","arguments":{}}`,
		"progress token, disabled": `{"_meta":{"progressToken":1},"name":"test_image_content","arguments":{}}`,
	}
	for hname, hdr := range headerSets {
		for bname, params := range bodies {
			st, _, msg := do(t, legacyReq(t, e.mcp, 7, "tools/call", params, hdr...))
			res, _ := msg["result"].(map[string]any)
			if res != nil || (st >= 200 && st < 300 && msg["error"] == nil) {
				t.Errorf("%s, %s: HTTP %d %v, want it refused", hname, bname, st, msg)
			}
		}
	}
	// And a legacy tools/list, with or without initialize, is the catalog's.
	for hname, hdr := range headerSets {
		st, _, msg := do(t, legacyReq(t, e.mcp, 8, "tools/list", "", hdr...))
		res, _ := msg["result"].(map[string]any)
		if st == 200 && res != nil {
			tools, _ := res["tools"].([]any)
			if len(tools) != 1 || tools[0].(map[string]any)["name"] != "simple_text" {
				t.Errorf("%s: tools/list = %v, want only simple_text", hname, tools)
			}
			if _, ok := res["resultType"]; ok {
				t.Errorf("%s: a 2025-era tools/list carries resultType: %v", hname, res)
			}
		} else if st < 400 {
			t.Errorf("%s: tools/list HTTP %d %v: neither the catalog nor refused", hname, st, msg)
		}
	}
}
