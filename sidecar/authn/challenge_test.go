package authn

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

func TestChallengeAndMetadataURL(t *testing.T) {
	for _, tc := range []struct {
		name, host, resource string
		tls                  bool
		err                  error
		want                 string
	}{
		{"no token", "mcp.team-a.svc", "http://mcp.team-a.svc/mcp", false, ErrNoToken,
			`Bearer resource_metadata="http://mcp.team-a.svc/.well-known/oauth-protected-resource/mcp"`},
		{"bad token", "mcp.team-a.svc", "http://mcp.team-a.svc/mcp", false, errors.New("expired"),
			`Bearer resource_metadata="http://mcp.team-a.svc/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"TLS ended in front, the resource's host", "mcp.example.com", "https://mcp.example.com/mcp", false, ErrNoToken,
			`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`},
		{"another host stays http", "10.0.0.7:8800", "https://mcp.example.com/mcp", false, ErrNoToken,
			`Bearer resource_metadata="http://10.0.0.7:8800/.well-known/oauth-protected-resource/mcp"`},
		{"TLS connection", "10.0.0.7:8800", "http://x/mcp", true, ErrNoToken,
			`Bearer resource_metadata="https://10.0.0.7:8800/.well-known/oauth-protected-resource/mcp"`},
		{"quotes escaped", `a"b\c`, "http://x/mcp", false, ErrNoToken,
			`Bearer resource_metadata="http://a\"b\\c/.well-known/oauth-protected-resource/mcp"`},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Host = tc.host
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if got := Challenge(MetadataURL(r, tc.resource, "/mcp"), tc.err); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestCacheIsBounded: the cache holds at most MaxCacheEntries tokens, whatever a caller sends.
func TestCacheIsBounded(t *testing.T) {
	c := newCraftedIssuer(t)
	a := New(Options{MaxCacheEntries: 3})
	a.Configure(&catalog.Auth{Resource: testAudience, JWT: []catalog.JWTIssuer{c.config()}, TrustDomain: "cluster.local"})
	for i := range 20 {
		sub := string(rune('a' + i))
		if _, err := a.Verify(verifyCtx(t), c.sign(t, c.claims(map[string]any{"sub": sub}))); err != nil {
			t.Fatal(err)
		}
		mustRefuse(t, a, c.sign(t, c.claims(map[string]any{"sub": sub, "aud": "other"})), "wrong audience")
	}
	if n := a.cache.Len(); n != 3 {
		t.Fatalf("cache holds %d entries, want 3", n)
	}
}
