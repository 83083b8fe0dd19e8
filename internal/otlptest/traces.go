// Package otlptest is an OTLP/HTTP traces endpoint for tests: it decodes each export request
// (protobuf, go.opentelemetry.io/proto/otlp) as a collector does and keeps the spans, so a test
// can follow a request's span or grep every exported attribute for a secret.
package otlptest

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TraceReceiver serves /v1/traces. mu guards the spans and services received.
type TraceReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
}

func (rc *TraceReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				rc.services = append(rc.services, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			rc.spans = append(rc.spans, ss.GetSpans()...)
		}
	}
	rc.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans are the spans received so far.
func (rc *TraceReceiver) Spans() []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*tracepb.Span(nil), rc.spans...)
}

// Services are the service.name of each resource received, in order.
func (rc *TraceReceiver) Services() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.services...)
}

// Text is every span received, one line each: its name, then its attributes and its events'
// names and attributes as key=value. It is what a test greps for a value no span may carry.
func (rc *TraceReceiver) Text() string {
	var b strings.Builder
	for _, s := range rc.Spans() {
		b.WriteString(s.GetName())
		writeAttrs(&b, SpanAttrs(s))
		for _, e := range s.GetEvents() {
			b.WriteString(" event " + e.GetName())
			writeAttrs(&b, attrs(e.GetAttributes()))
		}
		b.WriteString(" status " + s.GetStatus().GetMessage() + "\n")
	}
	return b.String()
}

func writeAttrs(b *strings.Builder, m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(" " + k + "=" + m[k])
	}
}

// SpanAttrs are a span's attributes: strings as they are, other values printed.
func SpanAttrs(s *tracepb.Span) map[string]string { return attrs(s.GetAttributes()) }

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, a := range kvs {
		v := a.GetValue()
		if v.GetStringValue() != "" {
			out[a.GetKey()] = v.GetStringValue()
		} else {
			out[a.GetKey()] = fmt.Sprint(v.GetIntValue())
		}
	}
	return out
}
