//go:build e2e

package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	v1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// The CEL and schema rules of MCPServer spec.auth and of MCPAccessPolicy against the real API
// server. The attacks come first: an OIDC caller made to look like a ServiceAccount or a
// system group, a rule that matches no caller or grants nothing, a policy aimed at another kind.

func TestMCPServerAuthValidation(t *testing.T) {
	valid := func() *v1.MCPServer {
		return &v1.MCPServer{
			ObjectMeta: meta("weather"),
			Spec: v1.MCPServerSpec{
				Container: &v1.ServerContainer{Image: "acme/weather-mcp:1.2.0"},
				Auth: &v1.AuthSpec{
					Mode:                 v1.AuthRequired,
					ServiceAccountTokens: &v1.ServiceAccountTokens{},
					JWT: []v1.JWTAuthenticator{{
						Issuer: v1.Issuer{URL: "https://issuer.example.com", Audiences: []string{"weather"}},
						ClaimMappings: &v1.ClaimMappings{
							Username: &v1.PrefixedClaim{Claim: "sub", Prefix: ptr.To("oidc:")},
							Groups:   &v1.PrefixedClaim{Claim: "groups", Prefix: ptr.To("oidc:")},
						},
					}},
				},
			},
		}
	}
	issuer := func(url string) v1.JWTAuthenticator { return v1.JWTAuthenticator{Issuer: v1.Issuer{URL: url}} }
	runValidation(t, valid, []validationCase[*v1.MCPServer]{
		{name: "service accounts and an issuer"},
		// Attacks: an OIDC user or group that reads as one of this cluster's own names.
		{name: "username prefix system:", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Username.Prefix = ptr.To("system:serviceaccount:")
		}, wantErrors: []string{"claimMappings prefix must not start with system:"}},
		{name: "groups prefix system:", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Groups.Prefix = ptr.To("system:")
		}, wantErrors: []string{"claimMappings prefix must not start with system:"}},
		{name: "username claim without a prefix", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Username.Prefix = nil
		}, wantErrors: []string{"claimMappings prefix is required when claim is set"}},
		{name: "email claim without a prefix", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Username = &v1.PrefixedClaim{Claim: "email"}
		}, wantErrors: []string{"claimMappings prefix is required when claim is set"}},
		{name: "groups claim without a prefix", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Groups.Prefix = nil
		}, wantErrors: []string{"claimMappings prefix is required when claim is set"}},
		{name: "empty prefix means none", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Username.Prefix = ptr.To("")
		}},
		{name: "no claim mappings", mutate: func(s *v1.MCPServer) { s.Spec.Auth.JWT[0].ClaimMappings = nil }},
		{name: "empty claim", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT[0].ClaimMappings.Username.Claim = ""
		}, wantErrors: []string{"spec.auth.jwt[0].claimMappings.username.claim"}},
		// Required needs a way to authenticate.
		{name: "required without an authenticator", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.ServiceAccountTokens, s.Spec.Auth.JWT = nil, nil
		}, wantErrors: []string{"auth.mode Required accepts no token: set auth.serviceAccountTokens"}},
		{name: "required with service accounts only", mutate: func(s *v1.MCPServer) { s.Spec.Auth.JWT = nil }},
		{name: "required with an issuer only", mutate: func(s *v1.MCPServer) { s.Spec.Auth.ServiceAccountTokens = nil }},
		{name: "off without an authenticator", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth = &v1.AuthSpec{Mode: v1.AuthOff}
		}},
		{name: "unknown mode", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Mode = "Optional" },
			wantErrors: []string{`spec.auth.mode: Unsupported value: "Optional"`}},
		// Issuers.
		{name: "http issuer", mutate: func(s *v1.MCPServer) { s.Spec.Auth.JWT[0].Issuer.URL = "http://issuer.example.com" },
			wantErrors: []string{"auth.jwt[].issuer.url must be an https URL"}},
		{name: "issuer without a host", mutate: func(s *v1.MCPServer) { s.Spec.Auth.JWT[0].Issuer.URL = "https:///path" },
			wantErrors: []string{"auth.jwt[].issuer.url must be an https URL"}},
		{name: "issuer twice", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT = append(s.Spec.Auth.JWT, issuer("https://issuer.example.com"))
		}, wantErrors: []string{"auth.jwt lists an issuer url twice"}},
		{name: "two issuers", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.JWT = append(s.Spec.Auth.JWT, issuer("https://other.example.com/realm"))
		}},
		{name: "nine issuers", mutate: func(s *v1.MCPServer) {
			for i := range 8 {
				s.Spec.Auth.JWT = append(s.Spec.Auth.JWT, issuer("https://issuer"+string(rune('a'+i))+".example.com"))
			}
		}, wantErrors: []string{"spec.auth.jwt: Too many: 9: must have at most 8 items"}},
		// Audiences.
		{name: "audiences", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Audiences = []string{"weather", "https://weather.example.com/mcp"} }},
		{name: "empty audience", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Audiences = []string{""} },
			wantErrors: []string{"spec.auth.audiences[0]"}},
		{name: "empty issuer audience", mutate: func(s *v1.MCPServer) { s.Spec.Auth.JWT[0].Issuer.Audiences = []string{""} },
			wantErrors: []string{"spec.auth.jwt[0].issuer.audiences[0]"}},
		{name: "duplicate audience", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Audiences = []string{"a", "a"} },
			wantErrors: []string{"Duplicate value"}},
		{name: "nine audiences", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.Audiences = strings.Split("a,b,c,d,e,f,g,h,i", ",")
		}, wantErrors: []string{"must have at most 8 items"}},
	})
}

