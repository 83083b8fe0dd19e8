package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
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
	attrStreams = attribute.Key("switchboard.listen.streams")
	attrDrained = attribute.Key("switchboard.drain.streams_ended")
	attrAborted = attribute.Key("switchboard.drain.inflight_aborted")
)

// drainSpanName is the name of the drain's span, which is always sampled.
const drainSpanName = "switchboard.drain"

// DefaultTraceSamplingPerMillion samples 1% of the traces the sidecar starts
// (requests whose client sent a trace context follow its sampled flag).
const DefaultTraceSamplingPerMillion = 10000

// Tracing is the sidecar's tracer. A nil *Tracing traces nothing.
//
// The sampling decision is taken here, before any span exists: a request
// whose client sent a trace context follows its sampled flag, any other
// request and every fan-out are sampled with probability ratio, the drain
// always. An unsampled request therefore costs no span, no IDs and no
// context: one look for a trace context and one random number.
type Tracing struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	ratio    float64
	shutdown func(context.Context) error
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
	return &Tracing{
		tracer: tp.Tracer("github.com/switchboard-mcp/switchboard/sidecar"),
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		ratio:  float64(perMillion) / 1e6,
	}
}

// Sampler is the provider's sampler: the decision is Tracing's (taken
// before a span is started), so every span started is sampled, and its
// children follow it.
func Sampler() sdktrace.Sampler { return sdktrace.ParentBased(sdktrace.AlwaysSample()) }

// sampleNew decides whether a trace the sidecar starts itself is sampled.
func (t *Tracing) sampleNew() bool { return t.ratio >= 1 || rand.Float64() < t.ratio }

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
		_ = eachMember(req.meta, func(m member) bool {
			for _, k := range traceKeys {
				if keyIs(m.key, k) {
					var v string
					if json.Unmarshal(req.meta[m.start:m.end], &v) == nil {
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
	if psc := trace.SpanContextFromContext(parent); psc.IsValid() && !psc.IsSampled() || !psc.IsValid() && !t.sampleNew() {
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
		attrs = append(attrs, attrRequestID.String(rawIDString(req.id)))
	}
	target := ""
	switch req.method {
	case "tools/call":
		target, _ = paramString(req, "name")
		attrs = append(attrs, attrToolName.String(target), attrOperation.String("execute_tool"))
	case "prompts/get":
		target, _ = paramString(req, "name")
		attrs = append(attrs, attrPromptName.String(target))
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		uri, _ := paramString(req, "uri")
		attrs = append(attrs, attrResourceURI.String(uri))
	}
	if target != "" {
		span.SetName(req.method + " " + target)
	}
	switch {
	case req.metaVersion != "":
		attrs = append(attrs, attrProtocolVersion.String(req.metaVersion))
	case req.session != nil:
		attrs = append(attrs, attrProtocolVersion.String(req.session.version))
	default:
		if v := headerValue(r.Header, headerProtocolVersion); v != "" {
			attrs = append(attrs, attrProtocolVersion.String(v))
		}
	}
	if sid := headerValue(r.Header, headerSessionID); sid != "" {
		attrs = append(attrs, attrSessionID.String(sid))
	}
	span.SetAttributes(attrs...)
	tw := &tracedWriter{ResponseWriter: w, span: span}
	return tw, tw
}

// tracedWriter carries a sampled request's span and the error it ended with.
type tracedWriter struct {
	http.ResponseWriter
	span    trace.Span
	code    int64
	message string
	toolErr bool
}

func (w *tracedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recordError notes the JSON-RPC error of the answer.
func (w *tracedWriter) recordError(code int64, message string) { w.code, w.message = code, message }

// finish ends the span with the error the request ended with, if any.
func (w *tracedWriter) finish() {
	switch {
	case w.code != 0:
		c := strconv.FormatInt(w.code, 10)
		w.span.SetAttributes(attrStatusCode.String(c), attrErrorType.String(c))
		w.span.SetStatus(codes.Error, w.message)
	case w.toolErr:
		w.span.SetAttributes(attrErrorType.String("tool_error"))
		w.span.SetStatus(codes.Error, "")
	}
	w.span.End()
}

// observeResponse notes the error (or a tool result with isError) of an
// upstream's JSON-RPC response the sidecar relays.
func (w *tracedWriter) observeResponse(msg []byte) {
	_ = eachMember(msg, func(m member) bool {
		switch {
		case keyIs(m.key, "error"):
			var e struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			if json.Unmarshal(msg[m.start:m.end], &e) == nil {
				w.recordError(e.Code, e.Message)
			}
			return false
		case keyIs(m.key, "result"):
			var res struct {
				IsError bool `json:"isError"`
			}
			if json.Unmarshal(msg[m.start:m.end], &res) == nil {
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
	_ = eachMember(req.meta, func(m member) bool {
		if !keyIs(m.key, "traceparent") {
			return true
		}
		v := req.meta[m.start:m.end]
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
		attrs = append(attrs, attrResourceURI.String(uri))
	}
	_, span := t.tracer.Start(context.Background(), method+" fan-out",
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot(), trace.WithAttributes(attrs...))
	return span
}

// drainSpan records one drain.
func (t *Tracing) drainSpan(start time.Time, st DrainStatus) {
	_, span := t.tracer.Start(context.Background(), drainSpanName, trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithNewRoot())
	span.SetAttributes(attrDrained.Int(st.StreamsEnded), attrAborted.Int64(st.InflightAborted))
	if st.InflightAborted > 0 {
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

// startFanoutIfOn is startFanout on a Tracing that may be nil (off).
func (t *Tracing) startFanoutIfOn(method, uri string) trace.Span {
	if t == nil {
		return nil
	}
	return t.startFanout(method, uri)
}
