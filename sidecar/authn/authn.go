// Package authn makes the sidecar an OAuth 2.1 resource server (MCP authorization spec,
// RFC 6750, RFC 9728): it finds the bearer token of a request, verifies it (this cluster's
// ServiceAccount tokens through a TokenReview, OIDC JWTs against their issuer's JWKS) and
// returns the caller's Identity, or the 401 challenge to answer with. It serves the Protected
// Resource Metadata document.
//
// It knows nothing of MCP methods, catalogs' tools or policies: what an Identity may do is
// decided at the sidecar's choke point (package sidecar/access). It never logs a token.
package authn

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Identity is a verified caller.
type Identity struct {
	// Subject is the caller's stable name, the key of everything bound to a caller (2025-era
	// sessions, private caches, streams): "system:serviceaccount:<ns>:<name>" for a
	// ServiceAccount token, the mapped username (prefix included) for an OIDC token.
	Subject string
	// Groups are the caller's groups: the TokenReview's for a ServiceAccount token (for
	// example system:serviceaccounts:<ns>), the mapped groups claim for an OIDC token.
	Groups []string
	// ServiceAccount is "<namespace>/<name>" for a ServiceAccount token, empty otherwise.
	ServiceAccount string
	// SPIFFE is spiffe://<trust domain>/ns/<namespace>/sa/<name> for a ServiceAccount token.
	SPIFFE string
	// Issuer is the token's issuer: the OIDC issuer URL, or "kubernetes" for ServiceAccount
	// tokens validated by TokenReview.
	Issuer string
	// Expiry is when the token expires: nothing the caller opened may outlive it.
	Expiry time.Time
	// CredentialClaim is the string value of the OIDC token's claim that selects the caller's
	// upstream credential (the issuer's CredentialClaim); empty otherwise.
	CredentialClaim string
}

// Verifier verifies one bearer token. Errors are for the log and the 401's
// error_description; they never contain the token.
type Verifier interface {
	Verify(ctx context.Context, token string) (*Identity, error)
}

// ErrNoToken means the request carries no bearer token.
var ErrNoToken = errors.New("no bearer token")

// MaxTokenBytes bounds a bearer token: larger ones are refused unparsed.
const MaxTokenBytes = 16 << 10

// Bearer returns the request's bearer token (RFC 6750 §2.1): exactly one Authorization header,
// scheme "Bearer" in any case, a non-empty token of token68 characters. ErrNoToken when there is
// no Authorization header; another error when it is there but not a usable bearer token (a
// second header, another scheme, an oversized or malformed token).
func Bearer(h http.Header) (string, error) {
	vs := h.Values("Authorization")
	switch {
	case len(vs) == 0:
		return "", ErrNoToken
	case len(vs) > 1:
		return "", errors.New("more than one Authorization header")
	}
	scheme, tok, ok := strings.Cut(vs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errors.New("the Authorization scheme is not Bearer")
	}
	tok = strings.TrimLeft(tok, " ")
	if tok == "" {
		return "", errors.New("empty bearer token")
	}
	if len(tok) > MaxTokenBytes {
		return "", errors.New("bearer token too large")
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		token68 := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0 || c == '=' && i > 0
		if !token68 {
			return "", errors.New("bearer token has characters outside token68")
		}
	}
	return tok, nil
}

type ctxKey struct{}

// WithIdentity returns ctx carrying the verified caller.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the verified caller of a request, nil when the server does not
// authenticate callers (auth mode Off).
func FromContext(ctx context.Context) *Identity {
	id, _ := ctx.Value(ctxKey{}).(*Identity)
	return id
}
