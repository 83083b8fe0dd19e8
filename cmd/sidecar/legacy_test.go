//go:build e2e

package main_test

// 2025-era clients through a real sidecar process in front of go-sdk v1.8.0's
// everything-server: the catalog holds for them exactly as for 2026-07-28
// clients.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
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
	return connectClient(t, mcp.NewClient(&mcp.Implementation{Name: "legacy-test", Version: "1"}, nil), url, version)
}

// connectClient connects c to url at protocol revision version (a 2025-era one, negotiated as is).
func connectClient(t *testing.T, c *mcp.Client, url, version string) *mcp.ClientSession {
	t.Helper()
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

// legacyInit runs initialize and notifications/initialized at version and
// returns the session id the sidecar minted.
func legacyInit(t *testing.T, url, version string) string {
	t.Helper()
	st, h, msg := do(t, legacyReq(t, url, "init", "initialize",
		`{"protocolVersion":"`+version+`","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"t","version":"1"}}`))
	res, _ := msg["result"].(map[string]any)
	if st != 200 || res == nil || res["protocolVersion"] != version {
		t.Fatalf("initialize %s: HTTP %d %v", version, st, msg)
	}
	sid := h.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize answered without Mcp-Session-Id")
	}
	if st, _, _ := do(t, legacyReq(t, url, nil, "notifications/initialized", "", "MCP-Protocol-Version", version, "Mcp-Session-Id", sid)); st != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d, want 202", st)
	}
	return sid
}

// lines is a 2025-era GET stream read line by line in the background.
type lines struct {
	resp *http.Response
	ch   chan string // every line; closed when the stream ends
}

