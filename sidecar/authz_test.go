package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/hub/hubtest"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// These tests drive the Server over HTTP with a real go-sdk MCP server as the upstream. The
// verified caller is their input: the front handler puts the Identity a test names (header
// X-Test-Caller, removed before the sidecar sees the request) into the request context with
// authn.WithIdentity, as the authentication gate does.

// testCallers are the callers of the tests.
var testCallers = map[string]*authn.Identity{
	"a": {Subject: "system:serviceaccount:team-a:agent-a", ServiceAccount: "team-a/agent-a",
		SPIFFE: "spiffe://cluster.local/ns/team-a/sa/agent-a", Groups: []string{"system:serviceaccounts:team-a"}, Issuer: "kubernetes"},
	"b": {Subject: "system:serviceaccount:team-b:agent-b", ServiceAccount: "team-b/agent-b",
		SPIFFE: "spiffe://cluster.local/ns/team-b/sa/agent-b", Groups: []string{"system:serviceaccounts:team-b"}, Issuer: "kubernetes"},
	// mallory is an OIDC user whose mapped name spells agent A's subject.
	"mallory": {Subject: "system:serviceaccount:team-a:agent-a", Groups: []string{"system:serviceaccounts:team-a"}, Issuer: "https://issuer.example"},
	"admin":   {Subject: "oidc:admin", Issuer: "https://issuer.example"},
}

// authzAccess grants A search, lookup (a renamed tool), a declared prompt, a declared resource and
// the upstream's table template; B status, the upstream's prompt and one upstream resource; the
// admin everything.
func authzAccess() *catalog.Access {
	return &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "a/0", Source: catalog.AccessSource{ServiceAccounts: []string{"team-a/agent-a"}},
			Tools: []string{"search", "lookup"}, Prompts: []string{"summarize"},
			Resources: []string{"file:///docs/readme.md", "db://tables/{table}"}},
		{Policy: "b/0", Source: catalog.AccessSource{ServiceAccounts: []string{"team-b/*"}},
			Tools: []string{"status"}, Prompts: []string{"up_prompt"}, Resources: []string{"db://tables/orders"}},
		{Policy: "admin/0", Source: catalog.AccessSource{Users: []string{"oidc:admin"}},
			Tools: []string{"*"}, Prompts: []string{"*"}, Resources: []string{"*"}},
	}}
}

func authzCatalog(a *catalog.Access) *catalog.Catalog { return authzCatalogText(a, "hello") }

// authzCatalogText is authzCatalog whose declared resource file:///docs/readme.md has content text.
func authzCatalogText(a *catalog.Access, text string) *catalog.Catalog {
	h := catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	return &catalog.Catalog{SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "ns", Name: "srv", ToolPolicy: catalog.ToolPolicyAll,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools:     []catalog.Tool{{Name: "lookup", UpstreamName: "internal_raw"}},
		Resources: []catalog.Resource{{URI: "file:///docs/readme.md", Name: "readme", Source: catalog.Source{Inline: &catalog.Inline{Text: text}}}},
		Prompts:   []catalog.Prompt{{Name: "summarize", Messages: []catalog.PromptMessage{{Role: "user", Text: "sum"}}}},
		Auth: &catalog.Auth{Resource: "https://srv.example/mcp", TrustDomain: "cluster.local",
			ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{"https://srv.example/mcp"}}},
		Access: a,
	}
}

type authzEnv struct {
	t     testing.TB
	front *httptest.Server
	ov    *overlay.Overlay
	srv   *Server
	hub   *hub.Hub
	// calls counts the upstream's tool calls, prompt gets and reads by name or URI.
	mu    sync.Mutex
	calls map[string]int
}

