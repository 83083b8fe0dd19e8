package sidecar

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// These tests drive the audit trail in process, against the real go-sdk upstream of the authz
// tests; cmd/sidecar/audit_test.go reads the records of a real sidecar process.

// lockedBuffer is an audit output the test reads while the sink writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) records(t *testing.T) []audit.Record {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []audit.Record
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not a record: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// auditedEnv is the authz environment whose catalog audits with a, writing to the returned
// buffer (queue records per sink; 0: the default).
func auditedEnv(t *testing.T, a *catalog.Audit, queue int) (*authzEnv, *lockedBuffer) {
	t.Helper()
	return auditedEnvIn(t, a, queue, "")
}

// auditedEnvIn is auditedEnv with dir the audit directory (catalog.AuditDir when empty).
func auditedEnvIn(t *testing.T, a *catalog.Audit, queue int, dir string) (*authzEnv, *lockedBuffer) {
	t.Helper()
	env := newAuthzEnv(t, authzAccess())
	out := &lockedBuffer{}
	env.srv.audit = audit.NewTrail(audit.TrailOptions{Out: out, Queue: queue, Pod: "pod-0", Dir: dir,
		Log: slog.New(slog.DiscardHandler), OnDrop: env.srv.m.AuditDropped.Inc})
	t.Cleanup(env.srv.audit.Close)
	c := authzCatalog(authzAccess())
	c.Audit = a
	env.applyCatalog(c)
	return env, out
}

// idle waits until no request is being served: every audited request's record has been
// emitted (ServeHTTP emits it before it gives its admission back; the client may have had the
// answer before that).
func idle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.gate.Admitted() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("requests still being served")
		}
		time.Sleep(time.Millisecond)
	}
}

const modernCall = `{"jsonrpc":"2.0","id":%ID%,"method":"%M%","params":{` + fuzzMeta + `,%P%}}`

func modernBody(id, method, params string) string {
	return strings.NewReplacer("%ID%", id, "%M%", method, "%P%", params).Replace(modernCall)
}

func modernHeaders(method, name string) map[string]string {
	return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
}

