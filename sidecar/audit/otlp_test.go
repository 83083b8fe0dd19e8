package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// logsReceiver is an OTLP/HTTP logs endpoint: it decodes each export request (protobuf) as a
// collector does, and answers fail(n) for the n-th request (0: success).
type logsReceiver struct {
	mu       sync.Mutex
	requests []*collogs.ExportLogsServiceRequest
	fail     func(n int) int
}

func (lr *logsReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collogs.ExportLogsServiceRequest
	if r.URL.Path != "/v1/logs" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP logs export", http.StatusBadRequest)
		return
	}
	lr.mu.Lock()
	lr.requests = append(lr.requests, &req)
	n := len(lr.requests)
	lr.mu.Unlock()
	if lr.fail != nil {
		if code := lr.fail(n); code != 0 {
			http.Error(w, "unavailable", code)
			return
		}
	}
	out, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// logs are the received log records with their request's resource attributes and scope.
type receivedLog struct {
	resource map[string]string
	scope    string
	rec      *logspb.LogRecord
}

func (lr *logsReceiver) logs() []receivedLog {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var out []receivedLog
	for _, req := range lr.requests {
		for _, rl := range req.GetResourceLogs() {
			res := attrStrings(rl.GetResource().GetAttributes())
			for _, sl := range rl.GetScopeLogs() {
				for _, l := range sl.GetLogRecords() {
					out = append(out, receivedLog{res, sl.GetScope().GetName(), l})
				}
			}
		}
	}
	return out
}

