package sidecar

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
)

// BenchmarkForwardAuth is BenchmarkForward through a catalog, without auth ("off") and with
// auth and a cached, valid token of the real OpenID Provider ("cached-token"): the
// difference is what authentication adds to every call of a caller (goal: ≤ 1.1× CPU and p50).
func BenchmarkForwardAuth(b *testing.B) {
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()
	const aud = "https://mcp.example.test/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := op.Token(ctx, testservers.TokenOptions{Audiences: []string{aud}, Subject: "alice", Claims: map[string]any{"groups": []string{"dev", "ops"}}})
	if err != nil {
		b.Fatal(err)
	}
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
			ov := NewOverlay(OverlayOptions{Logger: quiet})
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
			headers = append(headers, [2]string{"Authorization", "Bearer " + tok})
			benchPosts(b, front, body, headers)
		})
	}
}