func TestMCPAccessPolicyValidation(t *testing.T) {
	valid := func() *v1.MCPAccessPolicy {
		return &v1.MCPAccessPolicy{
			ObjectMeta: meta("weather-readers"),
			Spec: v1.MCPAccessPolicySpec{
				TargetRefs: []v1.PolicyTargetReference{{Group: "mcp.switchboard.dev", Kind: "MCPServer", Name: "weather"}},
				Rules: []v1.AccessRule{{
					Name: "agents",
					Source: v1.AccessRuleSource{
						ServiceAccounts: []string{"agents/planner", "agents/*", "local-agent"},
						Identities:      []string{"spiffe://cluster.local/ns/agents/sa/planner"},
						Users:           []string{"oidc:alice"},
						Groups:          []string{"oidc:weather-team"},
					},
					Tools:     []string{"get_forecast", "*"},
					Resources: []string{"docs://handbook", "weather://{city}/today"},
					Prompts:   []string{"trip-brief"},
				}},
			},
		}
	}
	rule := func(name string) v1.AccessRule {
		return v1.AccessRule{Name: name, Source: v1.AccessRuleSource{ServiceAccounts: []string{"a"}}, Tools: []string{"*"}}
	}
	runValidation(t, valid, []validationCase[*v1.MCPAccessPolicy]{
		{name: "every field"},
		// Attacks.
		{name: "rule with no source", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Source = v1.AccessRuleSource{} },
			wantErrors: []string{"rules[].source matches no caller"}},
		{name: "rule with empty source lists", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source = v1.AccessRuleSource{ServiceAccounts: []string{}, Users: []string{}}
		}, wantErrors: []string{"rules[].source matches no caller"}},
		{name: "system user", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.Users = []string{"system:serviceaccount:agents:planner"}
		}, wantErrors: []string{"users never start with system:"}},
		{name: "system group", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Source.Groups = []string{"system:masters"} },
			wantErrors: []string{"groups never start with system:"}},
		{name: "rule granting nothing", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Tools, p.Spec.Rules[0].Resources, p.Spec.Rules[0].Prompts = nil, nil, nil
		}, wantErrors: []string{"the rule grants nothing"}},
		{name: "target of another group", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.TargetRefs[0].Group = "gateway.networking.k8s.io" },
			wantErrors: []string{"targetRefs must name an MCPServer"}},
		{name: "target of another kind", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.TargetRefs[0].Kind = "Service" },
			wantErrors: []string{"targetRefs must name an MCPServer"}},
		{name: "target in another namespace", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.TargetRefs[0].Name = "other/weather" },
			wantErrors: []string{"spec.targetRefs[0].name"}},
		{name: "same target twice", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.TargetRefs = append(p.Spec.TargetRefs, p.Spec.TargetRefs[0])
		}, wantErrors: []string{"targetRefs names the same MCPServer twice"}},
		{name: "no targets", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.TargetRefs = nil },
			wantErrors: []string{"spec.targetRefs"}},
		{name: "no rules", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules = nil },
			wantErrors: []string{"spec.rules"}},
		{name: "two rules of one name", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules = []v1.AccessRule{rule("a"), rule("a")} },
			wantErrors: []string{"two rules have the same name"}},
		{name: "unnamed rules", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules = []v1.AccessRule{rule(""), rule(""), rule("b")} }},
		// ServiceAccounts.
		{name: "serviceAccount with two slashes", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.ServiceAccounts = []string{"agents/planner/x"}
		}, wantErrors: []string{"spec.rules[0].source.serviceAccounts[0]"}},
		{name: "serviceAccount in every namespace", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.ServiceAccounts = []string{"*/planner"}
		}, wantErrors: []string{"spec.rules[0].source.serviceAccounts[0]"}},
		{name: "bare star", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Source.ServiceAccounts = []string{"*"} },
			wantErrors: []string{"serviceAccounts entry * needs a namespace"}},
		{name: "upper-case serviceAccount", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.ServiceAccounts = []string{"Agents/planner"}
		}, wantErrors: []string{"spec.rules[0].source.serviceAccounts[0]"}},
		{name: "empty namespace", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Source.ServiceAccounts = []string{"/planner"} },
			wantErrors: []string{"spec.rules[0].source.serviceAccounts[0]"}},
		// SPIFFE IDs.
		{name: "identity that is not SPIFFE", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.Identities = []string{"agents/planner"}
		}, wantErrors: []string{"spec.rules[0].source.identities[0]"}},
		{name: "SPIFFE ID of no ServiceAccount", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.Identities = []string{"spiffe://cluster.local/workload/planner"}
		}, wantErrors: []string{"spec.rules[0].source.identities[0]"}},
		{name: "SPIFFE ID with a trailing path", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.Identities = []string{"spiffe://cluster.local/ns/agents/sa/planner/x"}
		}, wantErrors: []string{"spec.rules[0].source.identities[0]"}},
		{name: "SPIFFE ID of another trust domain", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Source.Identities = []string{"spiffe://prod.example.com/ns/agents/sa/planner"}
		}},
		// Grants.
		{name: "tool name with a space", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Tools = []string{"get forecast"} },
			wantErrors: []string{"spec.rules[0].tools[0]"}},
		{name: "tool wildcard in a name", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Tools = []string{"get_*"} },
			wantErrors: []string{"spec.rules[0].tools[0]"}},
		{name: "prompts only", mutate: func(p *v1.MCPAccessPolicy) {
			p.Spec.Rules[0].Tools, p.Spec.Rules[0].Resources = nil, nil
		}},
		{name: "empty resource", mutate: func(p *v1.MCPAccessPolicy) { p.Spec.Rules[0].Resources = []string{""} },
			wantErrors: []string{"spec.rules[0].resources[0]"}},
	})
}
