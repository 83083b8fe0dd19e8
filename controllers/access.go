package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// DefaultTrustDomain is the SPIFFE trust domain of the cluster's ServiceAccounts unless
// --trust-domain says otherwise: the one Istio and SPIRE's Kubernetes defaults use.
const DefaultTrustDomain = "cluster.local"

// DefaultUsernameClaim is the claim that names an OIDC caller unless
// claimMappings.username says otherwise.
const DefaultUsernameClaim = "sub"

// policyTargetIndex is the field index on MCPAccessPolicy by the names of its targetRefs.
const policyTargetIndex = "spec.targetRefs.name"

// policyTargets returns the names of the MCPServers a policy targets (the index's values).
func policyTargets(o client.Object) []string {
	p, ok := o.(*mcpv1alpha1.MCPAccessPolicy)
	if !ok {
		return nil
	}
	var out []string
	for _, t := range p.Spec.TargetRefs {
		out = append(out, t.Name)
	}
	return out
}

// authRequired reports whether the sidecars of s authenticate callers.
func authRequired(s *mcpv1alpha1.MCPServer) bool {
	return s.Spec.Auth != nil && s.Spec.Auth.Mode == mcpv1alpha1.AuthRequired
}

// wantsTokenReview reports whether the sidecars of s validate ServiceAccount tokens, and so
// need the right to create TokenReviews.
func wantsTokenReview(s *mcpv1alpha1.MCPServer) bool {
	return authRequired(s) && s.Spec.Auth.ServiceAccountTokens != nil
}

