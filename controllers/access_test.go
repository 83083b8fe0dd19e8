package controllers

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func authServer(ns, name string) *mcpv1alpha1.MCPServer {
	s := newServer(ns, name, 1)
	s.Spec.Auth = &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}
	return s
}

func newPolicy(ns, name string, servers []string, rules ...mcpv1alpha1.AccessRule) *mcpv1alpha1.MCPAccessPolicy {
	p := &mcpv1alpha1.MCPAccessPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: mcpv1alpha1.MCPAccessPolicySpec{Rules: rules}}
	for _, s := range servers {
		p.Spec.TargetRefs = append(p.Spec.TargetRefs, mcpv1alpha1.PolicyTargetReference{Group: mcpv1alpha1.GroupVersion.Group, Kind: "MCPServer", Name: s})
	}
	return p
}

func saRule(name string, sas []string, tools ...string) mcpv1alpha1.AccessRule {
	return mcpv1alpha1.AccessRule{Name: name, Source: mcpv1alpha1.AccessRuleSource{ServiceAccounts: sas}, Tools: tools}
}

func TestAuthFor(t *testing.T) {
	const url = "http://weather.tools.svc/mcp"
	for name, tc := range map[string]struct {
		auth *mcpv1alpha1.AuthSpec
		want *catalog.Auth
	}{
		"unset":                {nil, nil},
		"off, even if set up":  {&mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthOff, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}, nil},
		"mode left to default": {&mcpv1alpha1.AuthSpec{ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}, nil},
		"service account, URL audience": {
			&mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}},
			&catalog.Auth{Resource: url, TrustDomain: "cluster.local", ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{url}}},
		},
		"audiences, issuers, forwarding": {
			&mcpv1alpha1.AuthSpec{
				Mode: mcpv1alpha1.AuthRequired, Audiences: []string{"weather"}, ForwardToken: true,
				ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{},
				JWT: []mcpv1alpha1.JWTAuthenticator{
					// No mapping: sub, prefixed by the issuer; the server's audiences.
					{Issuer: mcpv1alpha1.Issuer{URL: "https://a.example.com"}},
					{Issuer: mcpv1alpha1.Issuer{URL: "https://b.example.com", Audiences: []string{"b-aud"}, CertificateAuthority: "PEM"},
						ClaimMappings: &mcpv1alpha1.ClaimMappings{
							Username: &mcpv1alpha1.PrefixedClaim{Claim: "email", Prefix: ptr.To("")},
							Groups:   &mcpv1alpha1.PrefixedClaim{Claim: "roles", Prefix: ptr.To("b:")},
						}},
				},
			},
			&catalog.Auth{Resource: url, TrustDomain: "cluster.local", ForwardToken: true,
				ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{"weather"}},
				JWT: []catalog.JWTIssuer{
					{URL: "https://a.example.com", Audiences: []string{"weather"}, UsernameClaim: "sub", UsernamePrefix: "https://a.example.com#"},
					{URL: "https://b.example.com", Audiences: []string{"b-aud"}, CertificateAuthority: "PEM", UsernameClaim: "email",
						GroupsClaim: "roles", GroupsPrefix: "b:"},
				}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer("tools", "weather", 1)
			s.Spec.Auth = tc.auth
			got := authFor(s, inject.NamesFor(s), "")
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("authFor:\n got %+v\nwant %+v", got, tc.want)
			}
			if got != nil {
				c := catalogFor(s, items{})
				c.Auth = got
				if err := catalog.Validate(c); err != nil {
					t.Fatalf("the sidecar would reject it: %v", err)
				}
			}
		})
	}
}

