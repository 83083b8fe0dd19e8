package authn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/lru"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// Limits and timings of verification. Every wait and every cache is bounded.
const (
	// DefaultRevalidateAfter is how long a ServiceAccount token's TokenReview result is reused:
	// a token whose pod or ServiceAccount was deleted is refused at most this long after.
	DefaultRevalidateAfter = 30 * time.Second
	// NegativeCacheTTL is how long a refused token is refused again without asking anyone.
	NegativeCacheTTL = 10 * time.Second
	// DefaultMaxCacheEntries bounds the verified and refused tokens remembered (least recently
	// used first out); an entry is a few hundred bytes.
	DefaultMaxCacheEntries = 10000
	// VerifyTimeout bounds one TokenReview, one discovery and one JWKS fetch.
	VerifyTimeout = 5 * time.Second
	// ClockSkew is the leeway on exp and nbf for clocks that disagree a little.
	ClockSkew = 5 * time.Second
	// MaxMetadataBytes bounds a discovery document and a JWKS.
	MaxMetadataBytes = 1 << 20
	// MaxJWKSKeys bounds the keys kept of one JWKS.
	MaxJWKSKeys = 64
	// JWKSMinRefreshInterval rate-limits JWKS fetches per issuer: a token naming an unknown key
	// refetches the JWKS at most this often, so random kids cannot hammer the issuer.
	JWKSMinRefreshInterval = 10 * time.Second
	// discoveryBackoffFirst and discoveryBackoffLast bound the wait between two discovery attempts
	// of an issuer that is down (doubling from the first to the second).
	discoveryBackoffFirst = time.Second
	discoveryBackoffLast  = time.Minute
)

// IssuerKubernetes is Identity.Issuer of a ServiceAccount token validated by TokenReview.
const IssuerKubernetes = "kubernetes"

// Options configure an Authenticator.
type Options struct {
	// TokenReviews validates ServiceAccount tokens (the sidecar's kube client's
	// AuthenticationV1().TokenReviews()); nil refuses them.
	TokenReviews TokenReviewer
	// RevalidateAfter is DefaultRevalidateAfter when 0.
	RevalidateAfter time.Duration
	// MaxCacheEntries is DefaultMaxCacheEntries when 0.
	MaxCacheEntries int
	Logger          *slog.Logger
}

// Authenticator verifies bearer tokens against the live catalog's Auth: a token whose
// (unverified) `iss` names one of Auth.JWT goes to that issuer, any other to a TokenReview when
// Auth.ServiceAccountTokens is set. Results are cached by the token's SHA-256 (until the token
// expires, a ServiceAccount token's no longer than RevalidateAfter; a refused one for
// NegativeCacheTTL), and one verification per token is in flight at a time.
type Authenticator struct {
	opts  Options
	log   *slog.Logger
	cfg   atomic.Pointer[config]
	cache *lru.Cache // thread-safe; [sha256]byte -> *entry
	// flight runs one verification per token hash.
	flight singleflight.Group
	// mu serialises Configure.
	mu sync.Mutex
}

// config is one Auth with its verifiers; replaced whole by Configure.
type config struct {
	auth    *catalog.Auth
	sa      *saVerifier
	issuers map[string]*issuer
}

// owns reports whether v is one of cfg's verifiers: a cached result of a verifier a catalog
// change replaced is not used.
func (c *config) owns(v verifier) bool {
	switch v := v.(type) {
	case *saVerifier:
		return c.sa == v
	case *issuer:
		return c.issuers[v.cfg.URL] == v
	}
	return false
}

type verifier interface {
	// verify returns the caller and until when the result may be reused.
	verify(ctx context.Context, token string, c *peeked) (*Identity, time.Time, error)
}

type entry struct {
	v     verifier
	id    *Identity
	err   error
	until time.Time
}

