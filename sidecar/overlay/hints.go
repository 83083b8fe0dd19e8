package overlay

import (
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// DefaultHints is the conservative policy used until a catalog says
// otherwise: immediately stale, and never shared across authorization
// contexts.
func DefaultHints(string, []byte) (int64, string) { return 0, "private" }

// defaultHints picks the catalog's default cache hint of each cacheable
// method the catalog has a default for (resources/read: see Hints).
var defaultHints = map[string]func(*catalog.CacheDefaults) catalog.CacheHint{
	protocol.MethodDiscover:    func(d *catalog.CacheDefaults) catalog.CacheHint { return d.Discover },
	"tools/list":               func(d *catalog.CacheDefaults) catalog.CacheHint { return d.Tools },
	"prompts/list":             func(d *catalog.CacheDefaults) catalog.CacheHint { return d.Prompts },
	"resources/list":           func(d *catalog.CacheDefaults) catalog.CacheHint { return d.Resources },
	"resources/templates/list": func(d *catalog.CacheDefaults) catalog.CacheHint { return d.ResourceTemplates },
	"resources/read":           func(d *catalog.CacheDefaults) catalog.CacheHint { return d.ResourceRead },
}

// DefaultHint is the catalog's default cache hint of a list method.
func DefaultHint(c *catalog.Catalog, method string) catalog.CacheHint {
	if pick := defaultHints[method]; pick != nil {
		return pick(&c.Server.Caching)
	}
	return catalog.CacheHint{}
}

// Hints is the sidecar's HintFunc when it serves a catalog: the catalog's
// defaults, and for resources/read the matching resource's (or resource
// template's) own hint.
func (o *Overlay) Hints(method string, params []byte) (int64, string) {
	c, _ := o.Catalog()
	var h catalog.CacheHint
	switch pick := defaultHints[method]; {
	case method == "resources/read":
		uri := ""
		if raw, ok, _ := wire.Field(params, "uri"); ok {
			uri, _ = wire.StringValue(raw)
		}
		h = o.readHintFor(uri)
	case pick != nil:
		h = pick(&c.Server.Caching)
	default:
		return DefaultHints(method, params)
	}
	return h.TTLMs, ScopeOf(h.CacheScope)
}

// ScopeOf is the cacheScope stamped for a catalog scope: private unless it
// is public.
func ScopeOf(s string) string {
	if s == catalog.ScopePublic {
		return catalog.ScopePublic
	}
	return catalog.ScopePrivate
}

// ReadHint is the hint of a read the sidecar answers: the resource's own, else the server's
// default. A Secret's content is always private, whatever either says: the MCPResource's CEL
// checks only its own hint, and a catalog may come from an older controller or a file.
func ReadHint(c *catalog.Catalog, r *catalog.Resource) catalog.CacheHint {
	h := c.Server.Caching.ResourceRead
	if r != nil && r.Cache != nil {
		h = *r.Cache
	}
	if r != nil && r.Source.Secret != nil {
		h.CacheScope = catalog.ScopePrivate
	}
	return h
}
