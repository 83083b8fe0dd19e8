package access

import (
	"fmt"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
)

func sa(ns, name string) *authn.Identity {
	return &authn.Identity{Subject: "system:serviceaccount:" + ns + ":" + name, ServiceAccount: ns + "/" + name,
		SPIFFE: "spiffe://cluster.local/ns/" + ns + "/sa/" + name, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
}

func oidc(user string, groups ...string) *authn.Identity {
	return &authn.Identity{Subject: user, Groups: groups, Issuer: "https://issuer.example"}
}

func TestMatches(t *testing.T) {
	cases := []struct {
		name string
		src  catalog.AccessSource
		id   *authn.Identity
		want bool
	}{
		{"sa exact", catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}}, sa("team-a", "agent"), true},
		{"sa other name", catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}}, sa("team-a", "agent2"), false},
		{"sa other namespace", catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}}, sa("team-b", "agent"), false},
		{"ns wildcard", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, sa("team-a", "anything"), true},
		{"ns wildcard other namespace", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, sa("team-b", "agent"), false},
		{"ns wildcard prefix namespace", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, sa("team-ab", "agent"), false},
		{"ns wildcard of a namespace prefix", catalog.AccessSource{ServiceAccounts: []string{"team/*"}}, sa("team-a", "agent"), false},
		{"star namespace is no wildcard", catalog.AccessSource{ServiceAccounts: []string{"*/*"}}, sa("team-a", "agent"), false},
		{"bare star is no wildcard", catalog.AccessSource{ServiceAccounts: []string{"*"}}, sa("team-a", "agent"), false},
		{"spiffe", catalog.AccessSource{Identities: []string{"spiffe://cluster.local/ns/team-a/sa/agent"}}, sa("team-a", "agent"), true},
		{"spiffe other", catalog.AccessSource{Identities: []string{"spiffe://cluster.local/ns/team-a/sa/agent"}}, sa("team-a", "other"), false},
		{"spiffe other trust domain", catalog.AccessSource{Identities: []string{"spiffe://other.domain/ns/team-a/sa/agent"}}, sa("team-a", "agent"), false},
		{"user", catalog.AccessSource{Users: []string{"oidc:alice"}}, oidc("oidc:alice"), true},
		{"user other", catalog.AccessSource{Users: []string{"oidc:alice"}}, oidc("oidc:bob"), false},
		{"user case", catalog.AccessSource{Users: []string{"oidc:alice"}}, oidc("oidc:Alice"), false},
		{"group", catalog.AccessSource{Groups: []string{"oidc:ops"}}, oidc("oidc:bob", "oidc:dev", "oidc:ops"), true},
		{"group other", catalog.AccessSource{Groups: []string{"oidc:ops"}}, oidc("oidc:bob", "oidc:dev"), false},
		{"user star is no wildcard", catalog.AccessSource{Users: []string{"*"}}, oidc("oidc:bob"), false},
		// An OIDC user whose mapped name spells a ServiceAccount is not that ServiceAccount.
		{"user named like sa subject vs sa rule", catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}}, oidc("system:serviceaccount:team-a:agent"), false},
		{"user named ns/name vs sa rule", catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}}, oidc("team-a/agent"), false},
		{"user named ns/name vs ns wildcard", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, oidc("team-a/agent"), false},
		{"user named like spiffe", catalog.AccessSource{Identities: []string{"spiffe://cluster.local/ns/team-a/sa/agent"}}, oidc("spiffe://cluster.local/ns/team-a/sa/agent"), false},
		{"oidc group spelling an sa group", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, oidc("x", "system:serviceaccounts:team-a"), false},
		// A ServiceAccount is matched by serviceAccounts and identities only.
		{"sa vs users rule of its subject", catalog.AccessSource{Users: []string{"system:serviceaccount:team-a:agent"}}, sa("team-a", "agent"), false},
		{"sa vs groups rule of its group", catalog.AccessSource{Groups: []string{"system:serviceaccounts:team-a"}}, sa("team-a", "agent"), false},
		{"nil identity", catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}, Users: []string{""}}, nil, false},
		{"empty user entry vs empty subject", catalog.AccessSource{Users: []string{""}}, oidc(""), false},
		{"empty source", catalog.AccessSource{}, sa("team-a", "agent"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Matches(&c.src, c.id); got != c.want {
				t.Fatalf("Matches = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGrant(t *testing.T) {
	a := &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "p/0", Source: catalog.AccessSource{ServiceAccounts: []string{"team-a/agent"}},
			Tools: []string{"search"}, Prompts: []string{"summarize"},
			Resources: []string{"file:///docs/readme.md", "db://tables/{table}", "bad://{unclosed"}},
		{Policy: "p/1", Source: catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, Tools: []string{"status"}},
		{Policy: "q/0", Source: catalog.AccessSource{Users: []string{"oidc:admin"}},
			Tools: []string{"*"}, Prompts: []string{"*"}, Resources: []string{"*"}},
		{Policy: "r/0", Source: catalog.AccessSource{Users: []string{"oidc:empty"}}},
	}}
	type check struct {
		kind string
		name string
		want bool
	}
	cases := []struct {
		name   string
		access *catalog.Access
		id     *authn.Identity
		checks []check
	}{
		{"no policy: everything", nil, sa("team-z", "x"), []check{
			{"tool", "anything", true}, {"prompt", "any", true}, {"resource", "x://y", true}, {"template", "x://{y}", true}}},
		{"no policy, no identity: everything", nil, nil, []check{{"tool", "anything", true}}},
		{"union of two rules", a, sa("team-a", "agent"), []check{
			{"tool", "search", true}, {"tool", "status", true}, {"tool", "delete", false}, {"tool", "Search", false},
			{"tool", "*", false}, {"tool", "", false},
			{"prompt", "summarize", true}, {"prompt", "search", false},
			{"resource", "file:///docs/readme.md", true}, {"resource", "file:///docs/readme.md#x", false},
			{"resource", "file:///docs/other.md", false},
			{"resource", "db://tables/users", true}, {"resource", "db://tables/", true},
			{"resource", "db://tables/users/rows", false}, {"resource", "db://tables/a%2Fb", true},
			{"resource", "db://tablesX/users", false}, {"resource", "xdb://tables/users", false},
			{"template", "db://tables/{table}", true}, {"template", "db://tables/{t}", false},
			{"resource", "db://tables/{table}", true}, // a value of {table} like any other
			{"template", "bad://{unclosed", true}, {"resource", "bad://x", false}, {"resource", "bad://{unclosed", true},
		}},
		{"namespace rule only", a, sa("team-a", "other"), []check{
			{"tool", "status", true}, {"tool", "search", false}, {"prompt", "summarize", false}, {"resource", "db://tables/users", false}}},
		{"other namespace: nothing", a, sa("team-b", "agent"), []check{
			{"tool", "status", false}, {"tool", "search", false}, {"resource", "file:///docs/readme.md", false}}},
		{"wildcard user", a, oidc("oidc:admin"), []check{
			{"tool", "delete", true}, {"prompt", "x", true}, {"resource", "any://thing", true}, {"template", "any://{x}", true}}},
		{"matching rule with empty grants", a, oidc("oidc:empty"), []check{
			{"tool", "search", false}, {"prompt", "summarize", false}, {"resource", "file:///docs/readme.md", false}}},
		{"no identity under a policy: nothing", a, nil, []check{{"tool", "status", false}}},
		{"empty access: nothing", &catalog.Access{}, sa("team-a", "agent"), []check{{"tool", "search", false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := For(c.access, c.id)
			for _, ch := range c.checks {
				var got bool
				switch ch.kind {
				case "tool":
					got = g.Tool(ch.name)
				case "prompt":
					got = g.Prompt(ch.name)
				case "resource":
					got = g.Resource(ch.name)
				case "template":
					got = g.Template(ch.name)
				}
				if got != ch.want {
					t.Errorf("%s %q = %v, want %v", ch.kind, ch.name, got, ch.want)
				}
			}
		})
	}
}

func TestAny(t *testing.T) {
	a := &catalog.Access{Rules: []catalog.AccessRule{
		{Source: catalog.AccessSource{Users: []string{"t"}}, Tools: []string{"x"}},
		{Source: catalog.AccessSource{Users: []string{"r"}}, Resources: []string{"*"}},
	}}
	for _, c := range []struct {
		g                         *Grant
		tools, prompts, resources bool
	}{
		{For(a, oidc("t")), true, false, false},
		{For(a, oidc("r")), false, false, true},
		{For(a, oidc("nobody")), false, false, false},
		{All(), true, true, true},
	} {
		if c.g.Any(Tools) != c.tools || c.g.Any(Prompts) != c.prompts || c.g.Any(Resources) != c.resources {
			t.Errorf("Any = %v %v %v, want %v %v %v", c.g.Any(Tools), c.g.Any(Prompts), c.g.Any(Resources), c.tools, c.prompts, c.resources)
		}
	}
}

func TestFingerprint(t *testing.T) {
	entries := []Entry{{Key: "a", Hash: 1}, {Key: "b", Hash: 2}, {Key: "c", Hash: 3}}
	grant := func(tools ...string) *Grant {
		return For(&catalog.Access{Rules: []catalog.AccessRule{{Source: catalog.AccessSource{Users: []string{"u"}}, Tools: tools}}}, oidc("u"))
	}
	ab := grant("a", "b").Fingerprint(Tools, entries)
	if got := grant("b", "a").Fingerprint(Tools, entries); got != ab {
		t.Errorf("same view, other rule order: fingerprints differ")
	}
	if got := grant("a", "b", "missing").Fingerprint(Tools, entries); got != ab {
		t.Errorf("granting a tool that does not exist changed the view")
	}
	if got := grant("a").Fingerprint(Tools, entries); got == ab {
		t.Errorf("revoking b did not change the view")
	}
	changed := []Entry{{Key: "a", Hash: 1}, {Key: "b", Hash: 2}, {Key: "c", Hash: 4}}
	if got := grant("a", "b").Fingerprint(Tools, changed); got != ab {
		t.Errorf("a change to a tool the caller may not see changed its view")
	}
	changed[1].Hash = 5
	if got := grant("a", "b").Fingerprint(Tools, changed); got == ab {
		t.Errorf("a change to a granted tool did not change the view")
	}
	if grant().Fingerprint(Tools, entries) != grant("zzz").Fingerprint(Tools, entries) {
		t.Errorf("two empty views differ")
	}
	res := []Entry{{Key: "db://{t}", Template: true, Hash: 1}, {Key: "db://x", Hash: 2}}
	g := For(&catalog.Access{Rules: []catalog.AccessRule{{Source: catalog.AccessSource{Users: []string{"u"}}, Resources: []string{"db://{t}"}}}}, oidc("u"))
	onlyTemplate := For(&catalog.Access{Rules: []catalog.AccessRule{{Source: catalog.AccessSource{Users: []string{"u"}}, Resources: []string{"db://y"}}}}, oidc("u"))
	if g.Fingerprint(Resources, res) == onlyTemplate.Fingerprint(Resources, res) {
		t.Errorf("a template grant sees the template and the URI it matches; a grant of another URI sees neither")
	}
}

func TestCache(t *testing.T) {
	a := &catalog.Access{Rules: []catalog.AccessRule{
		{Source: catalog.AccessSource{Groups: []string{"ops"}}, Tools: []string{"deploy"}},
	}}
	var c Cache
	ops := oidc("alice", "ops")
	if !c.Get("r1", a, ops).Tool("deploy") {
		t.Fatal("ops member not granted deploy")
	}
	// The same subject with a token of other groups must not get the cached grant.
	if c.Get("r1", a, oidc("alice", "dev")).Tool("deploy") {
		t.Fatal("same subject, other groups: got the cached grant of the first token")
	}
	// A new revision with another Access is a new grant.
	b := &catalog.Access{Rules: []catalog.AccessRule{}}
	if c.Get("r2", b, ops).Tool("deploy") {
		t.Fatal("revision r2 revokes deploy; the cache served r1's grant")
	}
	if c.Get("r1", nil, ops) != All() {
		t.Fatal("nil access is All")
	}
	// Bounded.
	for i := range MaxCachedGrants + 10 {
		c.Get("r3", a, oidc(fmt.Sprint("user", i)))
	}
	c.mu.Lock()
	n := len(c.grants)
	c.mu.Unlock()
	if n > MaxCachedGrants {
		t.Fatalf("cache holds %d grants, bound %d", n, MaxCachedGrants)
	}
}

func TestKeyDistinguishesAttributes(t *testing.T) {
	ids := []*authn.Identity{
		{Subject: "a"}, {Subject: "a", Groups: []string{"g"}}, {Subject: "a", ServiceAccount: "n/a"},
		{Subject: "a", SPIFFE: "spiffe://x"}, {Subject: "a\x00", Groups: nil}, {Subject: "a", Groups: []string{"g", "h"}},
		{Subject: "a", Groups: []string{""}}, {Subject: "a", Groups: []string{"", ""}}, {Subject: "", ServiceAccount: "a"},
	}
	seen := map[string]int{}
	for i, id := range ids {
		k := Key(id)
		if j, ok := seen[k]; ok {
			t.Errorf("identities %d and %d share key %q", j, i, k)
		}
		seen[k] = i
	}
	// A subject that spells the separator of a naive key cannot take another caller's key.
	forged := &authn.Identity{Subject: "system:serviceaccount:ns:sa\x00ns/sa\x00spiffe://cluster.local/ns/ns/sa/sa\x00"}
	real := &authn.Identity{Subject: "system:serviceaccount:ns:sa", ServiceAccount: "ns/sa", SPIFFE: "spiffe://cluster.local/ns/ns/sa/sa"}
	if Key(forged) == Key(real) {
		t.Error("an OIDC subject with NULs shares a ServiceAccount's key")
	}
	if Key(&authn.Identity{Subject: "a\x00b"}) == Key(&authn.Identity{Subject: "a", ServiceAccount: "b", Groups: []string{""}}) {
		t.Error("field boundaries are ambiguous")
	}
}

// BenchmarkCachedGrantCheck is the choke point's cost per request under a policy of 100 rules:
// the cached grant of a caller with three groups, and one tool check.
func BenchmarkCachedGrantCheck(b *testing.B) {
	a := &catalog.Access{}
	for i := range 100 {
		a.Rules = append(a.Rules, catalog.AccessRule{Source: catalog.AccessSource{ServiceAccounts: []string{fmt.Sprintf("ns/agent-%d", i)}},
			Tools: []string{fmt.Sprintf("tool-%d", i)}, Resources: []string{fmt.Sprintf("db://t%d/{x}", i)}})
	}
	id := sa("ns", "agent-42")
	id.Groups = append(id.Groups, "extra")
	var c Cache
	b.ReportAllocs()
	for b.Loop() {
		if !c.Get("r1", a, id).Tool("tool-42") {
			b.Fatal("not granted")
		}
	}
}

// TestGranting: the rule Granting names is the first that matches the caller and grants the
// item, agreeing with the Grant For builds.
func TestGranting(t *testing.T) {
	a := &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "p/readers", Source: catalog.AccessSource{ServiceAccounts: []string{"team/*"}}, Resources: []string{"db://tables/{table}"}},
		{Policy: "p/search", Source: catalog.AccessSource{ServiceAccounts: []string{"team/agent"}}, Tools: []string{"search"}, Prompts: []string{"*"}},
		{Policy: "q/all", Source: catalog.AccessSource{ServiceAccounts: []string{"team/agent"}}, Tools: []string{"*"}},
	}}
	agent := &authn.Identity{Subject: "system:serviceaccount:team:agent", ServiceAccount: "team/agent"}
	other := &authn.Identity{Subject: "system:serviceaccount:team:other", ServiceAccount: "team/other"}
	for _, tc := range []struct {
		id   *authn.Identity
		k    Kind
		name string
		want string
	}{
		{agent, Tools, "search", "p/search"},
		{agent, Tools, "delete", "q/all"},
		{agent, Prompts, "any", "p/search"},
		{agent, Resources, "db://tables/users", "p/readers"},
		{agent, Resources, "db://other", ""},
		{other, Tools, "search", ""},
		{other, Resources, "db://tables/orders", "p/readers"},
		{nil, Tools, "search", ""},
	} {
		got := Granting(a, tc.id, tc.k, tc.name)
		if got != tc.want {
			t.Errorf("Granting(%v, %d, %q) = %q, want %q", tc.id, tc.k, tc.name, got, tc.want)
		}
		g := For(a, tc.id)
		granted := map[Kind]func(string) bool{Tools: g.Tool, Prompts: g.Prompt, Resources: g.Resource}[tc.k](tc.name)
		if granted != (got != "") {
			t.Errorf("Granting and For disagree on %q: %q vs %v", tc.name, got, granted)
		}
	}
	if Granting(nil, agent, Tools, "search") != "" {
		t.Error("no policy: no rule")
	}
}
