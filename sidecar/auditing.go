package sidecar

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/access"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// The audit trail (docs/audit.md). The catalog's Audit says what is audited and where the
// records go; it is read per request, so an edit applies with the next request. A request the
// audit covers gets an auditWriter right after it is decoded (ServeHTTP), and its one record
// is written when its handler returns (auditWriter.finish), whichever generation of client
// sent it and whichever step answered it. The steps note on the way what only they know: the
// decision (deny, at the catalog step), the name the upstream got (routedAs), that the request
// went upstream (forwardOnce), the answer (fail, noteResponse, an input round). Emitting hands
// the record to the sinks' queues of the catalog's Audit (audit.Trail) and never waits.

// maxAuditNameBytes bounds the name a record keeps (a client's free text when nobody serves it).
const maxAuditNameBytes = 1024

// deniable reports the methods the choke point may refuse on access grounds: with denials
// audited, their requests are watched whatever the audited methods.
func deniable(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read", "completion/complete", "resources/subscribe":
		return true
	}
	return false
}

// watches reports whether requests of method get an auditWriter: their method is audited, or
// they may be denied and denials are.
func watches(st *audit.State, method string) bool {
	return st.Config().Audits(method) || st.Config().Denials && deniable(method)
}

// auditedDenial reports whether the request was refused on access grounds and denials are
// audited.
func (w *auditWriter) auditedDenial() bool {
	return w.st.Config().Denials && w.reason != "" && w.reason != audit.ReasonInvalid
}

// startAudit returns the auditWriter of a request the catalog's audit covers, or nil.
func (s *Server) startAudit(w http.ResponseWriter, r *http.Request, req *request) *auditWriter {
	if s.opts.Overlay == nil || req.isNotification() {
		return nil
	}
	c, rev := s.opts.Overlay.Catalog()
	st := s.audit.State(c.Audit)
	if st == nil || !watches(st, req.method) {
		return nil
	}
	aw := &auditWriter{ResponseWriter: w, s: s, st: st, c: c, rev: rev, r: r, req: req, start: time.Now()}
	aw.name = truncateString(auditName(req), maxAuditNameBytes)
	if req.legacy {
		// toModern replaces the header with the modern revision.
		aw.version = wire.HeaderValue(r.Header, protocol.HeaderProtocolVersion)
	}
	return aw
}

// auditName is the tool or prompt name, or the resource URI, a request names.
func auditName(req *request) string {
	switch req.method {
	case "tools/call", "prompts/get":
		n, _ := paramString(req, "name")
		return n
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		u, _ := paramString(req, "uri")
		return u
	case "completion/complete":
		ref, _, _ := wire.Field(req.params, "ref")
		for _, k := range []string{"name", "uri"} {
			if v, ok, _ := wire.Field(ref, k); ok {
				n, _ := wire.StringValue(v)
				return n
			}
		}
	}
	return ""
}

