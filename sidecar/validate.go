package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// request is a POSTed JSON-RPC message as far as the sidecar needs to know
// it. Every slice points into body, which is forwarded unchanged.
type request struct {
	body   []byte
	id     json.RawMessage // nil for a notification
	method string
	params []byte // raw params object, nil when absent

	meta        []byte // raw params._meta, nil when absent
	metaVersion string // _meta protocolVersion, "" when absent
	hasVersion  bool
	legacy      bool            // no modern claim: a 2025-era request (legacyserve.go)
	spec        *methodSpec     // nil for a method the sidecar does not know
	session     *legacy.Session // the verified 2025-era session, if any
	// upstreamID is the id a retried call goes upstream with (nil: the
	// client's id; legacyserve.go).
	upstreamID json.RawMessage
	// response is set for a JSON-RPC response (a client answering a
	// request the sidecar sent it); parseRequest then also returns an
	// error, for every path that does not expect one.
	response bool
	// traceCtx holds the request's span when tracing is on (tracing.go).
	traceCtx context.Context
}

// isNotification reports whether the message has no id.
func (r *request) isNotification() bool { return r.id == nil }

// parseRequest reads the envelope of one JSON-RPC message. It accepts only a
// single request or notification object (no batches, no responses).
func parseRequest(body []byte) (*request, *wire.Error) {
	if !json.Valid(body) {
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeParseError, "Parse error: body is not valid JSON")
	}
	if e := wire.CheckText(body); e != nil {
		return nil, e
	}
	i := wire.SkipWS(body, 0)
	if i < len(body) && body[i] == '[' {
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: batches are not supported")
	}
	if i >= len(body) || body[i] != '{' {
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: body must be a JSON-RPC request object")
	}
	r := &request{body: body}
	var version, method []byte
	var hasMethod, hasID, hasOutcome, dup bool
	variant := ""
	var seen [len(wire.EnvelopeMembers)]bool
	_ = wire.EachMember(body, func(m wire.Member) bool {
		// Members are matched as a case-insensitive decoder would match
		// them (wire/strictjson.go): "Method" is refused, not ignored.
		k, exact := wire.MemberIndex(m.Key, wire.EnvelopeMembers[:])
		if k < 0 {
			return true
		}
		if !exact {
			variant = string(m.Key)
			return false
		}
		dup = dup || seen[k]
		seen[k] = true
		v := body[m.Start:m.End]
		switch k { // wire.EnvelopeMembers' order
		case 0:
			version = v
		case 1:
			r.id, hasID = v, true
		case 2:
			method, hasMethod = v, true
		case 3:
			r.params = v
		default: // result, error
			hasOutcome = true
		}
		return true
	})
	if variant != "" {
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: member "+variant+" differs from a JSON-RPC member only in case")
	}
	// The id is echoed on every error from here on, when it is usable.
	if hasID && !validID(r.id) {
		r.id = nil
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	if dup {
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: duplicate envelope member")
	}
	if v, ok := wire.StringValue(version); !ok || v != "2.0" {
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	}
	if !hasMethod {
		r.response = hasID && hasOutcome
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: not a request or notification")
	}
	m, ok := wire.StringValue(method)
	if !ok || m == "" {
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: method must be a non-empty string")
	}
	r.method = m
	r.spec = methodOf(m)
	if r.params != nil && !wire.IsObject(r.params) {
		return r, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: params must be an object")
	}
	if r.params != nil {
		meta, version, e := checkParams(r.params)
		if e != nil {
			return r, e
		}
		r.meta = meta
		if version != nil {
			r.metaVersion, r.hasVersion = wire.StringValue(version)
		}
	}
	return r, nil
}

func validID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		return true
	}
	return false
}

// versionPolicy says which protocol versions the sidecar accepts.
type versionPolicy struct {
	// supported is what the sidecar advertises, newest first: the modern
	// revision plus, when 2025-era clients are served, legacy.Versions.
	supported []string
	// serveLegacy serves claim-less (2025-era) traffic (sidecar/legacy) instead
	// of rejecting it.
	serveLegacy bool
}

