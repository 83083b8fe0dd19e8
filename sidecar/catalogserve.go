package sidecar

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/headers"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file serves the methods the catalog overlay owns: the four lists
// (merged, paginated with the sidecar's own cursors), tools/call routing,
// resources/read for sidecar-served resources and prompts/get for declared
// prompts. Everything else still goes to the upstream.

func (s *Server) clientListRequest(r *http.Request, req *request) func(string) (*http.Request, error) {
	return func(cursor string) (*http.Request, error) {
		body, err := wire.WithParams(req.body, func(params []byte) ([]byte, error) {
			if cursor == "" {
				return wire.SetMembers(params, nil, []string{"cursor"})
			}
			return wire.SetMembers(params, []wire.KV{{Key: "cursor", Val: wire.JSONString(cursor)}}, nil)
		})
		if err != nil {
			return nil, err
		}
		cred, e := s.credentialFor(r)
		if e != nil {
			return nil, e
		}
		ureq, err := http.NewRequestWithContext(cred.WithHeader(r.Context()), http.MethodPost, s.up.URL(), bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		headers.ForUpstream(ureq, r)
		cred.Set(ureq.Header)
		return ureq, nil
	}
}

// serveList answers one of the four lists: the upstream's list (read with
// the client's headers, every page) merged with the catalog, cut into pages
// with the sidecar's cursors, stamped with the catalog's hints.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, req *request) {
	spec, method := req.spec.list, req.method
	cursor := ""
	if raw, ok, _ := wire.Field(req.params, "cursor"); ok && string(raw) != "null" {
		var okStr bool
		if cursor, okStr = wire.StringValue(raw); !okStr {
			s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: cursor must be a string"))
			return
		}
	}
	offset, ok := rules.ParseCursor(method, cursor)
	if !ok {
		s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: invalid cursor"))
		return
	}
	c, g := s.catalogGrant(r)
	info, err := s.upstreamInfoFor(r.Context())
	if err != nil {
		if s.endedByDrain(w, r, req) {
			return
		}
		s.failReq(w, req, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream unavailable"))
		return
	}
	up := []json.RawMessage{}
	private := false
	if spec.Capability(info) {
		start := time.Now()
		var pass *upstream.Answer
		up, private, pass, err = s.up.List(method, spec.Member, s.clientListRequest(r, req))
		s.m.ObserveUpstream(method, time.Since(start))
		if we := (*wire.Error)(nil); errors.As(err, &we) {
			s.failReq(w, req, we) // no upstream credential for the caller (sidecar/credential)
			return
		}
		if err != nil {
			if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
				return
			}
			s.log.Warn("Upstream list failed", "method", method, "err", err)
			s.failReq(w, req, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream unavailable"))
			return
		}
		if pass != nil {
			writeMessage(w, pass.Status, s.finish(req, pass.Msg))
			return
		}
	}
	if method == "tools/list" && c.Server.ToolPinning == catalog.ToolPinningEnforce {
		s.opts.Overlay.CheckDigests(c, up)
	}
	items, next, more := rules.Page(filterEntries(g, method, spec.Merge(c, up)), offset, s.opts.Overlay.PageSize())
	h := overlay.DefaultHint(c, method)
	if private || c.Access != nil {
		// Something in the answer depends on the caller (with a policy, the whole list does).
		h.CacheScope = catalog.ScopePrivate
	}
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(req.id)
	b.WriteString(`,"result":{`)
	if !req.legacy {
		b.WriteString(`"resultType":"complete",`)
	}
	b.WriteByte('"')
	b.WriteString(spec.Member)
	b.WriteString(`":[`)
	for i, e := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(e.Raw)
	}
	b.WriteByte(']')
	if more {
		b.WriteString(`,"nextCursor":`)
		b.Write(wire.JSONString(rules.MintCursor(method, next)))
	}
	if !req.legacy {
		b.WriteString(`,"ttlMs":`)
		b.WriteString(strconv.FormatInt(max(h.TTLMs, 0), 10))
		b.WriteString(`,"cacheScope":`)
		b.Write(wire.JSONString(overlay.ScopeOf(h.CacheScope)))
	}
	b.WriteString(`}}`)
	writeMessage(w, http.StatusOK, b.Bytes())
}

