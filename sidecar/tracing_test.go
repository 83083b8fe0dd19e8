package sidecar

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

// seenUpstream is what the upstream received: the traceparent header and the body.
type seenUpstream struct {
	mu          sync.Mutex
	traceparent []string
	bodies      []string
}

// tracedUpstream answers every request with result (a JSON object) and records what it got.
func tracedUpstream(t *testing.T, result string) (*httptest.Server, *seenUpstream) {
	seen := &seenUpstream{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if answerDiscover(w, b) {
			return
		}
		seen.mu.Lock()
		seen.traceparent = append(seen.traceparent, r.Header.Get("traceparent"))
		seen.bodies = append(seen.bodies, string(b))
		seen.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":`+result+`}`)
	}))
	t.Cleanup(up.Close)
	return up, seen
}

// answerDiscover answers the sidecar's server/discover (which tells it the upstream speaks
// 2026-07-28) and reports whether b was one.
func answerDiscover(w http.ResponseWriter, b []byte) bool {
	if !bytes.Contains(b, []byte(`"server/discover"`)) {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"serverInfo":{"name":"stub","version":"1"}}}`)
	return true
}

func tracedServer(t *testing.T, upstream string, perMillion int) (*Server, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(tracing.Sampler()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s, err := NewServer(Options{Upstream: upstream, Tracing: tracing.NewWith(tp, perMillion)})
	if err != nil {
		t.Fatal(err)
	}
	return s, exp
}

// call posts one modern request; meta is extra members of params._meta, hdr extra headers.
func call(t *testing.T, s *Server, method, name, params, meta string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	m := strings.TrimSuffix(fuzzMeta, "}") + meta + "}"
	body := `{"jsonrpc":"2.0","id":"req-7","method":"` + method + `","params":{` + m + params + `}}`
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2026-07-28")
	r.Header.Set("Mcp-Method", method)
	if name != "" {
		r.Header.Set("Mcp-Name", name)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func attrs(s tracetest.SpanStub) map[attribute.Key]string {
	out := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.String()
	}
	return out
}

func onlySpan(t *testing.T, exp *tracetest.InMemoryExporter) tracetest.SpanStub {
	t.Helper()
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1: %+v", len(spans), spans)
	}
	exp.Reset()
	return spans[0]
}

// TestRequestSpans checks the span of each kind of request with the SDK's in-memory exporter:
// name and attributes of the MCP semantic conventions, the client's trace context from
// params._meta or the headers as parent, the span's own context sent upstream (header, and
// params._meta rewritten in place), and error codes.
func TestRequestSpans(t *testing.T) {
	up, seen := tracedUpstream(t, `{"resultType":"complete","content":[{"type":"text","text":"ok"}]}`)
	s, exp := tracedServer(t, up.URL+"/mcp", 0) // only what the client samples

	t.Run("tools/call with traceparent in _meta", func(t *testing.T) {
		tp := "00-" + clientTraceID + "-" + clientSpanID + "-01"
		if w := call(t, s, "tools/call", "get_forecast", `,"name":"get_forecast","arguments":{}`, `,"traceparent":"`+tp+`"`, nil); w.Code != 200 {
			t.Fatalf("HTTP %d %s", w.Code, w.Body)
		}
		sp := onlySpan(t, exp)
		if sp.Name != "tools/call get_forecast" || sp.SpanKind != trace.SpanKindServer {
			t.Errorf("span %q kind %v", sp.Name, sp.SpanKind)
		}
		if sp.SpanContext.TraceID().String() != clientTraceID || sp.Parent.SpanID().String() != clientSpanID || !sp.Parent.IsRemote() {
			t.Errorf("span %s parent %s: not a child of the client's span", sp.SpanContext.TraceID(), sp.Parent.SpanID())
		}
		a := attrs(sp)
		for k, want := range map[attribute.Key]string{
			"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_forecast", "gen_ai.operation.name": "execute_tool",
			"jsonrpc.request.id": "req-7", "mcp.protocol.version": "2026-07-28", "network.transport": "tcp",
			"network.protocol.name": "http", "network.protocol.version": "1.1",
		} {
			if a[k] != want {
				t.Errorf("%s = %q, want %q", k, a[k], want)
			}
		}
		if _, ok := a["error.type"]; ok || sp.Status.Code == codes.Error {
			t.Errorf("a successful call has no error: %v %v", a, sp.Status)
		}
		seen.mu.Lock()
		defer seen.mu.Unlock()
		own := "00-" + clientTraceID + "-" + sp.SpanContext.SpanID().String() + "-01"
		if got := seen.traceparent[len(seen.traceparent)-1]; got != own {
			t.Errorf("upstream traceparent header %q, want the sidecar span's %q", got, own)
		}
		if body := seen.bodies[len(seen.bodies)-1]; !strings.Contains(body, `"traceparent":"`+own+`"`) {
			t.Errorf("upstream _meta.traceparent is not the sidecar span's: %s", body)
		}
	})

	t.Run("prompts/get with traceparent header", func(t *testing.T) {
		hdr := map[string]string{"traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01"}
		call(t, s, "prompts/get", "trip_brief", `,"name":"trip_brief"`, "", hdr)
		sp := onlySpan(t, exp)
		if sp.Name != "prompts/get trip_brief" || attrs(sp)["gen_ai.prompt.name"] != "trip_brief" || sp.Parent.SpanID().String() != clientSpanID {
			t.Errorf("span %q attrs %v parent %s", sp.Name, attrs(sp), sp.Parent.SpanID())
		}
	})

	t.Run("resources/read", func(t *testing.T) {
		hdr := map[string]string{"traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01"}
		call(t, s, "resources/read", "docs://a", `,"uri":"docs://a"`, "", hdr)
		sp := onlySpan(t, exp)
		if sp.Name != "resources/read" || attrs(sp)["mcp.resource.uri"] != "docs://a" {
			t.Errorf("span %q attrs %v", sp.Name, attrs(sp))
		}
	})

	t.Run("not sampled: nothing recorded, the client's context passed on as sent", func(t *testing.T) {
		n := len(seen.traceparent)
		call(t, s, "tools/list", "", "", "", nil)
		unsampled := "00-" + clientTraceID + "-" + clientSpanID + "-00"
		call(t, s, "tools/list", "", "", "", map[string]string{"traceparent": unsampled})
		if spans := exp.GetSpans(); len(spans) != 0 {
			t.Fatalf("sampling 0 recorded %d spans", len(spans))
		}
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if got := seen.traceparent[n:]; len(got) != 2 || got[0] != "" || got[1] != unsampled {
			t.Errorf("upstream traceparents %q, want none, then the client's unsampled one", got)
		}
	})
}

// TestRequestSpanErrors: a JSON-RPC error (the upstream's, relayed) and a tool result with
// isError set the conventions' error attributes and the span status.
func TestRequestSpanErrors(t *testing.T) {
	for _, c := range []struct {
		name, answer   string
		code, errType  string
		statusContains string
	}{
		{"upstream error", `{"jsonrpc":"2.0","id":"req-7","error":{"code":-32602,"message":"Unknown tool: nope"}}`, "-32602", "-32602", "Unknown tool"},
		{"tool error", `{"jsonrpc":"2.0","id":"req-7","result":{"resultType":"complete","isError":true,"content":[]}}`, "", "tool_error", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if b, _ := io.ReadAll(r.Body); answerDiscover(w, b) {
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, c.answer)
			}))
			defer up.Close()
			s, exp := tracedServer(t, up.URL, 1_000_000)
			call(t, s, "tools/call", "nope", `,"name":"nope"`, "", nil)
			sp := onlySpan(t, exp)
			a := attrs(sp)
			if a["rpc.response.status_code"] != c.code || a["error.type"] != c.errType || sp.Status.Code != codes.Error ||
				!strings.Contains(sp.Status.Description, c.statusContains) {
				t.Errorf("attrs %v status %+v", a, sp.Status)
			}
			if sp.Parent.SpanID().IsValid() {
				t.Errorf("without a client context the span is a root: parent %s", sp.Parent.SpanID())
			}
		})
	}
	// An error the sidecar answers itself after the request passed validation.
	s, exp := tracedServer(t, "http://127.0.0.1:1/mcp", 1_000_000) // nothing listens there
	w := call(t, s, "tools/call", "x", `,"name":"x"`, "", nil)
	var msg struct {
		Error struct{ Code int64 } `json:"error"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &msg)
	sp := onlySpan(t, exp)
	if a := attrs(sp); msg.Error.Code != wire.CodeInternalError || a["rpc.response.status_code"] != "-32603" || sp.Status.Code != codes.Error {
		t.Errorf("upstream down: answer %s, span attrs %v status %+v", w.Body, a, sp.Status)
	}
}

