package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// TestOIDCProviderTokens verifies tokens the real OpenID Provider issued: the right audience
// maps to the caller, anything else is refused.
func TestOIDCProviderTokens(t *testing.T) {
	p := provider(t)
	a := New(Options{})
	a.Configure(authWith(opIssuer(t)))

	tok := opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "alice", Claims: map[string]any{"groups": []string{"dev", "ops"}}})
	id, err := a.Verify(verifyCtx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "oidc:alice" || !slices.Equal(id.Groups, []string{"oidc:dev", "oidc:ops"}) || id.Issuer != p.Issuer || id.ServiceAccount != "" ||
		time.Until(id.Expiry) < 4*time.Minute || time.Until(id.Expiry) > 6*time.Minute {
		t.Fatalf("identity %s", fmtID(id))
	}
	// A groups claim that is one string is one group.
	id, err = a.Verify(verifyCtx(t), opToken(t, testservers.TokenOptions{Audiences: []string{"other", testAudience}, Subject: "bob", Claims: map[string]any{"groups": "dev"}}))
	if err != nil || id.Subject != "oidc:bob" || !slices.Equal(id.Groups, []string{"oidc:dev"}) {
		t.Fatalf("bob: %v %v", id, err)
	}

	mustRefuse(t, a, opToken(t, testservers.TokenOptions{Audiences: []string{"https://other.example/mcp"}, Subject: "alice"}), "wrong audience")
	mustRefuse(t, a, opToken(t, testservers.TokenOptions{Subject: "alice"}), "the client's own audience")
	mustRefuse(t, a, opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "carol", Claims: map[string]any{"groups": 7}}), "groups neither string nor list")

	// A token of an issuer that is not configured, with no ServiceAccount tokens accepted.
	other := newCraftedIssuer(t)
	mustRefuse(t, a, other.sign(t, other.claims(nil)), "unconfigured issuer")

	// Without a prefix an issuer could mint the cluster's own names.
	bare := opIssuer(t)
	bare.UsernamePrefix, bare.GroupsPrefix = "", ""
	b := New(Options{})
	b.Configure(authWith(bare))
	mustRefuse(t, b, opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "system:admin"}), "system: username")
	mustRefuse(t, b, opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "eve", Claims: map[string]any{"groups": []string{"dev", "system:masters"}}}), "system: group")
	if id, err := b.Verify(verifyCtx(t), opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "eve"})); err != nil || id.Subject != "eve" {
		t.Fatalf("eve: %v %v", id, err)
	}
}

// TestOIDCEmailUsername requires email_verified when the username is the email, as the API
// server does.
func TestOIDCEmailUsername(t *testing.T) {
	j := opIssuer(t)
	j.UsernameClaim, j.UsernamePrefix = "email", ""
	a := New(Options{})
	a.Configure(authWith(j))
	tok := func(claims map[string]any) string {
		return opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "u1", Claims: claims})
	}
	id, err := a.Verify(verifyCtx(t), tok(map[string]any{"email": "dev@example.com", "email_verified": true}))
	if err != nil || id.Subject != "dev@example.com" {
		t.Fatalf("verified email: %v %v", id, err)
	}
	mustRefuse(t, a, tok(map[string]any{"email": "dev@example.com", "email_verified": false}), "email_verified false")
	mustRefuse(t, a, tok(map[string]any{"email": "dev@example.com"}), "no email_verified")
	mustRefuse(t, a, tok(map[string]any{"email": "dev@example.com", "email_verified": "true"}), "email_verified a string")
	mustRefuse(t, a, tok(nil), "no email")
}

// TestOIDCExpiredToken: a token of a 1 s lifetime is accepted, then refused once it expired,
// the cache notwithstanding.
func TestOIDCExpiredToken(t *testing.T) {
	t.Parallel()
	a := New(Options{})
	a.Configure(authWith(opIssuer(t)))
	tok := opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "short", TTL: time.Second})
	id, err := a.Verify(verifyCtx(t), tok)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(id.Expiry.Add(ClockSkew + time.Second)))
	err = mustRefuse(t, a, tok, "expired")
	if !strings.Contains(err.Error(), "expired") {
		t.Fatalf("refused for %v, want expiry", err)
	}
}

// TestOIDCCertificateAuthority: the issuer's TLS is verified with certificateAuthority; without
// it (system roots) or with another CA, discovery fails and tokens are refused.
func TestOIDCCertificateAuthority(t *testing.T) {
	tok := opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}, Subject: "alice"})
	for name, ca := range map[string]string{"system roots": "", "another CA": newCraftedIssuer(t).caPEM()} {
		j := opIssuer(t)
		j.CertificateAuthority = ca
		a := New(Options{})
		a.Configure(authWith(j))
		err := mustRefuse(t, a, tok, name)
		if !isTransient(err) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("%s: %v, want a certificate error", name, err)
		}
	}
}