// attrStrings renders OTLP attributes as key → "type:value".
func attrStrings(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.GetKey()] = anyString(kv.GetValue())
	}
	return out
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return "string:" + x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprintf("bool:%v", x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprintf("int:%d", x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprintf("double:%v", x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyString(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("%T", v.GetValue())
}

// TestOTLPSinkExportsRecords: records reach a real OTLP/HTTP receiver as log records whose
// body is the record's JSON line and whose attributes are its fields.
func TestOTLPSinkExportsRecords(t *testing.T) {
	recv := &logsReceiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	s, err := NewOTLPSink(srv.URL+"/v1/logs", "weather-0", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 12, 0, 0, 5, time.UTC)
	allowed := &Record{Time: at, Server: Server{"team-a", "weather"}, Pod: "weather-0",
		Caller:          &Caller{Subject: "system:serviceaccount:team-b:agent", ServiceAccount: "team-b/agent", Groups: []string{"g1", "g2"}, Issuer: "kubernetes"},
		ProtocolVersion: "2026-07-28", Method: "tools/call", Name: "forecast", UpstreamName: "get_forecast", CatalogRevision: "r1",
		Decision: Decision{Allowed: true, Reason: ReasonAllowed, Policy: "agents/tools"},
		Outcome:  Outcome{Status: StatusResult, IsError: true, InputRequiredRounds: 1}, DurationMs: 1.5,
		RequestID: json.RawMessage(`"a-1"`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		Arguments: json.RawMessage(`{"city":"Paris"}`), ArgumentsTruncated: true}
	denied := &Record{Time: at, Server: Server{"team-a", "weather"}, Method: "tools/call", Name: "delete_all",
		Decision: Decision{Reason: ReasonNotGranted}, Outcome: Outcome{Status: StatusError, ErrorCode: -32602}, RequestID: json.RawMessage(`2`)}
	s.Emit(allowed)
	s.Emit(denied)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs := recv.logs()
	if len(logs) != 2 {
		t.Fatalf("%d log records, want 2", len(logs))
	}
	wantAttrs := []map[string]string{{
		"schema": "string:" + Schema, "server.namespace": "string:team-a", "server.name": "string:weather", "pod": "string:weather-0",
		"caller.subject": "string:system:serviceaccount:team-b:agent", "caller.serviceAccount": "string:team-b/agent",
		"caller.groups": "[string:g1,string:g2]", "caller.issuer": "string:kubernetes", "protocolVersion": "string:2026-07-28",
		"method": "string:tools/call", "name": "string:forecast", "upstreamName": "string:get_forecast", "catalogRevision": "string:r1",
		"decision.allowed": "bool:true", "decision.reason": "string:Allowed", "decision.policy": "string:agents/tools",
		"outcome.status": "string:result", "outcome.isError": "bool:true", "outcome.inputRequiredRounds": "int:1",
		"durationMs": "double:1.5", "requestId": `string:"a-1"`, "traceId": "string:4bf92f3577b34da6a3ce929d0e0e4736",
		"arguments": `string:{"city":"Paris"}`, "argumentsTruncated": "bool:true",
	}, {
		"schema": "string:" + Schema, "server.namespace": "string:team-a", "server.name": "string:weather",
		"method": "string:tools/call", "name": "string:delete_all", "decision.allowed": "bool:false", "decision.reason": "string:NotGranted",
		"outcome.status": "string:error", "outcome.errorCode": "int:-32602", "durationMs": "double:0", "requestId": "string:2",
	}}
	for i, r := range []*Record{allowed, denied} {
		l := logs[i]
		if want := map[string]string{"service.name": "string:switchboard-sidecar", "k8s.pod.name": "string:weather-0"}; !mapsEqual(l.resource, want) {
			t.Errorf("log %d resource %v, want %v", i, l.resource, want)
		}
		if l.scope != otlpScope || l.rec.GetEventName() != EventName || l.rec.GetTimeUnixNano() != uint64(at.UnixNano()) {
			t.Errorf("log %d: scope %q, event %q, time %d", i, l.scope, l.rec.GetEventName(), l.rec.GetTimeUnixNano())
		}
		wantSev, wantText := logspb.SeverityNumber_SEVERITY_NUMBER_INFO, "INFO"
		if i == 1 {
			wantSev, wantText = logspb.SeverityNumber_SEVERITY_NUMBER_WARN, "WARN"
		}
		if l.rec.GetSeverityNumber() != wantSev || l.rec.GetSeverityText() != wantText {
			t.Errorf("log %d severity %v %q", i, l.rec.GetSeverityNumber(), l.rec.GetSeverityText())
		}
		rc := *r
		rc.Schema = Schema
		if body, want := l.rec.GetBody().GetStringValue(), strings.TrimSuffix(string(AppendJSON(nil, &rc)), "\n"); body != want {
			t.Errorf("log %d body\n got %s\nwant %s", i, body, want)
		}
		if got := attrStrings(l.rec.GetAttributes()); !mapsEqual(got, wantAttrs[i]) {
			t.Errorf("log %d attributes\n got %v\nwant %v", i, got, wantAttrs[i])
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An export that fails loses its records: they are counted as dropped, and the next record
// exported says how many.
func TestOTLPSinkCountsFailedExports(t *testing.T) {
	recv := &logsReceiver{fail: func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	var drops atomic.Int64
	s, err := NewOTLPSink(srv.URL+"/v1/logs", "", 0, func() { drops.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	s.Emit(&Record{Method: "tools/call", Name: "lost"})
	waitFor(t, func() bool { return drops.Load() == 1 })
	s.Emit(&Record{Method: "tools/call", Name: "after"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs := recv.logs()
	names := make([]string, len(logs))
	for i, l := range logs {
		names[i] = attrStrings(l.rec.GetAttributes())["name"]
	}
	if !slices.Equal(names, []string{"string:lost", "string:after"}) {
		t.Fatalf("exported %v", names)
	}
	if got := attrStrings(logs[1].rec.GetAttributes())["droppedBefore"]; got != "int:1" {
		t.Fatalf("droppedBefore %q, want int:1", got)
	}
}

// A receiver that does not answer never delays Emit: records beyond the queue are dropped.
func TestOTLPSinkNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer srv.Close()
	var drops atomic.Int64
	s, err := NewOTLPSink(srv.URL+"/v1/logs", "", 4, func() { drops.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); _ = s.Close() }()
	start := time.Now()
	for range 1000 {
		s.Emit(&Record{Method: "tools/call"})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 Emits into a stuck receiver took %v", d)
	}
	if drops.Load() < 1000-4-OTLPBatch {
		t.Fatalf("%d dropped of 1000 with a queue of 4", drops.Load())
	}
}

func TestNewOTLPSinkRefuses(t *testing.T) {
	for _, ep := range []string{"", "collector:4318", "ftp://collector/v1/logs", "http:///v1/logs"} {
		if _, err := NewOTLPSink(ep, "", 0, nil); err == nil || !strings.Contains(err.Error(), "want an http:// or https:// URL") {
			t.Errorf("NewOTLPSink(%q) = %v", ep, err)
		}
	}
}
