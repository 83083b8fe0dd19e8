package catalog

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Auth is how the sidecar authenticates callers: MCPServer.spec.auth with mode Required,
// compiled. A catalog without Auth is mode Off: no caller is authenticated and every caller
// may use the whole catalog (Access must then be nil).
//
// A sidecar that predates Auth rejects a catalog carrying it (unknown field), keeps serving its
// last good catalog and reports the rejection, so a server never runs open while its status
// claims otherwise. Catalogs without Auth keep their bytes (and revision) across upgrades.
type Auth struct {
	// Resource is the protected resource's canonical URI (RFC 9728 `resource`, RFC 8707): the
	// server's status.url. The sidecar serves it in its Protected Resource Metadata document.
	Resource string `json:"resource"`
	// ServiceAccountTokens, when set, accepts this cluster's ServiceAccount tokens (validated
	// with a TokenReview) whose audience is one of its audiences.
	ServiceAccountTokens *ServiceAccountTokens `json:"serviceAccountTokens,omitempty"`
	// JWT lists the OIDC issuers whose tokens are accepted, in the shape of the API server's
	// structured authentication configuration (apiserver.config.k8s.io JWTAuthenticator).
	JWT []JWTIssuer `json:"jwt,omitempty"`
	// ForwardToken passes the caller's Authorization header to the upstream. Off by default:
	// the upstream gets the verified identity as headers instead (no token passthrough).
	ForwardToken bool `json:"forwardToken,omitempty"`
	// TrustDomain is the SPIFFE trust domain of this cluster's ServiceAccounts: a caller
	// authenticated as ServiceAccount ns/sa is also spiffe://<TrustDomain>/ns/<ns>/sa/<sa>.
	TrustDomain string `json:"trustDomain"`
	// ScopesSupported, when known, is served in the Protected Resource Metadata document.
	ScopesSupported []string `json:"scopesSupported,omitempty"`
	// UpstreamCredentials, when set, gives each caller its own credential for the upstream:
	// the mapping only; the values stay in the Secret, which the sidecar watches.
	UpstreamCredentials *UpstreamCredentials `json:"upstreamCredentials,omitempty"`
}

// Values of UpstreamCredentials.By.
const (
	CredentialByServiceAccount = "ServiceAccount"
	CredentialByUsername       = "Username"
	CredentialByClaim          = "Claim"
)

// UpstreamCredentials maps verified callers to keys of one Secret of the server's namespace.
type UpstreamCredentials struct {
	// Secret is the Secret's name (in the sidecar's namespace).
	Secret string `json:"secret"`
	// Readable says the Secret is exposed to the server, so its sidecars may read it (the
	// controller grants them get, list and watch on it by name). False: the sidecar does not
	// watch it and refuses every caller, naming the Secret.
	Readable bool `json:"readable,omitempty"`
	// Header is the header the credential goes in; ValuePrefix is put before the value.
	Header      string `json:"header"`
	ValuePrefix string `json:"valuePrefix,omitempty"`
	// By selects the caller's entry: ServiceAccount (<namespace>/<name>), Username (the
	// subject), or Claim (the value of the claim every JWT issuer's CredentialClaim names).
	By string `json:"by"`
	// Keys maps callers to keys of the Secret (JSON objects encode sorted: the bytes do not
	// depend on the order of spec.auth.upstreamCredentials.callers).
	Keys map[string]string `json:"keys,omitempty"`
	// DefaultKey is the key for a caller Keys does not list; empty: such a caller is refused.
	DefaultKey string `json:"defaultKey,omitempty"`
}

// ServiceAccountTokens accepts projected ServiceAccount tokens of this cluster.
type ServiceAccountTokens struct {
	// Audiences the token must have one of (at least one).
	Audiences []string `json:"audiences"`
}

// JWTIssuer is one OIDC issuer whose JWTs are accepted.
type JWTIssuer struct {
	// URL is the issuer (`iss`), https; discovery is <URL>/.well-known/openid-configuration.
	URL string `json:"url"`
	// Audiences the token's `aud` must contain one of (at least one).
	Audiences []string `json:"audiences"`
	// CertificateAuthority, PEM, verifies the issuer's TLS certificate; empty means the
	// system roots.
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
	// UsernameClaim (default "sub") and UsernamePrefix map the token to a username.
	UsernameClaim  string `json:"usernameClaim"`
	UsernamePrefix string `json:"usernamePrefix,omitempty"`
	// GroupsClaim (optional; a string or a list of strings) and GroupsPrefix map it to groups.
	GroupsClaim  string `json:"groupsClaim,omitempty"`
	GroupsPrefix string `json:"groupsPrefix,omitempty"`
	// CredentialClaim (optional) is the claim whose string value selects the caller's upstream
	// credential (UpstreamCredentials.By Claim).
	CredentialClaim string `json:"credentialClaim,omitempty"`
}