func newAuthzEnv(t testing.TB, access *catalog.Access) *authzEnv {
	t.Helper()
	env := &authzEnv{t: t, calls: map[string]int{}}
	count := func(k string) {
		env.mu.Lock()
		env.calls[k]++
		env.mu.Unlock()
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: "authz-upstream", Version: "1"}, nil)
	for _, name := range []string{"search", "delete", "status", "internal_raw"} {
		mcp.AddTool(ms, &mcp.Tool{Name: name, Description: "the " + name + " tool"},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				count("tool:" + name)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
			})
	}
	ms.AddPrompt(&mcp.Prompt{Name: "up_prompt"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		count("prompt:up_prompt")
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}}, nil
	})
	for _, u := range []string{"db://tables/users", "db://tables/orders"} {
		ms.AddResource(&mcp.Resource{URI: u, Name: u}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			count("read:" + r.Params.URI)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "rows"}}}, nil
		})
	}
	ms.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "db://tables/{table}", Name: "table"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			count("read:" + r.Params.URI)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "rows"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)

	quiet := slog.New(slog.DiscardHandler)
	streams := hub.New(hub.Options{Keepalive: -1, Logger: quiet})
	upc := upstream.New(up.URL, 0)
	ov := overlay.New(overlay.Options{Hub: streams, Upstream: upc, Logger: quiet})
	srv, err := NewServer(Options{Upstream: up.URL, Client: upc, Overlay: ov, Hub: streams, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	env.ov, env.srv, env.hub = ov, srv, streams
	env.apply(access)
	go ov.Run(ctx)
	select {
	case <-ov.Applied():
	case <-time.After(10 * time.Second):
		t.Fatal("overlay never applied the catalog")
	}
	env.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Test-Caller")
		r.Header.Del("X-Test-Caller")
		if id := testCallers[name]; id != nil {
			r = r.WithContext(authn.WithIdentity(r.Context(), id))
		}
		if exp := r.Header.Get("X-Test-Expiry"); exp != "" {
			// A copy of the caller whose token expires then.
			at, _ := time.Parse(time.RFC3339Nano, exp)
			c := *authn.FromContext(r.Context())
			c.Expiry = at
			r = r.WithContext(authn.WithIdentity(r.Context(), &c))
		}
		r.Header.Del("X-Test-Expiry")
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(env.front.Close)
	return env
}

func (env *authzEnv) apply(a *catalog.Access) { env.applyCatalog(authzCatalog(a)) }

func (env *authzEnv) applyCatalog(c *catalog.Catalog) {
	env.t.Helper()
	b, err := catalog.Encode(c)
	if err != nil {
		env.t.Fatal(err)
	}
	if err := env.ov.Apply(b, ""); err != nil {
		env.t.Fatal(err)
	}
}

func (env *authzEnv) upstreamCalls(k string) int {
	env.mu.Lock()
	defer env.mu.Unlock()
	return env.calls[k]
}

// rpcAnswer is one JSON-RPC answer and its HTTP status.
type rpcAnswer struct {
	Status int
	Result map[string]json.RawMessage
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	Session string
}

// post sends a raw body with the given headers as caller and reads the answer.
func (env *authzEnv) post(caller string, body string, hdr map[string]string) rpcAnswer {
	env.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, env.front.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if caller != "" {
		req.Header.Set("X-Test-Caller", caller)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := boundedClient.Do(req)
	if err != nil {
		env.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(raw), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				raw = []byte(d)
			}
		}
	}
	out := rpcAnswer{Status: resp.StatusCode, Session: resp.Header.Get("Mcp-Session-Id")}
	if err := json.Unmarshal(raw, &out); err != nil {
		env.t.Fatalf("HTTP %d: %s", resp.StatusCode, raw)
	}
	return out
}