func (p versionPolicy) unsupported(requested string) *wire.Error {
	e := wire.NewError(http.StatusBadRequest, wire.CodeUnsupportedProtocolVersion, "Unsupported protocol version")
	e.Data = mcp.UnsupportedProtocolVersionData{Supported: p.supported, Requested: requested}
	return e
}

// validate applies the spec's request validation (§2.2–2.5, §8) to a parsed
// request and its headers, in the order the conformance suite expects:
// _meta (-32602), protocol version header (-32020), version (-32022),
// Mcp-Method and Mcp-Name (-32020), removed methods (404 -32601).
// It marks r.legacy for claim-less requests the policy serves.
func validate(h http.Header, r *request, p versionPolicy) *wire.Error {
	hv, herr := singleHeader(h, protocol.HeaderProtocolVersion)
	if herr != nil {
		return herr
	}
	if !r.hasVersion {
		// No modern claim (spec §7.1): a 2025-era request, unless the
		// header names a modern revision (then the modern checks below
		// answer it).
		switch {
		case hv == "" || legacy.IsVersion(hv):
			if p.serveLegacy {
				r.legacy = true
				return nil
			}
			// legacyClients: Reject. A modern-only server names its
			// versions in any error to a 2025-era request.
			requested := hv
			if v, ok := paramString(r, "protocolVersion"); ok && r.method == "initialize" {
				requested = v
			}
			return p.unsupported(requested)
		case !slices.Contains(p.supported, hv) || hv < protocol.Version:
			return p.unsupported(hv)
		}
	}
	if r.isNotification() {
		// A notification needs no _meta (the required keys are defined for
		// requests), but a version it claims must agree with the header,
		// and its Mcp-* headers are checked as a request's (as go-sdk
		// servers do): nothing in front of the sidecar may route or
		// authorize on a header the body contradicts.
		if r.hasVersion {
			if e := versionHeaderMatches(hv, r.metaVersion); e != nil {
				return e
			}
			if r.metaVersion != protocol.Version || !slices.Contains(p.supported, r.metaVersion) {
				return p.unsupported(r.metaVersion)
			}
		}
		return checkMCPHeaders(h, r)
	}
	if r.meta == nil || !wire.IsObject(r.meta) {
		return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: missing required _meta")
	}
	if !r.hasVersion {
		return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: missing required _meta key "+mcp.MetaKeyProtocolVersion)
	}
	if caps, ok, _ := wire.Field(r.meta, mcp.MetaKeyClientCapabilities); !ok || !wire.IsObject(caps) {
		return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: missing required _meta key "+mcp.MetaKeyClientCapabilities)
	}
	if e := versionHeaderMatches(hv, r.metaVersion); e != nil {
		return e
	}
	if r.metaVersion != protocol.Version || !slices.Contains(p.supported, r.metaVersion) {
		return p.unsupported(r.metaVersion)
	}
	if e := checkMCPHeaders(h, r); e != nil {
		return e
	}
	if r.spec != nil && r.spec.era == eraLegacy {
		return wire.NewError(http.StatusNotFound, wire.CodeMethodNotFound, "Method not found: "+r.method+" is not part of protocol revision "+protocol.Version)
	}
	return nil
}

// versionHeaderMatches checks the MCP-Protocol-Version header against the
// version the body claims.
func versionHeaderMatches(hv, metaVersion string) *wire.Error {
	if hv == "" {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "Header mismatch: missing required MCP-Protocol-Version header")
	}
	if hv != metaVersion {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: MCP-Protocol-Version header value '%s' does not match body value '%s'", hv, metaVersion))
	}
	return nil
}

