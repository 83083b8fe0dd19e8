// Package tracing is the sidecar's tracer: the OTLP exporter's set-up, the
// sampling decision, the trace context a client sent and the one the
// upstream gets, the spans of a fan-out and of the drain, and a request's
// span to its end (RequestWriter). The request path starts each request's
// span on it and gives it the request's attributes.
//
// It must not know HTTP routing, MCP methods' handling or any other room:
// what it records is given to it as names, headers and bytes.
//
// Traces are off unless Config.OTLPEndpoint or Options.Tracing is set. One
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
// that reach the exporter are bounded (MaxValueBytes) and URIs lose their
// query string and fragment, and a 2025-era session id, a bearer handle, is
// recorded as a short hash (F11).
package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
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

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Attribute keys of the OpenTelemetry MCP semantic conventions, for the spans
// of this room and the request spans of the request path
// (open-telemetry/semantic-conventions-genai, docs/gen-ai/mcp.md).
const (
	AttrMethod          = attribute.Key("mcp.method.name")
	AttrProtocolVersion = attribute.Key("mcp.protocol.version")
	AttrSessionID       = attribute.Key("mcp.session.id")
	AttrResourceURI     = attribute.Key("mcp.resource.uri")
	AttrToolName        = attribute.Key("gen_ai.tool.name")
	AttrPromptName      = attribute.Key("gen_ai.prompt.name")
	AttrOperation       = attribute.Key("gen_ai.operation.name")
	AttrRequestID       = attribute.Key("jsonrpc.request.id")
	AttrStatusCode      = attribute.Key("rpc.response.status_code")
	AttrErrorType       = attribute.Key("error.type")
	AttrNetTransport    = attribute.Key("network.transport")
	AttrNetProtocol     = attribute.Key("network.protocol.name")
	AttrNetProtoVersion = attribute.Key("network.protocol.version")
	// Switchboard's own.
	AttrDrained = attribute.Key("switchboard.drain.streams_ended")
	AttrAborted = attribute.Key("switchboard.drain.inflight_aborted")
)

// drainSpanName is the name of the drain's span, which is always sampled.
const drainSpanName = "switchboard.drain"

// DefaultSamplingPerMillion samples 1% of the traces the sidecar starts
// (requests whose client sent a trace context follow its sampled flag).
const DefaultSamplingPerMillion = 10000

// DefaultClientSampledPerSecond is how many requests per second a
// client's sampled flag may have recorded; beyond it the sidecar's own ratio
// decides, so that no client can fill the exporter's queue with its spans.
const DefaultClientSampledPerSecond = 100

// MaxValueBytes bounds an exported string taken from a client or the
// upstream (error messages, URIs, names).
const MaxValueBytes = 256

// Tracer is the sidecar's tracer. A nil *Tracer traces nothing.
//
// The sampling decision is taken here, before any span exists: a request
// whose client sent a trace context follows its sampled flag (a sampled one
// within clientSampled's rate, else as if it had sent none), any other
// request and every fan-out are sampled with probability ratio, the drain
// always. An unsampled request therefore costs no span, no IDs and no
// context: one look for a trace context and one random number. (An SDK
// sampler would decide inside tracer.Start, after the IDs and the span's
// allocation; this is why the decision is not a ParentBased sampler.)
type Tracer struct {
	tracer        trace.Tracer
	prop          propagation.TextMapPropagator
	ratio         float64
	clientSampled *rate.Limiter // safe for concurrent use
	shutdown      func(context.Context) error
}

// New exports spans over OTLP/HTTP to endpoint (a URL such as
// http://collector:4318/v1/traces), sampling perMillion of the traces the
// sidecar starts itself; service names the process in the spans' resource.
func New(ctx context.Context, endpoint string, perMillion int, service string) (*Tracer, error) {
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
	t := NewWith(tp, perMillion)
	t.shutdown = tp.Shutdown
	return t, nil
}

// NewWith traces into tp (tests pass a provider with an in-memory
// exporter), sampling perMillion of the traces the sidecar starts; tp's
// sampler should be Sampler().
func NewWith(tp trace.TracerProvider, perMillion int) *Tracer {
	t := &Tracer{
		tracer: tp.Tracer("github.com/switchboard-mcp/switchboard/sidecar"),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		ratio:  float64(perMillion) / 1e6,
	}
	return t.WithClientSampledPerSecond(DefaultClientSampledPerSecond)
}