// boundedClient bounds every request of these tests (a hang bound, not a timing assertion).
var boundedClient = &http.Client{Timeout: 10 * time.Second}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}`

// modern sends a 2026-07-28 request; params is the JSON of params without _meta ("" for none).
func (env *authzEnv) modern(caller, method, params, name string) rpcAnswer {
	env.t.Helper()
	p := "{" + modernMeta
	if params != "" {
		p += "," + params
	}
	p += "}"
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		hdr["Mcp-Name"] = name
	}
	return env.post(caller, `{"jsonrpc":"2.0","id":7,"method":"`+method+`","params":`+p+`}`, hdr)
}

// legacyInit opens a 2025-11-25 session as caller and returns its id.
func (env *authzEnv) legacyInit(caller string) string {
	env.t.Helper()
	a := env.post(caller, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		map[string]string{"Mcp-Protocol-Version": "2025-11-25"})
	if a.Session == "" {
		env.t.Fatalf("initialize: no session (HTTP %d, %+v)", a.Status, a.Error)
	}
	return a.Session
}

// legacy sends a 2025-11-25 request in session sid.
func (env *authzEnv) legacy(caller, sid, method, params string) rpcAnswer {
	env.t.Helper()
	if params == "" {
		params = "{}"
	}
	return env.post(caller, `{"jsonrpc":"2.0","id":9,"method":"`+method+`","params":`+params+`}`,
		map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid})
}

// names returns the key member of every entry of a list result.
func names(t *testing.T, a rpcAnswer, member, key string) []string {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("list error %d %s", a.Error.Code, a.Error.Message)
	}
	var items []map[string]any
	if err := json.Unmarshal(a.Result[member], &items); err != nil {
		t.Fatalf("%s: %v", member, err)
	}
	out := []string{}
	for _, it := range items {
		out = append(out, fmt.Sprint(it[key]))
	}
	slices.Sort(out)
	return out
}

type wantView struct {
	tools, prompts, resources, templates []string
}

var authzViews = map[string]wantView{
	"a":       {tools: []string{"lookup", "search"}, prompts: []string{"summarize"}, resources: []string{"db://tables/orders", "db://tables/users", "file:///docs/readme.md"}, templates: []string{"db://tables/{table}"}},
	"b":       {tools: []string{"status"}, prompts: []string{"up_prompt"}, resources: []string{"db://tables/orders"}, templates: []string{}},
	"mallory": {tools: []string{}, prompts: []string{}, resources: []string{}, templates: []string{}},
	"":        {tools: []string{}, prompts: []string{}, resources: []string{}, templates: []string{}},
	"admin":   {tools: []string{"delete", "lookup", "search", "status"}, prompts: []string{"summarize", "up_prompt"}, resources: []string{"db://tables/orders", "db://tables/users", "file:///docs/readme.md"}, templates: []string{"db://tables/{table}"}},
}

// TestAuthzListsPerCaller: each caller's four lists hold exactly what it may use, for 2026-07-28
// and 2025-11-25 clients, under toolPolicy All (upstream tools, prompts and resources included);
// the lists are private; a caller whose name spells another's subject, and a request without a
// verified caller, see nothing.
func TestAuthzListsPerCaller(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	lists := []struct{ method, member, key string }{
		{"tools/list", "tools", "name"}, {"prompts/list", "prompts", "name"},
		{"resources/list", "resources", "uri"}, {"resources/templates/list", "resourceTemplates", "uriTemplate"},
	}
	for caller, want := range authzViews {
		wants := [][]string{want.tools, want.prompts, want.resources, want.templates}
		var sid string
		if caller != "" {
			sid = env.legacyInit(caller)
		}
		for i, l := range lists {
			a := env.modern(caller, l.method, "", "")
			if got := names(t, a, l.member, l.key); !slices.Equal(got, wants[i]) {
				t.Errorf("caller %q %s (2026-07-28) = %v, want %v", caller, l.method, got, wants[i])
			}
			if s := string(a.Result["cacheScope"]); s != `"private"` {
				t.Errorf("caller %q %s: cacheScope %s, want private (the list depends on the caller)", caller, l.method, s)
			}
			if sid == "" {
				continue
			}
			if got := names(t, env.legacy(caller, sid, l.method, ""), l.member, l.key); !slices.Equal(got, wants[i]) {
				t.Errorf("caller %q %s (2025-11-25) = %v, want %v", caller, l.method, got, wants[i])
			}
		}
	}
}

// TestAuthzNoPolicyListsEverything: without a policy every caller sees the whole catalog, and the
// catalog's hint (public) stays.
func TestAuthzNoPolicyListsEverything(t *testing.T) {
	env := newAuthzEnv(t, nil)
	a := env.modern("b", "tools/list", "", "")
	if got := names(t, a, "tools", "name"); !slices.Equal(got, authzViews["admin"].tools) {
		t.Fatalf("tools/list without policy = %v", got)
	}
	if s := string(a.Result["cacheScope"]); s != `"public"` {
		t.Fatalf("cacheScope without policy = %s, want the catalog's public", s)
	}
}

// errOf renders an answer's error with name replaced by NAME, to compare two refusals.
func errOf(a rpcAnswer, name string) string {
	if a.Error == nil {
		return fmt.Sprintf("HTTP %d, no error", a.Status)
	}
	d, m := string(a.Error.Data), a.Error.Message
	if name != "" {
		d, m = strings.ReplaceAll(d, name, "NAME"), strings.ReplaceAll(m, name, "NAME")
	}
	return fmt.Sprintf("HTTP %d code %d %q data %s", a.Status, a.Error.Code, m, d)
}

// TestAuthzRefusalsLookUnknown: a call, get, read, completion or subscribe of something the caller
// may not use gets exactly the answer of a name that does not exist, over both generations, and
// the upstream never sees it.
func TestAuthzRefusalsLookUnknown(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	sid := env.legacyInit("b")
	type probe struct {
		what, method, params string // params with %s for the name or URI
		member               string // params member mirrored in Mcp-Name
		denied, unknown      string
		upstreamKey          string
	}
	probes := []probe{
		{"upstream tool", "tools/call", `"name":%q,"arguments":{}`, "name", "search", "no_such_tool", "tool:search"},
		{"upstream tool not declared", "tools/call", `"name":%q,"arguments":{}`, "name", "delete", "no_such_tool", "tool:delete"},
		{"renamed tool", "tools/call", `"name":%q,"arguments":{}`, "name", "lookup", "no_such_tool", "tool:internal_raw"},
		{"renamed tool by upstream name", "tools/call", `"name":%q,"arguments":{}`, "name", "internal_raw", "no_such_tool", "tool:internal_raw"},
		{"declared prompt", "prompts/get", `"name":%q`, "name", "summarize", "no_such_prompt", ""},
		{"upstream prompt of A? no: B has it; A's", "prompts/get", `"name":%q`, "name", "summarize", "nope", ""},
		{"declared resource", "resources/read", `"uri":%q`, "uri", "file:///docs/readme.md", "file:///docs/none.md", ""},
		{"upstream resource", "resources/read", `"uri":%q`, "uri", "db://tables/users", "db://tables/none", "read:db://tables/users"},
		{"completion of a prompt", "completion/complete", `"ref":{"type":"ref/prompt","name":%q},"argument":{"name":"x","value":""}`, "", "summarize", "no_such_prompt", ""},
		{"completion of a template", "completion/complete", `"ref":{"type":"ref/resource","uri":%q},"argument":{"name":"table","value":""}`, "", "db://tables/{table}", "db://none/{x}", ""},
	}
	for _, p := range probes {
		for _, gen := range []string{"2026-07-28", "2025-11-25"} {
			ask := func(name string) rpcAnswer {
				params := fmt.Sprintf(p.params, name)
				mirror := ""
				if p.member != "" {
					mirror = name
				}
				if gen == "2026-07-28" {
					return env.modern("b", p.method, params, mirror)
				}
				return env.legacy("b", sid, p.method, "{"+params+"}")
			}
			denied, unknown := ask(p.denied), ask(p.unknown)
			if denied.Error == nil {
				t.Errorf("%s %s (%s): B was served %q", p.what, p.method, gen, p.denied)
				continue
			}
			if d, u := errOf(denied, p.denied), errOf(unknown, p.unknown); d != u {
				t.Errorf("%s %s (%s): refusal differs from an unknown name:\n denied:  %s\n unknown: %s", p.what, p.method, gen, d, u)
			}
		}
		if p.upstreamKey != "" && env.upstreamCalls(p.upstreamKey) != 0 {
			t.Errorf("%s: the upstream served %s to a caller not granted it", p.what, p.upstreamKey)
		}
	}
	// resources/subscribe of a URI B may not read: the answer of a read of it.
	sub := env.legacy("b", sid, "resources/subscribe", `{"uri":"db://tables/users"}`)
	read := env.legacy("b", sid, "resources/read", `{"uri":"db://tables/users"}`)
	if errOf(sub, "") != errOf(read, "") || sub.Error == nil {
		t.Errorf("subscribe of a denied URI: %s; read: %s", errOf(sub, ""), errOf(read, ""))
	}
	// What B may use works, and reaches the upstream.
	if a := env.modern("b", "tools/call", `"name":"status","arguments":{}`, "status"); a.Error != nil {
		t.Fatalf("B calling status: %s", a.Error.Message)
	}
	if a := env.legacy("b", sid, "resources/read", `{"uri":"db://tables/orders"}`); a.Error != nil {
		t.Fatalf("B reading orders: %s", a.Error.Message)
	}
	if env.upstreamCalls("tool:status") != 1 || env.upstreamCalls("read:db://tables/orders") != 1 {
		t.Fatalf("granted calls did not reach the upstream: %v", env.calls)
	}
	// A's template grant covers a concrete read of a URI it matches, and only those.
	if a := env.modern("a", "resources/read", `"uri":"db://tables/anything"`, "db://tables/anything"); a.Error != nil {
		t.Fatalf("A reading through its template: %s", a.Error.Message)
	}
	if a := env.modern("a", "resources/read", `"uri":"db://tables/x/y"`, "db://tables/x/y"); a.Error == nil {
		t.Fatal("A read db://tables/x/y: {table} does not span a /")
	}
}

// TestAuthzBypassSpellings: the spellings that could make the upstream read another name than
// the choke point checked are refused before it, so a caller not granted "search" cannot reach it.
func TestAuthzBypassSpellings(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	mcpHdr := func(name string) map[string]string {
		return map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
	}
	cases := []struct {
		name string
		body string
		hdr  map[string]string
	}{
		{"case variant member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"status","Name":"search","arguments":{}}}`, mcpHdr("status")},
		{"duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"status","name":"search","arguments":{}}}`, mcpHdr("status")},
		{"escaped name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"\u0073earch","arguments":{}}}`, mcpHdr("search")},
		{"escaped key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"status","n\u0061me":"search","arguments":{}}}`, mcpHdr("status")},
		{"header names a granted tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"search","arguments":{}}}`, mcpHdr("status")},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"search","arguments":{}}}]`, mcpHdr("search")},
		{"case variant method", `{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{` + modernMeta + `,"name":"search","arguments":{}}}`, map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "Tools/Call", "Mcp-Name": "search"}},
		{"2025 duplicate name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","name":"search","arguments":{}}}`, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}},
		{"2025 case variant", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","NAME":"search","arguments":{}}}`, map[string]string{"Mcp-Protocol-Version": "2025-11-25"}},
	}
	for _, c := range cases {
		a := env.post("b", c.body, c.hdr)
		if a.Error == nil {
			t.Errorf("%s: served (%s)", c.name, a.Result["content"])
		}
	}
	if n := env.upstreamCalls("tool:search"); n != 0 {
		t.Fatalf("the upstream ran search %d times for a caller not granted it", n)
	}
}