// TestAuthOffKeepsCatalogBytes: a server without auth (or with mode Off), whatever policies
// name it, compiles to the bytes it compiled to before auth existed.
func TestAuthOffKeepsCatalogBytes(t *testing.T) {
	s := newServer("tools", "weather", 1)
	before, err := catalog.Encode(catalogFor(s, items{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, auth := range []*mcpv1alpha1.AuthSpec{nil, {Mode: mcpv1alpha1.AuthOff, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}} {
		s.Spec.Auth = auth
		c := catalogFor(s, items{})
		c.Auth = authFor(s, inject.NamesFor(s), "")
		c.Access = accessFor(s, []mcpv1alpha1.MCPAccessPolicy{*newPolicy("tools", "p", []string{"weather"}, saRule("", []string{"a"}, "*"))}, "")
		after, err := catalog.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(before) {
			t.Fatalf("auth %+v changed the catalog:\n%s\n%s", auth, before, after)
		}
	}
}

func TestAccessFor(t *testing.T) {
	s := authServer("tools", "weather")
	other := newPolicy("tools", "other-server", []string{"maps"}, saRule("", []string{"a"}, "*"))
	for name, tc := range map[string]struct {
		server   *mcpv1alpha1.MCPServer
		policies []*mcpv1alpha1.MCPAccessPolicy
		want     *catalog.Access
	}{
		"no policy: open to every authenticated caller": {s, nil, nil},
		"policies of other servers only":                {s, []*mcpv1alpha1.MCPAccessPolicy{other}, nil},
		// Attack: a policy in another namespace whose targetRef names a server of the same name.
		"a policy of another namespace": {s, []*mcpv1alpha1.MCPAccessPolicy{newPolicy("evil", "grab", []string{"weather"}, saRule("", []string{"evil/*"}, "*"))}, nil},
		"auth off: nothing, the policy cannot be enforced": {newServer("tools", "weather", 1),
			[]*mcpv1alpha1.MCPAccessPolicy{newPolicy("tools", "p", []string{"weather"}, saRule("", []string{"a"}, "*"))}, nil},
		"names resolved, entries sorted, rules by policy": {s, []*mcpv1alpha1.MCPAccessPolicy{
			newPolicy("tools", "zeta", []string{"maps", "weather"},
				saRule("", []string{"agent", "agents/*", "agent"}, "b", "a"),
				mcpv1alpha1.AccessRule{Name: "oidc", Source: mcpv1alpha1.AccessRuleSource{Users: []string{"oidc:bob", "oidc:alice"}, Groups: []string{"oidc:g"},
					Identities: []string{"spiffe://cluster.local/ns/x/sa/y"}}, Resources: []string{"docs://b", "docs://a"}, Prompts: []string{"*"}}),
			newPolicy("tools", "alpha", []string{"weather"}, saRule("first", []string{"tools/agent"}, "*")),
			other,
		}, &catalog.Access{Rules: []catalog.AccessRule{
			{Policy: "alpha/first", Source: catalog.AccessSource{ServiceAccounts: []string{"tools/agent"}}, Tools: []string{"*"}},
			{Policy: "zeta/0", Source: catalog.AccessSource{ServiceAccounts: []string{"agents/*", "tools/agent"}}, Tools: []string{"a", "b"}},
			{Policy: "zeta/oidc", Source: catalog.AccessSource{Users: []string{"oidc:alice", "oidc:bob"}, Groups: []string{"oidc:g"},
				Identities: []string{"spiffe://cluster.local/ns/x/sa/y"}}, Resources: []string{"docs://a", "docs://b"}, Prompts: []string{"*"}},
		}}},
		// Fail closed: a policy that targets the server but is not accepted grants nothing, and
		// still isolates the server.
		"an invalid policy isolates and grants nothing": {s, []*mcpv1alpha1.MCPAccessPolicy{newPolicy("tools", "p", []string{"weather"},
			mcpv1alpha1.AccessRule{Source: mcpv1alpha1.AccessRuleSource{Identities: []string{"spiffe://elsewhere/ns/x/sa/y"}}, Tools: []string{"*"}})},
			&catalog.Access{Rules: []catalog.AccessRule{}}},
		"a deleted policy is gone": {s, []*mcpv1alpha1.MCPAccessPolicy{func() *mcpv1alpha1.MCPAccessPolicy {
			p := newPolicy("tools", "p", []string{"weather"}, saRule("", []string{"a"}, "*"))
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			return p
		}()}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			var policies []mcpv1alpha1.MCPAccessPolicy
			for _, p := range tc.policies {
				policies = append(policies, *p)
			}
			got := accessFor(tc.server, policies, "")
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("accessFor:\n got %+v\nwant %+v", got, tc.want)
			}
			// The same policies in another order compile to the same document.
			slices.Reverse(policies)
			if again := accessFor(tc.server, policies, ""); !reflect.DeepEqual(again, got) {
				t.Fatalf("order-dependent: %+v vs %+v", again, got)
			}
			if got != nil {
				c := catalogFor(tc.server, items{})
				c.Auth, c.Access = authFor(tc.server, inject.NamesFor(tc.server), ""), got
				if err := catalog.Validate(c); err != nil {
					t.Fatalf("the sidecar would reject it: %v", err)
				}
			}
		})
	}
}

func TestPolicyVerdict(t *testing.T) {
	p := newPolicy("tools", "p", []string{"weather"}, mcpv1alpha1.AccessRule{
		Source: mcpv1alpha1.AccessRuleSource{Identities: []string{"spiffe://cluster.local/ns/a/sa/b"}}, Tools: []string{"*"}})
	deleting := authServer("tools", "weather")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, tc := range map[string]struct {
		server      *mcpv1alpha1.MCPServer
		trustDomain string
		reason      mcpv1alpha1.ConditionReason
		message     string
	}{
		"accepted":           {authServer("tools", "weather"), "", mcpv1alpha1.ReasonAccepted, "enforced"},
		"missing":            {nil, "", mcpv1alpha1.ReasonTargetNotFound, "create it or fix the reference"},
		"being deleted":      {deleting, "", mcpv1alpha1.ReasonTargetNotFound, "does not exist"},
		"auth off":           {newServer("tools", "weather", 1), "", mcpv1alpha1.ReasonAuthenticationOff, "set spec.auth.mode: Required"},
		"other trust domain": {authServer("tools", "weather"), "prod.example.com", mcpv1alpha1.ReasonInvalid, `trust domain "cluster.local"`},
	} {
		t.Run(name, func(t *testing.T) {
			v := policyVerdict(p, "weather", tc.server, tc.trustDomain)
			if v.Reason != tc.reason || v.Accepted != (tc.reason == mcpv1alpha1.ReasonAccepted) || !strings.Contains(v.Message, tc.message) {
				t.Fatalf("verdict %+v, want reason %s and a message with %q", v, tc.reason, tc.message)
			}
		})
	}
}

func TestPolicyStatus(t *testing.T) {
	now := time.Now()
	p := newPolicy("tools", "p", []string{"a", "b"}, saRule("", []string{"x"}, "*"))
	p.Generation = 3
	accepted := verdict{Accepted: true, Reason: mcpv1alpha1.ReasonAccepted, Message: "ok"}
	missing := verdict{Reason: mcpv1alpha1.ReasonTargetNotFound, Message: "gone"}
	off := verdict{Reason: mcpv1alpha1.ReasonAuthenticationOff, Message: "off"}
	for name, tc := range map[string]struct {
		created         time.Time
		verdicts        []verdict
		ready           metav1.ConditionStatus
		reason, summary string // summary: Stalled, Reconciling or ""
		requeue         bool
	}{
		"all accepted":                {now.Add(-time.Hour), []verdict{accepted, accepted}, metav1.ConditionTrue, string(mcpv1alpha1.ReasonAccepted), "", false},
		"target missing, new":         {now, []verdict{accepted, missing}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonTargetNotFound), string(mcpv1alpha1.ConditionReconciling), true},
		"target missing, old":         {now.Add(-time.Hour), []verdict{accepted, missing}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonTargetNotFound), string(mcpv1alpha1.ConditionStalled), false},
		"auth off is never waited on": {now, []verdict{off, missing}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonAuthenticationOff), string(mcpv1alpha1.ConditionStalled), false},
	} {
		t.Run(name, func(t *testing.T) {
			p := p.DeepCopy()
			p.CreationTimestamp = metav1.Time{Time: tc.created}
			st, requeue := policyStatus(p, tc.verdicts, now, DefaultAppearGrace)
			if (requeue > 0) != tc.requeue || st.ObservedGeneration != 3 || len(st.Ancestors) != 2 {
				t.Fatalf("requeue %v, status %+v", requeue, st)
			}
			if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionReady, tc.ready, mcpv1alpha1.ConditionReason(tc.reason)); err != nil {
				t.Fatal(err)
			}
			for _, typ := range []string{string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ConditionReconciling)} {
				if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionType(typ), metav1.ConditionTrue, mcpv1alpha1.ConditionReason(tc.reason)); (typ == tc.summary) != (err == nil) {
					t.Errorf("%s: %v (want it only when the summary is %q)", typ, err, tc.summary)
				}
			}
			for i, a := range st.Ancestors {
				want := metav1.ConditionTrue
				if !tc.verdicts[i].Accepted {
					want = metav1.ConditionFalse
				}
				if a.AncestorRef.Name != p.Spec.TargetRefs[i].Name || a.AncestorRef.Kind != "MCPServer" || a.AncestorRef.Namespace != "tools" ||
					a.ControllerName != mcpv1alpha1.PolicyControllerName {
					t.Errorf("ancestor %d: %+v", i, a)
				}
				if err := conditionIs(a.Conditions, mcpv1alpha1.ConditionAccepted, want, mcpv1alpha1.ConditionReason(string(tc.verdicts[i].Reason))); err != nil || a.Conditions[0].ObservedGeneration != 3 {
					t.Errorf("ancestor %d: %v %+v", i, err, a.Conditions)
				}
			}
		})
	}
}
