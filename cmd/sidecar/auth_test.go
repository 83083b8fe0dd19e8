//go:build e2e

package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

const authAudience = "https://mcp.example.test/mcp"

// encodeAuthCatalog is encodeCatalog's catalog with auth.
func encodeAuthCatalog(t *testing.T, auth *catalog.Auth) []byte {
	t.Helper()
	var c catalog.Catalog
	if err := json.Unmarshal(encodeCatalog(t), &c); err != nil {
		t.Fatal(err)
	}
	c.Auth = auth
	b, err := catalog.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAuthRequired: a sidecar process whose catalog file gains auth (live) refuses callers
// without a valid token with 401 and the RFC 9728 challenge, serves the Protected Resource
// Metadata without a token, and passes a verified caller to the upstream as identity headers,
// never its token (unless forwardToken), for a 2026 and a 2025-era upstream. The identity
// headers a client sends never reach the upstream, with auth or without.
func TestAuthRequired(t *testing.T) {
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	token := func(o testservers.TokenOptions) string {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		tok, err := op.Token(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	alice := token(testservers.TokenOptions{Audiences: []string{authAudience}, Subject: "alice", Claims: map[string]any{"groups": []string{"dev", "ops"}}})
	otherAud := token(testservers.TokenOptions{Audiences: []string{"https://other.example/mcp"}, Subject: "alice"})
	forged := map[string]string{"X-Switchboard-Subject": "admin", "X-Switchboard-Groups": "system:masters", "x-switchboard-service-account": "kube-system/admin"}

	for _, tc := range []struct {
		name  string
		start func(t *testing.T, addr string)
	}{
		{"2026", func(t *testing.T, addr string) { startUpstream(t, addr) }},
		{"2025-era upstream", func(t *testing.T, addr string) { start(t, legacyBin(t), "-http="+addr) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := freePort(t)
			tc.start(t, up)
			front, rec := recordHeaders(t, up, "tools/call")
			path := filepath.Join(t.TempDir(), "catalog.json")
			writeFile(t, path, encodeCatalog(t))
			e := &env{upAddr: front}
			e.startSidecar(t, "--catalog-file", path)
			lastSeen := func() http.Header {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				if len(rec.seen) == 0 {
					t.Fatal("the upstream got no tools/call")
				}
				return rec.seen[len(rec.seen)-1]
			}
			call := func(tok string, extra map[string]string) (int, http.Header, map[string]any) {
				req := rpcReq(t, e.mcp, "c", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`)
				if tok != "" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				for k, v := range extra {
					req.Header.Set(k, v)
				}
				return do(t, req)
			}

			// Auth off: the client's identity headers are dropped all the same.
			if st, _, msg := call("", forged); st != 200 || msg["error"] != nil {
				t.Fatalf("auth off: HTTP %d %v", st, msg)
			}
			for k := range lastSeen() {
				if strings.HasPrefix(strings.ToLower(k), "x-switchboard-") {
					t.Errorf("auth off: the upstream got the client's %s", k)
				}
			}

			auth := &catalog.Auth{Resource: e.mcp, TrustDomain: "cluster.local", ScopesSupported: []string{"mcp"},
				JWT: []catalog.JWTIssuer{{URL: op.Issuer, Audiences: []string{authAudience}, CertificateAuthority: string(op.CAPEM),
					UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}}}
			writeFile(t, path, encodeAuthCatalog(t, auth))
			metadataURL := strings.Replace(e.mcp, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
			eventually.True(t, "the catalog's auth to apply", func() bool {
				st, _, _ := call("", nil)
				return st == http.StatusUnauthorized
			})

			// No token, and bad tokens: 401 with the challenge, on every method.
			st, h, msg := call("", nil)
			if want := `Bearer resource_metadata="` + metadataURL + `"`; st != 401 || h.Get("WWW-Authenticate") != want || msg["error"] == nil {
				t.Fatalf("no token: HTTP %d %q %v, want 401 %q", st, h.Get("WWW-Authenticate"), msg, want)
			}
			for name, tok := range map[string]string{"wrong audience": otherAud, "garbage": "garbage", "alg none": "eyJhbGciOiJub25lIn0.e30."} {
				st, h, _ := call(tok, nil)
				if want := `Bearer resource_metadata="` + metadataURL + `", error="invalid_token"`; st != 401 || h.Get("WWW-Authenticate") != want {
					t.Fatalf("%s: HTTP %d %q, want 401 %q", name, st, h.Get("WWW-Authenticate"), want)
				}
			}
			for _, m := range []string{http.MethodGet, http.MethodDelete} {
				req, _ := http.NewRequest(m, e.mcp, nil)
				req.Header.Set("Mcp-Session-Id", "whatever")
				if st, h, _ := send(t, req); st != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer resource_metadata=") {
					t.Fatalf("%s without a token: HTTP %d %q", m, st, h.Get("WWW-Authenticate"))
				}
			}
			// An unauthenticated body is not read: a 4 MiB POST is refused from its headers.
			big := rpcReq(t, e.mcp, "big", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{"x":"`+strings.Repeat("a", 4<<20)+`"}`)
			if st, _, _ := send(t, big); st != 401 {
				t.Fatalf("big unauthenticated POST: HTTP %d", st)
			}

			// The Protected Resource Metadata, without a token.
			st, h, body := send(t, mustGet(t, metadataURL))
			var prm map[string]any
			if st != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal(body, &prm) != nil {
				t.Fatalf("metadata: HTTP %d %q %s", st, h.Get("Content-Type"), body)
			}
			if prm["resource"] != e.mcp || !slices.Equal(strs(prm["authorization_servers"]), []string{op.Issuer}) ||
				!slices.Equal(strs(prm["bearer_methods_supported"]), []string{"header"}) || !slices.Equal(strs(prm["scopes_supported"]), []string{"mcp"}) {
				t.Fatalf("metadata %s", body)
			}

			// A verified caller reaches the upstream as identity headers, without its token.
			if st, _, msg := call(alice, forged); st != 200 || msg["error"] != nil {
				t.Fatalf("alice: HTTP %d %v", st, msg)
			}
			seen := lastSeen()
			if seen.Get("Authorization") != "" || seen.Get("X-Switchboard-Subject") != "oidc:alice" ||
				!slices.Equal(seen.Values("X-Switchboard-Groups"), []string{"oidc:dev", "oidc:ops"}) ||
				seen.Get("X-Switchboard-Issuer") != op.Issuer || seen.Get("X-Switchboard-Service-Account") != "" {
				t.Fatalf("the upstream saw %v", seen)
			}
			for k, vs := range seen {
				for _, v := range vs {
					if strings.Contains(v, alice) || v == "admin" || v == "system:masters" || v == "kube-system/admin" {
						t.Fatalf("the upstream got %s: %q", k, v)
					}
				}
			}

			// forwardToken: the token goes through.
			auth.ForwardToken = true
			writeFile(t, path, encodeAuthCatalog(t, auth))
			eventually.True(t, "forwardToken to apply", func() bool {
				if st, _, _ := call(alice, nil); st != 200 {
					return false
				}
				return lastSeen().Get("Authorization") == "Bearer "+alice
			})
		})
	}
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

var _ = time.Second
