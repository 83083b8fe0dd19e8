package sidecar

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// BenchmarkForwardLegacyUpstream is BenchmarkForward in front of a 2025-era
// upstream (sessions, SSE answers as go-sdk's streamable server writes them):
// the difference between the two is the generation transport's own work.
// For profiles and allocations; timings: BenchmarkUpstreamKinds (cmd/sidecar).
func BenchmarkForwardLegacyUpstream(b *testing.B) {
	up := benchLegacyUpstream()
	defer up.Close()
	s, err := NewServer(Options{Upstream: up.URL + "/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	benchCalls(b, front)
}

// benchLegacyUpstream answers like a 2025-11-25 go-sdk server: server/discover
// refused without a session, initialize with a session id, notifications 202,
// no GET stream, and every call an SSE answer with one message.
func benchLegacyUpstream() *httptest.Server {
	pad := strings.Repeat("x", 380)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		id, _, _ := wire.Field(body, "id")
		m, _, _ := wire.Field(body, "method")
		method, _ := wire.StringValue(m)
		switch {
		case method == "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "S1")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"bench","version":"1"}}}`)
		case r.Header.Get("Mcp-Session-Id") == "":
			http.Error(w, "Bad Request: Mcp-Session-Id header is required", http.StatusBadRequest)
		case len(id) == 0:
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+`{"jsonrpc":"2.0","id":`+string(id)+`,"result":{"content":[{"type":"text","text":"`+pad+`"}]}}`+"\n\n")
		}
	}))
}
