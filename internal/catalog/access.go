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
