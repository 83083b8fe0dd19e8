package authn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/sync/singleflight"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// AllowedAlgorithms are the JWS algorithms an OIDC token may be signed with: asymmetric only.
// No "none", and no HMAC, whose key a verifier would have to take from the public JWKS.
var AllowedAlgorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.EdDSA,
}

// issuer verifies the JWTs of one OIDC issuer. Discovery happens lazily (an issuer down when
// the sidecar starts costs nothing but its own tokens) and is retried with backoff.
type issuer struct {
	cfg    catalog.JWTIssuer
	client *http.Client
	log    *slog.Logger
	flight singleflight.Group // one discovery at a time

	// mu guards verifier, next and backoff.
	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	keys     *remoteKeys // the verifier's
	next     time.Time   // no discovery before
	lastErr  error       // why the last discovery failed
	backoff  time.Duration
}

func newIssuer(j catalog.JWTIssuer, log *slog.Logger) (*issuer, error) {
	tlsc := &tls.Config{MinVersion: tls.VersionTLS12}
	if j.CertificateAuthority != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(j.CertificateAuthority)) {
			return nil, errors.New("certificateAuthority holds no PEM certificate")
		}
		tlsc.RootCAs = pool
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		TLSClientConfig:       tlsc,
		TLSHandshakeTimeout:   VerifyTimeout,
		ResponseHeaderTimeout: VerifyTimeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
	return &issuer{
		cfg:    j,
		log:    log,
		client: &http.Client{Timeout: VerifyTimeout, Transport: limitedTransport{base: tr, max: MaxMetadataBytes}},
	}, nil
}

// ready returns the issuer's verifier, discovering it first if needed. While discovery is
// backing off after a failure, it fails at once.
func (is *issuer) ready() (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	v, next, lastErr := is.verifier, is.next, is.lastErr
	is.mu.Unlock()
	if v != nil {
		return v, nil
	}
	if time.Now().Before(next) {
		return nil, transient{fmt.Errorf("issuer %s: discovery failed recently (%w), next attempt at %s", is.cfg.URL, lastErr, next.Format(time.RFC3339))}
	}
	r, err, _ := is.flight.Do("", func() (any, error) { return is.discover() })
	if err != nil {
		return nil, err
	}
	return r.(*oidc.IDTokenVerifier), nil
}

func (is *issuer) discover() (*oidc.IDTokenVerifier, error) {
	ctx, cancel := context.WithTimeout(context.Background(), VerifyTimeout)
	defer cancel()
	v, keys, err := is.discoverOnce(ctx)
	is.mu.Lock()
	defer is.mu.Unlock()
	if err != nil {
		is.backoff = min(max(2*is.backoff, discoveryBackoffFirst), discoveryBackoffLast)
		is.next, is.lastErr = time.Now().Add(is.backoff), err
		is.log.Warn("OIDC discovery failed; tokens of this issuer are refused until it succeeds", "issuer", is.cfg.URL, "retryIn", is.backoff, "err", err)
		return nil, transient{fmt.Errorf("issuer %s: discovery: %w", is.cfg.URL, err)}
	}
	is.verifier, is.keys, is.backoff = v, keys, 0
	is.log.Info("OIDC issuer discovered", "issuer", is.cfg.URL)
	return v, nil
}

func (is *issuer) discoverOnce(ctx context.Context) (*oidc.IDTokenVerifier, *remoteKeys, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, is.client), is.cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	var d struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&d); err != nil {
		return nil, nil, err
	}
	if u, err := url.Parse(d.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, fmt.Errorf("jwks_uri %q is not an https URL", d.JWKSURI)
	}
	keys := &remoteKeys{url: d.JWKSURI, client: is.client}
	if _, err := keys.refresh(ctx); err != nil {
		// Not fatal: an unknown kid refetches (rate-limited).
		is.log.Warn("JWKS fetch failed", "issuer", is.cfg.URL, "err", err)
	}
	return oidc.NewVerifier(is.cfg.URL, keys, &oidc.Config{
		SkipClientIDCheck:    true, // any of cfg.Audiences, checked below
		SkipExpiryCheck:      true, // exp and nbf with ClockSkew, below
		SupportedSigningAlgs: AllowedAlgorithms,
	}), keys, nil
}

