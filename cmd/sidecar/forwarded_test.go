//go:build e2e

package main_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// headerRecorder is a relay in front of a real upstream that records the headers of the
// requests whose body names method, as the upstream receives them.
type headerRecorder struct {
	mu   sync.Mutex
	seen []http.Header
}

func recordHeaders(t *testing.T, upstream, method string) (addr string, rec *headerRecorder) {
	t.Helper()
	target, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rec = &headerRecorder{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"`+method+`"`)) {
			rec.mu.Lock()
			rec.seen = append(rec.seen, r.Header.Clone())
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})}
	l, err := net.Listen("tcp", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), rec
}

// TestForwardingHeadersAreTheSidecars (F13): the forwarding headers a client sends do not reach
// the upstream, which sits behind loopback and commonly trusts them from 127.0.0.1: the
// upstream sees X-Forwarded-For = the address of the peer the sidecar accepted, on the 2026
// path and on the 2025-era upstream path.
func TestForwardingHeadersAreTheSidecars(t *testing.T) {
	forged := map[string]string{
		"X-Forwarded-For":   "6.6.6.6",
		"X-Forwarded-Host":  "forged.example",
		"X-Forwarded-Proto": "gopher",
		"Forwarded":         "for=6.6.6.6;host=forged.example",
		"X-Real-Ip":         "6.6.6.6",
	}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, addr string)
	}{
		{"2026", func(t *testing.T, addr string) { startUpstream(t, addr) }},
		{"2025-era upstream", func(t *testing.T, addr string) {
			start(t, legacyBin(t), "-http="+addr)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := freePort(t)
			tc.start(t, up)
			front, rec := recordHeaders(t, up, "tools/list")
			e := &env{upAddr: front}
			e.startSidecar(t)
			req := rpcReq(t, e.mcp, 1, "tools/list", "", "")
			for k, v := range forged {
				req.Header.Set(k, v)
			}
			if st, _, msg := do(t, req); st != 200 || msg["error"] != nil {
				t.Fatalf("tools/list: HTTP %d %v", st, msg)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.seen) == 0 {
				t.Fatal("the upstream got no tools/list")
			}
			h := rec.seen[len(rec.seen)-1]
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, "6.6.6.6") || strings.Contains(v, "forged") || strings.Contains(v, "gopher") {
						t.Errorf("the upstream got the client's %s: %q", k, v)
					}
				}
			}
			if xff := h.Values("X-Forwarded-For"); len(xff) > 0 && (len(xff) != 1 || xff[0] != "127.0.0.1") {
				t.Errorf("X-Forwarded-For %q, want the client's peer address 127.0.0.1", xff)
			}
		})
	}
}