// authFor compiles spec.auth into the catalog's Auth: nil unless mode is Required, so a
// server without auth keeps its catalog's exact bytes (and revision). Resource and the default
// audience are the server's URL (status.url); an issuer without audiences of its own takes
// spec.auth.audiences.
func authFor(s *mcpv1alpha1.MCPServer, names inject.ObjectNames, trustDomain string) *catalog.Auth {
	if !authRequired(s) {
		return nil
	}
	spec := s.Spec.Auth
	resource := urlFor(s, names)
	audiences := slices.Clone(spec.Audiences)
	if len(audiences) == 0 {
		audiences = []string{resource}
	}
	out := &catalog.Auth{
		Resource:     resource,
		ForwardToken: spec.ForwardToken,
		TrustDomain:  cmp.Or(trustDomain, DefaultTrustDomain),
	}
	if spec.ServiceAccountTokens != nil {
		out.ServiceAccountTokens = &catalog.ServiceAccountTokens{Audiences: audiences}
	}
	for _, j := range spec.JWT {
		issuer := catalog.JWTIssuer{
			URL:                  j.Issuer.URL,
			Audiences:            slices.Clone(j.Issuer.Audiences),
			CertificateAuthority: j.Issuer.CertificateAuthority,
			UsernameClaim:        DefaultUsernameClaim,
			// Without a mapping, the issuer's URL prefixes the subject (as the API server's
			// --oidc-username-prefix default does): users of two issuers never collide, and
			// no subject can read as one of this cluster's own names (system:...).
			UsernamePrefix:  j.Issuer.URL + "#",
			CredentialClaim: credentialClaim(s),
		}
		if len(issuer.Audiences) == 0 {
			issuer.Audiences = audiences
		}
		if m := j.ClaimMappings; m != nil {
			if u := m.Username; u != nil {
				issuer.UsernameClaim = u.Claim
				issuer.UsernamePrefix = derefString(u.Prefix)
			}
			if g := m.Groups; g != nil {
				issuer.GroupsClaim = g.Claim
				issuer.GroupsPrefix = derefString(g.Prefix)
			}
		}
		out.JWT = append(out.JWT, issuer)
	}
	return out
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// policyVerdict decides whether a policy is enforced on one of its targets. server is the
// target, nil when it does not exist (or is being deleted). The MCPServer reconciler compiles
// exactly the policies accepted here, and the MCPAccessPolicy reconciler reports this verdict,
// so the status never claims what the sidecars do not enforce.
func policyVerdict(p *mcpv1alpha1.MCPAccessPolicy, name string, server *mcpv1alpha1.MCPServer, trustDomain string) verdict {
	if server == nil || !server.DeletionTimestamp.IsZero() {
		return verdict{Reason: mcpv1alpha1.ReasonTargetNotFound,
			Message: fmt.Sprintf("spec.targetRefs names MCPServer %q, which does not exist in namespace %s; create it or fix the reference", name, p.Namespace)}
	}
	if !authRequired(server) {
		return verdict{Reason: mcpv1alpha1.ReasonAuthenticationOff,
			Message: fmt.Sprintf("MCPServer %q does not authenticate callers, so its sidecars cannot tell who may use what; "+
				"set spec.auth.mode: Required on it (with spec.auth.serviceAccountTokens: {} or spec.auth.jwt)", name)}
	}
	trustDomain = cmp.Or(trustDomain, DefaultTrustDomain)
	for i, r := range p.Spec.Rules {
		for _, id := range r.Source.Identities {
			if td := spiffeTrustDomain(id); td != trustDomain {
				return verdict{Reason: mcpv1alpha1.ReasonInvalid,
					Message: fmt.Sprintf("spec.rules[%d].source.identities: %s is in trust domain %q, but this cluster's ServiceAccounts are spiffe://%s/...; "+
						"it can never match a caller: fix the trust domain or remove the entry (until then the policy grants nothing on this server)", i, id, td, trustDomain)}
			}
		}
	}
	return verdict{Accepted: true, Reason: mcpv1alpha1.ReasonAccepted, Message: fmt.Sprintf("enforced by the sidecars of MCPServer %q", name)}
}

// spiffeTrustDomain returns the trust domain of a SPIFFE ID ("" if it is not one).
func spiffeTrustDomain(id string) string {
	rest, ok := strings.CutPrefix(id, "spiffe://")
	if !ok {
		return ""
	}
	td, _, _ := strings.Cut(rest, "/")
	return td
}

// targets reports whether p targets the server named name.
func targets(p *mcpv1alpha1.MCPAccessPolicy, name string) bool {
	return slices.ContainsFunc(p.Spec.TargetRefs, func(t mcpv1alpha1.PolicyTargetReference) bool { return t.Name == name })
}

// accessFor compiles the MCPAccessPolicies of s's namespace that target it into the catalog's
// Access. Nil when s does not authenticate callers (a catalog without Auth carries no Access;
// the policies report AuthenticationOff) or when no policy targets it: every authenticated
// caller may use the whole catalog. Otherwise default deny: the rules of the policies accepted
// on s, and none of a policy that targets s but is not accepted (Invalid), which so isolates
// the server without granting anything, failing closed.
//
// The result does not depend on the order of policies, rules or entries: rules are sorted by
// their Policy name ("<policy>/<rule name or index>"), entries sorted and deduplicated, and
// bare ServiceAccount names resolved to the policy's namespace.
func accessFor(s *mcpv1alpha1.MCPServer, policies []mcpv1alpha1.MCPAccessPolicy, trustDomain string) *catalog.Access {
	if !authRequired(s) {
		return nil
	}
	var out *catalog.Access
	for i := range policies {
		p := &policies[i]
		if p.Namespace != s.Namespace || !p.DeletionTimestamp.IsZero() || !targets(p, s.Name) {
			continue
		}
		if out == nil {
			out = &catalog.Access{Rules: []catalog.AccessRule{}}
		}
		if !policyVerdict(p, s.Name, s, trustDomain).Accepted {
			continue
		}
		for j, r := range p.Spec.Rules {
			out.Rules = append(out.Rules, catalog.AccessRule{
				Policy: p.Name + "/" + cmp.Or(r.Name, strconv.Itoa(j)),
				Source: catalog.AccessSource{
					ServiceAccounts: setOf(serviceAccountsIn(p.Namespace, r.Source.ServiceAccounts)),
					Identities:      setOf(r.Source.Identities),
					Users:           setOf(r.Source.Users),
					Groups:          setOf(r.Source.Groups),
				},
				Tools:     setOf(r.Tools),
				Resources: setOf(r.Resources),
				Prompts:   setOf(r.Prompts),
			})
		}
	}
	if out != nil {
		slices.SortFunc(out.Rules, func(a, b catalog.AccessRule) int { return strings.Compare(a.Policy, b.Policy) })
	}
	return out
}

// serviceAccountsIn resolves bare ServiceAccount names to the policy's namespace.
func serviceAccountsIn(namespace string, entries []string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !strings.Contains(e, "/") {
			e = namespace + "/" + e
		}
		out = append(out, e)
	}
	return out
}

// setOf sorts and deduplicates a list; empty stays nil (omitted from the catalog).
func setOf(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
