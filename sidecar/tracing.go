package sidecar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Traces (off unless Config.OTLPEndpoint or Options.Tracing is set). One
// SERVER span per MCP request (listen streams aside), named and attributed
// as the OpenTelemetry MCP semantic conventions say (method, tool, prompt or
// resource, request id, protocol version, session, error code); its parent
// is the trace context the client sent in params._meta (traceparent,
// tracestate), else in the HTTP headers; the upstream receives the span's
// context in its traceparent header, and in params._meta when the client put
// one there. A fan-out of one change to the listen streams is an INTERNAL
// span of its own trace, and so is the drain (always sampled: there is one
// per pod's life).
//
// What a client sends is not trusted (security review F12): its sampled flag
// is honoured up to a rate per second, a tool or prompt name names the span
// only once it was routed (the catalog or the upstream served it), values
// that reach the exporter are bounded (maxTraceValueBytes) and URIs lose their
// query string and fragment, and a 2025-era session id, a bearer handle, is
// recorded as a short hash (F11).

// Attribute keys of the OpenTelemetry MCP semantic conventions
// (open-telemetry/semantic-conventions-genai, docs/gen-ai/mcp.md).
const (
	attrMethod          = attribute.Key("mcp.method.name")
	attrProtocolVersion = attribute.Key("mcp.protocol.version")
	attrSessionID       = attribute.Key("mcp.session.id")
	attrResourceURI     = attribute.Key("mcp.resource.uri")
	attrToolName        = attribute.Key("gen_ai.tool.name")
	attrPromptName      = attribute.Key("gen_ai.prompt.name")
	attrOperation       = attribute.Key("gen_ai.operation.name")
	attrRequestID       = attribute.Key("jsonrpc.request.id")
	attrStatusCode      = attribute.Key("rpc.response.status_code")
	attrErrorType       = attribute.Key("error.type")
	attrNetTransport    = attribute.Key("network.transport")
	attrNetProtocol     = attribute.Key("network.protocol.name")
	attrNetProtoVersion = attribute.Key("network.protocol.version")
	// Switchboard's own.
	attrDrained = attribute.Key("switchboard.drain.streams_ended")
	attrAborted = attribute.Key("switchboard.drain.inflight_aborted")
)

// drainSpanName is the name of the drain's span, which is always sampled.
const drainSpanName = "switchboard.drain"

// DefaultTraceSamplingPerMillion samples 1% of the traces the sidecar starts
// (requests whose client sent a trace context follow its sampled flag).
const DefaultTraceSamplingPerMillion = 10000

// DefaultTraceClientSampledPerSecond is how many requests per second a
// client's sampled flag may have recorded; beyond it the sidecar's own ratio
// decides, so that no client can fill the exporter's queue with its spans.
const DefaultTraceClientSampledPerSecond = 100

// maxTraceValueBytes bounds an exported string taken from a client or the
// upstream (error messages, URIs, names).
const maxTraceValueBytes = 256

// Tracing is the sidecar's tracer. A nil *Tracing traces nothing.
//
// The sampling decision is taken here, before any span exists: a request
// whose client sent a trace context follows its sampled flag (a sampled one
// within clientSampled's rate, else as if it had sent none), any other
// request and every fan-out are sampled with probability ratio, the drain
// always. An unsampled request therefore costs no span, no IDs and no
// context: one look for a trace context and one random number. (An SDK
// sampler would decide inside tracer.Start, after the IDs and the span's
// allocation; this is why the decision is not a ParentBased sampler.)
type Tracing struct {
	tracer        trace.Tracer
	prop          propagation.TextMapPropagator
	ratio         float64
	clientSampled *rate.Limiter // safe for concurrent use
	shutdown      func(context.Context) error
}

// NewTracing exports spans over OTLP/HTTP to endpoint (a URL such as
// http://collector:4318/v1/traces), sampling perMillion of the traces the
// sidecar starts itself; service names the process in the spans' resource.
func NewTracing(ctx context.Context, endpoint string, perMillion int, service string) (*Tracing, error) {
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %w", endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(Sampler()),
		sdktrace.WithResource(res),
	)
	t := NewTracingWith(tp, perMillion)
	t.shutdown = tp.Shutdown
	return t, nil
}

