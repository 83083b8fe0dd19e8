// Package access decides what one caller may use of a server's catalog: the grant that the
// compiled MCPAccessPolicies (catalog.Access) give a verified caller (authn.Identity). It is
// pure: no I/O, no HTTP, no MCP framing. The sidecar's choke point asks it about every list
// entry, call, read and prompt, and the listen hub asks it which streams a change concerns.
//
// Semantics (docs/security.md): a nil Access means no policy targets the server, and every
// authenticated caller may use everything. A non-nil Access is default deny: a caller may use
// the union of what the rules whose source matches it grant.
package access

import (
	"encoding/binary"
	"hash/maphash"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/yosida95/uritemplate/v3"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
)

// Grant is what one caller may use. The zero value grants nothing; All grants everything.
// A Grant is immutable once built and safe to share between goroutines.
type Grant struct {
	all bool

	toolsAll, promptsAll, resourcesAll bool
	tools, prompts                     map[string]bool
	// resources are the granted URIs and URI templates, as written.
	resources map[string]bool
	// templates match concrete URIs against the granted URI templates.
	templates []*regexp.Regexp
}

// all is the grant of a caller when no policy targets the server.
var all = &Grant{all: true}

// All returns the grant of everything.
func All() *Grant { return all }

// Unrestricted reports whether the grant is everything (no policy targets the server): the
// caller's view is then the same as everyone's.
func (g *Grant) Unrestricted() bool { return g.all }

// Tool reports whether the caller may see and call the tool clients know as name.
func (g *Grant) Tool(name string) bool { return g.all || g.toolsAll || g.tools[name] }

// Prompt reports whether the caller may see and get the prompt clients know as name.
func (g *Grant) Prompt(name string) bool { return g.all || g.promptsAll || g.prompts[name] }

// Template reports whether the caller may see the resource template tmpl (resources/templates/list,
// a completion/complete reference): it is granted as written.
func (g *Grant) Template(tmpl string) bool { return g.all || g.resourcesAll || g.resources[tmpl] }

// Resource reports whether the caller may see and read the concrete resource uri: the URI is
// granted as written, or a granted URI template matches it (RFC 6570 matching as the go-sdk
// routes a read to a template, so a variable never spans a "/" of a simple expansion).
func (g *Grant) Resource(uri string) bool {
	if g.all || g.resourcesAll || g.resources[uri] {
		return true
	}
	for _, re := range g.templates {
		if re.MatchString(uri) {
			return true
		}
	}
	return false
}

// Any reports whether the grant could let the caller see anything of kind k: a change to that
// kind's lists that cannot be weighed (the server announced one, its list could not be read)
// concerns it.
func (g *Grant) Any(k Kind) bool {
	switch {
	case g.all:
		return true
	case k == Tools:
		return g.toolsAll || len(g.tools) > 0
	case k == Prompts:
		return g.promptsAll || len(g.prompts) > 0
	}
	return g.resourcesAll || len(g.resources) > 0
}

// Kind names the three kinds a grant covers.
type Kind uint8

// The kinds, in the order of the fingerprints.
const (
	Tools Kind = iota
	Prompts
	Resources
	numKinds
)

// Matches reports whether a rule's source matches the caller.
//
// ServiceAccount callers (id.ServiceAccount set) are matched by serviceAccounts ("ns/name",
// or "ns/*" for every ServiceAccount of ns) and identities (their SPIFFE ID); OIDC callers by
// users (id.Subject) and groups. Neither kind of entry matches the other kind of caller: an OIDC
// user whose mapped name looks like a ServiceAccount ("system:serviceaccount:ns:sa", "ns/sa")
// is not that ServiceAccount, and a ServiceAccount is not a user or a group member of an OIDC
// issuer. No entry is a wildcard except the name part of "ns/*".
func Matches(src *catalog.AccessSource, id *authn.Identity) bool {
	if id == nil {
		return false
	}
	if id.ServiceAccount != "" {
		for _, sa := range src.ServiceAccounts {
			if sa == id.ServiceAccount {
				return true
			}
			if ns, ok := strings.CutSuffix(sa, "/"+catalog.Wildcard); ok && ns != "" && strings.HasPrefix(id.ServiceAccount, ns+"/") {
				return true
			}
		}
		return id.SPIFFE != "" && slices.Contains(src.Identities, id.SPIFFE)
	}
	if id.Subject != "" && slices.Contains(src.Users, id.Subject) {
		return true
	}
	for _, g := range id.Groups {
		if g != "" && slices.Contains(src.Groups, g) {
			return true
		}
	}
	return false
}

// For returns the caller's grant under a: everything when a is nil, else the union of the
// grants of the rules whose source matches id (nothing for a nil id: a caller nobody
// authenticated matches no rule).
func For(a *catalog.Access, id *authn.Identity) *Grant {
	if a == nil {
		return all
	}
	g := &Grant{}
	for i := range a.Rules {
		r := &a.Rules[i]
		if !Matches(&r.Source, id) {
			continue
		}
		addNames(&g.tools, &g.toolsAll, r.Tools)
		addNames(&g.prompts, &g.promptsAll, r.Prompts)
		for _, u := range r.Resources {
			if u == catalog.Wildcard {
				g.resourcesAll = true
				continue
			}
			if g.resources[u] {
				continue
			}
			if g.resources == nil {
				g.resources = map[string]bool{}
			}
			g.resources[u] = true
			if re := templateRegexp(u); re != nil {
				g.templates = append(g.templates, re)
			}
		}
	}
	return g
}

