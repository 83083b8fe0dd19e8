package sidecar

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/benchkit"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// BenchmarkForward measures one tools/call through the full handler
// (validation, forwarding over loopback, stamping) against an in-process
// upstream; BenchmarkForwardMinimal is the same harness with a bare
// forwarding handler, so the difference is the sidecar's own work. Timing
// goals live in hack/sidecarbench; these are for profiles and allocations.
func BenchmarkForward(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	s, err := NewServer(Options{Upstream: up.URL + "/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	benchCalls(b, front)
}

// BenchmarkForwardCredential is BenchmarkForward with auth (a cached token of the real OpenID
// Provider) without upstream credentials ("auth") and with them ("credential": the caller's key
// looked up in the mapping and read from a Secret held in memory, where the sidecar reads the
// one its watch fills, put in X-Api-Key): the difference is what credential injection adds to a call (goal: no measurable
// change in p50).
func BenchmarkForwardCredential(b *testing.B) {
	op, tok := benchOIDC(b, nil)
	const aud = benchAudience
	creds := &catalog.UpstreamCredentials{Secret: "keys", Readable: true, Header: "X-Api-Key", By: catalog.CredentialByUsername,
		Keys: map[string]string{"oidc:alice": "alice", "oidc:bob": "bob"}}
	for _, tc := range []struct {
		name  string
		creds *catalog.UpstreamCredentials
	}{{"auth", nil}, {"credential", creds}} {
		b.Run(tc.name, func(b *testing.B) {
			var seen atomic.Value
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen.Store(r.Header.Get("X-Api-Key"))
				benchUpstreamHandler(w, r)
			}))
			defer up.Close()
			h := catalog.CacheHint{CacheScope: catalog.ScopePublic}
			c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Server: catalog.Server{Namespace: "bench", Name: "bench", ToolPolicy: catalog.ToolPolicyAll,
				Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
				Auth: &catalog.Auth{Resource: aud, TrustDomain: "cluster.local", UpstreamCredentials: tc.creds,
					JWT: []catalog.JWTIssuer{{URL: op.Issuer, Audiences: []string{aud}, CertificateAuthority: string(op.CAPEM), UsernameClaim: "sub", UsernamePrefix: "oidc:"}}}}
			data, err := catalog.Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			// The Secret the process room's watch (sidecar/app) would serve, as a fixed source.
			quiet := slog.New(slog.DiscardHandler)
			contents := fixedSecrets{"keys": {"alice": []byte("sk-bench-alice-0123456789abcdef"), "bob": []byte("sk-bench-bob")}}
			ov := overlay.New(overlay.Options{Logger: quiet, Contents: contents})
			if err := ov.Apply(data, ""); err != nil {
				b.Fatal(err)
			}
			s, err := NewServer(Options{Upstream: up.URL + "/mcp", Overlay: ov, Logger: quiet, Authn: authn.New(authn.Options{Logger: quiet})})
			if err != nil {
				b.Fatal(err)
			}
			front := httptest.NewServer(s)
			defer front.Close()
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + fuzzMeta + `,"name":"echo","arguments":{"text":"` + strings.Repeat("y", 120) + `"}}}`)
			headers := [][2]string{{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}, {"Authorization", "Bearer " + tok}}
			benchPostsP50(b, front, body, headers)
			if want := map[bool]string{true: "sk-bench-alice-0123456789abcdef", false: ""}[tc.creds != nil]; seen.Load() != want {
				b.Fatalf("the upstream saw X-Api-Key %q", seen.Load())
			}
		})
	}
}

func BenchmarkForwardMinimal(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	front := httptest.NewServer(benchkit.MinimalProxy(client, up.URL+"/mcp"))
	defer front.Close()
	benchCalls(b, front)
}

