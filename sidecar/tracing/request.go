package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// RequestWriter carries a sampled request's span and the error it ended with:
// the request path starts the span (StartRequest) and gives it the request's
// attributes; its steps note on the way what ends the span (RecordError,
// MarkRouted, ObserveResponse), and Finish ends it. It is used by the
// request's handler goroutine only.
type RequestWriter struct {
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

// NewRequestWriter wraps w for the request of method whose span is span.
func NewRequestWriter(w http.ResponseWriter, span trace.Span, method string) *RequestWriter {
	return &RequestWriter{ResponseWriter: w, span: span, method: method}
}

// Target notes the name the client asked for (a tool's or a prompt's, under
// key): Finish records it once the request was routed.
func (w *RequestWriter) Target(key attribute.Key, name string) { w.targetKey, w.target = key, name }

func (w *RequestWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// RecordError notes the JSON-RPC error of the answer.
func (w *RequestWriter) RecordError(code int64, message string) { w.code, w.message = code, message }

// MarkRouted notes that the request's target is one the catalog routes: it
// may name the span.
func (w *RequestWriter) MarkRouted() { w.routed = true }

// Finish ends the span with the error the request ended with, if any. The
// target names the span and is recorded only when it was routed: a name
// nobody serves is a client's free text (unbounded cardinality).
func (w *RequestWriter) Finish() {
	if w.routed && w.targetKey != "" && w.target != "" {
		target := TruncateString(w.target, MaxValueBytes)
		w.span.SetAttributes(w.targetKey.String(target))
		w.span.SetName(w.method + " " + target)
	}
	switch {
	case w.code != 0:
		c := strconv.FormatInt(w.code, 10)
		w.span.SetAttributes(AttrStatusCode.String(c), AttrErrorType.String(c))
		w.span.SetStatus(codes.Error, TruncateString(w.message, MaxValueBytes))
	case w.toolErr:
		w.span.SetAttributes(AttrErrorType.String("tool_error"))
		w.span.SetStatus(codes.Error, "")
	}
	w.span.End()
}

// ObserveResponse notes the error (or a tool result with isError) of an
// upstream's JSON-RPC response the sidecar relays.
func (w *RequestWriter) ObserveResponse(msg []byte) {
	_ = wire.EachMember(msg, func(m wire.Member) bool {
		switch {
		case wire.KeyIs(m.Key, "error"):
			var e struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(msg[m.Start:m.End], &e) == nil {
				w.RecordError(e.Code, e.Message)
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

// From returns the RequestWriter w is when the request's span is sampled, or
// nil.
func From(w http.ResponseWriter) *RequestWriter {
	tw, _ := w.(*RequestWriter)
	return tw
}

// SessionIDHash is what traces record of a session id: the id is a bearer
// handle (whoever holds it can answer the session's elicitations), the hash
// still ties a session's spans together.
func SessionIDHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:8])
}

// RawIDString is a JSON-RPC id as the conventions record it: a string's
// value, a number's text.
func RawIDString(id json.RawMessage) string {
	var s string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// InjectRequest gives an upstream request the trace context of ctx, a sampled request span's:
// the traceparent header (tracestate, baggage), and the traceparent of meta (the request's
// params._meta, a slice of its body) rewritten in place when the client sent one there (same
// length, so the body is not re-encoded).
func (t *Tracer) InjectRequest(ctx context.Context, h http.Header, meta []byte) {
	t.Inject(ctx, h)
	tp := h.Get("Traceparent")
	if meta == nil || tp == "" {
		return
	}
	_ = wire.EachMember(meta, func(m wire.Member) bool {
		if !wire.KeyIs(m.Key, "traceparent") {
			return true
		}
		v := meta[m.Start:m.End]
		if len(v) == len(tp)+2 && v[0] == '"' && v[len(v)-1] == '"' {
			copy(v[1:], tp)
		}
		return false
	})
}

// TraceIDOf is the trace id of a W3C traceparent (version-traceid-parentid-flags), or "".
func TraceIDOf(tp string) string {
	if len(tp) < 55 || tp[2] != '-' || tp[35] != '-' {
		return ""
	}
	id, err := trace.TraceIDFromHex(tp[3:35])
	if err != nil {
		return ""
	}
	return id.String()
}
