package sidecar

import (
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
)

// BenchmarkForwardTraced1Pct is BenchmarkForward with tracing on at the default sampling (1% of
// the traces the sidecar starts; the requests carry no trace context), spans batched as in
// production and exported to a discarding exporter: the difference to BenchmarkForward is the
// tracing's own CPU per request (docs/performance.md).
func BenchmarkForwardTraced1Pct(b *testing.B) {
	up := benchUpstream()
	defer up.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(tracing.Sampler()))
	defer func() { _ = tp.Shutdown(b.Context()) }()
	s, err := NewServer(Options{Upstream: up.URL + "/mcp", Tracing: tracing.NewWith(tp, tracing.DefaultSamplingPerMillion)})
	if err != nil {
		b.Fatal(err)
	}
	front := httptest.NewServer(s)
	defer front.Close()
	benchCalls(b, front)
}