// allSpanText is every string an exported span carries: name, status, attributes, events.
func allSpanText(spans tracetest.SpanStubs) string {
	var b strings.Builder
	for _, sp := range spans {
		b.WriteString(sp.Name + "\n" + sp.Status.Description + "\n")
		for _, kv := range sp.Attributes {
			b.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
		}
		for _, ev := range sp.Events {
			b.WriteString(ev.Name + "\n")
			for _, kv := range ev.Attributes {
				b.WriteString(string(kv.Key) + "=" + kv.Value.String() + "\n")
			}
		}
	}
	return b.String()
}

// TestSessionIDNotExported (F11): a 2025-era session id is a bearer handle (whoever holds it can
// answer the session's elicitations); the span records a short hash of it, never the id.
func TestSessionIDNotExported(t *testing.T) {
	up, _ := tracedUpstream(t, `{"resultType":"complete","tools":[]}`)
	s, exp := tracedServer(t, up.URL+"/mcp", 1_000_000)
	legacy := func(body, sid string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			r.Header.Set("Mcp-Session-Id", sid)
			r.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		return w
	}
	w := legacy(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, "")
	sid := w.Header().Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize gave no session: HTTP %d %s", w.Code, w.Body)
	}
	if w := legacy(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sid); w.Code != 200 {
		t.Fatalf("tools/list: HTTP %d %s", w.Code, w.Body)
	}
	spans := exp.GetSpans()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	if text := allSpanText(spans); strings.Contains(text, sid) {
		t.Fatalf("the session id is exported:\n%s", text)
	}
	last := attrs(spans[len(spans)-1])
	if got, want := last["mcp.session.id"], tracing.SessionIDHash(sid); got != want || len(want) != 16 {
		t.Errorf("mcp.session.id = %q, want the hash %q", got, want)
	}
}