// NewTracingWith traces into tp (tests pass a provider with an in-memory
// exporter), sampling perMillion of the traces the sidecar starts; tp's
// sampler should be Sampler().
func NewTracingWith(tp trace.TracerProvider, perMillion int) *Tracing {
	t := &Tracing{
		tracer: tp.Tracer("github.com/switchboard-mcp/switchboard/sidecar"),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		ratio:  float64(perMillion) / 1e6,
	}
	return t.WithClientSampledPerSecond(DefaultTraceClientSampledPerSecond)
}

// WithClientSampledPerSecond sets how many client-sampled requests per
// second are recorded (burst: as many); 0 or less: a client's sampled flag
// never forces a span. Call it before the first request.
func (t *Tracing) WithClientSampledPerSecond(n int) *Tracing {
	t.clientSampled = rate.NewLimiter(rate.Limit(max(n, 0)), max(n, 0))
	return t
}

// Sampler is the provider's sampler: the decision is Tracing's (taken
// before a span is started), so every span started is sampled, and its
// children follow it.
func Sampler() sdktrace.Sampler { return sdktrace.ParentBased(sdktrace.AlwaysSample()) }

// sampleNew decides whether a trace the sidecar starts itself is sampled.
func (t *Tracing) sampleNew() bool { return t.ratio >= 1 || rand.Float64() < t.ratio }

// sampleRequest decides whether a request whose client sent parent (maybe
// invalid: none) is sampled.
func (t *Tracing) sampleRequest(parent trace.SpanContext) bool {
	switch {
	case !parent.IsValid():
		return t.sampleNew()
	case !parent.IsSampled():
		return false
	case t.clientSampled.Allow():
		return true
	default:
		return t.sampleNew()
	}
}

// Shutdown flushes the spans not yet exported.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// metaCarrier reads the trace context keys of params._meta.
type metaCarrier map[string]string

