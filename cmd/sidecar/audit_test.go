//go:build e2e

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
)

// bearerTransport adds a bearer token to every request of a go-sdk client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// auditCatalog is the catalog of the audit test: a renamed tool, a disabled one, ServiceAccount
// auth, one policy granting team-a's ServiceAccounts some tools, and the audit of the default
// methods and denials with Redacted arguments.
func auditCatalog(t *testing.T) []byte {
	t.Helper()
	var c catalog.Catalog
	if err := json.Unmarshal(encodeCatalog(t,
		catalog.Tool{Name: "simple", UpstreamName: "test_simple_text"},
		catalog.Tool{Name: "test_audio_content", Disabled: true}), &c); err != nil {
		t.Fatal(err)
	}
	c.Auth = &catalog.Auth{Resource: authAudience, TrustDomain: "cluster.local",
		ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{authAudience}}}
	c.Access = &catalog.Access{Rules: []catalog.AccessRule{{Policy: "agents/tools", Source: catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}},
		Tools: []string{"simple", "test_error_handling", "test_input_required_result_elicitation", "no_such_tool", "block"}}}}
	c.Audit = &catalog.Audit{Arguments: catalog.AuditArgumentsRedacted, Redact: []string{"apiKey"},
		Methods: catalog.DefaultAuditMethods, Denials: true}
	b, err := catalog.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// auditRecords are the audit records among a sidecar process's output lines (its logs go to
