package sidecar

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is a request's span, on the tracer of sidecar/tracing (which
// describes what traces record and what they never do): its attributes from
// the request, the name it gets once the request was routed, the error it
// ends with, and the trace context the upstream gets.

// startSpan starts the span of one MCP request; the span's context goes
// into req (for the upstream). Only a sampled span gets its attributes and
// a tracedWriter, which records the JSON-RPC error the request ends with;
// its finish ends the span.
func (s *Server) startSpan(w http.ResponseWriter, r *http.Request, req *request) (http.ResponseWriter, *tracedWriter) {
	ctx, span := s.tr.StartRequest(r.Context(), req.method, req.meta, r.Header)
	if span == nil {
		return w, nil
	}
	req.traceCtx = ctx
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, tracing.AttrMethod.String(req.method), tracing.AttrNetTransport.String("tcp"), tracing.AttrNetProtocol.String("http"))
	if v, ok := strings.CutPrefix(r.Proto, "HTTP/"); ok {
		attrs = append(attrs, tracing.AttrNetProtoVersion.String(v))
	}
	if req.id != nil {
		attrs = append(attrs, tracing.AttrRequestID.String(truncateString(rawIDString(req.id), tracing.MaxValueBytes)))
	}
	// A tool or prompt name is what the client asked for, not yet routed:
	// finish records it once the request was served (routed). A URI never
	// names the span; it is recorded redacted.
	tw := &tracedWriter{ResponseWriter: w, span: span, method: req.method}
	switch req.method {
	case "tools/call":
		tw.targetKey = tracing.AttrToolName
		tw.target, _ = paramString(req, "name")
		attrs = append(attrs, tracing.AttrOperation.String("execute_tool"))
	case "prompts/get":
		tw.targetKey = tracing.AttrPromptName
		tw.target, _ = paramString(req, "name")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		uri, _ := paramString(req, "uri")
		attrs = append(attrs, tracing.AttrResourceURI.String(tracing.RedactURI(uri)))
	}
	switch {
	case req.metaVersion != "":
		attrs = append(attrs, tracing.AttrProtocolVersion.String(req.metaVersion))
	case req.session != nil:
		attrs = append(attrs, tracing.AttrProtocolVersion.String(req.session.Version()))
	default:
		if v := wire.HeaderValue(r.Header, protocol.HeaderProtocolVersion); v != "" {
			attrs = append(attrs, tracing.AttrProtocolVersion.String(v))
		}
	}
	if sid := wire.HeaderValue(r.Header, legacy.HeaderSessionID); sid != "" {
		attrs = append(attrs, tracing.AttrSessionID.String(sessionIDHash(sid)))
	}
	span.SetAttributes(attrs...)
	return tw, tw
}

// sessionIDHash is what traces record of a session id: the id is a bearer
// handle (whoever holds it can answer the session's elicitations), the hash
// still ties a session's spans together.
func sessionIDHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:8])
}

// markRouted notes that the request's target is one the catalog routes: it
// may name the span.
func markRouted(w http.ResponseWriter) {
	if tw := tracedFrom(w); tw != nil {
		tw.routed = true
	}
}

// tracedWriter carries a sampled request's span and the error it ended with.
// It is used by the request's handler goroutine only.
type tracedWriter struct {
	http.ResponseWriter
	span    trace.Span
	code    int64
	message string
	toolErr bool

	method    string
	targetKey attribute.Key // tools/call, prompts/get: the name's attribute; else ""
	target    string        // the name as the client sent it
	routed    bool          // the catalog routed the target or the upstream answered a result
}

func (w *tracedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recordError notes the JSON-RPC error of the answer.
func (w *tracedWriter) recordError(code int64, message string) { w.code, w.message = code, message }

// finish ends the span with the error the request ended with, if any. The
// target names the span and is recorded only when it was routed: a name
// nobody serves is a client's free text (unbounded cardinality).
func (w *tracedWriter) finish() {
	if w.routed && w.targetKey != "" && w.target != "" {
		target := truncateString(w.target, tracing.MaxValueBytes)
		w.span.SetAttributes(w.targetKey.String(target))
		w.span.SetName(w.method + " " + target)
	}
	switch {
	case w.code != 0:
		c := strconv.FormatInt(w.code, 10)
		w.span.SetAttributes(tracing.AttrStatusCode.String(c), tracing.AttrErrorType.String(c))
		w.span.SetStatus(codes.Error, truncateString(w.message, tracing.MaxValueBytes))
	case w.toolErr:
		w.span.SetAttributes(tracing.AttrErrorType.String("tool_error"))
		w.span.SetStatus(codes.Error, "")
	}
	w.span.End()
}

// observeResponse notes the error (or a tool result with isError) of an
// upstream's JSON-RPC response the sidecar relays.
func (w *tracedWriter) observeResponse(msg []byte) {
	_ = wire.EachMember(msg, func(m wire.Member) bool {
		switch {
		case wire.KeyIs(m.Key, "error"):
			var e struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(msg[m.Start:m.End], &e) == nil {
				w.recordError(e.Code, e.Message)
			}
			return false
		case wire.KeyIs(m.Key, "result"):
			w.routed = true // the upstream served the target
			var res struct {
				IsError bool `json:"isError"`
			}
			if json.Unmarshal(msg[m.Start:m.End], &res) == nil {
				w.toolErr = res.IsError
			}
			return false
		}
		return true
	})
}

// tracedFrom returns the tracedWriter behind w when the request's span is
// sampled.
func tracedFrom(w http.ResponseWriter) *tracedWriter {
	tw, _ := w.(*tracedWriter)
	return tw
}

// injectUpstream gives the upstream request the context of the request's
// (sampled) span: the traceparent header (tracestate, baggage), and
// params._meta's traceparent rewritten in place when the client sent one
// there (same length, so the body is not re-encoded). An unsampled span
// adds nothing: the upstream gets the client's own context, if any, as the
// client sent it.
func (s *Server) injectUpstream(h http.Header, req *request) {
	if req.traceCtx == nil {
		return
	}
	s.tr.Inject(req.traceCtx, h)
	tp := h.Get("Traceparent")
	if req.meta == nil || tp == "" {
		return
	}
	_ = wire.EachMember(req.meta, func(m wire.Member) bool {
		if !wire.KeyIs(m.Key, "traceparent") {
			return true
		}
		v := req.meta[m.Start:m.End]
		if len(v) == len(tp)+2 && v[0] == '"' && v[len(v)-1] == '"' {
			copy(v[1:], tp) // req.meta is a slice of req.body
		}
		return false
	})
}

// rawIDString is a JSON-RPC id as the conventions record it: a string's
// value, a number's text.
func rawIDString(id json.RawMessage) string {
	var s string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// truncateString cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncateString(s string, n int) string { return tracing.TruncateString(s, n) }
