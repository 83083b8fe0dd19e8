package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is where the request path meets the 2025-era client generation
// (package sidecar/legacy, which owns the sessions, the translation, the
// calls in flight and the input relay): the methods the sidecar answers for
// 2025-era clients (initialize, ping, logging/setLevel,
// resources/subscribe|unsubscribe, notifications/cancelled), their GET
// streams and DELETE, and the turn into the modern shape before the choke
// point (Server.dispatch), so that the catalog holds whatever revision the
// client speaks and the upstream is always spoken to in the modern
// revision. Answers go back in the legacy shape: no resultType, ttlMs or
// cacheScope, and JSON-RPC errors with HTTP 200.

// serveLegacy answers one 2025-era POST.
func (s *Server) serveLegacy(w http.ResponseWriter, r *http.Request, req *request) {
	spec := req.spec
	if req.method != "initialize" {
		sess, e := s.legacy.SessionOf(r)
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
		caps = req.session.UpstreamCaps()
		if l := s.legacy.Level(req.session); l != "" {
			level = l
		}
	}
	if e := toModern(r, req, caps, level); e != nil {
		s.failReq(w, req, e)
		return
	}
	s.dispatch(w, r, req)
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

// finish is what every response leaving the sidecar for a request passes:
// stamped for a modern client, turned into the legacy shape for a 2025-era
// one.
func (s *Server) finish(req *request, msg []byte) []byte {
	if req.legacy {
		return legacy.Result(req.id, legacy.WithClientID(req.id, req.upstreamID, msg))
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
		b = legacy.Result(req.id, b)
	}
	writeMessage(w, http.StatusOK, b)
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
	caps, err := s.mergedCapabilities(info)
	if err != nil {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: upstream capabilities unusable"))
		return
	}
	serverInfo := info.ServerInfo
	if serverInfo == nil {
		serverInfo = upstream.ClientInfo
	}
	version := legacy.Negotiate(p.ProtocolVersion)
	id, err := s.legacy.Mint(version, p.Capabilities, legacy.CallerBinding(authn.FromContext(r.Context())))
	if err != nil {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: "+err.Error()))
		return
	}
	w.Header().Set(legacy.HeaderSessionID, id)
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
	if !ok || !legacy.IsLogLevel(level) {
		s.failReq(w, req, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency"))
		return
	}
	if req.session != nil {
		s.legacy.SetLevel(req.session, level)
	}
	s.writeResult(w, req, []byte(`{}`))
}

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
		s.m.SubscriptionRefused(hub.RefusedURI)
		s.failReq(w, req, uriError(http.StatusOK))
		return
	}
	if req.method == "resources/subscribe" && !s.requestGrant(r).Resource(uri) {
		// As a read of it would be answered.
		s.deny(w, audit.ReasonNotGranted)
		s.failReq(w, req, errResourceNotFound(uri))
		return
	}
	if req.session == nil {
		s.failReq(w, req, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: "+req.method+" needs a session (Mcp-Session-Id from initialize)"))
		return
	}
	if e := s.legacy.Subscribe(req.session, uri, req.method == "resources/subscribe"); e != nil {
		s.failReq(w, req, e)
		return
	}
	s.writeResult(w, req, []byte(`{}`))
}

// serveLegacyGet opens a session's notification stream: list_changed for
// every list the server advertises (no opt-in in 2025) and
// resources/updated for the URIs the session subscribed to, from the same
// hub and diff as listen streams. A 2025-11-25 session gets a priming
// event (an id, empty data); a reconnect (Last-Event-ID) is told that
// every list may have changed, since what happened while it was away is
// not kept. The drain ends it with a retry hint.
func (s *Server) serveLegacyGet(w http.ResponseWriter, r *http.Request) {
	if !legacy.AcceptsEventStream(r.Header) {
		s.fail(w, nil, wire.NewError(http.StatusNotAcceptable, wire.CodeInvalidRequest, "Not Acceptable: GET must accept text/event-stream"))
		return
	}
	sess, e := s.legacy.SessionOf(r)
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
	forget, refuse := s.legacy.OpenStream(sess, st)
	if refuse != nil {
		s.fail(w, nil, refuse)
		return
	}
	first := s.legacy.FirstEvents(sess, len(r.Header["Last-Event-Id"]) > 0, kinds)
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
	sess, e := s.legacy.SessionOf(r)
	if e == nil && sess == nil {
		e = wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header is required")
	}
	if e != nil {
		s.fail(w, nil, e)
		return
	}
	s.legacy.End(sess)
	w.WriteHeader(http.StatusNoContent)
}

// serveCancelled answers a 2025-era client's notifications/cancelled: the
// named call of its session, if in flight on this replica, is cancelled
// (its upstream request closed). Always 202: the notification may name a
// request that already finished, and the spec says to ignore it then.
func (s *Server) serveCancelled(w http.ResponseWriter, _ *http.Request, req *request) {
	if req.session != nil {
		if raw, ok, _ := wire.Field(req.params, "requestId"); ok && wire.ValidID(raw) {
			if s.legacy.Cancel(req.session, raw) {
				s.log.Debug("Call cancelled by the client", "requestId", string(raw))
			}
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// serveClientResponse takes a 2025-era client's JSON-RPC response to a
// request the sidecar sent it (elicitation/create, sampling/createMessage,
// roots/list) and hands it to the call waiting for it: 202. A late answer
// to a request this replica sent (the call timed out or was cancelled, and
// the client was told so) is accepted and dropped: refusing it would break
// some clients' whole connection. A response to anything else (a request
// another replica sent, an id the sidecar never used) is refused with 400,
// as the 2025 transport says for input a server cannot accept.
func (s *Server) serveClientResponse(w http.ResponseWriter, r *http.Request, req *request) {
	sess, e := s.legacy.SessionOf(r)
	if e == nil && sess == nil {
		e = wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: a response needs the Mcp-Session-Id of the session whose request it answers")
	}
	if e != nil {
		s.fail(w, nil, e)
		return
	}
	if !s.legacy.Answer(sess, req.id, req.body) {
		s.fail(w, nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest,
			"Bad Request: no request with id "+string(req.id)+" of this session waits for an answer on this server (it timed out, was cancelled, or was sent by another replica)"))
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// forwardLegacy forwards a call of a 2025-era session: cancellable by the
// client's notifications/cancelled, and answered through input rounds when
// the upstream asks for input.
func (s *Server) forwardLegacy(w http.ResponseWriter, r *http.Request, req *request) {
	ctx, done := s.legacy.Track(r.Context(), req.session, req.id)
	defer done()
	lc := &legacy.Call{Ctx: ctx, MRTR: req.spec != nil && req.spec.inputRequired}
	for round := 1; ; round++ {
		lc.Inputs = nil
		s.forwardOnce(w, r, req, lc)
		if ctx.Err() != nil && errors.Is(context.Cause(ctx), legacy.ErrCancelledByClient) && r.Context().Err() == nil {
			// 2025: no response for a cancelled request. The POST ends as
			// an empty event stream, which clients read as "no answer".
			if !lc.Started {
				legacy.StartEvents(w, req.legacy)
			}
			return
		}
		if lc.Inputs == nil {
			return
		}
		if round > legacy.MaxInputRounds {
			s.failCall(w, req, lc, wire.NewError(http.StatusOK, wire.CodeInternalError,
				"Internal error: the MCP server asked for client input more than "+strconv.Itoa(legacy.MaxInputRounds)+" times in one call"))
			return
		}
		responses, state, e := s.legacy.AskClient(w, r, req.session, lc, func() *wire.Error {
			if s.abortedByDrain(r) {
				return errDrained()
			}
			return nil
		})
		if e != nil {
			if e != legacy.ErrNoAnswer {
				s.failCall(w, req, lc, e)
			}
			return
		}
		if e := retryWithInput(req, responses, state, round); e != nil {
			s.failCall(w, req, lc, e)
			return
		}
	}
}

// failCall answers a call with an error: an event when its stream is
// started, else as failReq does.
func (s *Server) failCall(w http.ResponseWriter, req *request, lc *legacy.Call, e *wire.Error) {
	if lc != nil && lc.Started {
		s.m.CountError(e.Code)
		auditError(w, e)
		_ = legacy.WriteEvent(w, wire.ErrorBody(req.id, e), false)
		return
	}
	s.failReq(w, req, e)
}

// upstreamSeesParamHeaders reports whether the upstream gets a client's
// Mcp-Param-* headers, and so validates them itself: a 2026-07-28 server
// does; a 2025-era one (over HTTP, or stdio behind the bridge) is sent
// neither them nor any other Mcp-* header (sidecar/upstream/legacy.go). When the
// upstream is not known yet the sidecar validates.
func (s *Server) upstreamSeesParamHeaders(ctx context.Context) bool {
	info, err := s.upstreamInfoFor(ctx)
	return err == nil && info.ProtocolVersion == protocol.Version
}

// toModern rewrites a 2025-era request into the modern shape in place
// (legacy.ToModern: the _meta claim spliced into params) and gives it the
// headers a modern upstream requires (legacy.ModernHeaders).
func toModern(r *http.Request, req *request, clientCaps json.RawMessage, logLevel string) *wire.Error {
	body, e := legacy.ToModern(req.body, req.params, req.meta, clientCaps, logLevel)
	if e != nil {
		return e
	}
	req.body = body
	req.params, _, _ = wire.Field(body, "params")
	req.meta, _, _ = wire.Field(req.params, "_meta")
	req.metaVersion, req.hasVersion = protocol.Version, true

	var method []string
	if spec := req.spec; spec != nil && spec.methodValue != nil {
		method = spec.methodValue
	} else {
		method = []string{req.method}
	}
	var name []string
	if nm := req.nameMember(); nm != "" {
		if v, ok := paramString(req, nm); ok {
			name = []string{mcpHeaderValue(v)}
		}
	}
	legacy.ModernHeaders(r.Header, method, name)
	return nil
}

// retryWithInput rewrites a call for its next upstream attempt
// (legacy.RetryWithInput); finish gives the answer the client's id back.
func retryWithInput(req *request, responses, state json.RawMessage, round int) *wire.Error {
	body, upID, e := legacy.RetryWithInput(req.body, req.id, responses, state, round)
	if e != nil {
		return e
	}
	req.body = body
	req.params, _, _ = wire.Field(body, "params")
	req.upstreamID = upID
	return nil
}
