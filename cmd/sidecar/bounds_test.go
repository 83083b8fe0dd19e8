//go:build e2e

package main_test

// Resource bounds of a real sidecar process (security review findings F3 and F4): subscriptions
// are capped per URI, per 2025-era session, per listen stream and per replica, and refused with
// the spec's errors instead of growing until the OOM killer ends the pod; a request body that
// never arrives loses its connection at the body deadline, while long-lived streams stay; the
// connections and requests the sidecar holds at once are capped.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/sidecar"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
)

// uriOf returns a URI of exactly n bytes, distinct per i.
func uriOf(n, i int) string {
	p := fmt.Sprintf("test://r%d/", i)
	return p + strings.Repeat("a", n-len(p))
}

// uriList renders count distinct URIs of n bytes as a JSON array.
func uriList(count, n, from int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range count {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", uriOf(n, from+i))
	}
	b.WriteByte(']')
	return b.String()
}

// tryListen sends a listen and returns its HTTP status and either its JSON-RPC error (a JSON
// answer) or its first event (an acknowledged stream, which is then closed).
func tryListen(t *testing.T, url string, id any, filter string) (int, map[string]any) {
	t.Helper()
	req := rpcReq(t, url, id, "subscriptions/listen", "", `,"notifications":`+filter)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, _, msg := decodeBody(t, resp)
		return resp.StatusCode, msg
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return resp.StatusCode, map[string]any{"event": d}
		}
	}
	t.Fatalf("listen stream ended without an event: %v", sc.Err())
	return 0, nil
}

func decodeBody(t *testing.T, resp *http.Response) (int, http.Header, map[string]any) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("HTTP %d body is not JSON: %q", resp.StatusCode, b)
		}
	}
	return resp.StatusCode, resp.Header, msg
}

// wantError checks an answer is the JSON-RPC error code with the HTTP status.
func wantError(t *testing.T, what string, status int, msg map[string]any, wantStatus int, wantCode float64) {
	t.Helper()
	e, _ := msg["error"].(map[string]any)
	if status != wantStatus || e == nil || e["code"] != wantCode {
		t.Fatalf("%s: HTTP %d %.300v, want HTTP %d with JSON-RPC error %v", what, status, msg, wantStatus, wantCode)
	}
}

func wantAck(t *testing.T, what string, status int, msg map[string]any) {
	t.Helper()
	if ev, _ := msg["event"].(string); status != http.StatusOK || !strings.Contains(ev, "notifications/subscriptions/acknowledged") {
		t.Fatalf("%s: HTTP %d %.300v, want an acknowledged listen", what, status, msg)
	}
}

// TestSubscriptionURITooLong: a URI over 2048 bytes (the MCPResource CRD's bound) is refused with
// Invalid params, in a 2025-era resources/subscribe and in a listen; 2048 bytes are accepted.
func TestSubscriptionURITooLong(t *testing.T) {
	e := newEnv(t)
	long, fits := uriOf(sidecar.MaxURIBytes+1, 0), uriOf(sidecar.MaxURIBytes, 0)
	sid := legacyInit(t, e.mcp, "2025-11-25")
	hdr := []string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid}
	st, _, msg := do(t, legacyReq(t, e.mcp, 1, "resources/subscribe", `{"uri":"`+long+`"}`, hdr...))
	// 2025-era answers carry JSON-RPC errors with HTTP 200.
	wantError(t, "resources/subscribe of a 2049-byte URI", st, msg, http.StatusOK, -32602)
	if st, _, msg := do(t, legacyReq(t, e.mcp, 2, "resources/subscribe", `{"uri":"`+fits+`"}`, hdr...)); st != 200 || msg["result"] == nil {
		t.Fatalf("resources/subscribe of a 2048-byte URI: HTTP %d %v", st, msg)
	}
	st, msg = tryListen(t, e.mcp, "long", `{"resourceSubscriptions":["`+long+`"]}`)
	wantError(t, "listen with a 2049-byte URI", st, msg, http.StatusBadRequest, -32602)
	st, msg = tryListen(t, e.mcp, "fits", `{"resourceSubscriptions":["`+fits+`"]}`)
	wantAck(t, "listen with a 2048-byte URI", st, msg)
	if n := metric(t, e.admin, `switchboard_sidecar_subscriptions_refused_total{reason="uri"}`); n != 2 {
		t.Errorf("refused subscriptions (uri) = %v, want 2", n)
	}
}