// TestAuthzSessionBoundToSubject: a 2025-era session id works for the subject that opened it
// only; another subject's token, a request without a verified caller, and an id whose binding
// was edited are refused like an unknown session.
func TestAuthzSessionBoundToSubject(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	sid := env.legacyInit("a")
	if a := env.legacy("a", sid, "tools/list", ""); a.Error != nil || a.Status != 200 {
		t.Fatalf("the owner's own session: HTTP %d %+v", a.Status, a.Error)
	}
	unknown := env.legacy("b", "s1.bm90LWEtc2Vzc2lvbg.AAAA", "tools/list", "")
	if unknown.Status != http.StatusNotFound {
		t.Fatalf("an unknown session: HTTP %d", unknown.Status)
	}
	// mallory's subject is the same string as A's, from another issuer: not A's session either.
	for _, caller := range []string{"b", "admin", "mallory", ""} {
		a := env.legacy(caller, sid, "tools/list", "")
		if a.Status != unknown.Status || errOf(a, "") != errOf(unknown, "") {
			t.Errorf("A's session presented by %q: %s, want as unknown: %s", caller, errOf(a, ""), errOf(unknown, ""))
		}
	}
	// A GET stream and a DELETE of A's session by B: refused too.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, env.front.URL, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("X-Test-Caller", "b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s of A's session by B: HTTP %d, want 404", m, resp.StatusCode)
		}
	}
	// A session minted for B's subject with the same key, presented by A.
	forged, err := env.srv.legacy.Mint("2025-11-25", nil, legacy.CallerBinding(testCallers["b"]))
	if err != nil {
		t.Fatal(err)
	}
	if a := env.legacy("a", forged, "tools/list", ""); a.Status != http.StatusNotFound {
		t.Errorf("B's session presented by A: HTTP %d", a.Status)
	}
	// An anonymous session (minted without a caller) presented with A's token.
	anon, _ := env.srv.legacy.Mint("2025-11-25", nil, "")
	if a := env.legacy("a", anon, "tools/list", ""); a.Status != http.StatusNotFound {
		t.Errorf("an anonymous session presented by A: HTTP %d", a.Status)
	}
}