func writeMessage(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// paramString returns a string member of the request params.
func paramString(req *request, name string) (string, bool) {
	return wire.StringField(req.params, name)
}

// serveToolCall refuses calls to tools clients cannot see and calls renamed
// tools by their upstream name.
func (s *Server) serveToolCall(w http.ResponseWriter, r *http.Request, req *request) {
	name, ok := toolName(req.params)
	if !ok {
		s.deny(w, audit.ReasonInvalid)
		s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: tools/call requires params.name, a string, exactly once"))
		return
	}
	c, g := s.catalogGrant(r)
	upstream, _, ok := rules.RouteTool(c, name)
	if !ok || !g.Tool(name) {
		// Not granted is unknown: before the pinning check, whose answer would tell that
		// the tool exists.
		if !ok {
			s.deny(w, audit.ReasonUndeclared)
		} else {
			s.deny(w, audit.ReasonNotGranted)
		}
		s.failReq(w, req, errUnknownTool(name))
		return
	}
	markRouted(w) // a catalog name: it may name the span (tracing.go, sidecar/tracing)
	routedAs(w, upstream)
	if why := rules.ToolWithheld(c, upstream, s.opts.Overlay.ObservedDigestOf(upstream)); why != "" {
		// Withheld from tools/list too: refused like a tool clients cannot see,
		// saying why (the operator accepts a new definition in the MCPTool).
		s.m.PinRefused.Inc()
		s.deny(w, audit.ReasonWithheld)
		e := wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Tool withheld: "+name+": "+why)
		e.Data = map[string]string{"name": name, "reason": why}
		s.failReq(w, req, e)
		return
	}
	if upstream != name {
		body, err := wire.WithParams(req.body, func(p []byte) ([]byte, error) {
			return wire.SetMembers(p, []wire.KV{{Key: "name", Val: wire.JSONString(upstream)}}, nil)
		})
		if err != nil {
			s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: "+err.Error()))
			return
		}
		req.body = body
		r.Header.Set(protocol.HeaderName, mcpHeaderValue(upstream))
	}
	s.forward(w, r, req)
}

// toolName returns params.name when it is a string given exactly once.
// (parseRequest has refused params in which another member spells "name"
// in another case, which a case-insensitive upstream would read instead.)
func toolName(params []byte) (string, bool) {
	return wire.StringField(params, "name")
}

// serveComplete answers completion/complete for a declared prompt or a
// sidecar-served resource (the upstream does not know them, and their
// arguments have no completions) and forwards the rest.
func (s *Server) serveComplete(w http.ResponseWriter, r *http.Request, req *request) {
	raw, _, _ := wire.Field(req.params, "ref")
	typ, _, _ := wire.Field(raw, "type")
	t, _ := wire.StringValue(typ)
	c, g := s.catalogGrant(r)
	served := false
	switch t {
	case "ref/prompt":
		n, _, _ := wire.Field(raw, "name")
		name, _ := wire.StringValue(n)
		if !g.Prompt(name) {
			s.deny(w, audit.ReasonNotGranted)
			s.failReq(w, req, errUnknownPrompt(name))
			return
		}
		served = rules.FindPrompt(c, name) != nil
	case "ref/resource":
		u, _, _ := wire.Field(raw, "uri")
		uri, _ := wire.StringValue(u)
		if !g.Template(uri) && !g.Resource(uri) {
			s.deny(w, audit.ReasonNotGranted)
			s.failReq(w, req, errResourceNotFound(uri))
			return
		}
		for i := range c.Resources {
			if res := &c.Resources[i]; res.Key() == uri && !res.Source.Upstream {
				served = true
			}
		}
	}
	if !served {
		s.forward(w, r, req)
		return
	}
	s.writeResult(w, req, []byte(`{"resultType":"complete","completion":{"values":[],"total":0,"hasMore":false}}`))
}

// mcpHeaderValue encodes a name for an Mcp-* header: as is when it is
// visible ASCII, else as =?base64?…?=.
func mcpHeaderValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// serveRead serves resources the sidecar owns (inline, ConfigMap, Secret)
// and forwards the rest, whose hints the HintFunc picks.
func (s *Server) serveRead(w http.ResponseWriter, r *http.Request, req *request) {
	uri, _ := paramString(req, "uri")
	c, g := s.catalogGrant(r)
	if !g.Resource(uri) {
		s.deny(w, audit.ReasonNotGranted)
		s.failReq(w, req, errResourceNotFound(uri))
		return
	}
	res := rules.FindResource(c, uri)
	if res == nil || res.Source.Upstream {
		s.forward(w, r, req)
		return
	}
	body, mime, err := s.opts.Overlay.Content(res)
	if err != nil {
		s.failReq(w, req, errResourceNotFound(uri))
		return
	}
	type content struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType,omitempty"`
		Text     string `json:"text,omitempty"`
		Blob     string `json:"blob,omitempty"`
	}
	ct := content{URI: uri, MimeType: mime}
	if utf8.Valid(body) {
		ct.Text = string(body)
	} else {
		ct.Blob = base64.StdEncoding.EncodeToString(body)
	}
	h := overlay.ReadHint(c, res)
	out, _ := json.Marshal(struct {
		ResultType string    `json:"resultType"`
		Contents   []content `json:"contents"`
		TTLMs      int64     `json:"ttlMs"`
		CacheScope string    `json:"cacheScope"`
	}{protocol.ResultComplete, []content{ct}, max(h.TTLMs, 0), overlay.ScopeOf(h.CacheScope)})
	s.writeResult(w, req, out)
}

// servePromptGet renders declared prompts and forwards the rest.
func (s *Server) servePromptGet(w http.ResponseWriter, r *http.Request, req *request) {
	name, _ := paramString(req, "name")
	c, g := s.catalogGrant(r)
	if !g.Prompt(name) {
		s.deny(w, audit.ReasonNotGranted)
		s.failReq(w, req, errUnknownPrompt(name))
		return
	}
	p := rules.FindPrompt(c, name)
	if p == nil {
		s.forward(w, r, req)
		return
	}
	markRouted(w)
	args := map[string]string{}
	if raw, ok, _ := wire.Field(req.params, "arguments"); ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: arguments must be an object of strings"))
			return
		}
	}
	out, e := rules.RenderPrompt(p, args)
	if e != nil {
		s.failReq(w, req, e)
		return
	}
	s.writeResult(w, req, out)
}
