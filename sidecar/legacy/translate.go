package legacy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
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

// metaKeyLogLevel is the modern _meta key that carries a request's log
// level (go-sdk's MetaKeyLogLevel, deprecated with logging itself by
// SEP-2577; 2025-era clients still use logging).
const metaKeyLogLevel = "io.modelcontextprotocol/logLevel"

// headerSessionID is the 2025-era session header.
const headerSessionID = "Mcp-Session-Id"

// legacySession returns the verified session of a 2025-era request: nil
// without the header; an error answered with 404 (spec: the client then
// initializes again) when the id is not one of ours, has expired, or is
// bound to another caller than the request's, and 400 when the header is
// repeated.
func (s *Server) legacySession(r *http.Request) (*legacySession, *wire.Error) {
	vs := r.Header[headerSessionID]
	switch len(vs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header given more than once")
	}
	sess, err := s.sessions.open(vs[0])
	if err == nil && !sess.boundTo(callerBinding(authn.FromContext(r.Context()))) {
		// Another caller's session: as if this server had never issued it.
		err = errSessionInvalid
	}
	if err == nil && s.states.isEnded(sess.key) {
		err = errSessionEnded
	}
	if err != nil {
		return nil, wire.NewError(http.StatusNotFound, wire.CodeInvalidRequest, "Session not found: "+err.Error()+"; initialize a new session")
	}
	return sess, nil
}

// serveLegacy answers one 2025-era POST.
func (s *Server) serveLegacy(w http.ResponseWriter, r *http.Request, req *request) {
	spec := req.spec
	if req.method != "initialize" {
		sess, e := s.legacySession(r)
		if e != nil {
			s.fail(w, req.id, e)
			return
		}
		req.session = sess
	}
	if req.isNotification() {
		s.serveNotification(w, r, req)
		return
	}
	if spec != nil && spec.legacyServe != nil {
		spec.legacyServe(s, w, r, req)
		return
	}
	if spec != nil && spec.era == eraModern {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeMethodNotFound, "Method not found: "+req.method+" is part of protocol revision "+protocol.Version+" only"))
		return
	}
	var caps json.RawMessage
	level := "info" // what a 2025-era server assumes until logging/setLevel
	if req.session != nil {
		caps = req.session.upCaps
		if l := s.states.level(req.session.key); l != "" {
			level = l
		}
	}
	if e := s.toModern(r, req, caps, level); e != nil {
		s.failReq(w, req, e)
		return
	}
	s.dispatch(w, r, req)
}

