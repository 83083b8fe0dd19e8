//go:build e2e

package main_test

// Notifications and Mcp-Param-* headers through the choke point (security
// review F5, F6), against real upstreams of every kind: a go-sdk v1.8.0
// "tenant" server served as a 2026-07-28 server (stateless HTTP), as a
// 2025-era server (stateful HTTP narrowed to 2025-11-25: pooled upstream
// sessions shared by every client), and over stdio behind the real
// `sidecar stdio` bridge (one child for every client). The stdio child is
// this test binary itself (TestMain runs serveTenantStdio when
// tenantStdioEnv is set), so that the tests can ask it what it received.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// tenantStdioEnv makes the test binary serve the tenant server on stdio.
const tenantStdioEnv = "SWITCHBOARD_TEST_TENANT_STDIO"

// tenant is the upstream's state: what it received (every message, raw),
// which block calls started, and how they ended.
type tenant struct {
	mu        sync.Mutex
	received  [][]byte
	entered   []string
	cancelled []string
	release   map[string]chan struct{}
}

func newTenant() *tenant { return &tenant{release: map[string]chan struct{}{}} }

// maxTenantRecord bounds what the tenant keeps of what it received.
const maxTenantRecord = 64 << 20

func (u *tenant) record(msg []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, m := range u.received {
		n += len(m)
	}
	if n+len(msg) <= maxTenantRecord {
		u.received = append(u.received, bytes.Clone(msg))
	}
}

func (u *tenant) releaseChan(key string) chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	ch := u.release[key]
	if ch == nil {
		ch = make(chan struct{})
		u.release[key] = ch
	}
	return ch
}

type keyArgs struct {
	Key string `json:"key"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// server builds the tenant's go-sdk server: legacy narrows it to 2025-11-25.
func (u *tenant) server(legacy bool) *mcp.Server {
	// Subscriptions advertised, so that a listen subscribes upstream.
	subscribe := func(context.Context, *mcp.SubscribeRequest) error { return nil }
	unsubscribe := func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	opts := &mcp.ServerOptions{SubscribeHandler: subscribe, UnsubscribeHandler: unsubscribe}
	if legacy {
		opts.SupportedProtocolVersions = []string{"2025-11-25"}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "tenant", Version: "1"}, opts)
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "waits until released or cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
			ch := u.releaseChan(a.Key)
			u.mu.Lock()
			u.entered = append(u.entered, a.Key)
			u.mu.Unlock()
			select {
			case <-ch:
				return text("released " + a.Key), nil, nil
			case <-ctx.Done():
				u.mu.Lock()
				u.cancelled = append(u.cancelled, a.Key)
				u.mu.Unlock()
				return nil, nil, ctx.Err()
			}
		})
	for _, name := range []string{"release", "state", "seen"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
			return text(u.probe(name, a.Key)), nil, nil
		})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "regional", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"level":{"type":"integer"}}}`)},
		func(_ context.Context, _ *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("region=%v", a["region"])), nil, nil
		})
	srv.AddResource(&mcp.Resource{URI: "test://tenant", Name: "tenant"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://tenant", Text: "t"}}}, nil
	})
	return srv
}

// probe answers the tests' questions (also the tools of the same names):
// release a block call, the state of the block calls, whether a message
// naming key was received.
func (u *tenant) probe(tool, key string) string {
	switch tool {
	case "release":
		ch := u.releaseChan(key)
		u.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		u.mu.Unlock()
		return "ok"
	case "state":
		u.mu.Lock()
		b, _ := json.Marshal(map[string][]string{"entered": u.entered, "cancelled": u.cancelled})
		u.mu.Unlock()
		return string(b)
	case "seen":
		u.mu.Lock()
		defer u.mu.Unlock()
		for _, m := range u.received {
			// (Not the calls of this tool: they name the marker too.)
			if bytes.Contains(m, []byte(key)) && !bytes.Contains(m, []byte(`"name":"seen"`)) {
				return "seen: " + string(m[:min(len(m), 300)])
			}
		}
		return "not seen"
	}
	return "unknown probe " + tool
}

// recordingReader copies every line read from r into the tenant's record.
type recordingReader struct {
	r    io.Reader
	u    *tenant
	line []byte
}

func (rr *recordingReader) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			rr.u.record(rr.line)
			rr.line = rr.line[:0]
			continue
		}
		if len(rr.line) < maxTenantRecord {
			rr.line = append(rr.line, c)
		}
	}
	return n, err
}