func (is *issuer) verify(ctx context.Context, token string, _ *peeked) (*Identity, time.Time, error) {
	v, err := is.ready()
	if err != nil {
		return nil, time.Time{}, err
	}
	t, err := v.Verify(ctx, token)
	if err != nil {
		if errors.Is(err, errKeysUnavailable) {
			return nil, time.Time{}, transient{err}
		}
		return nil, time.Time{}, err
	}
	var claims map[string]json.RawMessage
	if err := t.Claims(&claims); err != nil {
		return nil, time.Time{}, err
	}
	id, err := mapClaims(is.cfg, claims, time.Now())
	if err != nil {
		return nil, time.Time{}, err
	}
	return id, id.Expiry, nil
}

// mapClaims checks a verified token's aud, exp and nbf and maps its claims to an Identity, as
// the API server's JWT authenticator does.
func mapClaims(j catalog.JWTIssuer, claims map[string]json.RawMessage, now time.Time) (*Identity, error) {
	var aud audience
	if err := json.Unmarshal(claims["aud"], &aud); err != nil || !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(j.Audiences, a) }) {
		return nil, errors.New("the token has none of the accepted audiences")
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return nil, errors.New("the token has no exp")
	}
	if !now.Before(exp.Add(ClockSkew)) {
		return nil, errors.New("the token expired")
	}
	if raw, present := claims["nbf"]; present {
		nbf, ok := numericDate(raw)
		if !ok || now.Add(ClockSkew).Before(nbf) {
			return nil, errors.New("the token is not valid yet (nbf)")
		}
	}
	var user string
	if err := json.Unmarshal(claims[j.UsernameClaim], &user); err != nil || user == "" {
		return nil, fmt.Errorf("the token has no string claim %q", j.UsernameClaim)
	}
	if j.UsernameClaim == "email" {
		var verified bool
		if err := json.Unmarshal(claims["email_verified"], &verified); err != nil || !verified {
			return nil, errors.New("the token's email is not verified (email_verified)")
		}
	}
	id := &Identity{Subject: j.UsernamePrefix + user, Issuer: j.URL, Expiry: exp}
	if raw, present := claims[j.GroupsClaim]; j.GroupsClaim != "" && present && string(raw) != "null" {
		var groups []string
		var one string
		if err := json.Unmarshal(raw, &one); err == nil {
			groups = []string{one}
		} else if err := json.Unmarshal(raw, &groups); err != nil {
			return nil, fmt.Errorf("the token's claim %q is neither a string nor a list of strings", j.GroupsClaim)
		}
		for _, g := range groups {
			id.Groups = append(id.Groups, j.GroupsPrefix+g)
		}
	}
	if j.CredentialClaim != "" {
		// Not a string (or absent): no value, so the caller gets the default key or none.
		_ = json.Unmarshal(claims[j.CredentialClaim], &id.CredentialClaim)
	}
	// The names travel to the upstream as header values.
	if !printable(id.Subject) || slices.ContainsFunc(id.Groups, func(g string) bool { return !printable(g) }) {
		return nil, errors.New("a mapped name has control characters or is too long")
	}
	// system: names are the cluster's own (system:masters, system:serviceaccount:...): an
	// issuer must not mint them.
	if strings.HasPrefix(id.Subject, "system:") {
		return nil, errors.New("the mapped username starts with \"system:\"")
	}
	if slices.ContainsFunc(id.Groups, func(g string) bool { return strings.HasPrefix(g, "system:") }) {
		return nil, errors.New("a mapped group starts with \"system:\"")
	}
	return id, nil
}

// audience is `aud`: a string or a list of strings.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// numericDate reads a JWT NumericDate (seconds, possibly fractional).
func numericDate(raw json.RawMessage) (time.Time, bool) {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f <= 0 || f > 1e11 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// limitedTransport bounds every response body it returns to max bytes: a larger one fails
// to read rather than filling memory.
type limitedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	}
	return resp, err
}

var errTooLarge = errors.New("response exceeds " + fmt.Sprint(MaxMetadataBytes) + " bytes")

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// MaxNameBytes bounds a mapped username or group.
const MaxNameBytes = 1024

// printable reports whether a name is short and free of control characters (it becomes a
// header value for the upstream).
func printable(s string) bool {
	if len(s) > MaxNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
