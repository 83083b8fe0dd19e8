package sidecar

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
// the record to the sink's queue and never waits (audit.Sink).

// maxAuditNameBytes bounds the name a record keeps (a client's free text when nobody serves it).
const maxAuditNameBytes = 1024

// auditor keeps the sinks and the redactor of the catalog's Audit. The state is swapped whole
// when the catalog's Audit changes (a new catalog revision), under mu; requests read it with
// one atomic load.
type auditor struct {
	out    io.Writer // stdout
	queue  int       // records waiting per sink (audit.DefaultQueue when 0)
	pod    string
	dir    string // the directory an audit file must be in (catalog.AuditDir when empty)
	log    *slog.Logger
	onDrop func()

	cur    atomic.Pointer[auditState]
	mu     sync.Mutex  // guards swaps of cur, and stdout
	stdout *audit.Sink // created with the first stdout state, closed by close
	// closing counts the files being closed in the background, which close waits for.
	closing sync.WaitGroup
}

// auditState is one catalog Audit, compiled.
type auditState struct {
	cfg  *catalog.Audit // the catalog's, compared by pointer
	red  *audit.Redactor
	sink *audit.Sink // JSON lines: the file's or stdout's; nil when records go over OTLP only
	// file is the open audit file (nil: sink is the stdout sink); the state that opened it
	// hands it on to the next state with the same path, and the last one closes it.
	file *os.File
	// otlp exports records to cfg.OTLPEndpoint; handed on like file.
	otlp *audit.Sink
}

// emit hands r to the state's sinks.
func (st *auditState) emit(r *audit.Record) {
	if st.sink != nil {
		st.sink.Emit(r)
	}
	if st.otlp != nil {
		st.otlp.Emit(r)
	}
}

func newAuditor(out io.Writer, pod string, log *slog.Logger, onDrop func()) *auditor {
	if out == nil {
		out = os.Stdout
	}
	return &auditor{out: out, pod: pod, log: log, onDrop: onDrop}
}

// state is the compiled Audit of catalog c: nil when c has none.
func (a *auditor) state(c *catalog.Catalog) *auditState {
	st := a.cur.Load()
	if st == nil && c.Audit == nil {
		return nil
	}
	if st != nil && st.cfg == c.Audit {
		return st
	}
	return a.swap(c.Audit)
}

// swap makes cfg's state the current one, reusing the sink when the destination is the same,
// and closes the previous file sink otherwise (in the background: Close writes what is queued).
// A record emitted to a sink being closed is dropped and counted.
func (a *auditor) swap(cfg *catalog.Audit) *auditState {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.cur.Load()
	if (old == nil && cfg == nil) || (old != nil && old.cfg == cfg) {
		return old
	}
	var next *auditState
	if cfg != nil {
		red, err := audit.NewRedactor(audit.Mode(cfg.Arguments), cfg.Redact, 0)
		if err != nil {
			// Decode validated the paths; should the redactor still refuse them, no argument is kept.
			a.log.Error("Audit arguments cannot be redacted as configured; records keep no arguments", "err", err)
			red, _ = audit.NewRedactor(audit.ModeOff, nil, 0)
		}
		next = &auditState{cfg: cfg, red: red}
		a.openFile(old, next)
		a.openOTLP(old, next)
		if next.sink == nil && next.otlp == nil {
			next.sink = a.stdoutSink()
		}
		a.log.Info("Auditing requests", "methods", cfg.Methods, "denials", cfg.Denials, "arguments", cfg.Arguments,
			"file", cfg.File, "otlpEndpoint", cfg.OTLPEndpoint)
	} else {
		a.log.Info("Auditing off")
	}
	a.cur.Store(next)
	if old != nil && old.file != nil && (next == nil || next.file != old.file) {
		a.closing.Go(func() { closeAuditFile(a.log, old) })
	}
	if old != nil && old.otlp != nil && (next == nil || next.otlp != old.otlp) {
		a.closing.Go(func() { closeOTLP(a.log, old.otlp) })
	}
	return next
}

// openFile gives next the file sink its Audit names: old's when the path is the same, else
// a newly opened file. A file outside the audit directory is refused, and one that cannot be
// opened is left out: either way the records go to stdout (openOTLP aside), said in the log.
func (a *auditor) openFile(old, next *auditState) {
	file := next.cfg.File
	switch {
	case file == "":
		return
	case old != nil && old.file != nil && old.file.Name() == file:
		next.sink, next.file = old.sink, old.file
		return
	case !inDir(cmp.Or(a.dir, catalog.AuditDir), file):
		a.log.Error("Refusing an audit file outside the audit directory; audit records go to stdout", "file", file,
			"dir", cmp.Or(a.dir, catalog.AuditDir))
	default:
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			a.log.Error("Opening the audit file failed; audit records go to stdout", "file", file, "err", err)
			break
		}
		next.sink, next.file = audit.NewSink(f, a.queue, a.onDrop), f
		return
	}
	next.sink = a.stdoutSink()
}