// serveTenantStdio is the stdio child (TestMain): the 2025-era tenant on
// stdin/stdout, every line it reads recorded.
func serveTenantStdio() {
	u := newTenant()
	srv := u.server(true)
	_ = srv.Run(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(&recordingReader{r: os.Stdin, u: u}), Writer: nopWriteCloser{os.Stdout}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// upstream kinds.
const (
	upModern = "2026-http"
	upLegacy = "2025-http"
	upStdio  = "stdio-bridge"
)

// probeFunc asks the tenant directly, not through the sidecar (so that the
// sidecar's upstream ids are spent only on the tests' own calls).
type probeFunc func(t *testing.T, tool, key string) string

// tenantEnv starts the tenant as kind and a sidecar in front of it.
func tenantEnv(t *testing.T, kind string, sidecarArgs ...string) (*env, probeFunc) {
	t.Helper()
	e := &env{upAddr: freePort(t)}
	var probe probeFunc
	switch kind {
	case upStdio:
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		e.up = startEnv(t, []string{tenantStdioEnv + "=1"}, sidecarBin, "stdio", "--listen", e.upAddr, "--", exe)
		eventually.True(t, "the stdio bridge to listen", func() bool {
			c, err := net.Dial("tcp", e.upAddr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		probe = bridgeProbe(t, "http://"+e.upAddr+"/mcp")
	default:
		u := newTenant()
		probe = func(_ *testing.T, tool, key string) string { return u.probe(tool, key) }
		legacy := kind == upLegacy
		srv := u.server(legacy)
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: !legacy, PropagateRequestCancellation: !legacy})
		rec := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				b, _ := io.ReadAll(r.Body)
				u.record(b)
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		})
		ln, err := net.Listen("tcp", e.upAddr)
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: rec, ReadHeaderTimeout: hang}
		go func() { _ = hs.Serve(ln) }()
		t.Cleanup(func() { _ = hs.Close() })
	}
	e.startSidecar(t, sidecarArgs...)
	return e, probe
}

// bridgeSession opens a 2025-11-25 session of its own on the stdio bridge at url,
// waiting for the bridge to answer.
func bridgeSession(t *testing.T, url string) string {
	t.Helper()
	var sid string
	eventually.True(t, "the stdio bridge to answer initialize", func() bool {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		sid = resp.Header.Get("Mcp-Session-Id")
		return resp.StatusCode == http.StatusOK && sid != ""
	})
	return sid
}

// bridgeProbe asks the stdio child through a bridge session of its own.
func bridgeProbe(t *testing.T, url string) probeFunc {
	t.Helper()
	sid := bridgeSession(t, url)
	return func(t *testing.T, tool, key string) string {
		t.Helper()
		st, _, body := rawPost(t, url, `{"jsonrpc":"2.0","id":"probe","method":"tools/call","params":{"name":"`+tool+`","arguments":{"key":`+jsonQuote(key)+`}}}`,
			"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25")
		var msg map[string]any
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatalf("probe %s: HTTP %d %q", tool, st, body)
		}
		return resultText(t, st, msg)
	}
}

func jsonQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func resultText(t *testing.T, st int, msg map[string]any) string {
	t.Helper()
	res, _ := msg["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if st != http.StatusOK || len(content) == 0 {
		t.Fatalf("HTTP %d %v", st, msg)
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// tenantState is what the tenant says about its block calls.
func tenantState(t *testing.T, probe probeFunc) (entered, cancelled []string) {
	t.Helper()
	var s struct{ Entered, Cancelled []string }
	if err := json.Unmarshal([]byte(probe(t, "state", "")), &s); err != nil {
		t.Fatal(err)
	}
	return s.Entered, s.Cancelled
}

func waitEntered(t *testing.T, probe probeFunc, keys ...string) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("the upstream to run block %v", keys), func() bool {
		entered, _ := tenantState(t, probe)
		for _, k := range keys {
			if !slices.Contains(entered, k) {
				return false
			}
		}
		return true
	})
}

// rawPost sends body with headers and returns status, content type and body.
func rawPost(t *testing.T, url, body string, hdr ...string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	status, header, b := send(t, req)
	return status, header.Get("Content-Type"), b
}

// modernHeaders are what a 2026-07-28 client sends with a message of method m.
func modernHeaders(m string) []string {
	return []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", m}
}