// Access is what the MCPAccessPolicies targeting the server grant, compiled. Nil means no
// policy targets the server: every authenticated caller may use the whole catalog. Non-nil
// (even with no rules) means default deny: a caller may use exactly the union of what the
// rules whose source matches it grant.
type Access struct {
	Rules []AccessRule `json:"rules"`
}

// AccessRule grants tools, resources and prompts to the callers its Source matches.
type AccessRule struct {
	// Policy names the MCPAccessPolicy and rule the rule comes from: "<name>/<rule name>", or
	// "<name>/<rule index>" for a rule without a name.
	Policy string       `json:"policy"`
	Source AccessSource `json:"source"`
	// Tools and Prompts are names clients see (after renames); Resources are URIs or URI
	// templates as declared. "*" grants every one of that kind.
	Tools     []string `json:"tools,omitempty"`
	Resources []string `json:"resources,omitempty"`
	Prompts   []string `json:"prompts,omitempty"`
}

// AccessSource says whom a rule applies to: a caller matching any entry.
type AccessSource struct {
	// ServiceAccounts are "<namespace>/<name>" or "<namespace>/*" (the controller resolves a
	// bare name to the policy's namespace).
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
	// Identities are SPIFFE IDs, spiffe://<trust domain>/ns/<namespace>/sa/<name>.
	Identities []string `json:"identities,omitempty"`
	// Users and Groups are OIDC callers' username and groups after claim mapping (prefixes
	// included).
	Users  []string `json:"users,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Wildcard grants every item of a kind, or every ServiceAccount of a namespace ("ns/*").
const Wildcard = "*"

func validateAccess(c *Catalog) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if a := c.Auth; a != nil {
		if u, err := url.Parse(a.Resource); a.Resource == "" || err != nil || !u.IsAbs() {
			add("auth.resource %q is not an absolute URL", a.Resource)
		}
		if a.ServiceAccountTokens == nil && len(a.JWT) == 0 {
			add("auth accepts no token: set serviceAccountTokens or jwt")
		}
		if a.ServiceAccountTokens != nil && len(a.ServiceAccountTokens.Audiences) == 0 {
			add("auth.serviceAccountTokens.audiences is empty")
		}
		if a.TrustDomain == "" {
			add("auth.trustDomain is required")
		}
		seen := map[string]bool{}
		for i, j := range a.JWT {
			if u, err := url.Parse(j.URL); err != nil || u.Scheme != "https" || u.Host == "" {
				add("auth.jwt[%d].url %q is not an https URL", i, j.URL)
			}
			if seen[j.URL] {
				add("auth.jwt[%d].url %q appears twice", i, j.URL)
			}
			seen[j.URL] = true
			if len(j.Audiences) == 0 {
				add("auth.jwt[%d].audiences is empty", i)
			}
			if j.UsernameClaim == "" {
				add("auth.jwt[%d].usernameClaim is required", i)
			}
		}
		if u := a.UpstreamCredentials; u != nil {
			errs = append(errs, validateCredentials(u, a.JWT)...)
		}
	}
	if c.Access != nil && c.Auth == nil {
		add("access needs auth: without authentication no caller matches a rule")
	}
	if c.Access != nil {
		for i, r := range c.Access.Rules {
			if r.Policy == "" {
				add("access.rules[%d] has no policy", i)
			}
			for _, sa := range r.Source.ServiceAccounts {
				ns, name, ok := strings.Cut(sa, "/")
				if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
					add("access.rules[%d]: serviceAccount %q is not <namespace>/<name> or <namespace>/*", i, sa)
				}
			}
			for _, id := range r.Source.Identities {
				if !strings.HasPrefix(id, "spiffe://") {
					add("access.rules[%d]: identity %q is not a spiffe:// ID", i, id)
				}
			}
		}
	}
	return errs
}

// Grants reports whether list (a rule's Tools, Resources or Prompts) grants name.
func Grants(list []string, name string) bool {
	return slices.Contains(list, Wildcard) || slices.Contains(list, name)
}

// validateCredentials checks what the sidecar relies on: a Secret, a header it may set, a known
// selector with its claim, and at least one key.
func validateCredentials(u *UpstreamCredentials, issuers []JWTIssuer) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if u.Secret == "" {
		add("auth.upstreamCredentials.secret is required")
	}
	if !ValidCredentialHeader(u.Header) {
		add("auth.upstreamCredentials.header %q is not a header name the sidecar may set", u.Header)
	}
	switch u.By {
	case CredentialByServiceAccount, CredentialByUsername:
	case CredentialByClaim:
		if len(issuers) == 0 || slices.ContainsFunc(issuers, func(j JWTIssuer) bool { return j.CredentialClaim == "" }) {
			add("auth.upstreamCredentials.by Claim needs every jwt issuer's credentialClaim")
		}
	default:
		add("auth.upstreamCredentials.by %q is not ServiceAccount, Username or Claim", u.By)
	}
	if len(u.Keys) == 0 && u.DefaultKey == "" {
		add("auth.upstreamCredentials maps no caller to a key")
	}
	return errs
}

// reservedCredentialHeaders are the headers a credential must never replace: hop-by-hop and
// framing headers, and those the sidecar sets itself (MCPServer's CEL refuses them too).
var reservedCredentialHeaders = []string{"connection", "proxy-connection", "keep-alive", "proxy-authenticate",
	"proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host", "content-length",
	"content-type", "content-encoding", "accept", "accept-encoding", "origin", "cookie", "forwarded",
	"x-real-ip", "traceparent", "tracestate", "baggage"}

// ValidCredentialHeader reports whether name is a header a credential may be sent in: an HTTP
// token, not reserved, and not an X-Switchboard-*, Mcp-* or X-Forwarded-* header.
func ValidCredentialHeader(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return false
		}
	}
	l := strings.ToLower(name)
	return !slices.Contains(reservedCredentialHeaders, l) &&
		!strings.HasPrefix(l, "x-switchboard-") && !strings.HasPrefix(l, "mcp-") && !strings.HasPrefix(l, "x-forwarded-")
}

// isTokenChar reports an RFC 9110 tchar.
func isTokenChar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// CredentialsSecret is the Secret the sidecar reads upstream credentials from: "" without
// UpstreamCredentials, or while the Secret is not Readable. The controller grants the sidecar
// access to it, and the sidecar watches it, exactly when this names it.
func (c *Catalog) CredentialsSecret() string {
	if c.Auth == nil || c.Auth.UpstreamCredentials == nil || !c.Auth.UpstreamCredentials.Readable {
		return ""
	}
	return c.Auth.UpstreamCredentials.Secret
}

// ContentRefs returns the ConfigMaps and Secrets the sidecar reads for this catalog: those its
// resources serve, and the upstream credentials Secret while it is readable; sorted and unique.
// The controller grants the sidecar read access to exactly these, and the sidecar watches them.
func (c *Catalog) ContentRefs() (configMaps, secrets []string) {
	for _, r := range c.Resources {
		if r.Source.ConfigMap != nil {
			configMaps = append(configMaps, r.Source.ConfigMap.Name)
		}
		if r.Source.Secret != nil {
			secrets = append(secrets, r.Source.Secret.Name)
		}
	}
	if name := c.CredentialsSecret(); name != "" {
		secrets = append(secrets, name)
	}
	slices.Sort(configMaps)
	slices.Sort(secrets)
	return slices.Compact(configMaps), slices.Compact(secrets)
}

// MaxCredentialBytes bounds a credential value (the Secret's, before ValuePrefix).
const MaxCredentialBytes = 8 << 10

// ValidCredentialValue reports whether v can go into a header as it is: not empty, at most
// MaxCredentialBytes, visible ASCII with spaces or tabs only inside. A trailing newline (echo
// into a file) is refused, not trimmed: the controller's condition names the key to fix.
func ValidCredentialValue(v []byte) bool {
	if len(v) == 0 || len(v) > MaxCredentialBytes || v[0] == ' ' || v[0] == '\t' || v[len(v)-1] == ' ' || v[len(v)-1] == '\t' {
		return false
	}
	for _, c := range v {
		if (c < 0x21 || c > 0x7e) && c != ' ' && c != '\t' {
			return false
		}
	}
	return true
}
