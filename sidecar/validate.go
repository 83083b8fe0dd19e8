package sidecar

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	legacy      bool           // no modern claim: a 2025-era request (legacy.go)
	spec        *methodSpec    // nil for a method the sidecar does not know
	session     *legacySession // the verified 2025-era session, if any
	// upstreamID is the id a retried call goes upstream with (nil: the
	// client's id; legacyinput.go).
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
func parseRequest(body []byte) (*request, *rpcError) {
	if !json.Valid(body) {
		return nil, newErr(http.StatusBadRequest, codeParseError, "Parse error: body is not valid JSON")
	}
	if e := checkText(body); e != nil {
		return nil, e
	}
	i := skipWS(body, 0)
	if i < len(body) && body[i] == '[' {
		return nil, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: batches are not supported")
	}
	if i >= len(body) || body[i] != '{' {
		return nil, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: body must be a JSON-RPC request object")
	}
	r := &request{body: body}
	var version, method []byte
	var hasMethod, hasID, hasOutcome, dup bool
	variant := ""
	var seen [len(envelopeMembers)]bool
	_ = eachMember(body, func(m member) bool {
		// Members are matched as a case-insensitive decoder would match
		// them (strictjson.go): "Method" is refused, not ignored.
		k, exact := memberIndex(m.key, envelopeMembers[:])
		if k < 0 {
			return true
		}
		if !exact {
			variant = string(m.key)
			return false
		}
		dup = dup || seen[k]
		seen[k] = true
		v := body[m.start:m.end]
		switch k { // envelopeMembers' order
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
		return nil, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: member "+variant+" differs from a JSON-RPC member only in case")
	}
	// The id is echoed on every error from here on, when it is usable.
	if hasID && !validID(r.id) {
		r.id = nil
		return r, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	if dup {
		return r, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: duplicate envelope member")
	}
	if v, ok := stringValue(version); !ok || v != "2.0" {
		return r, newErr(http.StatusBadRequest, codeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	}
	if !hasMethod {
		r.response = hasID && hasOutcome
		return r, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: not a request or notification")
	}
	m, ok := stringValue(method)
	if !ok || m == "" {
		return r, newErr(http.StatusBadRequest, codeInvalidRequest, "Invalid Request: method must be a non-empty string")
	}
	r.method = m
	r.spec = methodOf(m)
	if r.params != nil && !isObject(r.params) {
		return r, newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: params must be an object")
	}
	if r.params != nil {
		meta, version, e := checkParams(r.params)
		if e != nil {
			return r, e
		}
		r.meta = meta
		if version != nil {
			r.metaVersion, r.hasVersion = stringValue(version)
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
	// revision plus, when 2025-era clients are served, legacyVersions.
	supported []string
	// serveLegacy serves claim-less (2025-era) traffic (legacy.go) instead
	// of rejecting it.
	serveLegacy bool
}

// isLegacy reports whether v is a 2025-era revision the sidecar knows.
func isLegacy(v string) bool { return slices.Contains(legacyVersions, v) }

func (p versionPolicy) unsupported(requested string) *rpcError {
	e := newErr(http.StatusBadRequest, codeUnsupportedProto, "Unsupported protocol version")
	e.data = mcp.UnsupportedProtocolVersionData{Supported: p.supported, Requested: requested}
	return e
}

// validate applies the spec's request validation (§2.2–2.5, §8) to a parsed
// request and its headers, in the order the conformance suite expects:
// _meta (-32602), protocol version header (-32020), version (-32022),
// Mcp-Method and Mcp-Name (-32020), removed methods (404 -32601).
// It marks r.legacy for claim-less requests the policy serves.
func validate(h http.Header, r *request, p versionPolicy) *rpcError {
	hv, herr := singleHeader(h, headerProtocolVersion)
	if herr != nil {
		return herr
	}
	if !r.hasVersion {
		// No modern claim (spec §7.1): a 2025-era request, unless the
		// header names a modern revision (then the modern checks below
		// answer it).
		switch {
		case hv == "" || isLegacy(hv):
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
		case !slices.Contains(p.supported, hv) || hv < ProtocolVersion:
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
			if r.metaVersion != ProtocolVersion || !slices.Contains(p.supported, r.metaVersion) {
				return p.unsupported(r.metaVersion)
			}
		}
		return checkMCPHeaders(h, r)
	}
	if r.meta == nil || !isObject(r.meta) {
		return newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: missing required _meta")
	}
	if !r.hasVersion {
		return newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: missing required _meta key "+mcp.MetaKeyProtocolVersion)
	}
	if caps, ok, _ := field(r.meta, mcp.MetaKeyClientCapabilities); !ok || !isObject(caps) {
		return newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: missing required _meta key "+mcp.MetaKeyClientCapabilities)
	}
	if e := versionHeaderMatches(hv, r.metaVersion); e != nil {
		return e
	}
	if r.metaVersion != ProtocolVersion || !slices.Contains(p.supported, r.metaVersion) {
		return p.unsupported(r.metaVersion)
	}
	if e := checkMCPHeaders(h, r); e != nil {
		return e
	}
	if r.spec != nil && r.spec.era == eraLegacy {
		return newErr(http.StatusNotFound, codeMethodNotFound, "Method not found: "+r.method+" is not part of protocol revision "+ProtocolVersion)
	}
	return nil
}

// versionHeaderMatches checks the MCP-Protocol-Version header against the
// version the body claims.
func versionHeaderMatches(hv, metaVersion string) *rpcError {
	if hv == "" {
		return newErr(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: missing required MCP-Protocol-Version header")
	}
	if hv != metaVersion {
		return newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: MCP-Protocol-Version header value '%s' does not match body value '%s'", hv, metaVersion))
	}
	return nil
}

// checkMCPHeaders checks Mcp-Method, Mcp-Name and the characters of
// Mcp-Param-* against a modern message (request or notification).
func checkMCPHeaders(h http.Header, r *request) *rpcError {
	mh, herr := singleHeader(h, headerMethod)
	if herr != nil {
		return herr
	}
	if mh == "" {
		return newErr(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: missing required Mcp-Method header")
	}
	if mh != r.method {
		return newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Method header value '%s' does not match body value '%s'", mh, r.method))
	}
	if bodyName := r.nameMember(); bodyName != "" {
		raw, present, _ := field(r.params, bodyName)
		want, isStr := stringValue(raw)
		if !present || !isStr {
			return newErr(http.StatusBadRequest, codeInvalidParams, fmt.Sprintf("Invalid params: %s requires params.%s", r.method, bodyName))
		}
		nh, herr := singleHeader(h, headerName)
		if herr != nil {
			return herr
		}
		if nh == "" {
			return newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: missing required Mcp-Name header for method %q", r.method))
		}
		got, ok := decodeHeaderValue(nh)
		if !ok {
			return newErr(http.StatusBadRequest, codeHeaderMismatch, "Header mismatch: Mcp-Name header contains invalid Base64 encoding")
		}
		if got != want {
			return newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Name header value '%s' does not match body value '%s'", nh, want))
		}
	}
	// Mcp-Param-* values are matched against the tool's x-mcp-header schema
	// by a 2026-07-28 upstream, which gets headers and body unchanged, and
	// by the sidecar for one that does not see them (checkParamHeaders);
	// here only their characters are checked.
	for k, vs := range h {
		if len(k) > len(headerParamPrefix) && strings.EqualFold(k[:len(headerParamPrefix)], headerParamPrefix) {
			for _, v := range vs {
				if !safeHeaderValue(v) {
					return newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", k))
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
// name must be in canonical form (see headerValue).
func singleHeader(h http.Header, name string) (string, *rpcError) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header given more than once", name))
	}
	if !safeHeaderValue(vs[0]) {
		return "", newErr(http.StatusBadRequest, codeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", name))
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

const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// decodeHeaderValue undoes the =?base64?…?= wrapping of an MCP header value.
func decodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, base64Prefix); ok {
		if enc, ok = strings.CutSuffix(enc, base64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return "", false
			}
			return string(b), true
		}
	}
	return v, true
}
