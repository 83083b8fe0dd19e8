package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file serves 2025-era clients (Streamable HTTP 2025-11-25,
// 2025-06-18, 2025-03-26). The sidecar answers the session methods itself
// (initialize, notifications/initialized, ping, logging/setLevel,
// resources/subscribe|unsubscribe) and turns every other request into the
// modern shape (the _meta claim, the Mcp-* headers), so that it passes the
// same choke point (Server.dispatch) as a 2026-07-28 request: the catalog
// holds whatever revision the client speaks, and the upstream is always
// spoken to in the modern revision (or whatever its Transport translates
// that into). Answers go back in the legacy shape: no resultType, ttlMs or
// cacheScope, and JSON-RPC errors with HTTP 200.

// legacyVersions are the 2025-era revisions the sidecar serves, newest first.
var legacyVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// legacyDefaultVersion is assumed for a request without MCP-Protocol-Version
// (2025-06-18 transports: "the server SHOULD assume 2025-03-26").
const legacyDefaultVersion = "2025-03-26"

// serveLegacy answers one 2025-era POST.
func (s *Server) serveLegacy(w http.ResponseWriter, r *http.Request, req *request) {
	spec := req.spec
	if spec != nil && spec.legacyServe != nil {
		spec.legacyServe(s, w, r, req)
		return
	}
	if req.isNotification() {
		// notifications/cancelled, notifications/roots/list_changed, …:
		// nothing in the modern upstream could use them (a stateless 2026
		// server cancels when the request's stream closes).
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if spec != nil && spec.era == eraModern {
		s.failReq(w, req, newErr(http.StatusOK, codeMethodNotFound, "Method not found: "+req.method+" is part of protocol revision "+ProtocolVersion+" only"))
		return
	}
	if e := s.toModern(r, req, nil); e != nil {
		s.failReq(w, req, e)
		return
	}
	s.dispatch(w, r, req)
}

// toModern rewrites a 2025-era request into the modern shape in place: the
// _meta claim (protocol version, the client's capabilities) spliced into
// params, and the headers a modern upstream requires. Members the client
// sent (progressToken, arguments, …) are kept byte for byte.
func (s *Server) toModern(r *http.Request, req *request, clientCaps json.RawMessage) *rpcError {
	if len(clientCaps) == 0 {
		clientCaps = json.RawMessage(`{}`)
	}
	claim := []kv{
		{key: mcp.MetaKeyProtocolVersion, val: []byte(`"` + ProtocolVersion + `"`)},
		{key: mcp.MetaKeyClientCapabilities, val: clientCaps},
	}
	meta := req.meta
	if meta == nil || !isObject(meta) {
		meta = []byte(`{}`)
	}
	nmeta, err := setMembers(meta, claim, nil)
	if err != nil {
		return newErr(http.StatusOK, codeInvalidParams, "Invalid params: _meta must be an object")
	}
	params := req.params
	if params == nil {
		params = []byte(`{}`)
	}
	nparams, err := setMembers(params, []kv{{key: "_meta", val: nmeta}}, nil)
	if err != nil {
		return newErr(http.StatusOK, codeInvalidParams, "Invalid params: params must be an object")
	}
	body, err := setMembers(req.body, []kv{{key: "params", val: nparams}}, nil)
	if err != nil {
		return newErr(http.StatusOK, codeInvalidRequest, "Invalid Request: "+err.Error())
	}
	req.body = body
	req.params, _, _ = field(body, "params")
	req.meta, _, _ = field(req.params, "_meta")
	req.metaVersion, req.hasVersion = ProtocolVersion, true

	h := r.Header
	delete(h, "Mcp-Session-Id")
	delete(h, "Last-Event-Id")
	h[headerProtocolVersion] = []string{ProtocolVersion}
	h[headerMethod] = []string{req.method}
	h["Accept"] = []string{"application/json, text/event-stream"}
	delete(h, headerName)
	if nm := req.nameMember(); nm != "" {
		if v, ok := paramString(req, nm); ok {
			h[headerName] = []string{mcpHeaderValue(v)}
		}
	}
	return nil
}

// failReq answers a request with a JSON-RPC error: for a 2025-era client
// with HTTP 200 (its transport reads JSON-RPC errors from successful
// responses; 4xx is reserved for transport and session problems).
func (s *Server) failReq(w http.ResponseWriter, req *request, e *rpcError) {
	if req.legacy && e.status != http.StatusOK {
		c := *e
		c.status = http.StatusOK
		e = &c
	}
	s.fail(w, req.id, e)
}

// errInputRequired answers a 2025-era call for which the upstream asked for
// client input: the legacy request that would carry it is not implemented.
func errInputRequired(id json.RawMessage) []byte {
	return errorBody(id, newErr(http.StatusOK, codeInternalError,
		"Internal error: the MCP server asked the client for input (input_required: elicitation, sampling or roots), "+
			"which the sidecar does not relay to clients of protocol revision 2025-11-25 and earlier; call this tool with a 2026-07-28 client"))
}

// legacyResult turns a modern response into the 2025-era shape: a
// complete result loses resultType, ttlMs and cacheScope; an
// input_required result becomes an error naming the limitation. Errors
// and anything else stay the upstream's bytes.
func legacyResult(id json.RawMessage, msg []byte) []byte {
	rs, re, ok := span(msg, "result")
	if !ok || !isObject(msg[rs:re]) {
		return msg
	}
	res := msg[rs:re]
	if rt, ok, _ := field(res, "resultType"); ok {
		if v, _ := stringValue(rt); v == resultInputRequired {
			return errInputRequired(id)
		}
	} else if !bytes.Contains(res, []byte(`"ttlMs"`)) && !bytes.Contains(res, []byte(`"cacheScope"`)) {
		return msg
	}
	nres, err := setMembers(res, nil, []string{"resultType", "ttlMs", "cacheScope"})
	if err != nil {
		return msg
	}
	out := make([]byte, 0, len(msg))
	out = append(out, msg[:rs]...)
	out = append(out, nres...)
	return append(out, msg[re:]...)
}

// finish is what every response leaving the sidecar for a request passes:
// stamped for a modern client, turned into the legacy shape for a 2025-era
// one.
func (s *Server) finish(req *request, msg []byte) []byte {
	if req.legacy {
		return legacyResult(req.id, msg)
	}
	return s.stamp(req, msg)
}

// writeResult answers req with a result object the sidecar built (in the
// modern shape, resultType included).
func (s *Server) writeResult(w http.ResponseWriter, req *request, result []byte) {
	b := make([]byte, 0, len(result)+len(req.id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, req.id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, '}')
	if req.legacy {
		b = legacyResult(req.id, b)
	}
	writeMessage(w, http.StatusOK, b)
}

// negotiate picks the 2025-era revision for an initialize that asked for
// requested: that one when served, else the newest (the legacy rule: the
// client decides whether it can speak it).
func negotiate(requested string) string {
	if slices.Contains(legacyVersions, requested) {
		return requested
	}
	return legacyVersions[0]
}

// serveInitialize answers initialize: serverInfo and instructions from the
// upstream, its capabilities plus what the sidecar and catalog add.
func (s *Server) serveInitialize(w http.ResponseWriter, r *http.Request, req *request) {
	if req.isNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if req.params == nil || json.Unmarshal(req.params, &p) != nil {
		s.failReq(w, req, newErr(http.StatusOK, codeInvalidParams, "Invalid params: initialize requires params.protocolVersion and params.capabilities"))
		return
	}
	info, err := s.upstreamInfoFor(r.Context())
	if err != nil {
		if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
			return
		}
		s.failReq(w, req, newErr(http.StatusOK, codeInternalError, "Internal error: upstream unavailable"))
		return
	}
	caps, err := mergedCapabilities(info.capsRaw, s.opts.Overlay != nil)
	if err != nil {
		s.failReq(w, req, newErr(http.StatusOK, codeInternalError, "Internal error: upstream capabilities unusable"))
		return
	}
	serverInfo := info.serverInfo
	if serverInfo == nil {
		serverInfo = sidecarClientInfo
	}
	version := negotiate(p.ProtocolVersion)
	res := struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions,omitempty"`
	}{version, caps, serverInfo, info.instructions}
	b, _ := json.Marshal(res)
	s.writeResult(w, req, b)
}

// serveAccepted answers a notification the sidecar consumes.
func (s *Server) serveAccepted(w http.ResponseWriter, _ *http.Request, _ *request) {
	w.WriteHeader(http.StatusAccepted)
}

// serveEmpty answers ping and logging/setLevel with an empty result.
func (s *Server) serveEmpty(w http.ResponseWriter, _ *http.Request, req *request) {
	if req.isNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.writeResult(w, req, []byte(`{}`))
}

// serveSubscribe answers resources/subscribe and resources/unsubscribe.
func (s *Server) serveSubscribe(w http.ResponseWriter, _ *http.Request, req *request) {
	if req.isNotification() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.failReq(w, req, newErr(http.StatusOK, codeMethodNotFound, "Method not found: "+req.method+" needs a session"))
}

var _ = context.Background
