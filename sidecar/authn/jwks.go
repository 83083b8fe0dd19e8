package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// errKeysUnavailable means no key of the issuer's JWKS (as last fetched) verifies the token and
// the JWKS may not be refetched yet: maybe a key rotation the sidecar has not seen, so the
// refusal is not cached.
var errKeysUnavailable = errors.New("no key of the issuer's JWKS verifies the token")

// remoteKeys is an issuer's JWKS (go-oidc's KeySet): fetched at discovery and refetched when a
// token names a key it does not have, at most once per JWKSMinRefreshInterval.
type remoteKeys struct {
	url    string
	client *http.Client
	flight singleflight.Group

	// mu guards keys, fetched and fetches.
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // the last fetch attempt
	// fetches counts fetch attempts (tests: an unknown-kid flood must not multiply them).
	fetches int
}

var allowedJOSE = func() []jose.SignatureAlgorithm {
	var out []jose.SignatureAlgorithm
	for _, a := range AllowedAlgorithms {
		out = append(out, jose.SignatureAlgorithm(a))
	}
	return out
}()

// VerifySignature returns the payload of a compact JWS signed with an allowed algorithm by a
// key of the JWKS.
func (k *remoteKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, allowedJOSE)
	if err != nil {
		return nil, fmt.Errorf("malformed or unsupported JWS: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the JWS must have exactly one signature")
	}
	hdr := jws.Signatures[0].Header
	k.mu.Lock()
	keys := k.keys
	k.mu.Unlock()
	payload, known := verifyWith(jws, keys, hdr)
	if payload != nil {
		return payload, nil
	}
	if known && hdr.KeyID != "" {
		return nil, errors.New("the token's signature does not verify")
	}
	if !k.mayRefresh() {
		return nil, errKeysUnavailable
	}
	r, err, _ := k.flight.Do("", func() (any, error) { return k.refresh(ctx) })
	if err != nil {
		return nil, fmt.Errorf("%w (JWKS refetch: %w)", errKeysUnavailable, err)
	}
	if payload, _ := verifyWith(jws, r.([]jose.JSONWebKey), hdr); payload != nil {
		return payload, nil
	}
	return nil, errors.New("the token's signature does not verify")
}

// verifyWith tries the keys the header names (by kid, and alg when the key states one). known
// reports whether some key has the header's kid.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, hdr jose.Header) (payload []byte, known bool) {
	for _, key := range keys {
		if hdr.KeyID != "" && key.KeyID != hdr.KeyID {
			continue
		}
		known = true
		if key.Algorithm != "" && key.Algorithm != hdr.Algorithm {
			continue
		}
		if p, err := jws.Verify(key.Key); err == nil {
			return p, true
		}
	}
	return nil, known
}

// mayRefresh claims the next refetch slot if JWKSMinRefreshInterval has passed.
func (k *remoteKeys) mayRefresh() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.fetched) < JWKSMinRefreshInterval {
		return false
	}
	k.fetched = time.Now()
	return true
}

// refresh fetches the JWKS (bounded in time and size) and keeps its public signing keys. On
// failure the keys held stay.
func (k *remoteKeys) refresh(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	k.fetched = time.Now()
	k.fetches++
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), VerifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body) // bounded by the client's limitedTransport
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS: %s", resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("JWKS is not JSON: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		// A key of a type this verifier does not know is skipped, not fatal to the others.
		if key.UnmarshalJSON(raw) != nil || !key.Valid() || !key.IsPublic() || (key.Use != "" && key.Use != "sig") {
			continue
		}
		keys = append(keys, key)
		if len(keys) == MaxJWKSKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS has no usable public signing key")
	}
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return keys, nil
}