// stderr, the records to stdout; the harness reads both).
func auditRecords(t *testing.T, p *proc) []audit.Record {
	t.Helper()
	var out []audit.Record
	sc := bufio.NewScanner(strings.NewReader(p.output()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), `{"schema":"`+audit.Schema+`"`) {
			continue
		}
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("an audit line that is not a record: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// waitRecords waits for n audit records of p.
func waitRecords(t *testing.T, p *proc, n int) []audit.Record {
	t.Helper()
	var recs []audit.Record
	eventually.True(t, fmt.Sprintf("%d audit records", n), func() bool {
		recs = auditRecords(t, p)
		return len(recs) >= n
	})
	if len(recs) != n {
		t.Fatalf("%d audit records, want %d: %+v", len(recs), n, recs)
	}
	return recs
}

// TestAuditTrail: a real sidecar process, a real upstream (the go-sdk everything-server, and a
// go-sdk server whose tool blocks until cancelled) and a TokenRequest token of a ServiceAccount
// of a real API server: each request of the table produces exactly the record it lists, read
// back from the sidecar's stdout. Then no secret (the token, the redacted argument) is in any
// log line, span attribute or metric of the run.
func TestAuditTrail(t *testing.T) {
	cluster, tokenOf := serviceAccountCluster(t)
	tok := tokenOf("team-a", "agent-a", authAudience)
	rc, traces := startTraceReceiver(t)

	data := auditCatalog(t)
	rev := catalog.Revision(data)
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, data)
	args := func(pod string) []string {
		return []string{"--catalog-file", path, "--kubeconfig", cluster.KubeconfigPath, "--pod-name", pod,
			"--otlp-endpoint", traces, "--trace-sampling-per-million", "1000000"}
	}
	e := &env{upAddr: freePort(t)}
	startUpstream(t, e.upAddr)
	e.startSidecar(t, args("everything-0")...)
	blockAddr, entered, ended := blockingUpstream(t)
	b := &env{upAddr: blockAddr}
	b.startSidecar(t, args("blocking-0")...)
	for _, x := range []*env{e, b} {
		eventually.True(t, "the catalog's auth to apply", func() bool {
			st, _, _ := do(t, rpcReq(t, x.mcp, 0, "tools/list", "", ""))
			return st == http.StatusUnauthorized
		})
	}
	authed := func(r *http.Request) *http.Request { r.Header.Set("Authorization", "Bearer "+tok); return r }
	call := func(url string, id any, name, arguments string) (int, map[string]any) {
		st, _, msg := do(t, authed(rpcReq(t, url, id, "tools/call", name, `,"name":"`+name+`","arguments":`+arguments)))
		return st, msg
	}
	errCode := func(msg map[string]any) int {
		e, _ := msg["error"].(map[string]any)
		c, _ := e["code"].(float64)
		return int(c)
	}
	before := time.Now().UTC()

	// 1. Allowed, renamed, with a trace context and Redacted arguments.
	req := authed(rpcReq(t, e.mcp, 1, "tools/call", "simple", `,"name":"simple","arguments":{"apiKey":"sk-live-0123456789abcdef","text":"hi"}`))
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if st, _, msg := do(t, req); st != 200 || msg["result"] == nil {
		t.Fatalf("allowed call: HTTP %d %v", st, msg)
	}
	// 2. Denied by policy: the upstream serves it, no rule grants it.
	_, denied := call(e.mcp, 2, "test_image_content", `{}`)
	// 3. Undeclared: the catalog disables it.
	_, undeclared := call(e.mcp, 3, "test_audio_content", `{}`)
	// 4. Upstream errors: a JSON-RPC error (no such tool upstream), a tool error.
	_, upErr := call(e.mcp, 4, "no_such_tool", `{}`)
	call(e.mcp, 5, "test_error_handling", `{}`)
	// 5. input_required to a 2026-07-28 client: its answer is a request of its own.
	_, ir := call(e.mcp, 6, "test_input_required_result_elicitation", `{}`)
	if res, _ := ir["result"].(map[string]any); res["resultType"] != "input_required" {
		t.Fatalf("want input_required: %v", ir)
	}
	// 6. A 2025-era client (go-sdk, 2025-11-25) answering the upstream's elicitation in one
	// round the sidecar relays.
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-audit", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		}})
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearerTransport{tok}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("2025-era input_required call: %v %+v", err, res)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "simple", Arguments: map[string]any{"text": "old"}}); err != nil {
		t.Fatal(err)
	}
	// 7. Cancelled: a 2026-07-28 client closes its request.
	cctx, ccancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(authed(rpcReq(t, b.mcp, 7, "tools/call", "block", `,"name":"block","arguments":{}`)).WithContext(cctx)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(hang):
		t.Fatal("the blocking call never reached the upstream")
	}
	ccancel()
	<-done
	select {
	case <-ended:
	case <-time.After(hang):
		t.Fatal("the upstream call was not cancelled")
	}

	// 8. Cancelled: a 2025-11-25 client's notifications/cancelled.
	hdr := func(sid string) []string {
		return []string{"Authorization", "Bearer " + tok, "MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", sid}
	}
	st, h, msg := do(t, legacyReq(t, b.mcp, "init", "initialize",
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, hdr("")[:2]...))
	sid := h.Get("Mcp-Session-Id")
	if st != 200 || sid == "" {
		t.Fatalf("initialize: HTTP %d %v", st, msg)
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(legacyReq(t, b.mcp, 8, "tools/call", `{"name":"block","arguments":{}}`, hdr(sid)...)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(hang):
		t.Fatal("the 2025-era blocking call never reached the upstream")
	}
	if st, _, _ := send(t, legacyReq(t, b.mcp, nil, "notifications/cancelled", `{"requestId":8}`, hdr(sid)...)); st != http.StatusAccepted {
		t.Fatalf("notifications/cancelled: HTTP %d", st)
	}
	<-done
	// 9. Refusals outside the calls: a listen for a resource no rule grants (2026-07-28), a
	// 2025-era resources/subscribe of it, and a token that is not valid (401, the body unread:
	// method and name from the Mcp-Method and Mcp-Name headers). The first 401, without a
	// token, was the wait for the catalog's auth above.
	const deniedURI = "test://static/resource/1"
	lreq := authed(rpcReq(t, b.mcp, 9, "subscriptions/listen", "", `,"notifications":{"resourceSubscriptions":["`+deniedURI+`"]}`))
	lreq.Header.Set("Traceparent", "00-5bf92f3577b34da6a3ce929d0e0e4737-00f067aa0ba902b7-00")
	if st, _, msg := do(t, lreq); st != http.StatusBadRequest || errCode(msg) != -32602 {
		t.Fatalf("listen for a resource not granted: HTTP %d %v", st, msg)
	}
	if st, _, msg := do(t, legacyReq(t, b.mcp, 10, "resources/subscribe", `{"uri":"`+deniedURI+`"}`, hdr(sid)...)); errCode(msg) != -32602 {
		t.Fatalf("2025-era subscribe of a resource not granted: HTTP %d %v", st, msg)
	}
	breq := rpcReq(t, b.mcp, 11, "tools/call", "block", `,"name":"block","arguments":{}`)
	breq.Header.Set("Authorization", "Bearer not-a-valid-token")
	breq.Header.Set("Traceparent", "00-6bf92f3577b34da6a3ce929d0e0e4738-00f067aa0ba902b7-00")
	if st, _, _ := do(t, breq); st != http.StatusUnauthorized {
		t.Fatalf("a token that is not valid: HTTP %d", st)
	}

	caller := &audit.Caller{Subject: "system:serviceaccount:team-a:agent-a", ServiceAccount: "team-a/agent-a", Issuer: "kubernetes"}
	rec := func(pod, version string, id any, name, upstream string, d audit.Decision, o audit.Outcome, args string) audit.Record {
		idj, _ := json.Marshal(id)
		r := audit.Record{Schema: audit.Schema, Server: audit.Server{Namespace: "local", Name: "everything"}, Pod: pod, Caller: caller,
			ProtocolVersion: version, Method: "tools/call", Name: name, UpstreamName: upstream, CatalogRevision: rev,
			Decision: d, Outcome: o, RequestID: idj}
		if args != "" {
			r.Arguments = json.RawMessage(args)
		}
		return r
	}
	allowed := audit.Decision{Allowed: true, Reason: audit.ReasonAllowed, Policy: "agents/tools"}
	result := audit.Outcome{Status: audit.StatusResult}
	first := rec("everything-0", "2026-07-28", 1, "simple", "test_simple_text", allowed, result, `{"apiKey":"[REDACTED]","text":"hi"}`)
	first.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	// The wait for the catalog's auth: a tools/list without a token.
	unauthenticated := func(pod string) audit.Record {
		return audit.Record{Schema: audit.Schema, Server: audit.Server{Namespace: "local", Name: "everything"}, Pod: pod,
			ProtocolVersion: "2026-07-28", Method: "tools/list", CatalogRevision: rev, Decision: audit.Decision{Reason: audit.ReasonNoToken},
			Outcome: audit.Outcome{Status: audit.StatusError, ErrorCode: -32600}}
	}
	want := []audit.Record{
		unauthenticated("everything-0"),
		first,
		rec("everything-0", "2026-07-28", 2, "test_image_content", "", audit.Decision{Reason: audit.ReasonNotGranted},
			audit.Outcome{Status: audit.StatusError, ErrorCode: errCode(denied)}, `{}`),
		rec("everything-0", "2026-07-28", 3, "test_audio_content", "", audit.Decision{Reason: audit.ReasonUndeclared},
			audit.Outcome{Status: audit.StatusError, ErrorCode: errCode(undeclared)}, `{}`),
		rec("everything-0", "2026-07-28", 4, "no_such_tool", "no_such_tool", allowed,
			audit.Outcome{Status: audit.StatusError, ErrorCode: errCode(upErr)}, `{}`),
		rec("everything-0", "2026-07-28", 5, "test_error_handling", "test_error_handling", allowed,
			audit.Outcome{Status: audit.StatusResult, IsError: true}, `{}`),
		rec("everything-0", "2026-07-28", 6, "test_input_required_result_elicitation", "test_input_required_result_elicitation", allowed,
			audit.Outcome{Status: audit.StatusResult, InputRequired: true}, `{}`),
		// The go-sdk client's initialize was id 1.
		rec("everything-0", "2025-11-25", 2, "test_input_required_result_elicitation", "test_input_required_result_elicitation", allowed,
			audit.Outcome{Status: audit.StatusResult, InputRequiredRounds: 1}, `{}`),
		rec("everything-0", "2025-11-25", 3, "simple", "test_simple_text", allowed, result, `{"text":"old"}`),
	}
	for i, code := range []int{errCode(denied), errCode(undeclared), errCode(upErr)} {
		if code == 0 {
			t.Fatalf("request %d was not answered with an error", i+2)
		}
	}
	check := func(got, want []audit.Record) {
		t.Helper()
		for i := range got {
			g := got[i]
			if g.Time.Before(before.Add(-time.Second)) || g.Time.After(time.Now()) || g.DurationMs < 0 || g.DurationMs > float64(hang.Milliseconds()) {
				t.Errorf("record %d: time %v, duration %vms", i, g.Time, g.DurationMs)
			}
			if want[i].Caller == nil { // refused before the caller was known: all is in want
				g.Time, g.DurationMs = time.Time{}, 0
				gj, _ := json.Marshal(g)
				wj, _ := json.Marshal(want[i])
				if string(gj) != string(wj) {
					t.Errorf("record %d:\n got %s\nwant %s", i, gj, wj)
				}
				continue
			}
			if g.Caller == nil || !slices.Contains(g.Caller.Groups, "system:serviceaccounts:team-a") {
				t.Errorf("record %d: caller %+v", i, g.Caller)
				continue
			}
			if g.TraceID == "" || (want[i].TraceID != "" && g.TraceID != want[i].TraceID) {
				t.Errorf("record %d: trace id %q, want %q (every request is sampled)", i, g.TraceID, want[i].TraceID)
			}
			g.Time, g.DurationMs, g.Caller.Groups, g.TraceID = time.Time{}, 0, nil, want[i].TraceID
			gj, _ := json.Marshal(g)
			wj, _ := json.Marshal(want[i])
			if string(gj) != string(wj) {
				t.Errorf("record %d:\n got %s\nwant %s", i, gj, wj)
			}
		}
	}
	check(waitRecords(t, e.sc, len(want)), want)
	notGranted := func(version string, id any, method string) audit.Record {
		r := rec("blocking-0", version, id, deniedURI, "", audit.Decision{Reason: audit.ReasonNotGranted},
			audit.Outcome{Status: audit.StatusError, ErrorCode: -32602}, "")
		r.Method = method
		return r
	}
	listenDenied := notGranted("2026-07-28", 9, "subscriptions/listen")
	listenDenied.TraceID = "5bf92f3577b34da6a3ce929d0e0e4737"
	badToken := audit.Record{Schema: audit.Schema, Server: audit.Server{Namespace: "local", Name: "everything"}, Pod: "blocking-0",
		ProtocolVersion: "2026-07-28", Method: "tools/call", Name: "block", CatalogRevision: rev,
		Decision: audit.Decision{Reason: audit.ReasonInvalidToken}, Outcome: audit.Outcome{Status: audit.StatusError, ErrorCode: -32600},
		TraceID: "6bf92f3577b34da6a3ce929d0e0e4738"}
	check(waitRecords(t, b.sc, 6), []audit.Record{
		unauthenticated("blocking-0"),
		rec("blocking-0", "2026-07-28", 7, "block", "block", allowed, audit.Outcome{Status: audit.StatusCancelled}, `{}`),
		rec("blocking-0", "2025-11-25", 8, "block", "block", allowed, audit.Outcome{Status: audit.StatusCancelled}, `{}`),
		listenDenied,
		notGranted("2025-11-25", 10, "resources/subscribe"),
		badToken})

	// No secret anywhere: the sidecars' logs and records, their metrics, the spans.
	time.Sleep(300 * time.Millisecond) // two export intervals
	exported := rc.Text()
	nspans := len(rc.Spans())
	if nspans == 0 {
		t.Fatal("no span exported: the span check would check nothing")
	}
	for _, x := range []*env{e, b} {
		_, _, metrics := send(t, mustGet(t, x.admin+"/metrics"))
		for what, text := range map[string]string{"output": x.sc.output(), "metrics": string(metrics), "spans": exported} {
			for _, secret := range []string{tok, "sk-live-0123456789abcdef"} {
				if strings.Contains(text, secret) {
					t.Errorf("a secret is in the sidecar's %s", what)
				}
			}
		}
		if !strings.Contains(string(metrics), `switchboard_sidecar_audit_dropped_total 0`) {
			t.Errorf("audit drops: %s", grepLines(string(metrics), "audit"))
		}
	}
	_, _, metrics := send(t, mustGet(t, e.admin+"/metrics"))
	for _, line := range []string{`switchboard_sidecar_access_denied_total{reason="NotGranted"} 1`, `switchboard_sidecar_access_denied_total{reason="Undeclared"} 1`} {
		if !strings.Contains(string(metrics), line) {
			t.Errorf("want %s: %s", line, grepLines(string(metrics), "denied"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