// TestNotificationCannotCancelAnotherClientsCall: client A's call is in
// flight on the first pooled upstream session; client B fills the other
// three and sprays notifications/cancelled for the sidecar's sequential
// upstream ids ("sb-N") as a 2026-07-28 client. A's call must still
// complete, and the upstream must not have seen a cancellation of it.
func TestNotificationCannotCancelAnotherClientsCall(t *testing.T) {
	for _, kind := range []string{upLegacy, upStdio} {
		t.Run(kind, func(t *testing.T) {
			e, probe := tenantEnv(t, kind)
			// The pool first grows to its 4 sessions (each busy once),
			// then idles: A's call then takes the first session, B's
			// three the others, and a notification the least busy one,
			// the first on a tie: A's. (The test watches the upstream
			// directly, so the sidecar's sequential upstream ids go only
			// to these calls: A's is well inside the sprayed range.)
			warm := []string{"w1", "w2", "w3", "w4"}
			for _, k := range warm {
				go doQuiet(rpcReq(t, e.mcp, "w-"+k, "tools/call", "block", `,"name":"block","arguments":{"key":"`+k+`"}`))
				waitEntered(t, probe, k)
			}
			for _, k := range warm {
				probe(t, "release", k)
			}
			type answer struct {
				st  int
				msg map[string]any
			}
			aDone := make(chan answer, 1)
			go func() {
				st, _, msg := doQuiet(rpcReq(t, e.mcp, "a-1", "tools/call", "block", `,"name":"block","arguments":{"key":"a"}`))
				aDone <- answer{st, msg}
			}()
			waitEntered(t, probe, "a")
			for _, k := range []string{"b1", "b2", "b3"} {
				go doQuiet(rpcReq(t, e.mcp, "b-"+k, "tools/call", "block", `,"name":"block","arguments":{"key":"`+k+`"}`))
				waitEntered(t, probe, k)
			}
			for round := range 2 {
				for n := 1; n <= 300; n++ {
					st, _, body := rawPost(t, e.mcp,
						fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{%s,"requestId":"sb-%d","reason":"spray %d"}}`, meta, n, round),
						modernHeaders("notifications/cancelled")...)
					if st >= 500 {
						t.Fatalf("spray: HTTP %d %s", st, body)
					}
				}
			}
			probe(t, "release", "a")
			select {
			case a := <-aDone:
				res, _ := a.msg["result"].(map[string]any)
				if a.st != http.StatusOK || !strings.Contains(fmt.Sprint(res["content"]), "released a") {
					t.Errorf("client A's call: HTTP %d %v; want its result (client B cancelled it)", a.st, a.msg)
				}
			case <-ctxDone(t):
				t.Fatal("client A's call did not end after its release")
			}
			if _, cancelled := tenantState(t, probe); slices.Contains(cancelled, "a") {
				t.Errorf("the upstream saw client A's call cancelled: %v", cancelled)
			}
			for _, k := range []string{"b1", "b2", "b3"} {
				probe(t, "release", k)
			}
		})
	}
}

// ctxDone is a channel that closes after the hang bound.
func ctxDone(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	t.Cleanup(cancel)
	return ctx.Done()
}

// TestClientCancelsItsOwnCall: the cancellations a client may make still
// reach the upstream as a cancellation of that call: a 2026-07-28 client
// closes its request's stream (spec §2.7), a 2025-era client sends
// notifications/cancelled naming its own request in its session.
func TestClientCancelsItsOwnCall(t *testing.T) {
	for _, kind := range []string{upModern, upLegacy, upStdio} {
		t.Run(kind, func(t *testing.T) {
			e, probe := tenantEnv(t, kind)
			// 2026-07-28: the client closes its stream.
			ctx, cancel := context.WithCancel(context.Background())
			req := rpcReq(t, e.mcp, 1, "tools/call", "block", `,"name":"block","arguments":{"key":"modern"}`)
			go func() {
				resp, err := http.DefaultClient.Do(req.WithContext(ctx))
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
			waitEntered(t, probe, "modern")
			cancel()
			eventually.True(t, "the upstream to see the 2026-07-28 client's call cancelled", func() bool {
				_, cancelled := tenantState(t, probe)
				return slices.Contains(cancelled, "modern")
			})

			// 2025-11-25: notifications/cancelled for its own request.
			sid := legacyInit(t, e.mcp, "2025-11-25")
			hdr := []string{"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"}
			go doQuiet(legacyReq(t, e.mcp, 7, "tools/call", `{"name":"block","arguments":{"key":"legacy"}}`, hdr...))
			waitEntered(t, probe, "legacy")
			st, _, body := rawPost(t, e.mcp, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`, hdr...)
			if st != http.StatusAccepted || len(body) != 0 {
				t.Fatalf("notifications/cancelled: HTTP %d %q, want 202 without a body", st, body)
			}
			eventually.True(t, "the upstream to see the 2025-era client's call cancelled", func() bool {
				_, cancelled := tenantState(t, probe)
				return slices.Contains(cancelled, "legacy")
			})
		})
	}
}

// TestNotificationsStopAtTheChokePoint: what a client sends as a
// notification never reaches the upstream, whatever its method or headers,
// and the client never gets an upstream's body for it: the notifications a
// client may send (2026-07-28: notifications/cancelled; 2025-era:
// cancelled, initialized, progress, roots/list_changed, tasks/status) get
// 202 with no body, anything else 400 with the sidecar's JSON-RPC error, and
// a 2026-07-28 notification's Mcp-Method must match its body like a
// request's (400 -32020).
func TestNotificationsStopAtTheChokePoint(t *testing.T) {
	uris := make([]string, 2000)
	for i := range uris {
		uris[i] = fmt.Sprintf(`"test://marker-listen/%d"`, i)
	}
	listenParams := `"notifications":{"toolsListChanged":true,"resourceSubscriptions":[` + strings.Join(uris, ",") + `]}`
	for _, kind := range []string{upModern, upLegacy, upStdio} {
		t.Run(kind, func(t *testing.T) {
			e, probe := tenantEnv(t, kind)
			sid := legacyInit(t, e.mcp, "2025-11-25")
			legacyHdr := []string{"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"}
			for _, tc := range []struct {
				name   string
				body   string
				hdr    []string
				status int
				code   string // JSON-RPC error code of the answer ("" for 202)
				marker string // must never reach the upstream
			}{
				{"2026 arbitrary method", `{"jsonrpc":"2.0","method":"notifications/marker-1","params":{` + meta + `}}`,
					modernHeaders("notifications/marker-1"), 400, "-32601", "marker-1"},
				{"2026 tools/call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{` + meta + `,"name":"state","arguments":{"key":"marker-2"}}}`,
					append(modernHeaders("tools/call"), "Mcp-Name", "state"), 400, "-32600", "marker-2"},
				{"2026 cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta + `,"requestId":"sb-1","reason":"marker-3"}}`,
					modernHeaders("notifications/cancelled"), 202, "", "marker-3"},
				{"2026 cancelled without _meta (go-sdk clients)", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"sb-2","reason":"marker-4"}}`,
					modernHeaders("notifications/cancelled"), 202, "", "marker-4"},
				{"2026 Mcp-Method subscriptions/listen on a notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta + `,"requestId":"x",` + listenParams + `}}`,
					modernHeaders("subscriptions/listen"), 400, "-32020", "marker-listen"},
				{"2026 subscriptions/listen without id", `{"jsonrpc":"2.0","method":"subscriptions/listen","params":{` + meta + `,` + listenParams + `}}`,
					modernHeaders("subscriptions/listen"), 400, "-32600", "marker-listen"},
				{"2026 notification without Mcp-Method", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta + `,"requestId":"sb-3","reason":"marker-5"}}`,
					[]string{"MCP-Protocol-Version", "2026-07-28"}, 400, "-32020", "marker-5"},
				{"2026 claim without the version header", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + meta + `,"requestId":"sb-3","reason":"marker-6"}}`,
					[]string{"Mcp-Method", "notifications/cancelled"}, 400, "-32020", "marker-6"},
				{"2025 arbitrary method", `{"jsonrpc":"2.0","method":"notifications/marker-7"}`, legacyHdr, 400, "-32601", "marker-7"},
				{"2025 tools/call without id", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"state","arguments":{"key":"marker-8"}}}`, legacyHdr, 400, "-32600", "marker-8"},
				{"2025 roots/list_changed", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"_meta":{"m":"marker-9"}}}`, legacyHdr, 202, "", "marker-9"},
				{"2025 progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"marker-10","progress":1}}`, legacyHdr, 202, "", "marker-10"},
			} {
				st, ct, body := rawPost(t, e.mcp, tc.body, tc.hdr...)
				if st != tc.status {
					t.Errorf("%s: HTTP %d %q, want %d", tc.name, st, body, tc.status)
					continue
				}
				if tc.code == "" {
					if len(body) != 0 {
						t.Errorf("%s: 202 with a body %q", tc.name, body)
					}
				} else {
					var msg map[string]any
					if !strings.HasPrefix(ct, "application/json") || json.Unmarshal(body, &msg) != nil {
						t.Errorf("%s: HTTP %d %s %q, want the sidecar's JSON-RPC error", tc.name, st, ct, body)
						continue
					}
					er, _ := msg["error"].(map[string]any)
					if fmt.Sprint(er["code"]) != tc.code || msg["id"] != nil {
						t.Errorf("%s: %v, want code %s and id null", tc.name, msg, tc.code)
					}
				}
				if got := probe(t, "seen", tc.marker); got != "not seen" {
					t.Errorf("%s: reached the upstream: %s", tc.name, got)
				}
			}
		})
	}
}

