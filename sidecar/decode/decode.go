// Package decode checks the bytes and headers of one MCP message before
// the method table sees it: the JSON-RPC envelope (one request or
// notification object, its members matched exactly), the params member
// rule, and the Mcp-* headers against the body (spec §2.2–2.5, §8).
//
// It owns no decision of what a method means or who answers it: it knows
// no method table, no client generation, no catalog and no HTTP routing.
// The request path (sidecar/validate.go) passes it the method's Mcp-Name
// member and keeps the version policy.
package decode

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Envelope is what the sidecar needs of one JSON-RPC message. Every slice
// points into the body.
type Envelope struct {
	ID     json.RawMessage // nil for a notification (or an id that is unusable)
	Method string
	Params []byte // raw params object, nil when absent

	Meta        []byte // raw params._meta, nil when absent
	MetaVersion string // _meta protocolVersion, "" when absent
	HasVersion  bool
	// Response is set for a JSON-RPC response (a client answering a
	// request the sidecar sent it); Parse then also returns an error.
	Response bool
}

// Parse reads the envelope of one JSON-RPC message. It accepts only a
// single request or notification object (no batches, no responses). ok is
// false when the error comes before anything of the message is usable;
// otherwise env holds what was read (the id, to echo on the error).
func Parse(body []byte) (env Envelope, ok bool, e *wire.Error) {
	if !json.Valid(body) {
		return env, false, wire.NewError(http.StatusBadRequest, wire.CodeParseError, "Parse error: body is not valid JSON")
	}
	if e := wire.CheckText(body); e != nil {
		return env, false, e
	}
	i := wire.SkipWS(body, 0)
	if i < len(body) && body[i] == '[' {
		return env, false, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: batches are not supported")
	}
	if i >= len(body) || body[i] != '{' {
		return env, false, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: body must be a JSON-RPC request object")
	}
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
			env.ID, hasID = v, true
		case 2:
			method, hasMethod = v, true
		case 3:
			env.Params = v
		default: // result, error
			hasOutcome = true
		}
		return true
	})
	if variant != "" {
		return Envelope{}, false, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: member "+variant+" differs from a JSON-RPC member only in case")
	}
	// The id is echoed on every error from here on, when it is usable.
	if hasID && !wire.ValidID(env.ID) {
		env.ID = nil
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	if dup {
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: duplicate envelope member")
	}
	if v, ok := wire.StringValue(version); !ok || v != "2.0" {
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, `Invalid Request: jsonrpc must be "2.0"`)
	}
	if !hasMethod {
		env.Response = hasID && hasOutcome
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: not a request or notification")
	}
	m, ok := wire.StringValue(method)
	if !ok || m == "" {
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Invalid Request: method must be a non-empty string")
	}
	env.Method = m
	if env.Params != nil && !wire.IsObject(env.Params) {
		return env, true, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: params must be an object")
	}
	if env.Params != nil {
		meta, version, e := checkParams(env.Params)
		if e != nil {
			return env, true, e
		}
		env.Meta = meta
		if version != nil {
			env.MetaVersion, env.HasVersion = wire.StringValue(version)
		}
	}
	return env, true, nil
}

// VersionHeaderMatches checks the MCP-Protocol-Version header against the
// version the body claims.
func VersionHeaderMatches(hv, metaVersion string) *wire.Error {
	if hv == "" {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "Header mismatch: missing required MCP-Protocol-Version header")
	}
	if hv != metaVersion {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: MCP-Protocol-Version header value '%s' does not match body value '%s'", hv, metaVersion))
	}
	return nil
}

// CheckMCPHeaders checks Mcp-Method, Mcp-Name and the characters of
// Mcp-Param-* against a modern message (request or notification) of
// method with params; nameMember is the params member Mcp-Name mirrors
// ("" for none: the method table's).
func CheckMCPHeaders(h http.Header, method string, params []byte, nameMember string) *wire.Error {
	mh, herr := SingleHeader(h, protocol.HeaderMethod)
	if herr != nil {
		return herr
	}
	if mh == "" {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "Header mismatch: missing required Mcp-Method header")
	}
	if mh != method {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: Mcp-Method header value '%s' does not match body value '%s'", mh, method))
	}
	if nameMember != "" {
		raw, present, _ := wire.Field(params, nameMember)
		want, isStr := wire.StringValue(raw)
		if !present || !isStr {
			return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, fmt.Sprintf("Invalid params: %s requires params.%s", method, nameMember))
		}
		nh, herr := SingleHeader(h, protocol.HeaderName)
		if herr != nil {
			return herr
		}
		if nh == "" {
			return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: missing required Mcp-Name header for method %q", method))
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
				if !SafeHeaderValue(v) {
					return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", k))
				}
			}
		}
	}
	return nil
}

// SingleHeader returns the OWS-trimmed value of a header that must appear at
// most once and carry only safe ASCII.
// name must be in canonical form (see wire.HeaderValue).
func SingleHeader(h http.Header, name string) (string, *wire.Error) {
	vs := h[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header given more than once", name))
	}
	if !SafeHeaderValue(vs[0]) {
		return "", wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, fmt.Sprintf("Header mismatch: %s header contains invalid characters", name))
	}
	return strings.Trim(vs[0], " \t"), nil
}

// SafeHeaderValue reports whether v holds only visible ASCII, space and tab:
// anything else must be sent Base64-encoded (=?base64?…?=).
func SafeHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}

// paramsMembers are the params members the sidecar reads or rewrites for any
// method: _meta (sidecar/validate.go, sidecar/legacy), name and uri (routing,
// Mcp-Name, the catalog), arguments (prompts, Mcp-Param-*), cursor (lists),
// ref (completion/complete), notifications (subscriptions/listen), the
// retry's requestState and inputResponses (sidecar/legacy), and the
// 2025-era protocolVersion, capabilities, level and requestId
// (sidecar/legacy).
var paramsMembers = []string{"_meta", "name", "uri", "arguments", "cursor", "ref", "notifications",
	"requestState", "inputResponses", "protocolVersion", "capabilities", "level", "requestId"}

// metaMembers are the params._meta keys the sidecar reads or sets, the
// protocol version first (checkParams).
var metaMembers = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, protocol.MetaLogLevel}

// refMembers are the params.ref members completion/complete is routed by.
var refMembers = []string{"type", "name", "uri"}

// checkParams applies the member rule to params and to the objects in it the
// sidecar reads (_meta, ref), reading each once (arguments may be most of a
// large body). It returns params._meta and its protocolVersion claim (nil:
// absent), which Parse would otherwise look up again.
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
