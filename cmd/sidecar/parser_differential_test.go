//go:build e2e

package main_test

// The parser differential (security review F2): the sidecar decides on a
// request as its own exact-key scanner reads it and forwards the bytes
// unchanged, so every upstream must read the same method, tool name and URI
// from them, whatever its JSON decoder. The same hostile bytes go through
// real sidecar processes to upstreams that decode with Go's encoding/json
// (case-insensitive, last duplicate wins, as mark3labs/mcp-go and
// hand-written Go servers do), with the go-sdk, and with Node's JSON.parse,
// over the 2026 path, the 2025-era upstream path and the stdio bridge.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// ran is a request an upstream ran, as the upstream read it.
type ran struct {
	Method string `json:"method"`
	Name   string `json:"name"`
	URI    string `json:"uri"`
	Param  string `json:"param"`  // the Mcp-Param-Region header it got
	Region string `json:"region"` // arguments.region
}

// diffTools are every upstream's tools; region is bound to Mcp-Param-Region.
var diffTools = []string{"allowed_tool", "disabled_tool", "undeclared_tool"}

const regionSchema = `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`

// runLog collects what an in-process upstream ran.
type runLog struct {
	mu   sync.Mutex
	runs []ran
}

func (l *runLog) add(r ran) { l.mu.Lock(); l.runs = append(l.runs, r); l.mu.Unlock() }

func (l *runLog) take() []ran {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.runs
	l.runs = nil
	return r
}