// WithClientSampledPerSecond sets how many client-sampled requests per
// second are recorded (burst: as many); 0 or less: a client's sampled flag
// never forces a span. Call it before the first request.
func (t *Tracer) WithClientSampledPerSecond(n int) *Tracer {
	t.clientSampled = rate.NewLimiter(rate.Limit(max(n, 0)), max(n, 0))
	return t
}

// Sampler is the provider's sampler: the decision is Tracer's (taken
// before a span is started), so every span started is sampled, and its
// children follow it.
func Sampler() sdktrace.Sampler { return sdktrace.ParentBased(sdktrace.AlwaysSample()) }

// sampleNew decides whether a trace the sidecar starts itself is sampled.
func (t *Tracer) sampleNew() bool { return t.ratio >= 1 || rand.Float64() < t.ratio }

// sampleRequest decides whether a request whose client sent parent (maybe
// invalid: none) is sampled.
func (t *Tracer) sampleRequest(parent trace.SpanContext) bool {
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
func (t *Tracer) Shutdown(ctx context.Context) error {
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
func (t *Tracer) parentContext(ctx context.Context, meta []byte, h http.Header) context.Context {
	if meta != nil && bytes.Contains(meta, []byte("traceparent")) {
		var c metaCarrier
		_ = wire.EachMember(meta, func(m wire.Member) bool {
			for _, k := range traceKeys {
				if wire.KeyIs(m.Key, k) {
					var v string
					if json.Unmarshal(meta[m.Start:m.End], &v) == nil {
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
	if len(h["Traceparent"]) == 0 {
		return ctx
	}
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// StartRequest starts the SERVER span of one MCP request named name, its
// parent the trace context the client sent (params._meta, raw, else the
// headers), when the request is sampled; it returns a nil span otherwise.
func (t *Tracer) StartRequest(ctx context.Context, name string, meta []byte, h http.Header) (context.Context, trace.Span) {
	parent := t.parentContext(ctx, meta, h)
	if !t.sampleRequest(trace.SpanContextFromContext(parent)) {
		return ctx, nil
	}
	return t.tracer.Start(parent, name, trace.WithSpanKind(trace.SpanKindServer))
}

// Inject puts the trace context of ctx into h (traceparent, tracestate, baggage).
func (t *Tracer) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// RedactURI is a URI as traces record it: without query and fragment (which
// may carry credentials), at most MaxValueBytes.
func RedactURI(uri string) string {
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	return TruncateString(uri, MaxValueBytes)
}

// TruncateString cuts s to at most n bytes (on a rune boundary), marking the cut.
func TruncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// startFanout starts the span of one fan-out of a change to the listen
// streams, or returns nil when this trace is not sampled.
func (t *Tracer) startFanout(method, uri string) trace.Span {
	if !t.sampleNew() {
		return nil
	}
	attrs := []attribute.KeyValue{AttrMethod.String(method)}
	if uri != "" {
		attrs = append(attrs, AttrResourceURI.String(RedactURI(uri)))
	}
	_, span := t.tracer.Start(context.Background(), method+" fan-out",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot(), trace.WithAttributes(attrs...))
	return span
}

// DrainSpan records one drain that began at start, ended streamsEnded listen streams and
// answered aborted requests with an error at its budget's end.
func (t *Tracer) DrainSpan(start time.Time, streamsEnded int, aborted int64) {
	_, span := t.tracer.Start(context.Background(), drainSpanName, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot())
	span.SetAttributes(AttrDrained.Int(streamsEnded), AttrAborted.Int64(aborted))
	if aborted > 0 {
		span.SetStatus(codes.Error, "drain budget over: requests in flight answered with an error")
	}
	span.End()
}

// StartFanout is startFanout on a Tracer that may be nil (off): the hub's Tracer.
func (t *Tracer) StartFanout(method, uri string) trace.Span {
	if t == nil {
		return nil
	}
	return t.startFanout(method, uri)
}