// TestSubscriptionsPerSession: a 2025-era session holds at most 1024 subscriptions and 256 KiB of
// URIs; past either, resources/subscribe gets -32603 and the subscriptions it holds stay.
func TestSubscriptionsPerSession(t *testing.T) {
	e := newEnv(t)
	subscribe := func(sid string, id int, uri string) (int, map[string]any) {
		st, _, msg := do(t, legacyReq(t, e.mcp, id, "resources/subscribe", `{"uri":"`+uri+`"}`,
			"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid))
		return st, msg
	}
	t.Run("bytes", func(t *testing.T) {
		sid := legacyInit(t, e.mcp, "2025-11-25")
		// Each 2000-byte URI costs 2002 bytes (as JSON, quotes included).
		fit := legacy.MaxSessionSubscriptionBytes / 2002
		for i := range fit {
			if st, msg := subscribe(sid, i, uriOf(2000, i)); st != 200 || msg["result"] == nil {
				t.Fatalf("subscription %d of %d: HTTP %d %v", i+1, fit, st, msg)
			}
		}
		st, msg := subscribe(sid, fit, uriOf(2000, fit))
		wantError(t, fmt.Sprintf("subscription %d (over 256 KiB)", fit+1), st, msg, http.StatusOK, -32603)
		// What the session holds stays: subscribing again to one of its URIs is no new
		// subscription, and unsubscribing one makes room for another.
		if st, msg := subscribe(sid, fit+1, uriOf(2000, 0)); st != 200 || msg["result"] == nil {
			t.Fatalf("subscribing again to a held URI: HTTP %d %v", st, msg)
		}
		st, _, msg = do(t, legacyReq(t, e.mcp, "u", "resources/unsubscribe", `{"uri":"`+uriOf(2000, 0)+`"}`,
			"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid))
		if st != 200 || msg["result"] == nil {
			t.Fatalf("resources/unsubscribe: HTTP %d %v", st, msg)
		}
		if st, msg := subscribe(sid, fit+2, uriOf(2000, fit)); st != 200 || msg["result"] == nil {
			t.Fatalf("subscribing after an unsubscribe: HTTP %d %v", st, msg)
		}
	})
	t.Run("count", func(t *testing.T) {
		sid := legacyInit(t, e.mcp, "2025-11-25")
		for i := range legacy.MaxSessionSubscriptions {
			if st, msg := subscribe(sid, i, fmt.Sprintf("test://c/%d", i)); st != 200 || msg["result"] == nil {
				t.Fatalf("subscription %d: HTTP %d %v", i+1, st, msg)
			}
		}
		st, msg := subscribe(sid, -1, "test://c/one-more")
		wantError(t, "subscription 1025", st, msg, http.StatusOK, -32603)
	})
	if n := metric(t, e.admin, `switchboard_sidecar_subscriptions_refused_total{reason="session"}`); n != 2 {
		t.Errorf("refused subscriptions (session) = %v, want 2", n)
	}
}

// TestSubscriptionsPerStream: a listen names at most 1024 URIs of at most 256 KiB in all; past
// either it gets 400 -32602 (the filter is the request's params).
func TestSubscriptionsPerStream(t *testing.T) {
	e := newEnv(t)
	// 300-byte URIs cost 302 bytes each: 1024 of them are over 256 KiB.
	fit := sidecar.MaxStreamSubscriptionBytes / 302
	st, msg := tryListen(t, e.mcp, "fits", `{"resourceSubscriptions":`+uriList(fit, 300, 0)+`}`)
	wantAck(t, fmt.Sprintf("listen with %d URIs of 300 bytes", fit), st, msg)
	st, msg = tryListen(t, e.mcp, "bytes", `{"resourceSubscriptions":`+uriList(fit+1, 300, 0)+`}`)
	wantError(t, fmt.Sprintf("listen with %d URIs of 300 bytes", fit+1), st, msg, http.StatusBadRequest, -32602)
	st, msg = tryListen(t, e.mcp, "count", `{"resourceSubscriptions":`+uriList(sidecar.MaxStreamSubscriptions+1, 20, 0)+`}`)
	wantError(t, "listen with 1025 URIs", st, msg, http.StatusBadRequest, -32602)
	if n := metric(t, e.admin, `switchboard_sidecar_subscriptions_refused_total{reason="stream"}`); n != 2 {
		t.Errorf("refused subscriptions (stream) = %v, want 2", n)
	}
}

// TestSubscriptionsPerReplica: past --max-subscriptions or --max-subscription-bytes (every
// session's and stream's subscriptions on the replica together), a listen gets 503 -32603
// "Subscription limit reached" as past --max-listen-streams, and a 2025-era subscribe -32603.
// The streams that hold subscriptions keep them and keep getting notifications, and a closed
// stream gives its share back. An attack of many sessions subscribing big URIs leaves the held
// bytes within the bound.
func TestSubscriptionsPerReplica(t *testing.T) {
	t.Run("count", func(t *testing.T) {
		e := newEnv(t, "--max-subscriptions", "10")
		a := listen(t, e.mcp, "a", `{"toolsListChanged":true,"resourceSubscriptions":`+uriList(4, 30, 0)+`}`)
		b := listen(t, e.mcp, "b", `{"toolsListChanged":true,"resourceSubscriptions":`+uriList(4, 30, 4)+`}`)
		a.next(t)
		b.next(t)
		st, msg := tryListen(t, e.mcp, "c", `{"resourceSubscriptions":`+uriList(4, 30, 8)+`}`)
		wantError(t, "listen past 10 subscriptions", st, msg, http.StatusServiceUnavailable, -32603)
		if m, _ := msg["error"].(map[string]any)["message"].(string); !strings.Contains(m, "Subscription limit reached") {
			t.Errorf("message %q, want Subscription limit reached", m)
		}
		sid := legacyInit(t, e.mcp, "2025-11-25")
		hdr := []string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid}
		for i := range 2 {
			if st, _, msg := do(t, legacyReq(t, e.mcp, i, "resources/subscribe", `{"uri":"test://s/`+fmt.Sprint(i)+`"}`, hdr...)); st != 200 || msg["result"] == nil {
				t.Fatalf("subscription %d of the session: HTTP %d %v", i+9, st, msg)
			}
		}
		st, _, msg = do(t, legacyReq(t, e.mcp, 3, "resources/subscribe", `{"uri":"test://s/3"}`, hdr...))
		wantError(t, "subscribe past 10 subscriptions", st, msg, http.StatusOK, -32603)
		if n := metric(t, e.admin, "switchboard_sidecar_subscriptions"); n != 10 {
			t.Errorf("subscriptions held = %v, want 10", n)
		}
		// The streams holding subscriptions are untouched.
		callTool(t, e.mcp, "test_trigger_tool_change")
		a.nextMethod(t, "notifications/tools/list_changed")
		b.nextMethod(t, "notifications/tools/list_changed")
		// A GET stream holds its own copy of its session's subscriptions: no room for it now.
		get, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
		get.Header.Set("Accept", "text/event-stream")
		get.Header.Set("Mcp-Session-Id", sid)
		st, _, msg = do(t, get)
		wantError(t, "GET stream past 10 subscriptions", st, msg, http.StatusServiceUnavailable, -32603)
		// Ending the session gives its subscriptions back.
		del, _ := http.NewRequest(http.MethodDelete, e.mcp, nil)
		del.Header.Set("Mcp-Session-Id", sid)
		if st, _, _ := do(t, del); st != http.StatusNoContent {
			t.Fatalf("DELETE: HTTP %d", st)
		}
		if n := metric(t, e.admin, "switchboard_sidecar_subscriptions"); n != 8 {
			t.Errorf("subscriptions held after DELETE = %v, want 8", n)
		}
		// A stream that ends gives its subscriptions back.
		a.close()
		eventually.True(t, "a listen to fit once a stream closed", func() bool {
			st, msg := tryListen(t, e.mcp, "d", `{"resourceSubscriptions":`+uriList(4, 30, 8)+`}`)
			return st == http.StatusOK && msg["event"] != nil
		})
		if n := metric(t, e.admin, `switchboard_sidecar_subscriptions_refused_total{reason="replica"}`); n < 3 {
			t.Errorf("refused subscriptions (replica) = %v, want at least 3", n)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		const budget = 64 << 10
		e := newEnv(t, "--max-subscription-bytes", fmt.Sprint(budget))
		// Many sessions, each subscribing 2 KiB URIs until refused.
		refused := 0
		for s := range 8 {
			sid := legacyInit(t, e.mcp, "2025-11-25")
			for i := range 16 {
				st, _, msg := do(t, legacyReq(t, e.mcp, i, "resources/subscribe", `{"uri":"`+uriOf(sidecar.MaxURIBytes, s*100+i)+`"}`,
					"MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid))
				switch {
				case st == 200 && msg["result"] != nil:
				case st == 200 && msg["error"] != nil:
					refused++
				default:
					t.Fatalf("resources/subscribe: HTTP %d %v", st, msg)
				}
			}
		}
		held := metric(t, e.admin, "switchboard_sidecar_subscription_bytes")
		if refused == 0 || held > budget || held < budget-2*sidecar.MaxURIBytes {
			t.Errorf("refused %d subscribes, %v bytes held; want refusals and the held bytes just within %d", refused, held, budget)
		}
		st, msg := tryListen(t, e.mcp, "l", `{"resourceSubscriptions":["`+uriOf(sidecar.MaxURIBytes, 9999)+`"]}`)
		wantError(t, "listen past the byte budget", st, msg, http.StatusServiceUnavailable, -32603)
	})
}

// slowBody opens a connection and sends a POST's headers announcing a body of 16000 bytes, and
// then only its first byte.
func slowBody(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 16000\r\n\r\n{", addr)
	return c
}

// closedWithin reads c until the sidecar closes it (returning what it read), failing the test
// when that takes longer than hang.
func closedWithin(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(hang))
	b, err := io.ReadAll(c)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the sidecar kept the connection open (read %q)", b)
	}
	return string(b)
}

// TestSlowBody: a client that sends a request's headers and then not its body loses the
// connection at --body-read-timeout; a normal client is served meanwhile.
func TestSlowBody(t *testing.T) {
	e := newEnv(t, "--body-read-timeout", "1s")
	addr := strings.TrimSuffix(strings.TrimPrefix(e.mcp, "http://"), "/mcp")
	slow := slowBody(t, addr)
	callTool(t, e.mcp, "test_simple_text")
	closedWithin(t, slow)
	if n := metric(t, e.admin, "switchboard_sidecar_body_read_timeouts_total"); n != 1 {
		t.Errorf("body read timeouts = %v, want 1", n)
	}
}

// TestStreamsOutliveBodyDeadline: the body deadline covers reading a request body only: listen
// streams and 2025-era GET streams open longer than it (and than the server's ReadTimeout
// backstop) still get their notifications.
func TestStreamsOutliveBodyDeadline(t *testing.T) {
	e := newEnv(t, "--body-read-timeout", "1s")
	l := listen(t, e.mcp, "l", `{"toolsListChanged":true}`)
	l.next(t)
	sid := legacyInit(t, e.mcp, "2025-11-25")
	get := openLegacyGet(t, e.mcp, sid, "")
	get.until(t, "the priming event", func(s string) bool { return strings.HasPrefix(s, "id: ") })
	// Past the body deadline (1 s) and the connection's ReadTimeout backstop (the header
	// timeout, 10 s, plus the body deadline).
	time.Sleep(12 * time.Second)
	callTool(t, e.mcp, "test_trigger_tool_change")
	l.nextMethod(t, "notifications/tools/list_changed")
	get.until(t, "tools/list_changed", isMethod("notifications/tools/list_changed"))
}

// TestConnectionCap: past --max-connections a new connection is answered 503 with Retry-After
// and closed, and counted; listen streams are connections too; one closing makes room.
func TestConnectionCap(t *testing.T) {
	e := newEnv(t, "--max-connections", "3")
	var streams []*sse
	for i := range 3 {
		s := openStream(t, rpcReq(t, e.mcp, i, "subscriptions/listen", "", `,"notifications":{"toolsListChanged":true}`))
		s.next(t)
		streams = append(streams, s)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(e.mcp, "http://"), "/mcp")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := closedWithin(t, c); !strings.HasPrefix(got, "HTTP/1.1 503 ") || !strings.Contains(got, "Retry-After: ") {
		t.Errorf("connection past the cap got %q, want a 503 with Retry-After, then closed", got)
	}
	if n := metric(t, e.admin, "switchboard_sidecar_connections_refused_total"); n != 1 {
		t.Errorf("refused connections = %v, want 1", n)
	}
	if n := metric(t, e.admin, "switchboard_sidecar_connections"); n != 3 {
		t.Errorf("open connections = %v, want 3", n)
	}
	// Every stream is still served.
	streams[0].close()
	eventually.True(t, "a connection to fit once a stream closed", func() bool {
		return metric(t, e.admin, "switchboard_sidecar_connections") == 2
	})
	callTool(t, e.mcp, "test_trigger_tool_change")
	for _, s := range streams[1:] {
		s.nextMethod(t, "notifications/tools/list_changed")
	}
}

// TestInflightCap: past --max-inflight-requests a request is answered 503 with Retry-After and a
// JSON-RPC error, and counted; the requests holding the slots (here two slow bodies) free them
// when they end.
func TestInflightCap(t *testing.T) {
	e := newEnv(t, "--max-inflight-requests", "2", "--body-read-timeout", "3s")
	addr := strings.TrimSuffix(strings.TrimPrefix(e.mcp, "http://"), "/mcp")
	slow := []net.Conn{slowBody(t, addr), slowBody(t, addr)}
	eventually.True(t, "two slow bodies in progress", func() bool {
		return metric(t, e.admin, "switchboard_sidecar_requests_in_progress") == 2
	})
	refusal, err := http.DefaultClient.Do(rpcReq(t, e.mcp, 1, "tools/list", "", ""))
	if err != nil {
		t.Fatal(err)
	}
	st, h, msg := decodeBody(t, refusal)
	refusal.Body.Close()
	wantError(t, "request past the in-flight cap", st, msg, http.StatusServiceUnavailable, -32603)
	if h.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if n := metric(t, e.admin, "switchboard_sidecar_requests_refused_total"); n != 1 {
		t.Errorf("refused requests = %v, want 1", n)
	}
	for _, c := range slow {
		closedWithin(t, c)
	}
	callTool(t, e.mcp, "test_simple_text")
}