func addNames(set *map[string]bool, all *bool, names []string) {
	for _, n := range names {
		if n == catalog.Wildcard {
			*all = true
			continue
		}
		if *set == nil {
			*set = map[string]bool{}
		}
		(*set)[n] = true
	}
}

// templateRegexp compiles a granted URI template (nil for a plain URI, or a template that does
// not parse: that one grants only its own spelling).
func templateRegexp(t string) *regexp.Regexp {
	if !strings.Contains(t, "{") {
		return nil
	}
	tmpl, err := uritemplate.New(t)
	if err != nil {
		return nil
	}
	return tmpl.Regexp()
}

// Entry is one entry of an effective list, as Fingerprint reads it.
type Entry struct {
	// Key is the name clients see (tools, prompts), the URI, or the URI template.
	Key string
	// Template marks a resource template (resources/templates/list).
	Template bool
	// Hash is the caller-independent hash of the entry's content, computed once per list.
	Hash uint64
}

// Fingerprint hashes what the caller may see of one kind's effective lists (for Resources, the
// resources and the resource templates together, as one list_changed covers both): two
// fingerprints differ when the entries the caller may see, or their content, differ. Its cost is
// one grant lookup per entry.
func (g *Grant) Fingerprint(k Kind, entries []Entry) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	for i := range entries {
		e := &entries[i]
		var ok bool
		switch {
		case k == Tools:
			ok = g.Tool(e.Key)
		case k == Prompts:
			ok = g.Prompt(e.Key)
		case e.Template:
			ok = g.Template(e.Key)
		default:
			ok = g.Resource(e.Key)
		}
		if !ok {
			continue
		}
		for j := range 8 {
			b[j] = byte(e.Hash >> (8 * j))
		}
		_, _ = h.Write(b[:])
	}
	return h.Sum64()
}

// seed is the process's fingerprint seed: fingerprints are compared within one process only.
var seed = maphash.MakeSeed()

// MaxCachedGrants bounds a Cache. Past it the cache starts over (a grant costs one pass over the
// rules to rebuild).
const MaxCachedGrants = 4096

// Cache memoises grants per catalog revision and caller. Callers are keyed by every attribute a
// rule matches (subject, ServiceAccount, SPIFFE ID, groups), so a new token of the same subject
// with other groups gets its own grant. A new revision empties it. Safe for concurrent use; mu
// guards its fields.
type Cache struct {
	mu     sync.Mutex
	rev    string
	access *catalog.Access
	grants map[string]*Grant
}

// Get returns the caller's grant under a, the Access of catalog revision rev.
func (c *Cache) Get(rev string, a *catalog.Access, id *authn.Identity) *Grant {
	if a == nil {
		return all
	}
	if id == nil {
		return For(a, nil)
	}
	key := Key(id)
	c.mu.Lock()
	if c.rev != rev || c.access != a || c.grants == nil || len(c.grants) >= MaxCachedGrants {
		c.rev, c.access, c.grants = rev, a, map[string]*Grant{}
	}
	g := c.grants[key]
	c.mu.Unlock()
	if g != nil {
		return g
	}
	g = For(a, id)
	c.mu.Lock()
	if c.rev == rev && c.access == a && len(c.grants) < MaxCachedGrants {
		c.grants[key] = g
	}
	c.mu.Unlock()
	return g
}

// Key is what identifies a caller for its grant: two identities with the same key get the same
// grant from every Access. (Expiry and issuer play no part in matching.) Each field is
// length-prefixed, so no spelling of one field (a NUL in an OIDC username, say) can make two
// different callers share a key. Groups keep their order: the same token always lists them
// alike, and another order is only another cache entry.
func Key(id *authn.Identity) string {
	if id == nil {
		return ""
	}
	n := len(id.Subject) + len(id.ServiceAccount) + len(id.SPIFFE) + 4*binary.MaxVarintLen64
	for _, g := range id.Groups {
		n += len(g) + binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	field := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	field(id.Subject)
	field(id.ServiceAccount)
	field(id.SPIFFE)
	b = binary.AppendUvarint(b, uint64(len(id.Groups)))
	for _, g := range id.Groups {
		field(g)
	}
	return string(b)
}

// Granting names the rule that grants the caller the item of kind k (a tool or prompt name as
// clients see it, a concrete resource URI): the Policy of the first matching rule of a that
// grants it, or "" when a is nil or none does. It is for the audit trail, which says which rule
// let a request through; the choke point decides with the Grant.
func Granting(a *catalog.Access, id *authn.Identity, k Kind, name string) string {
	if a == nil {
		return ""
	}
	for i := range a.Rules {
		r := &a.Rules[i]
		if !Matches(&r.Source, id) {
			continue
		}
		switch k {
		case Tools:
			if catalog.Grants(r.Tools, name) {
				return r.Policy
			}
		case Prompts:
			if catalog.Grants(r.Prompts, name) {
				return r.Policy
			}
		default:
			if catalog.Grants(r.Resources, name) {
				return r.Policy
			}
			for _, u := range r.Resources {
				if re := templateRegexp(u); re != nil && re.MatchString(name) {
					return r.Policy
				}
			}
		}
	}
	return ""
}