// listenStream is a raw listen (or GET) stream: every data line, and the end.
type listenStream struct {
	ack    string
	events chan string
	cancel context.CancelFunc
}

func (env *authzEnv) open(caller string, modern bool, sid string, expiry time.Time) *listenStream {
	env.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var req *http.Request
	if modern {
		body := `{"jsonrpc":"2.0","id":"L-` + caller + `","method":"subscriptions/listen","params":{` + modernMeta +
			`,"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}}}`
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, env.front.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
	} else {
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, env.front.URL, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Header.Set("X-Test-Caller", caller)
	if !expiry.IsZero() {
		req.Header.Set("X-Test-Expiry", expiry.Format(time.RFC3339Nano))
	}
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the stream's reader closes it
	if err != nil {
		cancel()
		env.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		cancel()
		env.t.Fatalf("stream of %q: HTTP %d %s", caller, resp.StatusCode, b)
	}
	ls := &listenStream{events: make(chan string, 64), cancel: cancel}
	rd := bufio.NewReader(resp.Body)
	if modern {
		for ls.ack == "" {
			line, err := rd.ReadString('\n')
			if err != nil {
				env.t.Fatalf("no ack: %v", err)
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				ls.ack = d
			}
		}
	}
	go func() {
		defer close(ls.events)
		defer resp.Body.Close()
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && d != "" {
				ls.events <- d
			}
		}
	}()
	env.t.Cleanup(cancel)
	return ls
}