// toModern rewrites a 2025-era request into the modern shape in place: the
// _meta claim (protocol version, the client's capabilities) spliced into
// params, and the headers a modern upstream requires. Members the client
// sent (progressToken, arguments, …) are kept byte for byte.
func (s *Server) toModern(r *http.Request, req *request, clientCaps json.RawMessage, logLevel string) *wire.Error {
	if len(clientCaps) == 0 {
		clientCaps = json.RawMessage(`{}`)
	}
	claim := []wire.KV{
		{Key: mcp.MetaKeyProtocolVersion, Val: []byte(`"` + protocol.Version + `"`)},
		{Key: mcp.MetaKeyClientCapabilities, Val: clientCaps},
		{Key: metaKeyLogLevel, Val: wire.JSONString(logLevel)},
	}
	if req.meta != nil && !wire.IsObject(req.meta) {
		return wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: _meta must be an object")
	}
	if req.params != nil && !wire.IsObject(req.params) {
		return wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: params must be an object")
	}
	var nmeta []byte
	if req.meta == nil {
		// The usual case: the claim is the whole _meta.
		nmeta = make([]byte, 0, len(clientCaps)+len(logLevel)+128)
		for i, c := range claim {
			if i == 0 {
				nmeta = append(nmeta, '{')
			} else {
				nmeta = append(nmeta, ',')
			}
			nmeta = append(append(append(append(nmeta, '"'), c.Key...), '"', ':'), c.Val...)
		}
		nmeta = append(nmeta, '}')
	} else {
		var err error
		if nmeta, err = wire.SetMembers(req.meta, claim, nil); err != nil {
			return wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: _meta must be an object")
		}
	}
	// One splice into the body: everything the client sent stays where it
	// was, byte for byte.
	body := make([]byte, 0, len(req.body)+len(nmeta)+24)
	ps, pe, hasParams := wire.Span(req.body, "params")
	switch {
	case !hasParams:
		end := bytes.LastIndexByte(req.body, '}')
		if end < 0 {
			return wire.NewError(http.StatusOK, wire.CodeInvalidRequest, "Invalid Request: body must be a JSON-RPC request object")
		}
		body = append(body, req.body[:end]...)
		body = append(body, `,"params":{"_meta":`...)
		body = append(body, nmeta...)
		body = append(body, '}')
		body = append(body, req.body[end:]...)
	case req.meta != nil:
		params := req.body[ps:pe]
		ms, me, _ := wire.Span(params, "_meta")
		body = append(body, req.body[:ps]...)
		body = append(body, params[:ms]...)
		body = append(body, nmeta...)
		body = append(body, params[me:]...)
		body = append(body, req.body[pe:]...)
	default:
		params := req.body[ps:pe]
		open := bytes.IndexByte(params, '{')
		body = append(body, req.body[:ps]...)
		body = append(body, `{"_meta":`...)
		body = append(body, nmeta...)
		if rest := params[open+1:]; len(bytes.TrimLeft(rest, " \t\r\n")) > 0 && bytes.TrimLeft(rest, " \t\r\n")[0] != '}' {
			body = append(body, ',')
		}
		body = append(body, params[open+1:]...)
		body = append(body, req.body[pe:]...)
	}
	req.body = body
	req.params, _, _ = wire.Field(body, "params")
	req.meta, _, _ = wire.Field(req.params, "_meta")
	req.metaVersion, req.hasVersion = protocol.Version, true

	h := r.Header
	delete(h, "Mcp-Session-Id")
	delete(h, "Last-Event-Id")
	h[protocol.HeaderProtocolVersion] = modernVersionValue
	if spec := req.spec; spec != nil && spec.methodValue != nil {
		h[protocol.HeaderMethod] = spec.methodValue
	} else {
		h[protocol.HeaderMethod] = []string{req.method}
	}
	h["Accept"] = acceptBothValue
	delete(h, protocol.HeaderName)
	if nm := req.nameMember(); nm != "" {
		if v, ok := paramString(req, nm); ok {
			h[protocol.HeaderName] = []string{mcpHeaderValue(v)}
		}
	}
	return nil
}

// Header values the translation sets on every request. Shared, read-only:
// len == cap, so an append elsewhere copies.
var (
	modernVersionValue = []string{protocol.Version}
	acceptBothValue    = []string{"application/json, text/event-stream"}
)

// upstreamCaps are the client capabilities a translated request declares:
// the session's as the client gave them. Sampling, elicitation and roots
// included: the sidecar relays an upstream's input requests for them to the
// client (legacyinput.go).
func upstreamCaps(caps json.RawMessage) json.RawMessage {
	if !wire.IsObject(caps) {
		return nil
	}
	return caps
}

// failReq answers a request with a JSON-RPC error: for a 2025-era client
// with HTTP 200 (its transport reads JSON-RPC errors from successful
// responses; 4xx is reserved for transport and session problems).
func (s *Server) failReq(w http.ResponseWriter, req *request, e *wire.Error) {
	if req.legacy && e.Status != http.StatusOK {
		c := *e
		c.Status = http.StatusOK
		e = &c
	}
	s.fail(w, req.id, e)
}

// errInputRequired answers a 2025-era request for which the upstream asked
// for client input where the sidecar cannot relay it: a request without a
// session (the client's answer would have nowhere to go).
func errInputRequired(id json.RawMessage) []byte {
	return wire.ErrorBody(id, wire.NewError(http.StatusOK, wire.CodeInternalError,
		"Internal error: the MCP server asked the client for input (input_required: elicitation, sampling or roots); "+
			"the sidecar relays it to clients of protocol revision 2025-11-25 and earlier only within a session: initialize first"))
}

