package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// The control plane and the OpenID Provider start on first use (a fuzz worker or a benchmark
// of the pure parts needs neither) and stop after the tests.
var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
	opOnce  sync.Once
	op      *testservers.OIDCProvider
	opErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		_ = env.Stop()
	}
	if op != nil {
		op.Close()
	}
	os.Exit(code)
}

func kube(t testing.TB) *testenv.Env {
	t.Helper()
	envOnce.Do(func() { env, envErr = testenv.Start(testenv.Options{}) })
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func provider(t testing.TB) *testservers.OIDCProvider {
	t.Helper()
	opOnce.Do(func() { op, opErr = testservers.StartOIDCProvider() })
	if opErr != nil {
		t.Fatal(opErr)
	}
	return op
}

const testAudience = "https://mcp.example.test/mcp"

func opToken(t testing.TB, o testservers.TokenOptions) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := provider(t).Token(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// opIssuer is the JWT issuer configuration of the test OP, mapping as a cluster would.
func opIssuer(t testing.TB) catalog.JWTIssuer {
	p := provider(t)
	return catalog.JWTIssuer{URL: p.Issuer, Audiences: []string{testAudience}, CertificateAuthority: string(p.CAPEM),
		UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}
}

func verifyCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang bound
	t.Cleanup(cancel)
	return ctx
}

// mustRefuse asserts that tok is refused, and that the answer a sidecar would give is a 401
// with the invalid_token challenge.
func mustRefuse(t *testing.T, a *Authenticator, tok, why string) error {
	t.Helper()
	id, err := a.Verify(verifyCtx(t), tok)
	if err == nil {
		t.Fatalf("%s: accepted as %+v", why, id)
	}
	if c := Challenge("http://h/.well-known/oauth-protected-resource/mcp", err); c != `Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", error="invalid_token"` {
		t.Fatalf("%s: challenge %q", why, c)
	}
	return err
}

// craftedIssuer is an attacker's or a broken issuer: an HTTPS server whose discovery and JWKS
// the test controls (keys is called per JWKS request), and a key to sign tokens with.
type craftedIssuer struct {
	*httptest.Server
	key  *rsa.PrivateKey
	kid  string
	jwks func(w http.ResponseWriter)
}

func newCraftedIssuer(t *testing.T) *craftedIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	c := &craftedIssuer{key: key, kid: "crafted"}
	c.jwks = func(w http.ResponseWriter) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: c.kid, Algorithm: "RS256", Use: "sig"}}})
	}
	c.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": c.URL, "jwks_uri": c.URL + "/keys"})
		case "/keys":
			c.jwks(w)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *craftedIssuer) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate().Raw}))
}

func (c *craftedIssuer) config() catalog.JWTIssuer {
	return catalog.JWTIssuer{URL: c.URL, Audiences: []string{testAudience}, CertificateAuthority: c.caPEM(), UsernameClaim: "sub"}
}

// claims are valid for c and testAudience unless overridden.
func (c *craftedIssuer) claims(over map[string]any) map[string]any {
	now := time.Now().Unix()
	m := map[string]any{"iss": c.URL, "aud": testAudience, "sub": "mallory", "iat": now, "nbf": now, "exp": now + 300}
	for k, v := range over {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// sign signs claims with c's key (RS256, c.kid).
func (c *craftedIssuer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return signRS256(t, c.key, c.kid, claims)
}

func signRS256(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// unsigned assembles a compact JWS from a header and claims with the given signature bytes.
func unsigned(header, claims any, sig []byte) string {
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(claims)
	return b64(h) + "." + b64(p) + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// opPublicKey fetches the test OP's signing key from its JWKS.
func opPublicKey(t *testing.T) jose.JSONWebKey {
	t.Helper()
	p := provider(t)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(p.Issuer + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("OP JWKS: %v (%d keys)", err, len(set.Keys))
	}
	return set.Keys[0]
}

func authWith(jwt ...catalog.JWTIssuer) *catalog.Auth {
	return &catalog.Auth{Resource: testAudience, JWT: jwt, TrustDomain: "cluster.local"}
}

func fmtID(id *Identity) string { return fmt.Sprintf("%+v", *id) }

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
