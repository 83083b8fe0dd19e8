//go:build e2e

package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

func TestValidationErrors(t *testing.T) {
	e := newEnv(t, "--max-body-bytes", "65536")
	okReq := func(id any, method, name, extra string) func() *http.Request {
		return func() *http.Request { return rpcReq(t, e.mcp, id, method, name, extra) }
	}
	with := func(f func() *http.Request, mod func(*http.Request)) func() *http.Request {
		return func() *http.Request { r := f(); mod(r); return r }
	}
	raw := func(body string, hdr map[string]string) func() *http.Request {
		return func() *http.Request {
			r := rpcReq(t, e.mcp, 1, "tools/list", "", "")
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
			for k, v := range hdr {
				r.Header.Set(k, v)
			}
			return r
		}
	}
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   float64 // 0: success expected
		id     any     // expected id on errors
		check  func(t *testing.T, msg map[string]any)
	}{
		{name: "GET is 405", req: func() *http.Request { r, _ := http.NewRequest(http.MethodGet, e.mcp, nil); return r }, status: 405, code: -32600},
		{name: "DELETE is 405", req: func() *http.Request { r, _ := http.NewRequest(http.MethodDelete, e.mcp, nil); return r }, status: 405, code: -32600},
		{name: "foreign Origin is 403", req: with(okReq(11, "tools/list", "", ""), func(r *http.Request) { r.Header.Set("Origin", "http://evil.example.com") }), status: 403, code: -32600, id: 11.0},
		{name: "foreign Host on loopback is 403", req: with(okReq(12, "server/discover", "", ""), func(r *http.Request) { r.Host = "evil.example.com" }), status: 403, code: -32600, id: 12.0},
		{name: "localhost Origin is fine", req: with(okReq(13, "server/discover", "", ""), func(r *http.Request) { r.Header.Set("Origin", "http://localhost:3000") }), status: 200},
		{name: "missing _meta", req: raw(`{"jsonrpc":"2.0","id":"m1","method":"server/discover","params":{}}`, map[string]string{"Mcp-Method": "server/discover"}), status: 400, code: -32602, id: "m1"},
		{name: "missing protocolVersion", req: raw(`{"jsonrpc":"2.0","id":"m2","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, map[string]string{"Mcp-Method": "server/discover"}), status: 400, code: -32602, id: "m2"},
		{name: "missing clientCapabilities", req: raw(`{"jsonrpc":"2.0","id":"m3","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, map[string]string{"Mcp-Method": "server/discover"}), status: 400, code: -32602, id: "m3"},
		{name: "clientInfo is optional", req: raw(`{"jsonrpc":"2.0","id":"m4","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, map[string]string{"Mcp-Method": "server/discover"}), status: 200},
		{name: "unsupported version", req: raw(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, map[string]string{"MCP-Protocol-Version": "v999.0.0"}), status: 400, code: -32022, id: 5.0,
			check: func(t *testing.T, msg map[string]any) {
				d := msg["error"].(map[string]any)["data"].(map[string]any)
				if d["requested"] != "v999.0.0" || !strings.Contains(fmt.Sprint(d["supported"]), "2026-07-28") {
					t.Errorf("data = %v", d)
				}
			}},
		{name: "date-shaped unknown version gets a JSON body", req: raw(`{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`, map[string]string{"MCP-Protocol-Version": "1900-01-01"}), status: 400, code: -32022, id: 6.0},
		{name: "header vs _meta version", req: raw(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, nil), status: 400, code: -32020, id: 7.0},
		{name: "missing MCP-Protocol-Version", req: with(okReq(8, "tools/list", "", ""), func(r *http.Request) { r.Header.Del("MCP-Protocol-Version") }), status: 400, code: -32020, id: 8.0},
		{name: "Mcp-Method values are case-sensitive", req: with(okReq(9, "tools/list", "", ""), func(r *http.Request) { r.Header.Set("Mcp-Method", "TOOLS/LIST") }), status: 400, code: -32020, id: 9.0},
		{name: "missing Mcp-Method", req: with(okReq(10, "tools/list", "", ""), func(r *http.Request) { r.Header.Del("Mcp-Method") }), status: 400, code: -32020, id: 10.0},
		{name: "header whitespace is trimmed", req: with(okReq(14, "tools/list", "", ""), func(r *http.Request) { r.Header.Set("Mcp-Method", "  tools/list\t") }), status: 200},
		{name: "missing Mcp-Name", req: okReq(15, "tools/call", "", `,"name":"test_simple_text","arguments":{}`), status: 400, code: -32020, id: 15.0},
		{name: "Mcp-Name mismatch", req: okReq(16, "tools/call", "test_image_content", `,"name":"test_simple_text","arguments":{}`), status: 400, code: -32020, id: 16.0},
		{name: "Mcp-Name base64 of another value", req: okReq(17, "resources/read", "=?base64?dGVzdDovL290aGVy?=", `,"uri":"test://static-text"`), status: 400, code: -32020, id: 17.0},
		{name: "bad base64 in Mcp-Name", req: okReq(18, "resources/read", "=?base64?!!!?=", `,"uri":"test://static-text"`), status: 400, code: -32020, id: 18.0},
		{name: "non-ASCII Mcp-Param value", req: with(okReq(19, "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`), func(r *http.Request) { r.Header.Set("Mcp-Param-Region", "café") }), status: 400, code: -32020, id: 19.0},
		{name: "removed method initialize", req: okReq(20, "initialize", "", ""), status: 404, code: -32601, id: 20.0},
		{name: "removed method ping", req: okReq(21, "ping", "", ""), status: 404, code: -32601, id: 21.0},
		{name: "removed method resources/subscribe", req: okReq(22, "resources/subscribe", "", `,"uri":"test://static-text"`), status: 404, code: -32601, id: 22.0},
		{name: "batch", req: raw(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, nil), status: 400, code: -32600},
		{name: "parse error", req: raw(`{"jsonrpc":`, nil), status: 400, code: -32700},
		{name: "body too large", req: raw(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"`+strings.Repeat("x", 70000)+`"}}`, nil), status: 413, code: -32600},
		{name: "wrong Content-Type", req: with(okReq(23, "tools/list", "", ""), func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }), status: 415, code: -32600, id: 23.0},
		{name: "listen without notifications", req: okReq(24, "subscriptions/listen", "", ""), status: 400, code: -32602, id: 24.0},
		{name: "string ids keep their type", req: with(okReq("s-25", "tools/list", "", ""), func(r *http.Request) { r.Header.Set("Mcp-Method", "nope") }), status: 400, code: -32020, id: "s-25"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, hdr, msg := do(t, c.req())
			if st != c.status {
				t.Fatalf("status = %d, want %d (body %v)", st, c.status, msg)
			}
			if st == 405 && hdr.Get("Allow") != "POST" {
				t.Errorf("Allow = %q", hdr.Get("Allow"))
			}
			if c.code == 0 {
				if msg["error"] != nil || msg["result"] == nil {
					t.Fatalf("want a result, got %v", msg)
				}
				return
			}
			errObj, _ := msg["error"].(map[string]any)
			if errObj == nil || errObj["code"] != c.code {
				t.Fatalf("error = %v, want code %v", msg["error"], c.code)
			}
			if c.id != nil && msg["id"] != c.id {
				t.Errorf("id = %#v, want %#v", msg["id"], c.id)
			}
			if c.check != nil {
				c.check(t, msg)
			}
		})
	}
}

func TestForwardingAndStamping(t *testing.T) {
	e := newEnv(t)
	t.Run("cacheable results carry hints and resultType", func(t *testing.T) {
		for _, m := range []struct{ method, name, extra string }{
			{"tools/list", "", ""}, {"prompts/list", "", ""}, {"resources/list", "", ""},
			{"resources/templates/list", "", ""}, {"resources/read", "test://static-text", `,"uri":"test://static-text"`},
			{"server/discover", "", ""},
		} {
			st, _, msg := do(t, rpcReq(t, e.mcp, m.method, m.method, m.name, m.extra))
			res, _ := msg["result"].(map[string]any)
			if st != 200 || res == nil {
				t.Fatalf("%s: HTTP %d %v", m.method, st, msg)
			}
			if res["ttlMs"] != 0.0 || res["cacheScope"] != "private" || res["resultType"] != "complete" {
				t.Errorf("%s: ttlMs=%v cacheScope=%v resultType=%v", m.method, res["ttlMs"], res["cacheScope"], res["resultType"])
			}
		}
	})
	t.Run("discover merges capabilities and keeps serverInfo", func(t *testing.T) {
		_, _, msg := do(t, rpcReq(t, e.mcp, "d", "server/discover", "", ""))
		res := msg["result"].(map[string]any)
		caps := res["capabilities"].(map[string]any)
		for _, k := range []string{"tools", "prompts", "resources"} {
			if caps[k].(map[string]any)["listChanged"] != true {
				t.Errorf("%s.listChanged missing: %v", k, caps)
			}
		}
		if caps["resources"].(map[string]any)["subscribe"] != true {
			t.Errorf("resources.subscribe missing")
		}
		info := res["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"].(map[string]any)
		if info["name"] != "mcp-conformance-test-server" {
			t.Errorf("serverInfo = %v", info)
		}
	})
	t.Run("tools/call results pass through", func(t *testing.T) {
		msg := callTool(t, e.mcp, "test_simple_text")
		res := msg["result"].(map[string]any)
		if _, has := res["ttlMs"]; has {
			t.Errorf("tools/call must not carry cache hints: %v", res)
		}
		if !strings.Contains(fmt.Sprint(res["content"]), "simple text response") {
			t.Errorf("content = %v", res["content"])
		}
	})
	t.Run("input_required results pass through unstamped", func(t *testing.T) {
		st, _, msg := do(t, rpcReq(t, e.mcp, "ir", "tools/call", "test_input_required_result_elicitation", `,"name":"test_input_required_result_elicitation","arguments":{}`))
		res, _ := msg["result"].(map[string]any)
		if st != 200 || res["resultType"] != "input_required" {
			t.Fatalf("HTTP %d %v", st, msg)
		}
		if _, has := res["ttlMs"]; has {
			t.Errorf("input_required must not carry cache hints")
		}
	})
	t.Run("go-sdk client: progress over SSE, one data line per message", func(t *testing.T) {
		var mu sync.Mutex
		var progress []float64
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, r.Params.Progress)
				mu.Unlock()
			},
		})
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p1"}})
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %v %v", err, res)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(progress) < 2 {
			t.Errorf("progress notifications = %v, want several", progress)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) == 0 {
			t.Fatalf("ListTools: %v", err)
		}
	})
}

// TestCancellation: closing the client's request cancels the upstream one.
// The upstream is a small go-sdk server of ours with a tool that blocks
// until its context ends.
func TestCancellation(t *testing.T) {
	started, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "blocker", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			cancelled <- struct{}{}
		case <-time.After(hang):
		}
		return &mcp.CallToolResult{}, nil, nil
	})
	e := sidecarInFrontOf(t, srv, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := rpcReq(t, e.mcp, "blocking", "tools/call", "block", `,"name":"block","arguments":{}`).WithContext(ctx)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-started:
	case <-time.After(hang):
		t.Fatal("the tool never started")
	}
	if got := metricValue(t, e.admin, "switchboard_sidecar_inflight_requests"); got != 1 {
		t.Errorf("in flight = %v, want 1", got)
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(hang):
		t.Fatal("the upstream request was not cancelled")
	}
	eventually.True(t, "no request in flight", func() bool { return metricValue(t, e.admin, "switchboard_sidecar_inflight_requests") == 0 })
}

// metricValue reads one unlabelled series from the admin port.
func metricValue(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestListen(t *testing.T) {
	e := newEnv(t)
	t.Run("ack first, honoured subset, tags keep the id type", func(t *testing.T) {
		num := listen(t, e.mcp, 7, `{"toolsListChanged":true,"resourceSubscriptions":["test://watched-resource"]}`)
		str := listen(t, e.mcp, "sub-7", `{"toolsListChanged":true}`)
		for _, c := range []struct {
			s  *sse
			id any
		}{{num, 7.0}, {str, "sub-7"}} {
			ack := c.s.next(t)
			if ack["method"] != "notifications/subscriptions/acknowledged" || subID(ack) != c.id {
				t.Fatalf("first message = %v", ack)
			}
		}
		callTool(t, e.mcp, "test_trigger_tool_change")
		for _, c := range []struct {
			s  *sse
			id any
		}{{num, 7.0}, {str, "sub-7"}} {
			n, _ := c.s.nextMethod(t, "notifications/tools/list_changed")
			if subID(n) != c.id {
				t.Errorf("tag = %#v, want %#v", subID(n), c.id)
			}
		}
		// The raw frame keeps a number a number.
		for {
			select {
			case d := <-num.raw:
				if strings.Contains(d, "list_changed") && !strings.Contains(d, `"io.modelcontextprotocol/subscriptionId":7}`) {
					t.Errorf("frame %s", d)
				}
				continue
			default:
			}
			break
		}
	})
	t.Run("filter: nothing the client did not ask for", func(t *testing.T) {
		prompts := listen(t, e.mcp, "p", `{"promptsListChanged":true}`)
		tools := listen(t, e.mcp, "t", `{"toolsListChanged":true}`)
		prompts.next(t)
		tools.next(t)
		callTool(t, e.mcp, "test_trigger_tool_change")
		tools.nextMethod(t, "notifications/tools/list_changed")
		callTool(t, e.mcp, "test_trigger_prompt_change")
		_, skipped := prompts.nextMethod(t, "notifications/prompts/list_changed")
		if len(skipped) != 0 {
			t.Errorf("prompts-only stream got %v before its prompts change", skipped)
		}
	})
	t.Run("resources/updated only to streams subscribed to the URI", func(t *testing.T) {
		watched := listen(t, e.mcp, "w", `{"resourceSubscriptions":["test://watched-resource"]}`)
		other := listen(t, e.mcp, "o", `{"resourceSubscriptions":["test://static-text"],"toolsListChanged":true}`)
		watched.next(t)
		other.next(t)
		// The everything-server updates test://watched-resource every 3 s.
		n, _ := watched.nextMethod(t, "notifications/resources/updated")
		if n["params"].(map[string]any)["uri"] != "test://watched-resource" {
			t.Fatalf("update = %v", n)
		}
		watched.nextMethod(t, "notifications/resources/updated") // a second round has now reached every stream
		callTool(t, e.mcp, "test_trigger_tool_change")
		_, skipped := other.nextMethod(t, "notifications/tools/list_changed")
		for _, m := range skipped {
			if m["method"] == "notifications/resources/updated" {
				t.Errorf("stream subscribed to another URI got %v", m)
			}
		}
	})
	t.Run("empty honoured filter: ack then complete", func(t *testing.T) {
		s := listen(t, e.mcp, 99, `{}`)
		if ack := s.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first = %v", ack)
		}
		done := s.next(t)
		res, _ := done["result"].(map[string]any)
		if done["id"] != 99.0 || res["resultType"] != "complete" || subID(done) != 99.0 {
			t.Fatalf("complete = %v", done)
		}
	})
	t.Run("many concurrent subscriptions are independent", func(t *testing.T) {
		const n = 20
		streams := make([]*sse, n)
		for i := range streams {
			streams[i] = listen(t, e.mcp, i+1000, `{"toolsListChanged":true}`)
			streams[i].next(t)
		}
		streams[3].close() // one client leaves
		callTool(t, e.mcp, "test_trigger_tool_change")
		for i, s := range streams {
			if i == 3 {
				continue
			}
			m, _ := s.nextMethod(t, "notifications/tools/list_changed")
			if subID(m) != float64(i+1000) {
				t.Errorf("stream %d tagged %v", i, subID(m))
			}
		}
		eventually.True(t, "the listen streams to be counted", func() bool {
			// 19 here plus the streams of the earlier subtests that are still open.
			return metricValue(t, e.admin, "switchboard_sidecar_listen_streams") >= n-1
		})
	})
	t.Run("go-sdk client receives list changes through the sidecar", func(t *testing.T) {
		changed := make(chan struct{}, 8)
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		})
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		// The client opens its listen in the background; trigger until it sees one.
		eventually.True(t, "a tools change to reach the stream", func() bool {
			callTool(t, e.mcp, "test_trigger_tool_change")
			select {
			case <-changed:
				return true
			case <-time.After(300 * time.Millisecond):
				return false
			}
		})
	})
}

// Idle listen streams keep no goroutine each in the sidecar (one epoll set watches their
// clients), and a client that goes away is still noticed: its stream ends.
func TestIdleStreamsKeepNoGoroutine(t *testing.T) {
	e := newEnv(t)
	const n = 100
	first := listen(t, e.mcp, 0, `{"toolsListChanged":true}`)
	first.next(t)
	base := metricValue(t, e.admin, "go_goroutines")
	streams := []*sse{first}
	for i := 1; i < n; i++ {
		s := listen(t, e.mcp, i, `{"toolsListChanged":true}`)
		s.next(t)
		streams = append(streams, s)
	}
	eventually.True(t, "the listen streams to be counted", func() bool {
		return metricValue(t, e.admin, "switchboard_sidecar_listen_streams") == n
	})
	if g := metricValue(t, e.admin, "go_goroutines"); g-base >= n/2 {
		t.Fatalf("%v goroutines with %d idle listen streams, %v with one: a goroutine per stream", g, n, base)
	}
	for _, s := range streams {
		s.close()
	}
	eventually.True(t, "every stream to end once its client left", func() bool {
		return metricValue(t, e.admin, "switchboard_sidecar_listen_streams") == 0
	})
}

func TestListenCap(t *testing.T) {
	e := newEnv(t, "--max-listen-streams", "2")
	a := listen(t, e.mcp, 1, `{"toolsListChanged":true}`)
	b := listen(t, e.mcp, 2, `{"toolsListChanged":true}`)
	a.next(t)
	b.next(t)
	st, _, msg := do(t, rpcReq(t, e.mcp, 3, "subscriptions/listen", "", `,"notifications":{"toolsListChanged":true}`))
	if st != http.StatusServiceUnavailable || msg["error"].(map[string]any)["code"] != -32603.0 || msg["id"] != 3.0 {
		t.Fatalf("over the cap: HTTP %d %v", st, msg)
	}
	a.close()
	// The slot frees once the sidecar notices the disconnect.
	eventually.True(t, "one listen stream left", func() bool { return metricValue(t, e.admin, "switchboard_sidecar_listen_streams") == 1 })
	c := listen(t, e.mcp, 4, `{"toolsListChanged":true}`)
	if ack := c.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("after a slot freed: %v", ack)
	}
}

func TestUpstreamRestart(t *testing.T) {
	e := newEnv(t)
	s := listen(t, e.mcp, "survivor", `{"toolsListChanged":true}`)
	s.next(t)
	e.up.kill()
	// While the upstream is down the stream stays open and readiness fails.
	eventually.True(t, "readiness to follow the upstream", func() bool {
		r, err := http.Get(e.admin + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusServiceUnavailable
	})
	e.up = startUpstream(t, e.upAddr)
	// After the relay re-establishes, clients are told to re-read…
	if m, _ := s.nextMethod(t, "notifications/tools/list_changed"); subID(m) != "survivor" {
		t.Fatalf("invalidation = %v", m)
	}
	// …and live changes flow again.
	callTool(t, e.mcp, "test_trigger_tool_change")
	s.nextMethod(t, "notifications/tools/list_changed")
}

func TestAdmin(t *testing.T) {
	e := newEnv(t)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		r, err := http.Get(e.admin + p)
		if err != nil || r.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", p, err, r)
		}
		r.Body.Close()
	}
	callTool(t, e.mcp, "test_simple_text")
	do(t, rpcReq(t, e.mcp, 1, "ping", "", ""))
	s := listen(t, e.mcp, "m", `{"toolsListChanged":true}`)
	s.next(t)
	callTool(t, e.mcp, "test_trigger_tool_change")
	s.nextMethod(t, "notifications/tools/list_changed")
	r, _ := http.Get(e.admin + "/metrics")
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	for _, want := range []string{
		"switchboard_sidecar_listen_streams 1",
		`switchboard_sidecar_notifications_sent_total{type="notifications/tools/list_changed"}`,
		"switchboard_sidecar_fanout_duration_seconds_count",
		`switchboard_sidecar_upstream_request_duration_seconds_count{method="tools/call"}`,
		`switchboard_sidecar_errors_total{code="-32601"} 1`,
		"switchboard_sidecar_upstream_listen_connected 1",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q", want)
		}
	}

	// A sidecar whose upstream does not answer is alive but not ready.
	dead := &env{upAddr: freePort(t)}
	mcpAddr, adminAddr := freePort(t), freePort(t)
	start(t, sidecarBin, "--upstream", "http://"+dead.upAddr+"/mcp", "--listen", mcpAddr, "--admin-listen", adminAddr)
	eventually.True(t, "the sidecar to answer /healthz", func() bool {
		r, err := http.Get("http://" + adminAddr + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	r, err := http.Get("http://" + adminAddr + "/readyz")
	if err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz without upstream: %v %v", err, r)
	}
	r.Body.Close()
}

// TestJSONUpstream: an upstream that answers with application/json (a small
// go-sdk server of ours with JSONResponse) is forwarded as JSON, stamped.
func TestJSONUpstream(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "json-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://r", Text: "hello"}}}, nil
	})
	e := sidecarInFrontOf(t, srv, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})

	for _, c := range []struct {
		method, name, extra string
		hints               bool
	}{
		{"tools/list", "", "", true},
		{"resources/read", "test://r", `,"uri":"test://r"`, true},
		{"tools/call", "echo", `,"name":"echo","arguments":{"text":"héllo"}`, false},
	} {
		st, hdr, msg := do(t, rpcReq(t, e.mcp, c.method, c.method, c.name, c.extra))
		res, _ := msg["result"].(map[string]any)
		if st != 200 || res == nil || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Fatalf("%s: HTTP %d %s %v", c.method, st, hdr.Get("Content-Type"), msg)
		}
		_, hasTTL := res["ttlMs"]
		if res["resultType"] != "complete" || hasTTL != c.hints || (c.hints && res["cacheScope"] != "private") {
			t.Errorf("%s: result %v", c.method, res)
		}
	}
	_, _, msg := do(t, rpcReq(t, e.mcp, "c", "tools/call", "echo", `,"name":"echo","arguments":{"text":"héllo"}`))
	if !strings.Contains(fmt.Sprint(msg["result"]), "héllo") {
		t.Errorf("echo = %v", msg)
	}
	// This upstream serves resources without subscribe: the sidecar still
	// acknowledges the subscription (it provides resources.subscribe) but
	// the relay has no upstream URI stream.
	s := listen(t, e.mcp, 1, `{"resourceSubscriptions":["test://r"],"toolsListChanged":true}`)
	ack := s.next(t)
	n := ack["params"].(map[string]any)["notifications"].(map[string]any)
	if n["toolsListChanged"] != true || fmt.Sprint(n["resourceSubscriptions"]) != "[test://r]" {
		t.Errorf("ack = %v", ack)
	}
}

// sidecarInFrontOf serves srv over Streamable HTTP on a free port as the upstream and starts the
// sidecar in front of it.
func sidecarInFrontOf(t *testing.T, srv *mcp.Server, opts *mcp.StreamableHTTPOptions) *env {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	upAddr := freePort(t)
	hs := &http.Server{Addr: upAddr, Handler: h}
	go hs.ListenAndServe()
	t.Cleanup(func() { hs.Close() })
	e := &env{upAddr: upAddr}
	e.startSidecar(t)
	return e
}

// TestReadyzHidesUpstreamErrors (F20): /readyz says the upstream is not ready without echoing
// what the upstream answered (its error body may hold anything); the log has the details.
func TestReadyzHidesUpstreamErrors(t *testing.T) {
	const secret = "db-password=hunter2"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "connection to postgres failed: "+secret, http.StatusInternalServerError)
	}))
	t.Cleanup(up.Close)
	mcpAddr, adminAddr := freePort(t), freePort(t)
	sc := start(t, sidecarBin, "--upstream", up.URL+"/mcp", "--listen", mcpAddr, "--admin-listen", adminAddr)
	eventually.True(t, "the sidecar to answer /healthz", func() bool {
		r, err := http.Get("http://" + adminAddr + "/healthz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	r, err := http.Get("http://" + adminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusServiceUnavailable || strings.Contains(string(b), secret) || strings.Contains(string(b), "postgres") {
		t.Fatalf("readyz: HTTP %d %q; want 503 without the upstream's answer", r.StatusCode, b)
	}
	eventually.True(t, "the upstream's answer in the log", func() bool { return strings.Contains(sc.output(), secret) })
}
