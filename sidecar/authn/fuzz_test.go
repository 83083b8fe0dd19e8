package authn

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

const fuzzIssuer = "https://issuer.fuzz.invalid"

// FuzzVerify feeds arbitrary Authorization values through the whole verification of an
// Authenticator whose issuer is already discovered with a static key (no network): Bearer,
// routing, JWS parsing with the algorithm allow-list, signature, claims and mapping. It must
// never panic, and must accept only tokens signed by the issuer's key.
func FuzzVerify(f *testing.F) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	j := catalog.JWTIssuer{URL: fuzzIssuer, Audiences: []string{testAudience}, UsernameClaim: "sub", GroupsClaim: "groups", GroupsPrefix: "g:"}
	a := New(Options{})
	a.Configure(&catalog.Auth{Resource: testAudience, JWT: []catalog.JWTIssuer{j}, TrustDomain: "cluster.local"})
	is := a.cfg.Load().issuers[fuzzIssuer]
	keys := &remoteKeys{url: fuzzIssuer + "/keys", keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}},
		fetched: time.Now().Add(24 * time.Hour)} // never refetched: no network
	is.mu.Lock()
	is.keys = keys
	is.verifier = oidc.NewVerifier(fuzzIssuer, keys, &oidc.Config{SkipClientIDCheck: true, SkipExpiryCheck: true, SupportedSigningAlgs: AllowedAlgorithms})
	is.mu.Unlock()

	now := time.Now().Unix()
	good := signRS256(f, key, "k1", map[string]any{"iss": fuzzIssuer, "aud": testAudience, "sub": "alice", "groups": []string{"a", "b"}, "exp": now + 3600, "nbf": now})
	f.Add("Bearer " + good)
	f.Add("bearer " + good + "=")
	f.Add("Bearer " + unsigned(map[string]string{"alg": "none"}, map[string]any{"iss": fuzzIssuer, "aud": testAudience, "sub": "x", "exp": now + 60}, nil))
	f.Add("Bearer " + unsigned(map[string]string{"alg": "HS256", "kid": "k1"}, map[string]any{"iss": fuzzIssuer, "sub": "x"}, []byte("sig")))
	f.Add("Bearer e30.e30.e30")
	f.Add("Basic dXNlcjpwYXNz")
	f.Add("Bearer ")
	f.Fuzz(func(t *testing.T, authz string) {
		h := http.Header{"Authorization": {authz}}
		tok, err := Bearer(h)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		id, err := a.Verify(ctx, tok)
		if err != nil {
			return
		}
		// Accepted: it must carry a signature of the key over claims that map to a caller.
		jws, perr := jose.ParseSignedCompact(tok, allowedJOSE)
		if perr != nil {
			t.Fatalf("accepted a token go-jose cannot parse: %v", perr)
		}
		payload, verr := jws.Verify(&key.PublicKey)
		if verr != nil {
			t.Fatalf("accepted a token the key did not sign: %v", verr)
		}
		var claims map[string]json.RawMessage
		if json.Unmarshal(payload, &claims) != nil || id.Subject == "" || id.Issuer != fuzzIssuer {
			t.Fatalf("accepted %q as %+v", payload, id)
		}
	})
}