func (c metaCarrier) Get(k string) string { return c[k] }
func (c metaCarrier) Set(k, v string)     { c[k] = v }
func (c metaCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// traceKeys are the members of params._meta that carry trace context
// (SEP-414: unprefixed).
var traceKeys = [...]string{"traceparent", "tracestate", "baggage"}

// parentContext is the trace context the client sent: params._meta's
// traceparent (and tracestate, baggage) when present, else the HTTP
// headers'. It allocates nothing when the client sent none.
func (t *Tracing) parentContext(ctx context.Context, r *http.Request, req *request) context.Context {
	if req.meta != nil && bytes.Contains(req.meta, []byte("traceparent")) {
		var c metaCarrier
		_ = wire.EachMember(req.meta, func(m wire.Member) bool {
			for _, k := range traceKeys {
				if wire.KeyIs(m.Key, k) {
					var v string
					if json.Unmarshal(req.meta[m.Start:m.End], &v) == nil {
						if c == nil {
							c = metaCarrier{}
						}
						c[k] = v
					}
				}
			}
			return true
		})
		if c["traceparent"] != "" {
			return t.prop.Extract(ctx, c)
		}
	}
	if len(r.Header["Traceparent"]) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
}

// startRequest starts the span of one MCP request; the span's context goes
// into req (for the upstream). Only a sampled span gets its attributes and
// a tracedWriter, which records the JSON-RPC error the request ends with;
// endRequest ends the span.
func (t *Tracing) startRequest(w http.ResponseWriter, r *http.Request, req *request) (http.ResponseWriter, *tracedWriter) {
	parent := t.parentContext(r.Context(), r, req)
	if !t.sampleRequest(trace.SpanContextFromContext(parent)) {
		return w, nil
	}
	ctx, span := t.tracer.Start(parent, req.method, trace.WithSpanKind(trace.SpanKindServer))
	req.traceCtx = ctx
	attrs := make([]attribute.KeyValue, 0, 12)
	attrs = append(attrs, attrMethod.String(req.method), attrNetTransport.String("tcp"), attrNetProtocol.String("http"))
	if v, ok := strings.CutPrefix(r.Proto, "HTTP/"); ok {
		attrs = append(attrs, attrNetProtoVersion.String(v))
	}
	if req.id != nil {
		attrs = append(attrs, attrRequestID.String(truncateString(rawIDString(req.id), maxTraceValueBytes)))
	}
	// A tool or prompt name is what the client asked for, not yet routed:
	// finish records it once the request was served (routed). A URI never
	// names the span; it is recorded redacted.
	tw := &tracedWriter{ResponseWriter: w, span: span, method: req.method}
	switch req.method {
	case "tools/call":
		tw.targetKey = attrToolName
		tw.target, _ = paramString(req, "name")
		attrs = append(attrs, attrOperation.String("execute_tool"))
	case "prompts/get":
		tw.targetKey = attrPromptName
		tw.target, _ = paramString(req, "name")
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		uri, _ := paramString(req, "uri")
		attrs = append(attrs, attrResourceURI.String(redactURI(uri)))
	}
	switch {
	case req.metaVersion != "":
		attrs = append(attrs, attrProtocolVersion.String(req.metaVersion))
	case req.session != nil:
		attrs = append(attrs, attrProtocolVersion.String(req.session.Version()))
	default:
		if v := wire.HeaderValue(r.Header, protocol.HeaderProtocolVersion); v != "" {
			attrs = append(attrs, attrProtocolVersion.String(v))
		}
	}
	if sid := wire.HeaderValue(r.Header, legacy.HeaderSessionID); sid != "" {
		attrs = append(attrs, attrSessionID.String(sessionIDHash(sid)))
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

// redactURI is a URI as traces record it: without query and fragment (which
// may carry credentials), at most maxTraceValueBytes.
func redactURI(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return truncateString(uri, maxTraceValueBytes)
}

// truncateString cuts s to at most n bytes (on a rune boundary), marking the cut.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
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
		target := truncateString(w.target, maxTraceValueBytes)
		w.span.SetAttributes(w.targetKey.String(target))
		w.span.SetName(w.method + " " + target)
	}
	switch {
	case w.code != 0:
		c := strconv.FormatInt(w.code, 10)
		w.span.SetAttributes(attrStatusCode.String(c), attrErrorType.String(c))
		w.span.SetStatus(codes.Error, truncateString(w.message, maxTraceValueBytes))
	case w.toolErr:
		w.span.SetAttributes(attrErrorType.String("tool_error"))
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
func (t *Tracing) injectUpstream(h http.Header, req *request) {
	if req.traceCtx == nil {
		return
	}
	t.prop.Inject(req.traceCtx, propagation.HeaderCarrier(h))
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

// startFanout starts the span of one fan-out of a change to the listen
// streams, or returns nil when this trace is not sampled.
func (t *Tracing) startFanout(method, uri string) trace.Span {
	if !t.sampleNew() {
		return nil
	}
	attrs := []attribute.KeyValue{attrMethod.String(method)}
	if uri != "" {
		attrs = append(attrs, attrResourceURI.String(redactURI(uri)))
	}
	_, span := t.tracer.Start(context.Background(), method+" fan-out",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot(), trace.WithAttributes(attrs...))
	return span
}

// DrainSpan records one drain that began at start, ended streamsEnded listen streams and
// answered aborted requests with an error at its budget's end.
func (t *Tracing) DrainSpan(start time.Time, streamsEnded int, aborted int64) {
	_, span := t.tracer.Start(context.Background(), drainSpanName, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot())
	span.SetAttributes(attrDrained.Int(streamsEnded), attrAborted.Int64(aborted))
	if aborted > 0 {
		span.SetStatus(codes.Error, "drain budget over: requests in flight answered with an error")
	}
	span.End()
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

// StartFanout is startFanout on a Tracing that may be nil (off): the hub's Tracer.
func (t *Tracing) StartFanout(method, uri string) trace.Span {
	if t == nil {
		return nil
	}
	return t.startFanout(method, uri)
}