// BenchmarkForwardLegacy is BenchmarkForward for a 2025-11-25 call in a
// session the sidecar serves (translated, then turned back into the 2025
// shape); BenchmarkForwardLegacyMinimal forwards the same call through the
// bare handler.
func BenchmarkForwardLegacy(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	s, err := NewServer(Options{Upstream: up.URL + "/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	sid, err := s.legacy.Mint("2025-11-25", []byte(`{"roots":{"listChanged":true}}`), "")
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	benchLegacyCalls(b, front, sid)
}

func BenchmarkForwardLegacyMinimal(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	front := httptest.NewServer(benchkit.MinimalProxy(client, up.URL+"/mcp"))
	defer front.Close()
	benchLegacyCalls(b, front, "s1.minimal-proxy-session-id-of-a-realistic-length-0123456789abcdef0123456789abcdef0123456789abcdef")
}

func benchLegacyCalls(b *testing.B, front *httptest.Server, sid string) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("y", 120) + `"}}}`)
	benchPosts(b, front, body, [][2]string{{"MCP-Protocol-Version", "2025-11-25"}, {"Mcp-Session-Id", sid}})
}

func benchUpstream() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(benchUpstreamHandler))
}

var benchPad = strings.Repeat("x", 380)

func benchUpstreamHandler(w http.ResponseWriter, r *http.Request) {
	if b, _ := io.ReadAll(r.Body); answerDiscover(w, b) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"`+benchPad+`"}]}}`)
}

func benchCalls(b *testing.B, front *httptest.Server) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + fuzzMeta + `,"name":"echo","arguments":{"text":"` + strings.Repeat("y", 120) + `"}}}`)
	benchPosts(b, front, body, [][2]string{{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}})
}

// benchPosts POSTs body to front with the MCP headers given, b.N times, reporting allocations
// and the whole process's CPU per call.
func benchPosts(b *testing.B, front *httptest.Server, body []byte, headers [][2]string) {
	client := front.Client()
	b.ReportAllocs()
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, h := range headers {
			req.Header.Set(h[0], h[1])
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
}

// BenchmarkValidate is the parse + validate + stamp work alone.
func BenchmarkValidate(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + fuzzMeta + `,"name":"echo","arguments":{"text":"` + strings.Repeat("y", 120) + `"}}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 380) + `"}]}}`)
	h := http.Header{}
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", "echo")
	p := versionPolicy{supported: []string{protocol.Version}}
	s := &Server{opts: Options{Hints: overlay.DefaultHints}}
	b.ReportAllocs()
	for b.Loop() {
		r, e := parseRequest(body)
		if e != nil {
			b.Fatal(e)
		}
		if e := validate(h, r, p); e != nil {
			b.Fatal(e)
		}
		_ = s.stamp(r, resp)
	}
}

// BenchmarkLegacyWork is the same work for a 2025-era call in a session:
// parse, validate, the session (cached), the translation into the modern
// shape, and the answer turned back into the 2025 shape.
func BenchmarkLegacyWork(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("y", 120) + `"}}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"` + strings.Repeat("x", 380) + `"}]}}`)
	s, err := NewServer(Options{Upstream: "http://127.0.0.1:1/mcp"})
	if err != nil {
		b.Fatal(err)
	}
	sid, err := s.legacy.Mint("2025-11-25", []byte(`{"roots":{"listChanged":true}}`), "")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		h := http.Header{}
		h["Mcp-Protocol-Version"] = []string{"2025-11-25"}
		h["Mcp-Session-Id"] = []string{sid}
		r, e := parseRequest(body)
		if e != nil {
			b.Fatal(e)
		}
		if e := validate(h, r, s.pol); e != nil || !r.legacy {
			b.Fatal(e)
		}
		hr := &http.Request{Header: h}
		sess, e := s.legacy.SessionOf(hr)
		if e != nil {
			b.Fatal(e)
		}
		r.session = sess
		if e := toModern(hr, r, sess.UpstreamCaps(), "info"); e != nil {
			b.Fatal(e)
		}
		_ = s.finish(r, resp)
	}
}

// processCPU is the user+system CPU time the process used so far, in ns: the
// client, the sidecar and the upstream of these benchmarks share the process,
// so cpu-ns/op is their CPU per request together.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// fixedSecrets is a ContentSource of Secrets held in memory (name → key → value).
type fixedSecrets map[string]map[string][]byte

func (f fixedSecrets) Content(secret bool, name, key string) ([]byte, bool) {
	if !secret {
		return nil, false
	}
	v, ok := f[name][key]
	return v, ok
}

func (fixedSecrets) SetRefs(_, _ []string) {}

func (fixedSecrets) Synced() bool { return true }
