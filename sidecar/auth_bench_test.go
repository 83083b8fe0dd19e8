package sidecar

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
)

// BenchmarkForwardAuth is BenchmarkForward through a catalog, without auth ("off") and with
// auth and a cached, valid token of the real OpenID Provider ("cached-token"): the
// difference is what authentication adds to every call of a caller (goal: ≤ 1.1× CPU and p50).
func BenchmarkForwardAuth(b *testing.B) {
	op, tok := benchOIDC(b, map[string]any{"groups": []string{"dev", "ops"}})
	const aud = benchAudience
	auth := &catalog.Auth{Resource: aud, TrustDomain: "cluster.local", JWT: []catalog.JWTIssuer{{URL: op.Issuer, Audiences: []string{aud},
		CertificateAuthority: string(op.CAPEM), UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}}}
	for _, tc := range []struct {
		name string
		auth *catalog.Auth
	}{{"off", nil}, {"cached-token", auth}} {
		b.Run(tc.name, func(b *testing.B) {
			up := benchUpstream()
			defer up.Close()
			h := catalog.CacheHint{CacheScope: catalog.ScopePublic}
			c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Auth: tc.auth, Server: catalog.Server{Namespace: "bench", Name: "bench", ToolPolicy: catalog.ToolPolicyAll,
				Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}}}
			data, err := catalog.Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			quiet := slog.New(slog.DiscardHandler)
			ov := overlay.New(overlay.Options{Logger: quiet})
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
			headers := [][2]string{{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}}
			headers = append(headers, [2]string{"Authorization", "Bearer " + tok}) // "off" ignores it
			benchPostsP50(b, front, body, headers)
		})
	}
}

// benchPostsP50 is benchPosts reporting the median latency of one call too.
func benchPostsP50(b *testing.B, front *httptest.Server, body []byte, headers [][2]string) {
	client := front.Client()
	b.ReportAllocs()
	d := make([]time.Duration, 0, 4096)
	cpu0 := processCPU()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, front.URL+"/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for _, h := range headers {
			req.Header.Set(h[0], h[1])
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d = append(d, time.Since(t0))
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), "p50-ns")
}

// benchAudience is the audience of the benchmarks' tokens.
const benchAudience = "https://mcp.example.test/mcp"

// benchOIDC starts the real OpenID Provider for one benchmark, with the default logger silenced
// until it ends, and returns it with a token of subject alice for benchAudience carrying claims.
func benchOIDC(b *testing.B, claims map[string]any) (*testservers.OIDCProvider, string) {
	b.Helper()
	def := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(def) })
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(op.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := op.Token(ctx, testservers.TokenOptions{Audiences: []string{benchAudience}, Subject: "alice", Claims: claims})
	if err != nil {
		b.Fatal(err)
	}
	return op, tok
}