// TestParamHeadersCheckedForEveryUpstream: a 2026-07-28 client's
// Mcp-Param-* header that disagrees with the body (or is missing) is
// refused the same way whether the upstream sees the headers (a 2026-07-28
// go-sdk server validates them itself) or not (a 2025-era server, stdio
// behind the bridge: the sidecar validates them as a 2026 server would).
func TestParamHeadersCheckedForEveryUpstream(t *testing.T) {
	call := func(e *env, args string, hdr ...string) (int, map[string]any) {
		req := rpcReq(t, e.mcp, 9, "tools/call", "regional", `,"name":"regional","arguments":`+args)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		st, _, msg := do(t, req)
		return st, msg
	}
	cases := []struct {
		name string
		args string
		hdr  []string
	}{
		{"mismatch", `{"region":"eu-west-1"}`, []string{"Mcp-Param-Region", "us-east-2"}},
		{"missing", `{"region":"eu-west-1"}`, nil},
		{"header for an absent argument", `{"level":3}`, []string{"Mcp-Param-Region", "eu-west-1"}},
		{"invalid base64", `{"region":"eu-west-1"}`, []string{"Mcp-Param-Region", "=?base64?***?="}},
		{"base64 of another value", `{"region":"Zürich"}`, []string{"Mcp-Param-Region", "=?base64?WnVyaWNo?="}},
	}
	envs := map[string]*env{}
	for _, kind := range []string{upModern, upLegacy, upStdio} {
		envs[kind], _ = tenantEnv(t, kind)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantSt, want := call(envs[upModern], tc.args, tc.hdr...)
			if er, _ := want["error"].(map[string]any); wantSt != http.StatusBadRequest || fmt.Sprint(er["code"]) != "-32020" {
				t.Fatalf("the 2026-07-28 upstream answered HTTP %d %v; want 400 -32020", wantSt, want)
			}
			for _, kind := range []string{upLegacy, upStdio} {
				st, msg := call(envs[kind], tc.args, tc.hdr...)
				if st != wantSt || fmt.Sprint(msg) != fmt.Sprint(want) {
					t.Errorf("%s: HTTP %d %v; want HTTP %d %v as from the 2026-07-28 upstream", kind, st, msg, wantSt, want)
				}
			}
		})
	}
	// Headers that agree with the body pass, for every upstream.
	for kind, e := range envs {
		for _, tc := range []struct{ args, hv, want string }{
			{`{"region":"eu-west-1"}`, "eu-west-1", "region=eu-west-1"},
			{`{"region":"Zürich"}`, "=?base64?WsO8cmljaA==?=", "region=Zürich"},
		} {
			st, msg := call(e, tc.args, "Mcp-Param-Region", tc.hv)
			if got := resultText(t, st, msg); got != tc.want {
				t.Errorf("%s: %q, want %q", kind, got, tc.want)
			}
		}
	}
}

