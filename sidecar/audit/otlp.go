package audit

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
)

// OTLP export bounds.
const (
	// OTLPBatch is how many records one export request carries at most.
	OTLPBatch = 512
	// OTLPTimeout bounds one export request; a batch that fails is lost and counted as
	// dropped (no retry: the queue in front keeps calls from waiting, not the records).
	OTLPTimeout = 5 * time.Second
	// otlpScope names the records' instrumentation scope.
	otlpScope = "github.com/switchboard-mcp/switchboard/sidecar/audit"
	// EventName is the OTLP event name of an audit record.
	EventName = "switchboard.audit"
)

// NewOTLPSink starts a sink exporting records as OTLP log records (http/protobuf) to endpoint,
// the full URL of the logs path (http://collector:4318/v1/logs). pod names the resource's
// k8s.pod.name. Like NewSink, its Emit never waits.
//
// Each log record's body is the record's JSON line (AppendJSON, without the newline), its
// attributes the record's fields (nested ones joined by dots: "decision.reason"), its
// timestamp the record's time, its severity INFO, or WARN for a request not allowed.
func NewOTLPSink(endpoint, pod string, queue int, onDrop func()) (*Sink, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("audit OTLP endpoint %q: want an http:// or https:// URL", endpoint)
	}
	exp, err := otlploghttp.New(context.Background(), otlploghttp.WithEndpointURL(endpoint),
		otlploghttp.WithTimeout(OTLPTimeout), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("audit OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "switchboard-sidecar")}
	if pod != "" {
		attrs = append(attrs, attribute.String("k8s.pod.name", pod))
	}
	res := resource.NewSchemaless(attrs...)
	o := &otlpOutput{exp: exp}
	o.provider = sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(o))
	o.logger = o.provider.Logger(otlpScope)
	return newSink(o, queue, onDrop), nil
}

// otlpOutput turns records into log records through the SDK's logger and exports them in
// batches. It is its own processor: the sink's goroutine emits, so the batch needs no lock.
type otlpOutput struct {
	exp      sdklog.Exporter
	provider *sdklog.LoggerProvider
	logger   log.Logger
	batch    []sdklog.Record
	line     []byte
}

func (o *otlpOutput) write(r *Record) error {
	o.line = AppendJSON(o.line[:0], r)
	var lr log.Record
	lr.SetEventName(EventName)
	lr.SetTimestamp(r.Time)
	lr.SetSeverity(log.SeverityInfo)
	lr.SetSeverityText("INFO")
	if !r.Decision.Allowed {
		lr.SetSeverity(log.SeverityWarn)
		lr.SetSeverityText("WARN")
	}
	lr.SetBody(attribute.StringValue(string(o.line[:len(o.line)-1])))
	lr.AddAttributes(recordAttributes(r)...)
	o.logger.Emit(context.Background(), lr)
	if len(o.batch) >= OTLPBatch {
		_, err := o.flush()
		return err
	}
	return nil
}

// flush exports the batch; a batch that fails to export is lost.
func (o *otlpOutput) flush() (int, error) {
	if len(o.batch) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), OTLPTimeout)
	defer cancel()
	err := o.exp.Export(ctx, o.batch)
	n := len(o.batch)
	clear(o.batch)
	o.batch = o.batch[:0]
	if err != nil {
		return n, nil // counted as dropped; the next export may succeed
	}
	return 0, nil
}

// The sdklog.Processor the logger hands its records to.

func (o *otlpOutput) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (o *otlpOutput) OnEmit(_ context.Context, r *sdklog.Record) error {
	o.batch = append(o.batch, r.Clone())
	return nil
}

func (o *otlpOutput) Shutdown(ctx context.Context) error { return o.exp.Shutdown(ctx) }

func (o *otlpOutput) ForceFlush(context.Context) error { return nil }

// close shuts the exporter down after the sink's last flush.
func (o *otlpOutput) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), OTLPTimeout)
	defer cancel()
	return o.provider.Shutdown(ctx)
}

// recordAttributes are r's fields as log attributes, absent ones left out as in its JSON.
func recordAttributes(r *Record) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 24)
	str := func(k, v string) {
		if v != "" {
			kv = append(kv, attribute.String(k, v))
		}
	}
	str("schema", r.Schema)
	str("server.namespace", r.Server.Namespace)
	str("server.name", r.Server.Name)
	str("pod", r.Pod)
	if c := r.Caller; c != nil {
		str("caller.subject", c.Subject)
		str("caller.serviceAccount", c.ServiceAccount)
		if len(c.Groups) > 0 {
			kv = append(kv, attribute.StringSlice("caller.groups", c.Groups))
		}
		str("caller.issuer", c.Issuer)
	}
	str("protocolVersion", r.ProtocolVersion)
	str("method", r.Method)
	str("name", r.Name)
	str("upstreamName", r.UpstreamName)
	str("catalogRevision", r.CatalogRevision)
	kv = append(kv, attribute.Bool("decision.allowed", r.Decision.Allowed))
	str("decision.reason", r.Decision.Reason)
	str("decision.policy", r.Decision.Policy)
	str("outcome.status", r.Outcome.Status)
	if r.Outcome.ErrorCode != 0 {
		kv = append(kv, attribute.Int("outcome.errorCode", r.Outcome.ErrorCode))
	}
	if r.Outcome.IsError {
		kv = append(kv, attribute.Bool("outcome.isError", true))
	}
	if r.Outcome.InputRequiredRounds != 0 {
		kv = append(kv, attribute.Int("outcome.inputRequiredRounds", r.Outcome.InputRequiredRounds))
	}
	if r.Outcome.InputRequired {
		kv = append(kv, attribute.Bool("outcome.inputRequired", true))
	}
	kv = append(kv, attribute.Float64("durationMs", r.DurationMs))
	str("requestId", string(r.RequestID))
	str("traceId", r.TraceID)
	str("arguments", string(r.Arguments))
	if r.ArgumentsTruncated {
		kv = append(kv, attribute.Bool("argumentsTruncated", true))
	}
	if r.DroppedBefore != 0 {
		kv = append(kv, attribute.Int64("droppedBefore", int64(r.DroppedBefore)))
	}
	return kv
}