func openLegacyGet(t *testing.T, url, sid, lastEventID string) *lines {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed at cleanup
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("GET answered HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	l := &lines{resp: resp, ch: make(chan string, 1024)}
	go func() {
		defer close(l.ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			l.ch <- sc.Text()
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return l
}

// until reads lines until one satisfies ok, and returns the lines read.
func (l *lines) until(t *testing.T, what string, ok func(string) bool) []string {
	t.Helper()
	var got []string
	deadline := time.After(hang)
	for {
		select {
		case s, open := <-l.ch:
			if !open {
				t.Fatalf("stream ended before %s; read %q", what, got)
			}
			got = append(got, s)
			if ok(s) {
				return got
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s; read %q", what, got)
		}
	}
}

// ended waits for the stream to end and returns the lines read meanwhile.
func (l *lines) ended(t *testing.T) []string {
	t.Helper()
	var got []string
	deadline := time.After(hang)
	for {
		select {
		case s, open := <-l.ch:
			if !open {
				return got
			}
			got = append(got, s)
		case <-deadline:
			t.Fatalf("stream did not end; read %q", got)
		}
	}
}

func isMethod(m string) func(string) bool {
	return func(s string) bool { return strings.HasPrefix(s, "data: ") && strings.Contains(s, `"method":"`+m+`"`) }
}

// TestLegacySessionsAcrossReplicas: two sidecar processes sharing one key,
// as two replicas behind a Service without session affinity: initialize on
// one, everything else on the other. A replica with another key, a forged
// id and an expired id get 404; a deleted session gets 404 where it was
// deleted.
func TestLegacySessionsAcrossReplicas(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	writeFile(t, keyFile, []byte("0123456789abcdef0123456789abcdef\n"))
	otherKey := filepath.Join(dir, "other")
	writeFile(t, otherKey, []byte("ffffffffffffffffffffffffffffffff"))
	path := filepath.Join(dir, "catalog.json")
	writeFile(t, path, declaredCatalog(t))
	a := newEnv(t, "--catalog-file", path, "--session-key-file", keyFile)
	b := &env{upAddr: a.upAddr}
	b.startSidecar(t, "--catalog-file", path, "--session-key-file", keyFile)
	c := &env{upAddr: a.upAddr}
	c.startSidecar(t, "--catalog-file", path, "--session-key-file", otherKey, "--session-ttl", "1s")

	sid := legacyInit(t, a.mcp, "2025-11-25")
	hdr := []string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid}
	st, _, msg := do(t, legacyReq(t, b.mcp, 1, "tools/list", "", hdr...))
	if tools, _ := msg["result"].(map[string]any)["tools"].([]any); st != 200 || len(tools) != 1 {
		t.Fatalf("tools/list on the other replica: HTTP %d %v", st, msg)
	}
	st, _, msg = do(t, legacyReq(t, b.mcp, 2, "tools/call", `{"name":"simple_text","arguments":{}}`, hdr...))
	if st != 200 || msg["result"] == nil {
		t.Fatalf("tools/call on the other replica: HTTP %d %v", st, msg)
	}
	get := openLegacyGet(t, b.mcp, sid, "")
	get.until(t, "the priming event", func(s string) bool { return strings.HasPrefix(s, "id: ") })

	// Not honoured by a replica of another server (another key), nor forged.
	forged := sid[:len(sid)-4] + "AAAA"
	for name, c := range map[string]struct {
		url, sid string
	}{"another key": {c.mcp, sid}, "forged": {b.mcp, forged}, "made up": {b.mcp, "s1.e30.AAAA"}} {
		st, _, msg := do(t, legacyReq(t, c.url, 3, "tools/list", "", "MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", c.sid))
		if st != http.StatusNotFound || msg["error"] == nil {
			t.Errorf("%s session id: HTTP %d %v, want 404 with a JSON-RPC error", name, st, msg)
		}
	}
	// Expired: c mints 1 s sessions.
	short := legacyInit(t, c.mcp, "2025-06-18")
	eventually.True(t, "the 1 s session id refused once expired", func() bool {
		st, _, _ := do(t, legacyReq(t, c.mcp, 4, "tools/list", "", "MCP-Protocol-Version", "2025-06-18", "Mcp-Session-Id", short))
		return st == http.StatusNotFound
	})

	// DELETE on b ends the session there: its GET stream ends, the id is refused.
	del, _ := http.NewRequest(http.MethodDelete, b.mcp, nil)
	del.Header.Set("Mcp-Session-Id", sid)
	if st, _, _ := do(t, del); st != http.StatusNoContent {
		t.Errorf("DELETE: HTTP %d, want 204", st)
	}
	get.ended(t)
	if st, _, _ := do(t, legacyReq(t, b.mcp, 5, "ping", "", hdr...)); st != http.StatusNotFound {
		t.Errorf("ping after DELETE: HTTP %d, want 404", st)
	}
}

// TestLegacyGetStream: a session's GET stream gets tools/list_changed when
// the catalog changes, resources/updated for a URI it subscribed to (and
// not after unsubscribing), and the drain ends it with a retry hint.
func TestLegacyGetStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, declaredCatalog(t))
	e := newEnv(t, "--catalog-file", path, "--drain-delay", "100ms", "--drain-jitter", "0s", "--drain-budget", "1s")
	sid := legacyInit(t, e.mcp, "2025-11-25")
	hdr := []string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid}
	get := openLegacyGet(t, e.mcp, sid, "")
	priming := get.until(t, "the priming event", func(s string) bool { return strings.HasPrefix(s, "id: ") })
	eventID := strings.TrimPrefix(priming[len(priming)-1], "id: ")

	st, _, msg := do(t, legacyReq(t, e.mcp, 1, "resources/subscribe", `{"uri":"switchboard://declared"}`, hdr...))
	if st != 200 || msg["result"] == nil {
		t.Fatalf("resources/subscribe: HTTP %d %v", st, msg)
	}
	// Change the declared resource's content and a tool's description.
	var c catalog.Catalog
	if err := json.Unmarshal(declaredCatalog(t), &c); err != nil {
		t.Fatal(err)
	}
	c.Resources[0].Source.Inline.Text = "changed content"
	c.Tools[0].Description = "Changed description."
	b, err := catalog.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
	got := get.until(t, "tools/list_changed", isMethod("notifications/tools/list_changed"))
	got = append(got, get.until(t, "resources/updated", isMethod("notifications/resources/updated"))...)
	for _, l := range got {
		if strings.Contains(l, "subscriptionId") || strings.Contains(l, "_meta") {
			t.Errorf("a 2025-era stream got a 2026-shaped notification: %s", l)
		}
	}
	if !slices.Contains(got, `data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"switchboard://declared"}}`) {
		t.Errorf("resources/updated not as 2025-11-25 shapes it: %q", got)
	}

	// A reconnect with Last-Event-ID is told every list may have changed.
	again := openLegacyGet(t, e.mcp, sid, eventID)
	again.until(t, "tools/list_changed on resume", isMethod("notifications/tools/list_changed"))

	// Drain: both streams end with the retry hint, and the replica is not ready.
	done := drainAsync(e.admin)
	for _, l := range []*lines{get, again} {
		rest := l.ended(t)
		if !slices.Contains(rest, "retry: 1000") {
			t.Errorf("drained GET stream ended with %q, want the retry hint", rest)
		}
	}
	<-done
}