// stdoutSink is the one sink of stdout, started with its first use; a.mu is held.
func (a *auditor) stdoutSink() *audit.Sink {
	if a.stdout == nil {
		a.stdout = audit.NewSink(a.out, a.queue, a.onDrop)
	}
	return a.stdout
}

// inDir reports whether the clean, absolute path file lies below dir.
func inDir(dir, file string) bool {
	rel, err := filepath.Rel(dir, file)
	return err == nil && filepath.IsAbs(file) && filepath.Clean(file) == file && rel != "." && rel != ".." &&
		!strings.HasPrefix(rel, "../")
}

// openOTLP gives next the OTLP sink its Audit names: old's when the endpoint is the same.
func (a *auditor) openOTLP(old, next *auditState) {
	ep := next.cfg.OTLPEndpoint
	switch {
	case ep == "":
	case old != nil && old.otlp != nil && old.cfg.OTLPEndpoint == ep:
		next.otlp = old.otlp
	default:
		s, err := audit.NewOTLPSink(ep, a.pod, a.queue, a.onDrop)
		if err != nil {
			a.log.Error("Starting the audit OTLP export failed", "otlpEndpoint", ep, "err", err)
			return
		}
		next.otlp = s
	}
}

func closeOTLP(log *slog.Logger, s *audit.Sink) {
	if err := s.Close(); err != nil {
		log.Error("Exporting audit records over OTLP failed", "err", err)
	}
}

func closeAuditFile(log *slog.Logger, st *auditState) {
	err := st.sink.Close()
	if cerr := st.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Error("Writing the audit file failed", "file", st.file.Name(), "err", err)
	}
}

// close writes what is queued and closes the sinks (at shutdown).
func (a *auditor) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.closing.Wait()
	st := a.cur.Swap(nil)
	if st != nil && st.file != nil {
		closeAuditFile(a.log, st)
	}
	if st != nil && st.otlp != nil {
		closeOTLP(a.log, st.otlp)
	}
	if a.stdout != nil {
		if err := a.stdout.Close(); err != nil {
			a.log.Error("Writing audit records to stdout failed", "err", err)
		}
	}
}

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
func (st *auditState) watches(method string) bool {
	return st.cfg.Audits(method) || st.cfg.Denials && deniable(method)
}

// auditedDenial reports whether the request was refused on access grounds and denials are
// audited.
func (w *auditWriter) auditedDenial() bool {
	return w.st.cfg.Denials && w.reason != "" && w.reason != audit.ReasonInvalid
}

// startAudit returns the auditWriter of a request the catalog's audit covers, or nil.
func (s *Server) startAudit(w http.ResponseWriter, r *http.Request, req *request) *auditWriter {
	if s.opts.Overlay == nil || req.isNotification() {
		return nil
	}
	c, rev := s.opts.Overlay.Catalog()
	st := s.audit.state(c)
	if st == nil || !st.watches(req.method) {
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
	st    *auditState
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
	st := s.audit.state(c)
	if st == nil || !st.cfg.Denials {
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
	if !w.st.cfg.Audits(w.req.method) && !w.auditedDenial() {
		return
	}
	req := w.req
	rec := &audit.Record{
		Schema:          audit.Schema,
		Time:            w.start.UTC(),
		Server:          audit.Server{Namespace: w.c.Server.Namespace, Name: w.c.Server.Name},
		Pod:             w.s.audit.pod,
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
	if w.st.red.Keeps() && (req.method == "tools/call" || req.method == "prompts/get") {
		if raw, ok, _ := wire.Field(req.params, "arguments"); ok {
			rec.Arguments, rec.ArgumentsTruncated = w.st.red.Arguments(raw)
		}
	}
	w.st.emit(rec)
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
		if t := traceIDOf(tp); t != "" {
			return t
		}
	}
	return traceIDOf(wire.HeaderValue(w.r.Header, "Traceparent"))
}

// traceIDOf is the trace id of a W3C traceparent (version-traceid-parentid-flags), or "".
func traceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	id, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return ""
	}
	return id.String()
}