// TestAuditDecisions: the decision and the names each kind of request gets in its record,
// live with the catalog: a renamed tool, a tool no policy grants, a resource granted through
// a template, a prompt the catalog answers, a list (not audited by default).
func TestAuditDecisions(t *testing.T) {
	env, out := auditedEnv(t, &catalog.Audit{Arguments: catalog.AuditArgumentsRedacted, Redact: []string{"q"},
		Methods: catalog.DefaultAuditMethods, Denials: true}, 0)
	env.post("a", modernBody("1", "tools/call", `"name":"lookup","arguments":{"q":"who","password":"hunter2","n":1}`), modernHeaders("tools/call", "lookup"))
	env.post("a", modernBody("2", "tools/call", `"name":"delete","arguments":{}`), modernHeaders("tools/call", "delete"))
	env.post("a", modernBody("3", "resources/read", `"uri":"db://tables/users"`), modernHeaders("resources/read", "db://tables/users"))
	env.post("a", modernBody("4", "prompts/get", `"name":"summarize"`), modernHeaders("prompts/get", "summarize"))
	env.post("a", modernBody("5", "tools/list", `"cursor":null`), modernHeaders("tools/list", ""))
	idle(t, env.srv)
	env.srv.audit.Close()
	got := out.records(t)
	type want struct {
		id, method, name, upstream, reason, policy, status string
		code                                               int
		args                                               string
	}
	wants := []want{
		{"1", "tools/call", "lookup", "internal_raw", audit.ReasonAllowed, "a/0", audit.StatusResult, 0, `{"q":"[REDACTED]","password":"[REDACTED]","n":1}`},
		{"2", "tools/call", "delete", "", audit.ReasonNotGranted, "", audit.StatusError, -32602, `{}`},
		{"3", "resources/read", "db://tables/users", "db://tables/users", audit.ReasonAllowed, "a/0", audit.StatusResult, 0, ""},
		{"4", "prompts/get", "summarize", "", audit.ReasonAllowed, "a/0", audit.StatusResult, 0, ""},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d records, want %d: %+v", len(got), len(wants), got)
	}
	for i, w := range wants {
		r := got[i]
		if string(r.RequestID) != w.id || r.Method != w.method || r.Name != w.name || r.UpstreamName != w.upstream ||
			r.Decision.Reason != w.reason || r.Decision.Allowed != (w.reason == audit.ReasonAllowed) || r.Decision.Policy != w.policy ||
			r.Outcome.Status != w.status || r.Outcome.ErrorCode != w.code || string(r.Arguments) != w.args {
			t.Errorf("record %d = %+v (arguments %s), want %+v", i, r, r.Arguments, w)
		}
		if r.Schema != audit.Schema || r.Server != (audit.Server{Namespace: "ns", Name: "srv"}) || r.Pod != "pod-0" ||
			r.ProtocolVersion != "2026-07-28" || r.Caller == nil || r.Caller.ServiceAccount != "team-a/agent-a" || r.CatalogRevision == "" {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if v := counterValue(t, env.srv.m.AccessDenied.WithLabelValues(audit.ReasonNotGranted)); v != 1 {
		t.Errorf("access_denied_total{NotGranted} = %v, want 1", v)
	}
}

// blockedWriter blocks every Write until release is closed.
type blockedWriter struct {
	release chan struct{}
	lockedBuffer
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.lockedBuffer.Write(p)
}

// TestFullAuditSinkNeverDelaysACall: with the sink's writer stuck, calls are answered all the
// same; the records that do not fit are dropped and counted, and the first record written
// after says how many were.
func TestFullAuditSinkNeverDelaysACall(t *testing.T) {
	env := newAuthzEnv(t, authzAccess())
	stuck := &blockedWriter{release: make(chan struct{})}
	env.srv.audit = audit.NewTrail(audit.TrailOptions{Out: stuck, Queue: 4, Pod: "pod-0", Log: slog.New(slog.DiscardHandler),
		OnDrop: env.srv.m.AuditDropped.Inc})
	c := authzCatalog(authzAccess())
	c.Audit = &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: []string{"tools/call"}}
	env.applyCatalog(c)
	const calls = 40
	// boundedClient's timeout fails a call that hangs behind the stuck sink.
	for i := range calls {
		a := env.post("a", modernBody("1", "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
		if a.Status != 200 || a.Result == nil {
			t.Fatalf("call %d: %+v", i, a)
		}
	}
	idle(t, env.srv)
	dropped := counterValue(t, env.srv.m.AuditDropped)
	// One record is in the stuck write, four wait in the queue; the rest are dropped.
	if dropped < calls-5 || dropped > calls-4 {
		t.Fatalf("dropped %v records, want %d or %d", dropped, calls-5, calls-4)
	}
	close(stuck.release)
	// The records that waited are written; then the sink has room again.
	deadline := time.Now().Add(10 * time.Second)
	for len(stuck.records(t)) != calls-int(dropped) {
		if time.Now().After(deadline) {
			t.Fatalf("%d records written after the writer recovered, want %d", len(stuck.records(t)), calls-int(dropped))
		}
		time.Sleep(time.Millisecond)
	}
	env.post("a", modernBody("2", "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
	idle(t, env.srv)
	env.srv.audit.Close()
	recs := stuck.records(t)
	var reported uint64
	for _, r := range recs {
		reported += r.DroppedBefore
	}
	if final := counterValue(t, env.srv.m.AuditDropped); final != dropped {
		t.Fatalf("%v records dropped after the writer recovered", final-dropped)
	}
	if reported != uint64(dropped) || len(recs)+int(dropped) != calls+1 {
		t.Fatalf("%d records written reporting %d dropped; %v dropped; want written + dropped = %d", len(recs), reported, dropped, calls+1)
	}
	if last := recs[len(recs)-1]; string(last.RequestID) != "2" {
		t.Fatalf("the call after the writer recovered has no record: %+v", last)
	}
}

// TestAuditLive: audit follows the catalog: off, then on (stdout), then off again, with no
// restart; a denials-only audit writes denials only.
func TestAuditLive(t *testing.T) {
	env, out := auditedEnv(t, nil, 0)
	call := func(id, tool string) {
		env.post("a", modernBody(id, "tools/call", `"name":"`+tool+`","arguments":{}`), modernHeaders("tools/call", tool))
	}
	call("1", "search")
	c := authzCatalog(authzAccess())
	c.Audit = &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Denials: true}
	env.applyCatalog(c)
	call("2", "search")
	call("3", "delete")
	env.applyCatalog(authzCatalog(authzAccess()))
	call("4", "delete")
	idle(t, env.srv)
	env.srv.audit.Close()
	got := out.records(t)
	if len(got) != 1 || string(got[0].RequestID) != "3" || got[0].Decision.Reason != audit.ReasonNotGranted {
		t.Fatalf("records %+v, want only the denial of call 3", got)
	}
}

// counterValue reads a counter of the sidecar's metrics.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestAuditFileSinkLive: the catalog's file takes the records; renaming it moves them to the
// new file (the old one is closed with everything written), and dropping it back to stdout.
func TestAuditFileSinkLive(t *testing.T) {
	dir := t.TempDir()
	env, out := auditedEnvIn(t, nil, 0, dir)
	call := func(id string) {
		env.post("a", modernBody(id, "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
	}
	withFile := func(file string) {
		c := authzCatalog(authzAccess())
		c.Audit = &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: []string{"tools/call"}, File: file}
		env.applyCatalog(c)
	}
	withFile(filepath.Join(dir, "a.jsonl"))
	call("1")
	call("2")
	withFile(filepath.Join(dir, "b.jsonl"))
	call("3")
	withFile("")
	call("4")
	idle(t, env.srv)
	env.srv.audit.Close()
	ids := func(file string) string {
		t.Helper()
		var got []string
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			var r audit.Record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("%s: %q: %v", file, l, err)
			}
			got = append(got, string(r.RequestID))
		}
		return strings.Join(got, ",")
	}
	if a, b := ids(filepath.Join(dir, "a.jsonl")), ids(filepath.Join(dir, "b.jsonl")); a != "1,2" || b != "3" {
		t.Fatalf("a.jsonl has %s, b.jsonl %s; want 1,2 and 3", a, b)
	}
	if got := out.records(t); len(got) != 1 || string(got[0].RequestID) != "4" {
		t.Fatalf("stdout has %+v, want call 4 only", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a.jsonl")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit file mode: %v %v", fi.Mode(), err)
	}
}

// TestAuditFileOutsideTheAuditDir: a catalog naming a file outside the audit directory (which
// the API server's rules refuse; a hand-written catalog file may not) gets no file: the records
// go to stdout, and the file is never created.
func TestAuditFileOutsideTheAuditDir(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	env, out := auditedEnvIn(t, nil, 0, allowed)
	for i, file := range []string{filepath.Join(outside, "a.jsonl"), allowed, allowed + "x/b.jsonl"} {
		c := authzCatalog(authzAccess())
		c.Audit = &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: []string{"tools/call"}, File: file}
		env.applyCatalog(c)
		env.post("a", modernBody(strconv.Itoa(i+1), "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
	}
	idle(t, env.srv)
	env.srv.audit.Close()
	if got := out.records(t); len(got) != 3 {
		t.Fatalf("stdout has %d records, want 3", len(got))
	}
	for _, dir := range []string{outside, allowed} {
		if files, _ := os.ReadDir(dir); len(files) != 0 {
			t.Fatalf("%s has %v: the refused file was written", dir, files)
		}
	}
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"/var/log/switchboard/audit.jsonl", true}, {"/var/log/switchboard/sub/a.jsonl", true},
		{"/var/log/switchboard", false}, {"/var/log/switchboard/", false}, {"/var/log/switchboard/../x", false},
		{"/var/log/switchboardx/a", false}, {"/tmp/a.jsonl", false}, {"audit.jsonl", false}, {"/var/log/switchboard/..a", true},
	} {
		if got := audit.InDir(catalog.AuditDir, tc.file); got != tc.want {
			t.Errorf("audit.InDir(%q) = %v, want %v", tc.file, got, tc.want)
		}
	}
}

// TestAuditRefusedSubscriptions: with denials audited, a listen whose filter names a resource
// the caller may not read and a 2025-era resources/subscribe of it have NotGranted records;
// a granted subscribe has none (resources/subscribe is not an audited method).
func TestAuditRefusedSubscriptions(t *testing.T) {
	env, out := auditedEnv(t, &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: catalog.DefaultAuditMethods, Denials: true}, 0)
	listen := env.post("b", modernBody("1", "subscriptions/listen", `"notifications":{"resourceSubscriptions":["db://tables/users","db://tables/x"]}`),
		modernHeaders("subscriptions/listen", ""))
	if listen.Error == nil || listen.Error.Code != wire.CodeInvalidParams {
		t.Fatalf("listen: %+v", listen)
	}
	sid := env.legacyInit("b")
	if a := env.legacy("b", sid, "resources/subscribe", `{"uri":"db://tables/users"}`); a.Error == nil {
		t.Fatalf("subscribe of a resource not granted: %+v", a)
	}
	if a := env.legacy("b", sid, "resources/subscribe", `{"uri":"db://tables/orders"}`); a.Error != nil {
		t.Fatalf("subscribe of a granted resource: %+v", a.Error)
	}
	idle(t, env.srv)
	env.srv.audit.Close()
	got := out.records(t)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	for i, w := range []struct{ version, method, id string }{{"2026-07-28", "subscriptions/listen", "1"}, {"2025-11-25", "resources/subscribe", ""}} {
		r := got[i]
		if r.Method != w.method || r.Name != "db://tables/users" || r.ProtocolVersion != w.version || r.Decision.Allowed ||
			r.Decision.Reason != audit.ReasonNotGranted || r.Outcome.Status != audit.StatusError || r.Outcome.ErrorCode != wire.CodeInvalidParams ||
			r.UpstreamName != "" || r.Caller == nil || r.Caller.ServiceAccount != "team-b/agent-b" || (w.id != "" && string(r.RequestID) != w.id) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	if v := counterValue(t, env.srv.m.AccessDenied.WithLabelValues(audit.ReasonNotGranted)); v != 2 {
		t.Errorf("access_denied_total{NotGranted} = %v, want 2", v)
	}
}

// TestAuditOTLPOnly: with an OTLP endpoint and no file, the records go to the collector and
// not to stdout; the endpoint unchanged across a catalog edit keeps its exporter.
func TestAuditOTLPOnly(t *testing.T) {
	var mu sync.Mutex
	var names []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rl := range req.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				for _, l := range sl.GetLogRecords() {
					for _, a := range l.GetAttributes() {
						if a.GetKey() == "requestId" {
							names = append(names, a.GetValue().GetStringValue())
						}
					}
				}
			}
		}
		mu.Unlock()
	}))
	defer collector.Close()
	audited := &catalog.Audit{Arguments: catalog.AuditArgumentsOff, Methods: []string{"tools/call"}, OTLPEndpoint: collector.URL + "/v1/logs"}
	env, out := auditedEnv(t, audited, 0)
	env.post("a", modernBody("1", "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
	_, first := env.srv.audit.Current().Sinks()
	c := authzCatalog(authzAccess())
	edited := *audited
	edited.Methods = []string{"resources/read", "tools/call"}
	c.Audit = &edited
	env.applyCatalog(c)
	env.post("a", modernBody("2", "tools/call", `"name":"search","arguments":{}`), modernHeaders("tools/call", "search"))
	idle(t, env.srv)
	if lines, otlp := env.srv.audit.Current().Sinks(); otlp != first || lines != nil {
		t.Fatalf("after the edit: OTLP sink %p (was %p), stream sink %v", otlp, first, lines)
	}
	env.srv.audit.Close()
	if got := out.records(t); len(got) != 0 {
		t.Fatalf("stdout has %d records with OTLP only", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(names, ",") != "1,2" {
		t.Fatalf("the collector got request ids %v, want 1,2", names)
	}
}