// legacyResult turns a modern response into the 2025-era shape: a
// complete result loses resultType, ttlMs and cacheScope; an
// input_required result becomes an error naming the limitation. Errors
// and anything else stay the upstream's bytes.
func legacyResult(id json.RawMessage, msg []byte) []byte {
	rs, re, ok := wire.Span(msg, "result")
	if !ok || !wire.IsObject(msg[rs:re]) {
		return msg
	}
	res := msg[rs:re]
	// One pass: is there anything to drop, and is it input_required?
	drop := 0
	inputRequired := false
	_ = wire.EachMember(res, func(m wire.Member) bool {
		switch {
		case wire.KeyIs(m.Key, "resultType"):
			drop++
			v, _ := wire.StringValue(res[m.Start:m.End])
			inputRequired = v == protocol.ResultInputRequired
		case wire.KeyIs(m.Key, "ttlMs"), wire.KeyIs(m.Key, "cacheScope"):
			drop++
		}
		return true
	})
	if inputRequired {
		return errInputRequired(id)
	}
	if drop == 0 {
		return msg
	}
	// The result rebuilt without them, straight into the answer.
	out := make([]byte, 0, len(msg))
	out = append(out, msg[:rs]...)
	out = append(out, '{')
	first := true
	err := wire.EachMember(res, func(m wire.Member) bool {
		if wire.KeyIs(m.Key, "resultType") || wire.KeyIs(m.Key, "ttlMs") || wire.KeyIs(m.Key, "cacheScope") {
			return true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, m.Key...), ':'), res[m.Start:m.End]...)
		return true
	})
	if err != nil {
		return msg
	}
	out = append(out, '}')
	return append(out, msg[re:]...)
}

// finish is what every response leaving the sidecar for a request passes:
// stamped for a modern client, turned into the legacy shape for a 2025-era
// one.
func (s *Server) finish(req *request, msg []byte) []byte {
	if req.legacy {
		return legacyResult(req.id, withClientID(req, msg))
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
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if req.params == nil || json.Unmarshal(req.params, &p) != nil {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: initialize requires params.ProtocolVersion and params.capabilities"))
		return
	}
	info, err := s.upstreamInfoFor(r.Context())
	if err != nil {
		if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
			return
		}
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: upstream unavailable"))
		return
	}
	caps, err := mergedCapabilities(info.CapsRaw, s.opts.Overlay != nil)
	if err != nil {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: upstream capabilities unusable"))
		return
	}
	serverInfo := info.ServerInfo
	if serverInfo == nil {
		serverInfo = upstream.ClientInfo
	}
	version := negotiate(p.ProtocolVersion)
	id, err := s.sessions.mint(version, p.Capabilities, callerBinding(authn.FromContext(r.Context())))
	if err != nil {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: "+err.Error()))
		return
	}
	w.Header().Set(headerSessionID, id)
	res := struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions,omitempty"`
	}{version, caps, serverInfo, info.Instructions}
	b, _ := json.Marshal(res)
	s.writeResult(w, req, b)
}

// serveEmpty answers ping and logging/setLevel with an empty result.
func (s *Server) serveEmpty(w http.ResponseWriter, _ *http.Request, req *request) {
	s.writeResult(w, req, []byte(`{}`))
}

// serveSetLevel answers logging/setLevel: the level is kept for the
// session on this replica and sent with its calls (the modern logLevel
// _meta key); a replica that has not seen it assumes info.
func (s *Server) serveSetLevel(w http.ResponseWriter, _ *http.Request, req *request) {
	level, ok := paramString(req, "level")
	if !ok || !logLevels[level] {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency"))
		return
	}
	if req.session != nil {
		s.states.mu.Lock()
		if st := s.states.getLocked(req.session); st != nil {
			st.level = level
		}
		s.states.mu.Unlock()
	}
	s.writeResult(w, req, []byte(`{}`))
}

var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}