// serveOn serves h on a free 127.0.0.1 port until the test ends.
func serveOn(t *testing.T, h http.Handler) string {
	t.Helper()
	addr := freePort(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return addr
}

// goJSONUpstream decodes every message with encoding/json into structs, as
// mark3labs/mcp-go does: a 2026-07-28 server, or (legacy) a 2025-11-25 one.
func goJSONUpstream(t *testing.T, legacy bool) (string, func() []ran) {
	t.Helper()
	log := &runLog{}
	writeMsg := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		if legacy {
			w.Header().Set("Mcp-Session-Id", "gojson-session")
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			return
		}
		var m struct {
			ID     *json.RawMessage `json:"id"`
			Method string           `json:"method"`
			Params struct {
				Name      string `json:"name"`
				URI       string `json:"uri"`
				Arguments struct {
					Region string `json:"region"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &m) != nil {
			writeMsg(w, http.StatusBadRequest, map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700, "message": "Parse error"}})
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted) // a notification: nothing runs
			return
		}
		ok := func(res any) { writeMsg(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": res}) }
		tools := []map[string]any{}
		for _, n := range diffTools {
			tools = append(tools, map[string]any{"name": n, "inputSchema": json.RawMessage(regionSchema)})
		}
		switch m.Method {
		case "server/discover":
			if legacy {
				writeMsg(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "Method not found"}})
				return
			}
			ok(map[string]any{"resultType": "complete", "supportedVersions": []string{"2026-07-28"},
				"capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}}, "serverInfo": map[string]any{"name": "gojson", "version": "1"}})
			return
		case "initialize":
			ok(map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}, "resources": map[string]any{}},
				"serverInfo": map[string]any{"name": "gojson", "version": "1"}})
			return
		case "tools/list":
			ok(map[string]any{"resultType": "complete", "tools": tools})
			return
		case "ping":
			ok(map[string]any{})
			return
		}
		log.add(ran{Method: m.Method, Name: m.Params.Name, URI: m.Params.URI, Param: r.Header.Get("Mcp-Param-Region"), Region: m.Params.Arguments.Region})
		ok(map[string]any{"resultType": "complete", "content": []map[string]any{{"type": "text", "text": "ran"}}})
	})
	return serveOn(t, h), log.take
}

// goSDKUpstream is a go-sdk (pinned in go.mod) 2026-07-28 server; its
// handlers record what they were asked to run.
func goSDKUpstream(t *testing.T) (string, func() []ran) {
	t.Helper()
	log := &runLog{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "go-sdk", Version: "1"}, nil)
	for _, n := range diffTools {
		srv.AddTool(&mcp.Tool{Name: n, InputSchema: json.RawMessage(regionSchema)}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args) // a map: exact keys
			region, _ := args["region"].(string)
			log.add(ran{Method: "tools/call", Name: req.Params.Name, Param: req.Extra.Header.Get("Mcp-Param-Region"), Region: region})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
		})
	}
	for _, uri := range []string{"test://public", "test://private"} {
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			log.add(ran{Method: "resources/read", URI: req.Params.URI})
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	return serveOn(t, h), log.take
}

// nodeUpstream runs testdata/jsonparse_upstream.js (JSON.parse) in mode
// http (2026-07-28), legacy (2025-11-25 over HTTP) or stdio (2025-11-25
// behind the real `sidecar stdio` bridge). It returns the address to put
// a sidecar in front of.
func nodeUpstream(t *testing.T, node, mode string) (string, func() []ran) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "jsonparse_upstream.js"))
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(t.TempDir(), "ran.jsonl")
	if err := os.WriteFile(record, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	if mode == "stdio" {
		start(t, sidecarBin, "stdio", "--listen", addr, "--", node, script, "stdio", "-", record)
	} else {
		_, port, _ := net.SplitHostPort(addr)
		start(t, node, script, mode, port, record)
	}
	eventually.True(t, "the node upstream to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	read := 0
	return addr, func() []ran {
		b, err := os.ReadFile(record)
		if err != nil {
			t.Fatal(err)
		}
		var out []ran
		for _, line := range strings.Split(string(b[read:]), "\n") {
			if line == "" {
				continue
			}
			var r ran
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("record %q: %v", line, err)
			}
			out = append(out, r)
		}
		read = len(b)
		return out
	}
}

// diffCatalog: policy Declared, allowed_tool declared, disabled_tool
// declared and disabled; undeclared_tool is not in it.
func diffCatalog(t *testing.T) string {
	t.Helper()
	h := catalog.CacheHint{TTLMs: 0, CacheScope: catalog.ScopePrivate}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "local", Name: "diff", ToolPolicy: catalog.ToolPolicyDeclared,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools: []catalog.Tool{{Name: "allowed_tool"}, {Name: "disabled_tool", Disabled: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, b)
	return path
}

// exactView is what a request says read with exact keys (the sidecar's
// reading; the same as JSON.parse's for a body without duplicates).
type exactView struct{ method, name, uri, region string }

func viewOf(body []byte) exactView {
	var env, params, args map[string]json.RawMessage
	_ = json.Unmarshal(body, &env)
	_ = json.Unmarshal(env["params"], &params)
	_ = json.Unmarshal(params["arguments"], &args)
	var v exactView
	_ = json.Unmarshal(env["method"], &v.method)
	_ = json.Unmarshal(params["name"], &v.name)
	_ = json.Unmarshal(params["uri"], &v.uri)
	_ = json.Unmarshal(args["region"], &v.region)
	return v
}

// diffCase is one request. legacy: a 2025-era client (sent in a session);
// else a 2026 one with Mcp-Method / Mcp-Name / Mcp-Param-Region as given.
// ok: every upstream must run it; else the sidecar must refuse it.
type diffCase struct {
	name                string
	legacy              bool
	body                string
	method, mname, pRgn string
	ok                  bool
}

// m26 is a 2026 request with the _meta claim first in params.
func m26(method, params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + meta + params + `}}`
}

// m25 is a 2025-era request.
func m25(method, params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params + `}}`
}

func diffCases() []diffCase {
	call := func(params string) string { return m26("tools/call", params) }
	complete := `,"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""}`
	return []diffCase{
		// Controls: what must work keeps working, on every path.
		{name: "control allowed", body: call(`,"name":"allowed_tool","arguments":{}`), method: "tools/call", mname: "allowed_tool", ok: true},
		{name: "control escaped exact key", body: call(`,"\u006eame":"allowed_tool"`), method: "tools/call", mname: "allowed_tool", ok: true},
		{name: "control bound argument", body: call(`,"name":"allowed_tool","arguments":{"region":"eu"}`), method: "tools/call", mname: "allowed_tool", pRgn: "eu", ok: true},
		{name: "control resource", body: m26("resources/read", `,"uri":"test://public"`), method: "resources/read", mname: "test://public", ok: true},
		{name: "control disabled", body: call(`,"name":"disabled_tool"`), method: "tools/call", mname: "disabled_tool"},
		{name: "control undeclared", body: call(`,"name":"undeclared_tool"`), method: "tools/call", mname: "undeclared_tool"},
		{name: "2025 control allowed", legacy: true, body: m25("tools/call", `"name":"allowed_tool","arguments":{}`), ok: true},
		{name: "2025 control bound argument", legacy: true, body: m25("tools/call", `"name":"allowed_tool","arguments":{"region":"eu"}`), ok: true},
		{name: "2025 control disabled", legacy: true, body: m25("tools/call", `"name":"disabled_tool"`)},

		// params.name.
		{name: "name case variant", body: call(`,"name":"allowed_tool","Name":"disabled_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "name escaped case variant", body: call(`,"name":"allowed_tool","\u004eame":"disabled_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "name escaped mixed case", body: call(`,"name":"allowed_tool","N\u0061ME":"undeclared_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "name variant first", body: call(`,"NAME":"disabled_tool","name":"allowed_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "name duplicate", body: call(`,"name":"allowed_tool","name":"disabled_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "name escaped duplicate", body: call(`,"name":"allowed_tool","\u006eame":"disabled_tool"`), method: "tools/call", mname: "allowed_tool"},

		// The envelope.
		{name: "Method case variant", body: `{"jsonrpc":"2.0","id":1,"method":"completion/complete","Method":"tools/call","params":{` + meta + complete + `,"name":"disabled_tool"}}`,
			method: "completion/complete"},
		{name: "method escaped case variant", body: `{"jsonrpc":"2.0","id":1,"method":"completion/complete","\u004dETHOD":"tools/call","params":{` + meta + complete + `,"name":"disabled_tool"}}`,
			method: "completion/complete"},
		{name: "Params case variant", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"allowed_tool"},"Params":{` + meta + `,"name":"disabled_tool"}}`,
			method: "tools/call", mname: "allowed_tool"},
		{name: "params with long s (U+017F)", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"allowed_tool"},"paramſ":{` + meta + `,"name":"disabled_tool"}}`,
			method: "tools/call", mname: "allowed_tool"},
		{name: "params with escaped long s", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"allowed_tool"},"param\u017f":{` + meta + `,"name":"disabled_tool"}}`,
			method: "tools/call", mname: "allowed_tool"},
		{name: "ID makes a notification a call", body: `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{` + meta + `,"name":"disabled_tool"}}`, method: "tools/call", mname: "disabled_tool"},
		{name: "id case variant", body: `{"jsonrpc":"2.0","id":1,"Id":2,"method":"tools/call","params":{` + meta + `,"name":"allowed_tool"}}`, method: "tools/call", mname: "allowed_tool"},
		{name: "jsonrpc case variant", body: `{"jsonrpc":"2.0","JSONRPC":"1.0","id":1,"method":"tools/call","params":{` + meta + `,"name":"allowed_tool"}}`, method: "tools/call", mname: "allowed_tool"},
		{name: "method escaped duplicate", body: `{"jsonrpc":"2.0","id":1,"method":"completion/complete","\u006dethod":"tools/call","params":{` + meta + `,"name":"disabled_tool"}}`, method: "completion/complete"},

		// params._meta and other params members.
		{name: "_meta case variant", body: call(`,"_META":{},"name":"allowed_tool"`), method: "tools/call", mname: "allowed_tool"},
		{name: "_meta claim case variant", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"IO.modelcontextprotocol/protocolVersion":"2025-06-18"},"name":"allowed_tool"}}`,
			method: "tools/call", mname: "allowed_tool"},
		{name: "arguments case variant", body: call(`,"name":"allowed_tool","arguments":{},"Arguments":{"region":"us"}`), method: "tools/call", mname: "allowed_tool"},
		{name: "ref name case variant", body: m26("completion/complete", `,"ref":{"type":"ref/prompt","name":"p","Name":"q"},"argument":{"name":"a","value":""}`), method: "completion/complete"},
		{name: "uri case variant", body: m26("resources/read", `,"uri":"test://public","URI":"test://private"`), method: "resources/read", mname: "test://public"},
		{name: "uri escaped case variant", body: m26("resources/read", `,"uri":"test://public","\u0055ri":"test://private"`), method: "resources/read", mname: "test://public"},
		{name: "uri with dotless i (U+0131)", body: m26("resources/read", `,"uri":"test://public","urı":"test://private"`), method: "resources/read", mname: "test://public"},
		{name: "uri duplicate", body: m26("resources/read", `,"uri":"test://public","uri":"test://private"`), method: "resources/read", mname: "test://public"},

		// Arguments bound to Mcp-Param-* headers.
		{name: "bound argument case variant", body: call(`,"name":"allowed_tool","arguments":{"region":"eu","Region":"us"}`), method: "tools/call", mname: "allowed_tool", pRgn: "eu"},
		{name: "bound argument duplicate", body: call(`,"name":"allowed_tool","arguments":{"region":"eu","region":"us"}`), method: "tools/call", mname: "allowed_tool", pRgn: "eu"},

		// Bytes decoders repair differently.
		{name: "invalid UTF-8", body: call(`,"name":"allowed_tool","arguments":{"note":"` + "\xff" + `"}`), method: "tools/call", mname: "allowed_tool"},
		{name: "invalid UTF-8 in a key", body: call(`,"name":"allowed_tool","arguments":{"` + "\xc3" + `x":1}`), method: "tools/call", mname: "allowed_tool"},
		{name: "lone surrogate", body: call(`,"name":"allowed_tool","arguments":{"note":"\ud800"}`), method: "tools/call", mname: "allowed_tool"},
		{name: "batch", body: "[" + call(`,"name":"allowed_tool"`) + "," + call(`,"name":"disabled_tool"`) + "]", method: "tools/call", mname: "allowed_tool"},

		// 2025-era clients (translated by the sidecar).
		{name: "2025 name escaped case variant", legacy: true, body: m25("tools/call", `"name":"allowed_tool","\u004eame":"disabled_tool"`)},
		{name: "2025 name case variant", legacy: true, body: m25("tools/call", `"name":"allowed_tool","nAME":"disabled_tool"`)},
		{name: "2025 Method case variant", legacy: true, body: `{"jsonrpc":"2.0","id":1,"method":"completion/complete","Method":"tools/call","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""},"name":"disabled_tool"}}`},
		{name: "2025 Params case variant", legacy: true, body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"allowed_tool"},"PARAMS":{"name":"disabled_tool"}}`},
		{name: "2025 ID makes a notification a call", legacy: true, body: `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{"name":"disabled_tool"}}`},
		{name: "2025 bound argument case variant", legacy: true, body: m25("tools/call", `"name":"allowed_tool","arguments":{"region":"eu","Region":"us"}`)},
		{name: "2025 bound argument escaped duplicate", legacy: true, body: m25("tools/call", `"name":"allowed_tool","arguments":{"region":"eu","\u0072egion":"us"}`)},
		{name: "2025 _meta claim case variant", legacy: true, body: m25("tools/call", `"_meta":{"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/LOGLEVEL":"x"},"name":"allowed_tool"`)},
		{name: "2025 invalid UTF-8", legacy: true, body: m25("tools/call", `"name":"allowed_tool","arguments":{"note":"`+"\xed\xa0\x80"+`"}`)},
		{name: "2025 batch", legacy: true, body: "[" + m25("tools/call", `"name":"allowed_tool"`) + "]"},
	}
}

// diffDo sends req and returns the status and the JSON-RPC message of the
// answer (nil when the body is not one: an upstream's plain-text error).
func diffDo(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	status, _, b := send(t, req)
	var msg map[string]any
	for _, line := range strings.Split(string(b), "\n") { // JSON, or the last message of an SSE body
		line = strings.TrimPrefix(line, "data: ")
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && (m["result"] != nil || m["error"] != nil) {
			msg = m
		}
	}
	return status, msg
}

// diffTarget is one upstream behind its own sidecar.
type diffTarget struct {
	name string
	e    *env
	sid  string // a 2025-era client session on it
	runs func() []ran
}

// TestParserDifferential: for every hostile request and every upstream,
// either the sidecar refuses it (a JSON-RPC error, and no upstream runs
// anything), or every upstream runs exactly the method, tool name, URI and
// bound argument the sidecar decided on. A disabled or undeclared tool never
// runs.
func TestParserDifferential(t *testing.T) {
	cat := diffCatalog(t)
	var targets []diffTarget
	add := func(name, addr string, runs func() []ran) {
		e := &env{upAddr: addr}
		e.startSidecar(t, "--catalog-file", cat)
		targets = append(targets, diffTarget{name: name, e: e, sid: legacyInit(t, e.mcp, "2025-11-25"), runs: runs})
	}
	addr, runs := goJSONUpstream(t, false)
	add("encoding/json 2026", addr, runs)
	addr, runs = goSDKUpstream(t)
	add("go-sdk 2026", addr, runs)
	addr, runs = goJSONUpstream(t, true)
	add("encoding/json 2025 (upstream_legacy)", addr, runs)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Log("SKIPPED the JSON.parse upstreams: no node on PATH")
	} else {
		addr, runs = nodeUpstream(t, node, "http")
		add("JSON.parse 2026", addr, runs)
		addr, runs = nodeUpstream(t, node, "legacy")
		add("JSON.parse 2025 (upstream_legacy)", addr, runs)
		addr, runs = nodeUpstream(t, node, "stdio")
		add("JSON.parse stdio bridge", addr, runs)
	}
	for _, tc := range diffCases() {
		t.Run(tc.name, func(t *testing.T) {
			want := viewOf([]byte(tc.body))
			for _, tg := range targets {
				tg.runs() // nothing left over from setup
				req, err := http.NewRequest(http.MethodPost, tg.e.mcp, bytes.NewReader([]byte(tc.body)))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if tc.legacy {
					req.Header.Set("MCP-Protocol-Version", "2025-11-25")
					req.Header.Set("Mcp-Session-Id", tg.sid)
				} else {
					req.Header.Set("MCP-Protocol-Version", "2026-07-28")
					req.Header.Set("Mcp-Method", tc.method)
					if tc.mname != "" {
						req.Header.Set("Mcp-Name", tc.mname)
					}
					if tc.pRgn != "" {
						req.Header.Set("Mcp-Param-Region", tc.pRgn)
					}
				}
				st, msg := diffDo(t, req)
				got := tg.runs()
				for _, r := range got {
					if r.Method == "tools/call" && (r.Name == "disabled_tool" || r.Name == "undeclared_tool") {
						t.Errorf("%s RAN %s (the catalog refuses it); the sidecar answered HTTP %d %v", tg.name, r.Name, st, msg)
					}
					if r.Method != want.method || r.Name != want.name || r.URI != want.uri || r.Region != want.region {
						t.Errorf("%s ran %s name=%q uri=%q region=%q; the sidecar decided on %s name=%q uri=%q region=%q",
							tg.name, r.Method, r.Name, r.URI, r.Region, want.method, want.name, want.uri, want.region)
					}
					if r.Param != "" && r.Param != r.Region {
						t.Errorf("%s got Mcp-Param-Region %q but read region %q", tg.name, r.Param, r.Region)
					}
				}
				refused := msg["error"] != nil && len(got) == 0
				switch {
				case tc.ok && (st != http.StatusOK || msg["result"] == nil || len(got) != 1):
					t.Errorf("%s: HTTP %d %v, ran %v; want it run once", tg.name, st, msg, got)
				case !tc.ok && !refused:
					t.Errorf("%s: HTTP %d %v, ran %v; want it refused", tg.name, st, msg, got)
				case !tc.ok && !tc.legacy && st != http.StatusBadRequest:
					t.Errorf("%s: refused with HTTP %d, want 400", tg.name, st)
				}
			}
		})
	}
}