// collect returns the events of a stream within d, and whether the stream ended.
func (ls *listenStream) collect(d time.Duration) (evs []string, ended bool) {
	return ls.await(-1, d)
}

// await returns once n events arrived (n < 0: never), the stream ended or d passed; then it
// takes what else arrives within a short grace, so a second, unwanted event is seen too.
func (ls *listenStream) await(n int, d time.Duration) (evs []string, ended bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if n >= 0 && len(evs) >= n {
			more, ended := ls.collect(100 * time.Millisecond)
			return append(evs, more...), ended
		}
		select {
		case e, ok := <-ls.events:
			if !ok {
				return evs, true
			}
			evs = append(evs, e)
		case <-t.C:
			return evs, false
		}
	}
}

// settle is how long a test waits for notifications that must not come: well past the
// overlay's coalescing window and a fan-out.
const settle = 700 * time.Millisecond

// TestAuthzPolicyEditWakesOnlyAffected: a policy edit that changes agent A's grants sends A's
// listen stream and A's 2025-era GET stream the list_changed it implies, and B's streams nothing;
// then an edit for B only wakes B's.
func TestAuthzPolicyEditWakesOnlyAffected(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	sidA, sidB := env.legacyInit("a"), env.legacyInit("b")
	la, lb := env.open("a", true, "", time.Time{}), env.open("b", true, "", time.Time{})
	ga, gb := env.open("a", false, sidA, time.Time{}), env.open("b", false, sidB, time.Time{})
	// Let the GET streams' opening events pass.
	ga.collect(100 * time.Millisecond)
	gb.collect(100 * time.Millisecond)

	// A gains the tool delete: only A's tools view changes.
	acc := authzAccess()
	acc.Rules[0].Tools = append(acc.Rules[0].Tools, "delete")
	env.apply(acc)
	for name, s := range map[string]*listenStream{"A listen": la, "A GET": ga} {
		evs, _ := s.await(1, 5*time.Second)
		if len(evs) != 1 || !strings.Contains(evs[0], "notifications/tools/list_changed") {
			t.Errorf("%s after A's grant changed: %v, want one tools/list_changed", name, evs)
		}
	}
	for name, s := range map[string]*listenStream{"B listen": lb, "B GET": gb} {
		if evs, _ := s.collect(settle); len(evs) != 0 {
			t.Errorf("%s woken by an edit of A's grants: %v", name, evs)
		}
	}
	// B loses its prompt: only B's prompts view changes.
	acc.Rules[1].Prompts = nil
	env.apply(acc)
	for name, s := range map[string]*listenStream{"B listen": lb, "B GET": gb} {
		evs, _ := s.await(1, 5*time.Second)
		if len(evs) != 1 || !strings.Contains(evs[0], "notifications/prompts/list_changed") {
			t.Errorf("%s after B's grant changed: %v, want one prompts/list_changed", name, evs)
		}
	}
	if evs, _ := la.collect(settle); len(evs) != 0 {
		t.Errorf("A woken by an edit of B's grants: %v", evs)
	}
	// A grant of a tool that does not exist changes nobody's view.
	acc.Rules[0].Tools = append(acc.Rules[0].Tools, "no_such_tool")
	env.apply(acc)
	if evs, _ := la.collect(settle); len(evs) != 0 {
		t.Errorf("granting a missing tool woke A: %v", evs)
	}
	// Removing every policy: both views change (to everything).
	env.apply(nil)
	for name, s := range map[string]*listenStream{"A listen": la, "B listen": lb} {
		evs, _ := s.await(1, 5*time.Second)
		if len(evs) == 0 {
			t.Errorf("%s not told that removing the policies changed its view", name)
		}
	}
}

