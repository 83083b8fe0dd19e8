package tracing

import (
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// TestSampler: the client's sampled flag wins, the sidecar's own traces follow the ratio, and the
// drain is always sampled.
func TestSampler(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(Sampler()))
	tr := NewWith(tp, 0)
	if sp := tr.startFanout(protocol.NotifToolsListChanged, ""); sp != nil {
		t.Error("sampling 0 started a fan-out span")
	}
	tr.DrainSpan(time.Now(), 3, 0)
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != drainSpanName || !slices.Contains(spans[0].Attributes, AttrDrained.Int(3)) {
		t.Fatalf("with sampling 0 only the drain is recorded: %+v", spans)
	}
}