// serveSubscribe answers resources/subscribe and resources/unsubscribe for
// a session: the URI joins (or leaves) the session's subscriptions on this
// replica, and every GET stream the session has open here. A URI over
// MaxURIBytes is Invalid params; past the session's bounds or the replica's,
// the subscribe is refused (-32603) and what the session holds stays.
func (s *Server) serveSubscribe(w http.ResponseWriter, r *http.Request, req *request) {
	uri, ok := paramString(req, "uri")
	if !ok || uri == "" {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: "+req.method+" requires params.uri"))
		return
	}
	if len(uri) > MaxURIBytes {
		s.m.refuseSubscription(refusedURI)
		s.failReq(w, req, uriError(http.StatusOK))
		return
	}
	if req.method == "resources/subscribe" && !s.requestGrant(r).Resource(uri) {
		// As a read of it would be answered.
		s.failReq(w, req, errResourceNotFound(uri))
		return
	}
	if req.session == nil {
		s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: "+req.method+" needs a session (Mcp-Session-Id from initialize)"))
		return
	}
	var e *wire.Error
	s.states.mu.Lock()
	if st := s.states.getLocked(req.session); st == nil {
		e = wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: subscription limit reached")
	} else if req.method == "resources/subscribe" {
		e = s.subscribeLocked(st, uri)
	} else if st.uris[uri] {
		cost := hub.SubscriptionBytes(uri)
		delete(st.uris, uri)
		st.bytes -= cost
		s.hub.GiveSubscriptions(1, cost)
		for _, x := range st.streams {
			s.hub.Unsubscribe(x, uri)
		}
	}
	s.states.mu.Unlock()
	if e != nil {
		s.failReq(w, req, e)
		return
	}
	s.writeResult(w, req, []byte(`{}`))
}

// subscribeLocked adds uri to a session's subscriptions and to its open GET streams, each
// taking its share of the replica's budget, or none of them (s.states.mu held; the hub's
// mutex is taken inside it, never the other way round).
func (s *Server) subscribeLocked(st *sessionState, uri string) *wire.Error {
	if st.uris[uri] {
		return nil
	}
	cost := hub.SubscriptionBytes(uri)
	if len(st.uris) >= MaxSessionSubscriptions || st.bytes+cost > MaxSessionSubscriptionBytes {
		s.m.refuseSubscription(refusedSession)
		return wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: subscription limit reached for this session (max "+
			strconv.Itoa(MaxSessionSubscriptions)+" URIs, "+strconv.Itoa(MaxSessionSubscriptionBytes)+" bytes)")
	}
	// Expired sessions' subscriptions are given back only when room is needed.
	if !s.hub.TakeSubscriptions(1, cost) && (!s.states.purgeLocked(st) || !s.hub.TakeSubscriptions(1, cost)) {
		s.m.refuseSubscription(refusedReplica)
		return errSubscriptionLimit(http.StatusOK)
	}
	for i, x := range st.streams {
		if !s.hub.Subscribe(x, uri) {
			for _, y := range st.streams[:i] {
				s.hub.Unsubscribe(y, uri)
			}
			s.hub.GiveSubscriptions(1, cost)
			s.m.refuseSubscription(refusedReplica)
			return errSubscriptionLimit(http.StatusOK)
		}
	}
	if st.uris == nil {
		st.uris = map[string]bool{}
	}
	st.uris[uri] = true
	st.bytes += cost
	return nil
}