// TestAuthzListenExpiry: with an expiring token the acknowledgement carries authorizedUntil, and
// at expiry the stream ends with the AuthorizationEnded error (reason token_expiry) and nothing
// else; a 2025-era GET stream is closed. A change after expiry writes nothing.
func TestAuthzListenExpiry(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	exp := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	sid := env.legacyInit("a")
	l := env.open("a", true, "", exp)
	g := env.open("a", false, sid, exp)
	var ack struct {
		Params struct {
			AuthorizedUntil string `json:"authorizedUntil"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(l.ack), &ack); err != nil || ack.Params.AuthorizedUntil != exp.UTC().Format(time.RFC3339) {
		t.Fatalf("ack %s: authorizedUntil %q, want %q", l.ack, ack.Params.AuthorizedUntil, exp.UTC().Format(time.RFC3339))
	}
	evs, ended := l.collect(time.Until(exp) + 5*time.Second)
	if !ended || len(evs) != 1 {
		t.Fatalf("listen stream at expiry: ended %v, events %v", ended, evs)
	}
	var end struct {
		ID    string `json:"id"`
		Error struct {
			Code int64 `json:"code"`
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(evs[0]), &end); err != nil || end.ID != "L-a" || end.Error.Code != wire.CodeAuthorizationEnded || end.Error.Data.Reason != "token_expiry" {
		t.Fatalf("final event %s, want the AuthorizationEnded error with reason token_expiry", evs[0])
	}
	if time.Now().Before(exp) {
		t.Fatal("the stream ended before its authorization did")
	}
	if _, ended := g.collect(5 * time.Second); !ended {
		t.Fatal("the 2025-era GET stream outlived its token")
	}
}

// TestAuthzNoWriteAfterExpiry: a change published after the caller's token expired but before its
// timer fired is not written; the stream ends with AuthorizationEnded instead.
func TestAuthzNoWriteAfterExpiry(t *testing.T) {
	h := hub.New(hub.Options{Keepalive: -1})
	w := &hubtest.Recorder{}
	st := &hub.Stream{ID: []byte(`1`), Kinds: protocol.KindTools, Caller: testCallers["a"], Expires: time.Now().Add(-time.Millisecond)}
	if !h.Reserve() || !h.Add(st) || !st.Start(w) {
		t.Fatal("stream not registered")
	}
	// No expireAt: as if its timer had not fired yet.
	if n := h.Publish(protocol.KindTools, ""); n != 0 {
		t.Fatalf("wrote to %d streams after expiry", n)
	}
	if len(w.Events) != 0 || !w.Ended || !bytes.Contains(w.Final, []byte(`"token_expiry"`)) {
		t.Fatalf("events %q, ended %v, final %s", w.Events, w.Ended, w.Final)
	}
}

// TestAuthzDrainStillCompletes: the drain ends an expiring stream with complete, not with
// AuthorizationEnded, and its expiry later writes nothing more.
func TestAuthzDrainStillCompletes(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	l := env.open("a", true, "", time.Now().Add(800*time.Millisecond))
	if n := env.hub.EndAll(0); n != 1 {
		t.Fatalf("EndAll ended %d streams", n)
	}
	evs, ended := l.collect(3 * time.Second)
	if !ended || len(evs) != 1 || !strings.Contains(evs[0], `"resultType":"complete"`) {
		t.Fatalf("drained stream: ended %v, events %v", ended, evs)
	}
}

// TestAuthzListenDeniedSubscription: a listen that names a URI the caller may not read is refused
// whole (SubscriptionDenied, -32602, data.denied), whether the URI exists or not.
func TestAuthzListenDeniedSubscription(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	for _, uri := range []string{"db://tables/users", "db://tables/none/x"} {
		a := env.modern("b", "subscriptions/listen", `"notifications":{"resourceSubscriptions":["db://tables/orders",`+jsonQuote(uri)+`]}`, "")
		if a.Status != http.StatusBadRequest || a.Error == nil || a.Error.Code != wire.CodeInvalidParams || !strings.Contains(string(a.Error.Data), jsonQuote(uri)) {
			t.Errorf("listen naming %s: %s", uri, errOf(a, ""))
		}
	}
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestAuthzResourceUpdatedOnlyToReaders: resources/updated for a URI goes only to the streams
// whose caller may still read it.
func TestAuthzResourceUpdatedOnlyToReaders(t *testing.T) {
	h := hub.New(hub.Options{Keepalive: -1})
	var writers []*hubtest.Recorder
	for _, c := range []string{"a", "b"} {
		w := &hubtest.Recorder{}
		st := &hub.Stream{ID: []byte(`"` + c + `"`), URIs: []string{"db://tables/orders"}, Caller: testCallers[c]}
		if !h.Reserve() || !h.Add(st) || !st.Start(w) {
			t.Fatal("stream not registered")
		}
		writers = append(writers, w)
	}
	var asked atomic.Int32
	n := h.PublishUpdate("db://tables/orders", func(id *authn.Identity) bool {
		asked.Add(1)
		return id.ServiceAccount == "team-b/agent-b"
	})
	if n != 1 || len(writers[0].Events) != 0 || len(writers[1].Events) != 1 || asked.Load() != 2 {
		t.Fatalf("sent %d; A got %d, B got %d; asked %d times", n, len(writers[0].Events), len(writers[1].Events), asked.Load())
	}
}

// TestAuthzUpdateNotSentAfterRevocation: a revision that changes a resource's content and
// revokes one caller's grant of it sends resources/updated to the callers who may still read it,
// and not to the one who lost it (whose resources list changed instead).
func TestAuthzUpdateNotSentAfterRevocation(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	open := func(caller string) *listenStream {
		body := `{"jsonrpc":"2.0","id":"U-` + caller + `","method":"subscriptions/listen","params":{` + modernMeta +
			`,"notifications":{"resourcesListChanged":true,"resourceSubscriptions":["file:///docs/readme.md"]}}}`
		req, _ := http.NewRequest(http.MethodPost, env.front.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		req.Header.Set("X-Test-Caller", caller)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		resp, err := http.DefaultClient.Do(req.WithContext(ctx)) //nolint:bodyclose // the reader goroutine closes it
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("listen of %s: %v %v", caller, err, resp)
		}
		ls := &listenStream{events: make(chan string, 64), cancel: cancel}
		go func() {
			defer close(ls.events)
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			for {
				line, err := rd.ReadString('\n')
				if err != nil {
					return
				}
				if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && !strings.Contains(d, "acknowledged") {
					ls.events <- d
				}
			}
		}()
		return ls
	}
	a, admin := open("a"), open("admin")
	acc := authzAccess()
	acc.Rules[0].Resources = []string{"db://tables/{table}"} // A loses the readme
	env.applyCatalog(authzCatalogText(acc, "hello again"))
	evs, _ := admin.await(1, 5*time.Second)
	if len(evs) != 1 || !strings.Contains(evs[0], "notifications/resources/updated") {
		t.Fatalf("admin (still granted): %v, want one resources/updated", evs)
	}
	evs, _ = a.await(1, 5*time.Second)
	for _, e := range evs {
		if strings.Contains(e, "notifications/resources/updated") {
			t.Errorf("A got an update of a resource it may no longer read: %s", e)
		}
	}
	if len(evs) != 1 || !strings.Contains(evs[0], "notifications/resources/list_changed") {
		t.Errorf("A: %v, want one resources/list_changed (the readme left its list)", evs)
	}
}
