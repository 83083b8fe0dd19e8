package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/decode"
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

// parseRequest reads the envelope of one JSON-RPC message (sidecar/decode).
// It accepts only a single request or notification object (no batches, no
// responses).
func parseRequest(body []byte) (*request, *wire.Error) {
	env, ok, e := decode.Parse(body)
	if !ok {
		return nil, e
	}
	r := &request{body: body, id: env.ID, method: env.Method, params: env.Params,
		meta: env.Meta, metaVersion: env.MetaVersion, hasVersion: env.HasVersion, response: env.Response}
	if r.method != "" {
		r.spec = methodOf(r.method)
	}
	return r, e
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
	hv, herr := decode.SingleHeader(h, protocol.HeaderProtocolVersion)
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
			if e := decode.VersionHeaderMatches(hv, r.metaVersion); e != nil {
				return e
			}
			if r.metaVersion != protocol.Version || !slices.Contains(p.supported, r.metaVersion) {
				return p.unsupported(r.metaVersion)
			}
		}
		return decode.CheckMCPHeaders(h, r.method, r.params, r.nameMember())
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
	if e := decode.VersionHeaderMatches(hv, r.metaVersion); e != nil {
		return e
	}
	if r.metaVersion != protocol.Version || !slices.Contains(p.supported, r.metaVersion) {
		return p.unsupported(r.metaVersion)
	}
	if e := decode.CheckMCPHeaders(h, r.method, r.params, r.nameMember()); e != nil {
		return e
	}
	if r.spec != nil && r.spec.era == eraLegacy {
		return wire.NewError(http.StatusNotFound, wire.CodeMethodNotFound, "Method not found: "+r.method+" is not part of protocol revision "+protocol.Version)
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