// New returns an Authenticator that refuses every token until Configure.
func New(o Options) *Authenticator {
	if o.RevalidateAfter <= 0 {
		o.RevalidateAfter = DefaultRevalidateAfter
	}
	if o.MaxCacheEntries <= 0 {
		o.MaxCacheEntries = DefaultMaxCacheEntries
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Authenticator{opts: o, log: o.Logger, cache: lru.New(o.MaxCacheEntries)}
}

// Auth returns the Auth the Authenticator enforces (nil: none).
func (a *Authenticator) Auth() *catalog.Auth {
	if c := a.cfg.Load(); c != nil {
		return c.auth
	}
	return nil
}

// Configure makes auth the configuration (nil: none). The verifiers of unchanged issuers, and
// the ServiceAccount verifier when its audiences are unchanged, are kept with their caches;
// results of replaced ones are forgotten. New issuers are discovered in the background.
func (a *Authenticator) Configure(auth *catalog.Auth) {
	if c := a.cfg.Load(); c != nil && c.auth == auth {
		return // the request path calls this with the live catalog's Auth: nothing changed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.cfg.Load()
	if old != nil && old.auth == auth {
		return
	}
	next := &config{auth: auth, issuers: map[string]*issuer{}}
	if auth != nil {
		if st := auth.ServiceAccountTokens; st != nil {
			sa := &saVerifier{reviews: a.opts.TokenReviews, audiences: st.Audiences, trustDomain: auth.TrustDomain, revalidate: a.opts.RevalidateAfter}
			if old != nil && old.sa != nil && old.sa.same(sa) {
				sa = old.sa
			}
			next.sa = sa
		}
		for _, j := range auth.JWT {
			if old != nil {
				if is := old.issuers[j.URL]; is != nil && reflect.DeepEqual(is.cfg, j) {
					next.issuers[j.URL] = is
					continue
				}
			}
			is, err := newIssuer(j, a.log)
			if err != nil {
				// The catalog validated the URL; a CA that does not parse refuses this issuer's
				// tokens (transiently: the next catalog may fix it) rather than the catalog.
				a.log.Error("OIDC issuer unusable; its tokens are refused", "issuer", j.URL, "err", err)
			}
			next.issuers[j.URL] = is
			if err == nil {
				go func() { _, _ = is.ready() }()
			}
		}
	}
	a.cfg.Store(next)
}

// Verify returns the caller a bearer token authenticates, or why it does not. It never
// returns the token in an error.
func (a *Authenticator) Verify(ctx context.Context, token string) (*Identity, error) {
	cfg := a.cfg.Load()
	if cfg == nil || cfg.auth == nil {
		return nil, errors.New("authentication is not configured")
	}
	if len(token) > MaxTokenBytes {
		return nil, errors.New("token too large")
	}
	key := sha256.Sum256([]byte(token))
	now := time.Now()
	if v, ok := a.cache.Get(key); ok {
		if e := v.(*entry); now.Before(e.until) && cfg.owns(e.v) {
			return e.id, e.err
		}
	}
	ch := a.flight.DoChan(string(key[:]), func() (any, error) {
		return a.verifyNew(cfg, key, token)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Identity), nil
	case <-ctx.Done():
		return nil, transient{ctx.Err()}
	}
}

// verifyNew verifies a token not in the cache. It runs detached from the request that asked
// (others may wait for it too), under VerifyTimeout.
func (a *Authenticator) verifyNew(cfg *config, key [sha256.Size]byte, token string) (*Identity, error) {
	c, err := peek(token)
	if err != nil {
		return nil, err
	}
	var v verifier
	if is, ok := cfg.issuers[c.Iss]; ok {
		if is == nil {
			return nil, transient{fmt.Errorf("issuer %q is misconfigured", c.Iss)}
		}
		v = is
	} else if cfg.sa != nil {
		v = cfg.sa
	} else {
		return nil, errors.New("the token's issuer is not accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), VerifyTimeout)
	defer cancel()
	id, until, err := v.verify(ctx, token, c)
	now := time.Now()
	switch {
	case err == nil:
		if id.Expiry.Before(until) {
			until = id.Expiry
		}
		a.cache.Add(key, &entry{v: v, id: id, until: until})
	case !isTransient(err):
		a.cache.Add(key, &entry{v: v, err: err, until: now.Add(NegativeCacheTTL)})
	}
	return id, err
}

// transient marks a failure that says nothing about the token (an API server or issuer that
// cannot be reached): it is not cached.
type transient struct{ error }

func (t transient) Unwrap() error { return t.error }

func isTransient(err error) bool {
	var t transient
	return errors.As(err, &t)
}

// peeked is what routing reads from a JWT before its signature is checked.
type peeked struct {
	Iss string  `json:"iss"`
	Exp float64 `json:"exp"`
}

// peek reads the unverified claims of a compact JWS: three base64url parts, the middle one a
// JSON object. Bounded by MaxTokenBytes (checked by the caller).
func peek(token string) (*peeked, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return nil, errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errors.New("the token's payload is not base64url")
	}
	var c peeked
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, errors.New("the token's payload is not a JSON object with a string iss and numeric exp")
	}
	return &c, nil
}
