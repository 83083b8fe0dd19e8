package sidecar

import (
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/access"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is the authorization half of the choke point: what the caller of a request may use
// of the catalog (package access decides, from the catalog's Access and the verified caller the
// authentication gate put in the request context), and the errors a refusal gets. A refused
// name gets exactly the answer of a name nobody serves, whether or not it exists, so a caller
// learns nothing about what it may not use.

// grantOf returns the grant of r's caller under catalog c of revision rev: everything when no
// policy targets the server (c.Access nil); else what the caller's rules grant, nothing for a
// request without a verified caller (fail closed).
func (s *Server) grantOf(r *http.Request, c *catalog.Catalog, rev string) *access.Grant {
	if c.Access == nil {
		return access.All()
	}
	return s.grants.Get(rev, c.Access, authn.FromContext(r.Context()))
}

// catalogGrant is the current catalog, its revision and the grant of r's caller under it, read
// from one revision.
func (s *Server) catalogGrant(r *http.Request) (*catalog.Catalog, *access.Grant) {
	c, rev := s.opts.Overlay.Catalog()
	return c, s.grantOf(r, c, rev)
}

// requestGrant is the grant of r's caller: everything without a catalog.
func (s *Server) requestGrant(r *http.Request) *access.Grant {
	if s.opts.Overlay == nil {
		return access.All()
	}
	_, g := s.catalogGrant(r)
	return g
}

// visible reports whether a merged list's entry is one the caller may use.
func visible(g *access.Grant, method, key string) bool {
	switch method {
	case "tools/list":
		return g.Tool(key)
	case "prompts/list":
		return g.Prompt(key)
	case "resources/list":
		return g.Resource(key)
	case "resources/templates/list":
		return g.Template(key)
	}
	return false
}

// filterEntries keeps the entries of a merged list the caller may use (in place).
func filterEntries(g *access.Grant, method string, list []rules.Entry) []rules.Entry {
	if g.Unrestricted() {
		return list
	}
	out := list[:0]
	for _, e := range list {
		if visible(g, method, e.Key) {
			out = append(out, e)
		}
	}
	return out
}

// errUnknownTool is the answer to a call of a tool the caller cannot see: undeclared, hidden,
// or not granted alike.
func errUnknownTool(name string) *wire.Error {
	return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Unknown tool: "+name)
}

// errUnknownPrompt is the answer to prompts/get (or a completion) of a prompt the caller may
// not use.
func errUnknownPrompt(name string) *wire.Error {
	return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Unknown prompt: "+name)
}

// errResourceNotFound is the answer to a read of a resource the caller may not use (spec:
// -32602 with data.uri), the same as the sidecar's answer for a declared resource without
// content.
func errResourceNotFound(uri string) *wire.Error {
	e := wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Resource not found")
	e.Data = map[string]string{"uri": uri}
	return e
}

// errSubscriptionDenied refuses a listen whose resourceSubscriptions name URIs the caller may not
// read: a filter is accepted whole or not at all (the MCP draft "Authorization lifetime for
// subscription streams", SubscriptionDeniedError). denied lists the caller's own request back,
// so it tells nothing about what exists.
func errSubscriptionDenied(denied []string) *wire.Error {
	e := wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Subscription denied: "+strconv.Itoa(len(denied))+" resource subscription(s) not authorized")
	e.Data = map[string]any{"denied": denied}
	return e
}