// checkMCPHeaders checks Mcp-Method, Mcp-Name and the characters of
// Mcp-Param-* against a modern message (request or notification).
func checkMCPHeaders(h http.Header, r *request) *wire.Error {
	mh, herr := singleHeader(h, protocol.HeaderMethod)
	if herr != nil {
		return herr
	}
	if mh == "" {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "Header mismatch: missing required Mcp-Method header")
	}
	if mh != r.method {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Method header value '%s' does not match body value '%s'", mh, r.method))
	}
	if bodyName := r.nameMember(); bodyName != "" {
		raw, present, _ := wire.Field(r.params, bodyName)
		want, isStr := wire.StringValue(raw)
		if !present || !isStr {
			return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, fmt.Sprintf("Invalid params: %s requires params.%s", r.method, bodyName))
		}
		nh, herr := singleHeader(h, protocol.HeaderName)
		if herr != nil {
			return herr
		}
		if nh == "" {
			return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: missing required Mcp-Name header for method %q", r.method))
		}
		got, ok := wire.DecodeHeaderValue(nh)
		if !ok {
			return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "Header mismatch: Mcp-Name header contains invalid Base64 encoding")
		}
		if got != want {
			return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Name header value '%s' does not match body value '%s'", nh, want))
		}
	}
	// Mcp-Param-* values are matched against the tool's x-mcp-header schema
	// by a 2026-07-28 upstream, which gets headers and body unchanged, and
	// by the sidecar for one that does not see them (checkParamHeaders);
	// here only their characters are checked.
	for k, vs := range h {
		if len(k) > len(protocol.HeaderParamPrefix) && strings.EqualFold(k[:len(protocol.HeaderParamPrefix)], protocol.HeaderParamPrefix) {
			for _, v := range vs {
				if !safeHeaderValue(v) {
					return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", k))
				}
			}
		}
	}
	return nil
}

// nameMember returns the params member that Mcp-Name mirrors ("" for none).
func (r *request) nameMember() string {
	if r.spec == nil {
		return ""
	}
	return r.spec.nameMember
}

// singleHeader returns the OWS-trimmed value of a header that must appear at
// most once and carry only safe ASCII.
// name must be in canonical form (see wire.HeaderValue).
func singleHeader(h http.Header, name string) (string, *wire.Error) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header given more than once", name))
	}
	if !safeHeaderValue(vs[0]) {
		return "", wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", name))
	}
	return strings.Trim(vs[0], " \t"), nil
}

// safeHeaderValue reports whether v holds only visible ASCII, space and tab:
// anything else must be sent Base64-encoded (=?base64?…?=).
func safeHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// paramsMembers are the params members the sidecar reads or rewrites for any
// method: _meta (validate.go, sidecar/legacy), name and uri (routing, Mcp-Name,
// the catalog), arguments (prompts, Mcp-Param-*), cursor (lists), ref
// (completion/complete), notifications (subscriptions/listen), the retry's
// requestState and inputResponses (sidecar/legacy), and the 2025-era
// protocolVersion, capabilities, level and requestId (sidecar/legacy).
var paramsMembers = []string{"_meta", "name", "uri", "arguments", "cursor", "ref", "notifications",
	"requestState", "inputResponses", "protocolVersion", "capabilities", "level", "requestId"}

// metaMembers are the params._meta keys the sidecar reads or sets, the
// protocol version first (checkParams).
var metaMembers = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, legacy.MetaKeyLogLevel}

// refMembers are the params.ref members completion/complete is routed by.
var refMembers = []string{"type", "name", "uri"}

// checkParams applies the member rule to params and to the objects in it the
// sidecar reads (_meta, ref), reading each once (arguments may be most of a
// large body). It returns params._meta and its protocolVersion claim (nil:
// absent), which parseRequest would otherwise look up again.
func checkParams(params []byte) (meta, version []byte, e *wire.Error) {
	var ref []byte
	if k := wire.ScanKnown(params, paramsMembers, func(i int, v []byte) {
		switch paramsMembers[i] {
		case "_meta":
			meta = v
		case "ref":
			ref = v
		}
	}); k != "" {
		return nil, nil, wire.AmbiguousParam("params", k)
	}
	if wire.IsObject(meta) {
		if k := wire.ScanKnown(meta, metaMembers, func(i int, v []byte) {
			if i == 0 { // metaMembers[0]: the protocol version
				version = v
			}
		}); k != "" {
			return nil, nil, wire.AmbiguousParam("params._meta", k)
		}
	}
	if wire.IsObject(ref) {
		if k := wire.AmbiguousMember(ref, refMembers); k != "" {
			return nil, nil, wire.AmbiguousParam("params.ref", k)
		}
	}
	return meta, version, nil
}