// TestAttackerTokens: tokens an attacker can make without the issuer's private key.
func TestAttackerTokens(t *testing.T) {
	p := provider(t)
	a := New(Options{})
	a.Configure(authWith(opIssuer(t)))
	pub := opPublicKey(t)
	now := time.Now().Unix()
	claims := map[string]any{"iss": p.Issuer, "aud": testAudience, "sub": "admin", "iat": now, "nbf": now, "exp": now + 300}
	// The real OP's tokens are accepted by the same Authenticator.
	if _, err := a.Verify(verifyCtx(t), opToken(t, testservers.TokenOptions{Audiences: []string{testAudience}})); err != nil {
		t.Fatal(err)
	}

	mustRefuse(t, a, unsigned(map[string]string{"alg": "none", "typ": "JWT", "kid": pub.KeyID}, claims, nil), "alg none")
	mustRefuse(t, a, unsigned(map[string]string{"alg": "none"}, claims, []byte("x")), "alg none with a signature")
	// HMAC keyed with the public key, in the spellings a confused verifier would use.
	der, err := x509.MarshalPKIXPublicKey(pub.Key)
	if err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string][]byte{"PEM": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), "DER": der, "modulus": pub.Key.(*rsa.PublicKey).N.Bytes()} {
		signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret}, (&jose.SignerOptions{}).WithHeader("kid", pub.KeyID))
		if err != nil {
			t.Fatal(err)
		}
		mustRefuse(t, a, sign(t, signer, claims), "HS256 with the public key as "+name)
	}
	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, a, signRS256(t, attacker, pub.KeyID, claims), "forged with the OP's kid")
	mustRefuse(t, a, signRS256(t, attacker, "", claims), "forged without kid")

	// An unknown-kid flood refetches the JWKS at most once per JWKSMinRefreshInterval.
	is := a.cfg.Load().issuers[p.Issuer]
	is.keys.mu.Lock()
	before := is.keys.fetches
	is.keys.mu.Unlock()
	for i := range 200 {
		mustRefuse(t, a, signRS256(t, attacker, "kid-"+strconv.Itoa(i), claims), "unknown kid")
	}
	is.keys.mu.Lock()
	after := is.keys.fetches
	is.keys.mu.Unlock()
	if after-before > 1 {
		t.Fatalf("200 unknown kids fetched the JWKS %d times, want at most 1", after-before)
	}

	mustRefuse(t, a, strings.Repeat("a", MaxTokenBytes+1), "oversized")
	for _, bad := range []string{"", ".", "..", "a.b", "a.b.c.d", "a.!!!.c", "e30.e30", "e30.W10.c", "e30.bnVsbA.c", "e30." + b64([]byte(`{"iss":5}`)) + ".c",
		"e30." + b64([]byte(`{"iss":"`+p.Issuer+`"`)) + ".c", b64([]byte("{")) + "." + b64([]byte(`{"iss":"`+p.Issuer+`"}`)) + ".c"} {
		mustRefuse(t, a, bad, "malformed "+strconv.Quote(bad))
	}
}