// auditWriter is an audited request's response writer: what the steps noted, and its record
// written by finish. It is used by the request's handler goroutine only.
type auditWriter struct {
	http.ResponseWriter
	s     *Server
	st    *audit.State
	c     *catalog.Catalog
	rev   string
	r     *http.Request
	req   *request
	start time.Time

	name    string // as the client sent it
	version string // a 2025-era request's MCP-Protocol-Version header

	reason       string // a refusal's audit reason; "" while allowed
	upstreamName string // the name the upstream got, when the catalog renamed it
	sent         bool   // the request went to the upstream

	status        int  // the HTTP status written
	eventStream   bool // the answer is an SSE stream
	code          int64
	result        bool // a JSON-RPC result was relayed
	isError       bool
	inputRequired bool
	rounds        int
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *auditWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.eventStream = wire.IsEventStream(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// auditFrom returns the auditWriter behind w when the request is audited.
func auditFrom(w http.ResponseWriter) *auditWriter {
	if tw, ok := w.(*tracing.RequestWriter); ok {
		w = tw.ResponseWriter
	}
	aw, _ := w.(*auditWriter)
	return aw
}

// deny notes that the choke point refused the request on access grounds (an audit Reason*).
func (s *Server) deny(w http.ResponseWriter, reason string) {
	if reason != audit.ReasonInvalid {
		s.m.AccessDenied.WithLabelValues(reason).Inc()
	}
	if aw := auditFrom(w); aw != nil {
		aw.reason = reason
	}
}

// denyListen notes a subscriptions/listen refused because the caller may not read uri (the
// first of the URIs it was refused): a listen has no auditWriter, it streams.
func (s *Server) denyListen(r *http.Request, req *request, uri string, e *wire.Error) {
	s.m.AccessDenied.WithLabelValues(audit.ReasonNotGranted).Inc()
	s.auditRefusal(r, req, audit.ReasonNotGranted, uri, e.Code)
}

// auditUnauthenticated notes a request answered 401 (no token, or one not valid). Its body
// was not read: the method and name are those of the Mcp-Method and Mcp-Name headers a
// 2026-07-28 client sends, if any.
func (s *Server) auditUnauthenticated(r *http.Request, noToken bool) {
	reason := audit.ReasonInvalidToken
	if noToken {
		reason = audit.ReasonNoToken
	}
	req := &request{method: truncateString(wire.HeaderValue(r.Header, protocol.HeaderMethod), maxAuditNameBytes)}
	s.auditRefusal(r, req, reason, wire.HeaderValue(r.Header, protocol.HeaderName), wire.CodeInvalidRequest)
}

// auditRefusal writes the record of a request refused outside the audited path (ServeHTTP's
// auditWriter), when the catalog audits denials.
func (s *Server) auditRefusal(r *http.Request, req *request, reason, name string, code int64) {
	if s.opts.Overlay == nil {
		return
	}
	c, rev := s.opts.Overlay.Catalog()
	st := s.audit.State(c.Audit)
	if st == nil || !st.Config().Denials {
		return
	}
	aw := &auditWriter{s: s, st: st, c: c, rev: rev, r: r, req: req, start: time.Now(), reason: reason, code: code}
	aw.name = truncateString(name, maxAuditNameBytes)
	aw.version = wire.HeaderValue(r.Header, protocol.HeaderProtocolVersion)
	aw.finish()
}

// routedAs notes the name the catalog sends a call to the upstream with (a rename).
func routedAs(w http.ResponseWriter, upstreamName string) {
	if aw := auditFrom(w); aw != nil {
		aw.upstreamName = upstreamName
	}
}

// noteSent notes that the request goes to the upstream.
func noteSent(w http.ResponseWriter) {
	if aw := auditFrom(w); aw != nil {
		aw.sent = true
	}
}

// noteError notes the JSON-RPC error the request is answered with.
func noteError(w http.ResponseWriter, e *wire.Error) {
	if tw := tracing.From(w); tw != nil {
		tw.RecordError(e.Code, e.Message)
	}
	if aw := auditFrom(w); aw != nil {
		aw.code = e.Code
	}
}

// auditError notes the JSON-RPC error of an answer written as an event on a started stream
// (which spans do not record).
func auditError(w http.ResponseWriter, e *wire.Error) {
	if aw := auditFrom(w); aw != nil {
		aw.code = e.Code
	}
}

// noteResponse notes the upstream's JSON-RPC response the sidecar relays: its error, or a
// result and whether it is a tool error or input_required.
func noteResponse(w http.ResponseWriter, msg []byte) {
	if tw := tracing.From(w); tw != nil {
		tw.ObserveResponse(msg)
	}
	aw := auditFrom(w)
	if aw == nil {
		return
	}
	if raw, ok, _ := wire.Field(msg, "error"); ok {
		var e struct {
			Code int64 `json:"code"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Code != 0 {
			aw.code = e.Code
		} else {
			aw.code = wire.CodeInternalError
		}
		return
	}
	res, ok, _ := wire.Field(msg, "result")
	if !ok {
		return
	}
	aw.result = true
	if v, ok, _ := wire.Field(res, "isError"); ok && string(v) == "true" {
		aw.isError = true
	}
	if v, ok, _ := wire.Field(res, "resultType"); ok {
		rt, _ := wire.StringValue(v)
		aw.inputRequired = rt == protocol.ResultInputRequired
	}
}

// noteInputRound notes an input_required answer the sidecar relays to a 2025-era client as
// its own requests (legacyinput.go).
func noteInputRound(w http.ResponseWriter) {
	if aw := auditFrom(w); aw != nil {
		aw.rounds++
	}
}

// finish writes the request's record (when its method is audited, or it was denied and
// denials are).
func (w *auditWriter) finish() {
	if !w.st.Config().Audits(w.req.method) && !w.auditedDenial() {
		return
	}
	req := w.req
	rec := &audit.Record{
		Schema:          audit.Schema,
		Time:            w.start.UTC(),
		Server:          audit.Server{Namespace: w.c.Server.Namespace, Name: w.c.Server.Name},
		Pod:             w.s.audit.Pod(),
		Method:          req.method,
		Name:            w.name,
		CatalogRevision: w.rev,
		DurationMs:      float64(time.Since(w.start).Microseconds()) / 1000,
		RequestID:       bytes.Clone(req.id),
		TraceID:         w.traceID(),
	}
	id := authn.FromContext(w.r.Context())
	if id != nil {
		rec.Caller = &audit.Caller{Subject: id.Subject, ServiceAccount: id.ServiceAccount, Groups: id.Groups, Issuer: id.Issuer}
	}
	switch {
	case req.session != nil:
		rec.ProtocolVersion = req.session.Version()
	case req.legacy:
		rec.ProtocolVersion = w.version
	default:
		rec.ProtocolVersion = cmp.Or(req.metaVersion, w.version)
	}
	if w.sent {
		rec.UpstreamName = w.upstreamName
		if rec.UpstreamName == "" {
			rec.UpstreamName = w.name
		}
	}
	reason := w.reason
	if reason == "" && !w.sent && w.code == wire.CodeInvalidRequest {
		reason = audit.ReasonInvalid // refused before any decision (a 2025-era session not found)
	}
	if reason == "" {
		rec.Decision = audit.Decision{Allowed: true, Reason: audit.ReasonAllowed, Policy: w.policy(id)}
	} else {
		rec.Decision = audit.Decision{Reason: reason}
	}
	switch {
	case w.code != 0:
		rec.Outcome = audit.Outcome{Status: audit.StatusError, ErrorCode: int(w.code)}
	case w.result, w.status != 0 && w.status < 400 && !w.eventStream:
		// A relayed result, or one the sidecar or the catalog built.
		rec.Outcome = audit.Outcome{Status: audit.StatusResult, IsError: w.isError, InputRequired: w.inputRequired}
	case w.status >= 400:
		rec.Outcome = audit.Outcome{Status: audit.StatusError}
	default:
		// Nothing answered: the client went away, or cancelled the call.
		rec.Outcome = audit.Outcome{Status: audit.StatusCancelled}
	}
	rec.Outcome.InputRequiredRounds = w.rounds
	if w.st.Redactor().Keeps() && (req.method == "tools/call" || req.method == "prompts/get") {
		if raw, ok, _ := wire.Field(req.params, "arguments"); ok {
			rec.Arguments, rec.ArgumentsTruncated = w.st.Redactor().Arguments(raw)
		}
	}
	w.st.Emit(rec)
}

// policy names the access policy rule that let the request through (none without policies).
func (w *auditWriter) policy(id *authn.Identity) string {
	if w.c.Access == nil {
		return ""
	}
	switch w.req.method {
	case "tools/call":
		return access.Granting(w.c.Access, id, access.Tools, w.name)
	case "prompts/get":
		return access.Granting(w.c.Access, id, access.Prompts, w.name)
	case "resources/read":
		return access.Granting(w.c.Access, id, access.Resources, w.name)
	}
	return ""
}

// traceID is the request's trace: its span's when sampled, else the one the client sent
// (params._meta traceparent, else the header), if any.
func (w *auditWriter) traceID() string {
	if w.req.traceCtx != nil {
		if sc := trace.SpanContextFromContext(w.req.traceCtx); sc.HasTraceID() {
			return sc.TraceID().String()
		}
	}
	if v, ok, _ := wire.Field(w.req.meta, "traceparent"); ok {
		tp, _ := wire.StringValue(v)
		if t := tracing.TraceIDOf(tp); t != "" {
			return t
		}
	}
	return tracing.TraceIDOf(wire.HeaderValue(w.r.Header, "Traceparent"))
}