// TestClientSampledFlagIsRateLimited (F12): a client's sampled flag is honoured up to
// the configured rate per second; beyond it the sidecar's own ratio decides (0 here), so a
// client cannot make the sidecar record every request.
func TestClientSampledFlagIsRateLimited(t *testing.T) {
	up, _ := tracedUpstream(t, `{"resultType":"complete","tools":[]}`)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(tracing.Sampler()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	s, err := NewServer(Options{Upstream: up.URL + "/mcp", Tracing: tracing.NewWith(tp, 0).WithClientSampledPerSecond(1)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	hdr := map[string]string{"traceparent": "00-" + clientTraceID + "-" + clientSpanID + "-01"}
	for range n {
		call(t, s, "tools/list", "", "", "", hdr)
	}
	// One per second with a burst of one: 20 requests would have to take 10 s to reach 10.
	if got := len(exp.GetSpans()); got == 0 || got > n/2 {
		t.Fatalf("%d of %d client-sampled requests recorded at 1/s", got, n)
	}
}

// TestSpanNamesAfterRouting (F12): a tool name nobody routed (the upstream refused it) does not
// name the span or become an attribute: the name stays the method's.
func TestSpanNamesAfterRouting(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if answerDiscover(w, b) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`"get_forecast"`)) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"req-7","result":{"resultType":"complete","content":[]}}`)
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"req-7","error":{"code":-32602,"message":"Unknown tool"}}`)
	}))
	t.Cleanup(up.Close)
	s, exp := tracedServer(t, up.URL, 1_000_000)
	call(t, s, "tools/call", "random-4711", `,"name":"random-4711"`, "", nil)
	sp := onlySpan(t, exp)
	if sp.Name != "tools/call" || strings.Contains(allSpanText(tracetest.SpanStubs{sp}), "random-4711") {
		t.Errorf("an unknown tool named the span: %q %v", sp.Name, attrs(sp))
	}
	call(t, s, "tools/call", "get_forecast", `,"name":"get_forecast"`, "", nil)
	if sp := onlySpan(t, exp); sp.Name != "tools/call get_forecast" || attrs(sp)["gen_ai.tool.name"] != "get_forecast" {
		t.Errorf("a served tool: span %q attrs %v", sp.Name, attrs(sp))
	}
}

// TestSpanRedaction (F12): the upstream's error text is exported truncated, and a resource URI
// without its query string (which may carry a token).
func TestSpanRedaction(t *testing.T) {
	long := strings.Repeat("x", 4096)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if answerDiscover(w, b) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`resources/read`)) {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"req-7","result":{"resultType":"complete","contents":[]}}`)
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"req-7","error":{"code":-32603,"message":"`+long+`"}}`)
	}))
	t.Cleanup(up.Close)
	s, exp := tracedServer(t, up.URL, 1_000_000)
	call(t, s, "tools/call", "t", `,"name":"t"`, "", nil)
	if sp := onlySpan(t, exp); len(sp.Status.Description) > tracing.MaxValueBytes+len("…") || sp.Status.Code != codes.Error {
		t.Errorf("status description of %d bytes: %+v", len(sp.Status.Description), sp.Status.Code)
	}
	call(t, s, "resources/read", "docs://a/b?token=s3cret#frag", `,"uri":"docs://a/b?token=s3cret#frag"`, "", nil)
	sp := onlySpan(t, exp)
	if got := attrs(sp)["mcp.resource.uri"]; got != "docs://a/b" || strings.Contains(allSpanText(tracetest.SpanStubs{sp}), "s3cret") {
		t.Errorf("mcp.resource.uri = %q", got)
	}
}