// serveLegacyGet opens a session's notification stream: list_changed for
// every list the server advertises (no opt-in in 2025) and
// resources/updated for the URIs the session subscribed to, from the same
// hub and diff as listen streams. A 2025-11-25 session gets a priming
// event (an id, empty data); a reconnect (Last-Event-ID) is told that
// every list may have changed, since what happened while it was away is
// not kept. The drain ends it with a retry hint.
func (s *Server) serveLegacyGet(w http.ResponseWriter, r *http.Request) {
	if !acceptsEventStream(r.Header) {
		s.fail(w, nil, wire.NewError(http.StatusNotAcceptable, wire.CodeInvalidRequest, "Not Acceptable: GET must accept text/event-stream"))
		return
	}
	sess, e := s.legacySession(r)
	if e == nil && sess == nil {
		e = wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	}
	if e != nil {
		s.fail(w, nil, e)
		return
	}
	info, err := s.upstreamInfoFor(r.Context())
	if err != nil {
		s.fail(w, nil, wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError, "Internal error: upstream unavailable"))
		return
	}
	caps := s.effectiveCaps(info)
	var kinds protocol.Kind
	if caps.Tools != nil && caps.Tools.ListChanged {
		kinds |= protocol.KindTools
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		kinds |= protocol.KindPrompts
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		kinds |= protocol.KindResources
	}
	st := &hub.Stream{Legacy: true, Kinds: kinds, Caller: authn.FromContext(r.Context())}
	if st.Caller != nil {
		st.Expires = st.Caller.Expiry
	}
	// The stream holds its own copy of the session's subscriptions (in the hub's indexes), so it
	// takes its share of the replica's budget: a session's URIs times its streams is bounded.
	var refuse *wire.Error
	s.states.mu.Lock()
	state := s.states.getLocked(sess)
	if state == nil {
		refuse = wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError, "Internal error: session limit reached")
	} else {
		for u := range state.uris {
			st.URIs = append(st.URIs, u)
		}
		slices.Sort(st.URIs)
		if s.hub.Charge(st) {
			state.streams = append(state.streams, st)
		} else {
			s.m.refuseSubscription(refusedReplica)
			refuse = errSubscriptionLimit(http.StatusServiceUnavailable)
		}
	}
	s.states.mu.Unlock()
	if refuse != nil {
		s.fail(w, nil, refuse)
		return
	}
	// forget runs once the stream is over; after it no subscribe reaches the stream, so its
	// subscriptions are given back for good.
	forget := func(x *hub.Stream) {
		s.states.mu.Lock()
		if i := slices.Index(state.streams, x); i >= 0 {
			state.streams = slices.Delete(state.streams, i, i+1)
		}
		s.states.mu.Unlock()
		s.hub.Uncharge(x)
	}
	st.OnClose = forget
	var first []byte
	if sess.version >= "2025-11-25" {
		first = append(append(first, "id: "...), s.nextEventID()...)
		first = append(first, "\ndata: \n\n"...)
	}
	if len(r.Header["Last-Event-Id"]) > 0 {
		for _, k := range protocol.ListKinds {
			if kinds&k != 0 {
				first = append(first, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\""+k.Method()+"\"}\n\n"...)
			}
		}
	}
	if len(first) == 0 {
		first = []byte(": stream open\n\n")
	}
	if !s.attachStream(w, r, st, first, false, func() {
		s.fail(w, nil, wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError, "Internal error: stream limit reached"))
	}) {
		forget(st)
	}
}

// serveLegacyDelete ends a session on this replica: its GET streams here
// end and its local state is dropped. (The id stays valid on replicas that
// never saw the DELETE until it expires: no state is shared.)
func (s *Server) serveLegacyDelete(w http.ResponseWriter, r *http.Request) {
	sess, e := s.legacySession(r)
	if e == nil && sess == nil {
		e = wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	}
	if e != nil {
		s.fail(w, nil, e)
		return
	}
	s.states.mu.Lock()
	state := s.states.dropLocked(sess.key)
	s.states.endLocked(sess)
	var streams []*hub.Stream
	if state != nil {
		streams = slices.Clone(state.streams)
	}
	s.states.mu.Unlock()
	for _, x := range streams {
		s.hub.Close(x, nil)
	}
	w.WriteHeader(http.StatusNoContent)
}

// nextEventID returns a new SSE event id, unique across replicas.
func (s *Server) nextEventID() string {
	return s.eventPrefix + strconv.FormatInt(s.eventSeq.Add(1), 36)
}

func acceptsEventStream(h http.Header) bool {
	for _, v := range h["Accept"] {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			if strings.EqualFold(mt, "text/event-stream") || mt == "*/*" || strings.EqualFold(mt, "text/*") {
				return true
			}
		}
	}
	return false
}
