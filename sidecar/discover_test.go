package sidecar

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// F20: a client's server/discover is forwarded with the client's headers, so what the upstream
// answers may be meant for that client alone. It must not become the upstream info every other
// client's initialize, lists and listen filters are built from. The upstream here tells a
// caller with "Authorization: Bearer alice" instructions it tells nobody else.
func TestClientDiscoverIsNotGlobal(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !bytes.Contains(b, []byte(`"server/discover"`)) {
			http.Error(w, "only discover here", http.StatusNotFound)
			return
		}
		instructions := "for everyone"
		if r.Header.Get("Authorization") == "Bearer alice" {
			instructions = "alice's private instructions"
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],`+
			`"capabilities":{},"instructions":"`+instructions+`","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"stub","version":"1"}}}}`)
	}))
	t.Cleanup(up.Close)
	s, err := NewServer(Options{Upstream: up.URL + "/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	if w := call(t, s, "server/discover", "", "", "", map[string]string{"Authorization": "Bearer alice"}); w.Code != 200 ||
		!strings.Contains(w.Body.String(), "alice's private instructions") {
		t.Fatalf("alice's discover: HTTP %d %s", w.Code, w.Body)
	}

	// Another client, without credentials, initializes on 2025-11-25.
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bob","version":"1"}}}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "for everyone") {
		t.Fatalf("bob's initialize: HTTP %d %s; want the instructions the upstream gives the sidecar", w.Code, w.Body)
	}
}