func sign(t *testing.T, s jose.Signer, claims map[string]any) string {
	t.Helper()
	payload, _ := jsonMarshal(claims)
	jws, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCraftedClaims: validly signed tokens (of an issuer the test controls) whose claims are
// wrong.
func TestCraftedClaims(t *testing.T) {
	c := newCraftedIssuer(t)
	a := New(Options{})
	a.Configure(authWith(c.config()))
	if id, err := a.Verify(verifyCtx(t), c.sign(t, c.claims(nil))); err != nil || id.Subject != "mallory" {
		t.Fatalf("baseline: %v %v", id, err)
	}
	now := time.Now().Unix()
	for name, over := range map[string]map[string]any{
		"nbf in the future":     {"nbf": now + 3600},
		"nbf not a number":      {"nbf": "soon"},
		"expired":               {"exp": now - 60},
		"no exp":                {"exp": nil},
		"exp absurd":            {"exp": 1e300},
		"no aud":                {"aud": nil},
		"aud list without ours": {"aud": []string{"a", "b"}},
		"no sub":                {"sub": nil},
		"sub not a string":      {"sub": 42},
		"another iss":           {"iss": c.URL + "/other"},
	} {
		mustRefuse(t, a, c.sign(t, c.claims(over)), name)
	}
	// A signed payload that is not JSON.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: c.key}, (&jose.SignerOptions{}).WithHeader("kid", c.kid))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign([]byte("not json"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := jws.CompactSerialize()
	mustRefuse(t, a, s, "payload not JSON")
}

// TestHostileIssuers: issuers that are down, slow or answer garbage cost a bounded wait and a
// 401, never a panic.
func TestHostileIssuers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "https://" + ln.Addr().String()
	_ = ln.Close()

	slow := newCraftedIssuer(t)
	slow.jwks = func(w http.ResponseWriter) { time.Sleep(VerifyTimeout + time.Second) }
	garbage := newCraftedIssuer(t)
	garbage.jwks = func(w http.ResponseWriter) { _, _ = w.Write([]byte("{{{{ not a key set")) }
	huge := newCraftedIssuer(t)
	huge.jwks = func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"keys":[`))
		_, _ = w.Write([]byte(strings.Repeat(" ", 2*MaxMetadataBytes)))
	}
	symmetric := newCraftedIssuer(t)
	symmetric.jwks = func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(`{"keys":[{"kty":"oct","kid":"crafted","k":"c2VjcmV0"}]}`))
	}
	for name, c := range map[string]*craftedIssuer{"slow JWKS": slow, "garbage JWKS": garbage, "oversized JWKS": huge, "symmetric JWKS": symmetric} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := New(Options{})
			a.Configure(authWith(c.config()))
			start := time.Now()
			mustRefuse(t, a, c.sign(t, c.claims(nil)), name)
			mustRefuse(t, a, c.sign(t, c.claims(map[string]any{"sub": "again"})), name+", again")
			if d := time.Since(start); d > 4*VerifyTimeout {
				t.Fatalf("%s: took %s", name, d)
			}
		})
	}
	t.Run("down", func(t *testing.T) {
		t.Parallel()
		c := newCraftedIssuer(t)
		j := c.config()
		j.URL = downURL
		a := New(Options{})
		a.Configure(authWith(j))
		tok := c.sign(t, c.claims(map[string]any{"iss": downURL}))
		if err := mustRefuse(t, a, tok, "issuer down"); !isTransient(err) {
			t.Fatalf("issuer down: %v is cached as a refusal", err)
		}
		// Backing off: refused at once, without another attempt.
		if err := mustRefuse(t, a, tok, "issuer down, again"); !strings.Contains(err.Error(), "next attempt") {
			t.Fatalf("issuer down, again: %v", err)
		}
	})
	for name, doc := range map[string]string{
		"garbage discovery":   "<html>",
		"wrong issuer":        `{"issuer":"https://elsewhere.example","jwks_uri":"https://elsewhere.example/keys"}`,
		"plain-http jwks_uri": "",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCraftedIssuer(t)
			body := doc
			if body == "" {
				body = `{"issuer":"` + c.URL + `","jwks_uri":"http://` + strings.TrimPrefix(c.URL, "https://") + `/keys"}`
			}
			c.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) })
			a := New(Options{})
			a.Configure(authWith(c.config()))
			mustRefuse(t, a, c.sign(t, c.claims(nil)), name)
		})
	}
}

// TestConfigureKeepsIssuers: a catalog change that leaves an issuer alone keeps its discovery
// and cache; one that changes it starts afresh, and a removed issuer's tokens are refused even
// though they were cached.
func TestConfigureKeepsIssuers(t *testing.T) {
	c := newCraftedIssuer(t)
	a := New(Options{})
	auth := authWith(c.config())
	a.Configure(auth)
	tok := c.sign(t, c.claims(nil))
	if _, err := a.Verify(verifyCtx(t), tok); err != nil {
		t.Fatal(err)
	}
	is := a.cfg.Load().issuers[c.URL]
	same := *auth
	same.ScopesSupported = []string{"mcp"}
	a.Configure(&same)
	if a.cfg.Load().issuers[c.URL] != is {
		t.Fatal("an unchanged issuer was rebuilt")
	}
	changed := c.config()
	changed.Audiences = []string{"https://elsewhere.example/mcp"}
	a.Configure(authWith(changed))
	mustRefuse(t, a, tok, "audience no longer accepted")
	a.Configure(authWith())
	mustRefuse(t, a, tok, "issuer removed")
	a.Configure(nil)
	if _, err := a.Verify(verifyCtx(t), tok); err == nil {
		t.Fatal("accepted with authentication off")
	}
	_ = catalog.Wildcard
	_ = context.Background
}