// TestStdioBridgeForwardsOnlyClientNotifications: the bridge, a 2025-era
// server in front of a child every session shares, passes on only the
// notifications a client sends (progress; cancelled mapped within the
// session); anything else gets 400 and never reaches the child.
func TestStdioBridgeForwardsOnlyClientNotifications(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startEnv(t, []string{tenantStdioEnv + "=1"}, sidecarBin, "stdio", "--listen", addr, "--", exe)
	url := "http://" + addr + "/mcp"
	sid := bridgeSession(t, url)
	hdr := []string{"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"}
	seen := func(marker string) string {
		st, _, body := rawPost(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"seen","arguments":{"key":"`+marker+`"}}}`, hdr...)
		var msg map[string]any
		if err := json.Unmarshal(body, &msg); err != nil {
			t.Fatalf("seen: HTTP %d %q", st, body)
		}
		return resultText(t, st, msg)
	}
	if st, _, body := rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/marker-b1","params":{}}`, hdr...); st != http.StatusBadRequest {
		t.Errorf("arbitrary notification: HTTP %d %q, want 400", st, body)
	}
	if got := seen("marker-b1"); got != "not seen" {
		t.Errorf("an arbitrary notification reached the child: %s", got)
	}
	if st, _, body := rawPost(t, url, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"marker-b2","progress":1}}`, hdr...); st != http.StatusAccepted || len(body) != 0 {
		t.Errorf("notifications/progress: HTTP %d %q, want 202", st, body)
	}
	eventually.True(t, "the child to get the client's progress", func() bool { return seen("marker-b2") != "not seen" })
}
