package sidecar

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
)

// BenchmarkForwardAudit is BenchmarkForward through a catalog whose audit is off ("off"), on
// with arguments off ("on"), and on with Redacted arguments ("redacted-1KB"), for one call
// with a 1 KB arguments object; the records go to io.Discard, through the real sink (its
// writer goroutine's CPU is in cpu-ns/op). Goals: on ≤ 1.05× off, redacted-1KB ≤ 1.15× off
// (docs/performance.md).
func BenchmarkForwardAudit(b *testing.B) {
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name  string
		audit *catalog.Audit
	}{
		{"off", nil},
		{"on", &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: catalog.DefaultAuditMethods, Denials: true}},
		{"redacted-1KB", &catalog.Audit{Arguments: catalog.AuditArgumentsRedacted, Redact: []string{"query.filter.*.value"},
			Methods: catalog.DefaultAuditMethods, Denials: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			up := benchUpstream()
			defer up.Close()
			h := catalog.CacheHint{CacheScope: catalog.ScopePublic}
			c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Audit: tc.audit, Server: catalog.Server{Namespace: "bench", Name: "bench",
				ToolPolicy: catalog.ToolPolicyAll, Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}}}
			data, err := catalog.Encode(c)
			if err != nil {
				b.Fatal(err)
			}
			quiet := slog.New(slog.DiscardHandler)
			ov := overlay.New(overlay.Options{Logger: quiet})
			if err := ov.Apply(data, ""); err != nil {
				b.Fatal(err)
			}
			s, err := NewServer(Options{Upstream: up.URL + "/mcp", Overlay: ov, Logger: quiet, AuditOutput: io.Discard, PodName: "bench-0"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.audit.Close()
			front := httptest.NewServer(s)
			defer front.Close()
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + fuzzMeta + `,"name":"echo","arguments":` + benchArguments1KB + `}}`)
			benchPostsP50(b, front, body, [][2]string{{"MCP-Protocol-Version", "2026-07-28"}, {"Mcp-Method", "tools/call"}, {"Mcp-Name", "echo"}})
		})
	}
}

// benchArguments1KB is a tool call's arguments of about 1 KB: nested objects, an array,
// numbers, a secret-looking member.
var benchArguments1KB = func() string {
	var b strings.Builder
	b.WriteString(`{"query":{"table":"orders","filter":[`)
	for i := range 8 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"field":"column_%d","op":"eq","value":"value-%d-%s"}`, i, i, strings.Repeat("v", 40))
	}
	b.WriteString(`],"limit":100,"offset":0},"password":"correct-horse-battery-staple","note":"` + strings.Repeat("n", 200) + `"}`)
	return b.String()
}()

// BenchmarkAuditRecord is the audit's own work for one tools/call alone, without the HTTP
// exchange that dominates BenchmarkForwardAudit: the request's auditWriter, its record, and
// the sink encoding it (to io.Discard; Close waits for the last one, inside the timing).
// cpu-ns/op is the process's CPU, the sink's goroutine included.
func BenchmarkAuditRecord(b *testing.B) {
	for _, mode := range []string{catalog.AuditArgumentsOff, catalog.AuditArgumentsRedacted} {
		b.Run(mode, func(b *testing.B) {
			c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Server: catalog.Server{Namespace: "bench", Name: "bench"},
				Audit: &catalog.Audit{Arguments: mode, Redact: []string{"query.filter.*.value"}, Methods: catalog.DefaultAuditMethods, Denials: true}}
			quiet := slog.New(slog.DiscardHandler)
			a := audit.NewTrail(audit.TrailOptions{Out: io.Discard, Queue: b.N + 1, Pod: "bench-0", Log: quiet})
			st := a.State(c.Audit)
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + fuzzMeta + `,"name":"echo","arguments":` + benchArguments1KB + `}}`)
			req, e := parseRequest(body)
			if e != nil {
				b.Fatal(e)
			}
			hr := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			s := &Server{audit: a}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				aw := &auditWriter{ResponseWriter: httptest.NewRecorder(), s: s, st: st, c: c, rev: "r1", r: hr, req: req, start: time.Now()}
				aw.name = auditName(req)
				aw.sent, aw.result, aw.status = true, true, 200
				aw.finish()
			}
			a.Close()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
