//go:build e2e

package main_test

// Graceful drain (docs/drain.md) against real processes: the sidecar binary
// in front of the go-sdk everything-server, or of a small go-sdk server of
// ours with slow tools.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// rawStream is one listen stream read to its end: every message in order,
// when the complete result arrived, and how the body ended.
type rawStream struct {
	id       string // the listen id as sent (JSON)
	filter   string
	msgs     []map[string]any
	complete time.Time
	endErr   error // nil: the response ended cleanly (last chunk, then close)
	done     chan struct{}
	acked    chan struct{}
}

// openRaw starts a listen with client c and reads it in the background.
func openRaw(t *testing.T, c *http.Client, url string, id any, filter string) (*rawStream, error) {
	t.Helper()
	idj, _ := json.Marshal(id)
	s := &rawStream{id: string(idj), filter: filter, done: make(chan struct{}), acked: make(chan struct{})}
	resp, err := c.Do(rpcReq(t, url, id, "subscriptions/listen", "", `,"notifications":`+filter)) //nolint:bodyclose // closed by the reader
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("listen %s: HTTP %d", s.id, resp.StatusCode)
	}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					s.endErr = err
				}
				return
			}
			d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(d), &m) != nil {
				m = map[string]any{"unparseable": d}
			}
			if len(s.msgs) == 0 {
				close(s.acked)
			}
			if m["result"] != nil && s.complete.IsZero() {
				s.complete = time.Now()
			}
			s.msgs = append(s.msgs, m)
		}
	}()
	return s, nil
}

// metricOrZero is metricValue for a series that may not exist yet.
func metricOrZero(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

func (s *rawStream) waitAck(t *testing.T) {
	t.Helper()
	select {
	case <-s.acked:
	case <-s.done:
		t.Fatalf("listen %s ended before its ack: %v", s.id, s.endErr)
	case <-time.After(hang):
		t.Fatalf("listen %s: no ack", s.id)
	}
}

func (s *rawStream) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(hang):
		t.Fatalf("listen %s never ended", s.id)
	}
}

// drainRequest is what a preStop hook sends: GET /drain with the pod's drain token.
func drainRequest(method, admin, token string) *http.Request {
	r, err := http.NewRequest(method, admin+"/drain", nil)
	if err != nil {
		panic(err)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// drainAsync calls GET /drain (what the preStop hooks send) and delivers the
// status it answers.
func drainAsync(admin string) <-chan map[string]any {
	ch := make(chan map[string]any, 1)
	go func() {
		var m map[string]any
		r, err := http.DefaultClient.Do(drainRequest(http.MethodGet, admin, testDrainToken))
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&m)
			r.Body.Close()
		}
		ch <- m
	}()
	return ch
}

func waitNotReady(t *testing.T, admin string) {
	t.Helper()
	eventually.True(t, "the sidecar to report not ready", func() bool {
		r, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusServiceUnavailable
	})
}

// TestDrainThousandStreams: 1,000 listen streams from several clients with
// mixed filters. Each gets every notification sent before the drain, then
// exactly one complete result carrying its own id, then the end of the
// response — nothing after it; and a listen arriving during the drain gets
// its ack and complete at once.
func TestDrainThousandStreams(t *testing.T) {
	const (
		clients   = 4
		perClient = 250
		jitter    = 500 * time.Millisecond
	)
	e := newEnv(t, "--drain-delay", "300ms", "--drain-jitter", jitter.String(), "--drain-budget", "2s")
	filters := []string{
		`{"toolsListChanged":true}`,
		`{"promptsListChanged":true}`,
		`{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}`,
		`{"resourceSubscriptions":["test://watched-resource"],"promptsListChanged":true}`,
	}
	streams := make([][]*rawStream, clients)
	var wg sync.WaitGroup
	for c := range clients {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		wg.Go(func() {
			for i := range perClient {
				var id any = c*perClient + i
				if i%2 == 1 {
					id = fmt.Sprintf("c%d-s%d", c, i) // string ids too
				}
				s, err := openRaw(t, hc, e.mcp, id, filters[(c+i)%len(filters)])
				if err != nil {
					t.Error(err)
					return
				}
				streams[c] = append(streams[c], s)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var all []*rawStream
	for _, ss := range streams {
		all = append(all, ss...)
	}
	for _, s := range all {
		s.waitAck(t)
	}
	// Notifications sent before the drain must reach every stream that
	// asked for them, before its complete.
	callTool(t, e.mcp, "test_trigger_tool_change")
	callTool(t, e.mcp, "test_trigger_prompt_change")
	eventually.True(t, "the prompts change to reach the streams", func() bool {
		m := metricOrZero(t, e.admin, `switchboard_sidecar_notifications_sent_total{type="notifications/prompts/list_changed"}`)
		return m >= float64(len(all)*3/4)
	})
	eventually.True(t, "the tools change to reach the streams", func() bool {
		m := metricOrZero(t, e.admin, `switchboard_sidecar_notifications_sent_total{type="notifications/tools/list_changed"}`)
		return m >= float64(len(all)/2)
	})

	drained := drainAsync(e.admin)
	waitNotReady(t, e.admin)
	late, err := openRaw(t, http.DefaultClient, e.mcp, "late", `{"toolsListChanged":true}`)
	if err != nil {
		t.Fatal(err)
	}
	late.wait(t)
	if len(late.msgs) != 2 || late.msgs[0]["method"] != "notifications/subscriptions/acknowledged" ||
		late.msgs[1]["id"] != "late" || late.endErr != nil {
		t.Fatalf("listen during drain: %v (end: %v)", late.msgs, late.endErr)
	}
	if res, _ := late.msgs[1]["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("listen during drain ended with %v", late.msgs[1])
	}

	var first, last time.Time
	for _, s := range all {
		s.wait(t)
		if s.endErr != nil {
			t.Errorf("stream %s: response did not end cleanly: %v", s.id, s.endErr)
			continue
		}
		var completes, tools, prompts int
		for i, m := range s.msgs {
			switch m["method"] {
			case "notifications/tools/list_changed":
				tools++
			case "notifications/prompts/list_changed":
				prompts++
			}
			if _, ok := m["result"]; ok {
				completes++
				if i != len(s.msgs)-1 {
					t.Errorf("stream %s: %d messages after its complete: %v", s.id, len(s.msgs)-1-i, s.msgs[i+1:])
				}
			}
		}
		fin := s.msgs[len(s.msgs)-1]
		res, _ := fin["result"].(map[string]any)
		idj, _ := json.Marshal(fin["id"])
		sidj, _ := json.Marshal(subID(fin))
		if completes != 1 || res["resultType"] != "complete" || string(idj) != s.id || string(sidj) != s.id {
			t.Errorf("stream %s: %d complete results; final frame %v", s.id, completes, fin)
			continue
		}
		if strings.Contains(s.filter, "tools") && tools == 0 {
			t.Errorf("stream %s (%s) missed the tools change sent before the drain", s.id, s.filter)
		}
		if strings.Contains(s.filter, "prompts") && prompts == 0 {
			t.Errorf("stream %s (%s) missed the prompts change sent before the drain", s.id, s.filter)
		}
		if !strings.Contains(s.filter, "tools") && tools > 0 {
			t.Errorf("stream %s (%s) got a tools change it did not ask for", s.id, s.filter)
		}
		if first.IsZero() || s.complete.Before(first) {
			first = s.complete
		}
		if s.complete.After(last) {
			last = s.complete
		}
	}
	select {
	case st := <-drained:
		if st["state"] != "drained" || st["streamsEnded"] != float64(len(all)) {
			t.Fatalf("GET /drain answered %v", st)
		}
		t.Logf("drain status: %v", st)
		if v := metricValue(t, e.admin, "switchboard_sidecar_draining"); v != 1 {
			t.Errorf("switchboard_sidecar_draining = %v after the drain, want 1", v)
		}
		if v := metricValue(t, e.admin, "switchboard_sidecar_drain_streams_ended_total"); v != float64(len(all)) {
			t.Errorf("switchboard_sidecar_drain_streams_ended_total = %v, want %d", v, len(all))
		}
		if v := metricValue(t, e.admin, "switchboard_sidecar_drain_duration_seconds_count"); v != 1 {
			t.Errorf("switchboard_sidecar_drain_duration_seconds_count = %v, want 1", v)
		}
	case <-time.After(hang):
		t.Fatal("GET /drain did not return")
	}
	// The drain is idempotent (both containers' preStop hooks call it; POST works too), and
	// /drain/status reports it.
	for _, req := range []struct{ method, path string }{{http.MethodPost, "/drain"}, {http.MethodGet, "/drain/status"}} {
		hr, err := http.NewRequest(req.method, e.admin+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+testDrainToken) // /drain/status needs none
		r, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		_ = json.NewDecoder(r.Body).Decode(&st)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || st["state"] != "drained" || st["streamsEnded"] != float64(len(all)) {
			t.Errorf("%s %s after the drain: %d %v", req.method, req.path, r.StatusCode, st)
		}
	}
	// The completes are spread over the jitter window, not sent in one
	// burst. (Load only stretches the spread, so half the window is a safe
	// lower bound; the real distribution is measured by hack/drainbench.)
	spread := last.Sub(first)
	t.Logf("%d completes received over %v (jitter %v)", len(all), spread, jitter)
	if spread < jitter/2 {
		t.Errorf("completes arrived within %v; want them spread over the %v jitter window", spread, jitter)
	}
}

// slowUpstream is a go-sdk server with a tool that takes 400 ms and one that
// runs until it is cancelled (sending a progress notification first when the
// request carries a progress token), served as JSON or SSE. A server/discover
// request with the id "stuck-discover" is held until it is cancelled.
func slowUpstream(t *testing.T, jsonResponse bool) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(400 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "stuck"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Message: "started"})
		}
		select {
		case <-time.After(time.Minute):
		case <-ctx.Done():
		}
		return nil, nil, ctx.Err()
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: jsonResponse})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"id":"stuck-discover"`)) {
			select {
			case <-time.After(time.Minute):
			case <-r.Context().Done():
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	})
	addr := freePort(t)
	hs := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: hang}
	go func() { _ = hs.ListenAndServe() }()
	t.Cleanup(func() { hs.Close() })
	return addr
}

// callResult is what one forwarded call came back with.
type callResult struct {
	status int
	ctype  string
	msgs   []map[string]any // JSON body, or every SSE data message
	err    error            // transport error: a reset or a cut body
}

// rawCall calls tool with id, optionally asking for progress, and reads the
// whole answer.
func rawCall(t *testing.T, url string, id, tool string, progress bool) callResult {
	t.Helper()
	m := meta
	if progress {
		m = strings.Replace(meta, `"_meta":{`, `"_meta":{"progressToken":"p-`+id+`",`, 1)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{%s,"name":%q,"arguments":{}}}`, id, m, tool)
	req := rpcReq(t, url, id, "tools/call", tool, "")
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = nil
	return rawDo(t, req)
}

// rawDo sends req and reads the whole answer.
func rawDo(t *testing.T, req *http.Request) callResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return callResult{err: err}
	}
	defer resp.Body.Close()
	r := callResult{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		r.err = err
		return r
	}
	if strings.HasPrefix(r.ctype, "text/event-stream") {
		for line := range strings.SplitSeq(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var msg map[string]any
				_ = json.Unmarshal([]byte(d), &msg)
				r.msgs = append(r.msgs, msg)
			}
		}
	} else {
		var msg map[string]any
		if err := json.Unmarshal(b, &msg); err != nil {
			r.err = fmt.Errorf("body is not JSON: %q", b)
		}
		r.msgs = append(r.msgs, msg)
	}
	return r
}

// TestDrainInflight: requests in flight when the drain starts finish
// normally; one still running when the budget is over is answered with a
// JSON-RPC error carrying its id — on a JSON response, or as the last event
// of an SSE response that already started — and the sidecar, stopped by
// SIGTERM, exits only after writing that answer.
func TestDrainInflight(t *testing.T) {
	for _, c := range []struct {
		name     string
		json     bool
		progress bool // the stuck call's SSE response starts before the budget ends
		sigterm  bool
	}{
		{name: "JSON upstream, preStop GET /drain", json: true},
		{name: "SSE upstream, response started, preStop GET /drain", progress: true},
		{name: "SSE upstream, response started, SIGTERM", progress: true, sigterm: true},
		{name: "SSE upstream, no event yet, SIGTERM", sigterm: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := &env{upAddr: slowUpstream(t, c.json)}
			e.startSidecar(t, "--drain-delay", "100ms", "--drain-jitter", "0s", "--drain-budget", "1s")
			results := make(map[string]chan callResult)
			call := func(id, tool string, progress bool) {
				ch := make(chan callResult, 1)
				results[id] = ch
				go func() { ch <- rawCall(t, e.mcp, id, tool, progress) }()
			}
			call("stuck-1", "stuck", c.progress)
			for i := range 3 {
				call(fmt.Sprintf("slow-%d", i), "slow", false)
			}
			// A request the sidecar answers itself while it waits on the
			// upstream is in flight too.
			discover := make(chan callResult, 1)
			results["stuck-discover"] = discover
			go func() { discover <- rawDo(t, rpcReq(t, e.mcp, "stuck-discover", "server/discover", "", "")) }()
			eventually.True(t, "five requests in flight", func() bool { return metricValue(t, e.admin, "switchboard_sidecar_inflight_requests") == 5 })
			var drained <-chan map[string]any
			if c.sigterm {
				if err := e.sc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else {
				drained = drainAsync(e.admin)
			}
			for id, ch := range results {
				var r callResult
				select {
				case r = <-ch:
				case <-time.After(hang):
					t.Fatalf("%s: no answer", id)
				}
				if r.err != nil {
					t.Fatalf("%s: transport error (the client was cut, not answered): %v", id, r.err)
				}
				last := r.msgs[len(r.msgs)-1]
				if last["id"] != id {
					t.Fatalf("%s: last message %v", id, last)
				}
				if strings.HasPrefix(id, "slow") {
					if r.status != 200 || last["result"] == nil {
						t.Errorf("%s: in flight at drain start but not completed: HTTP %d %v", id, r.status, last)
					}
					continue
				}
				e, _ := last["error"].(map[string]any)
				if e == nil || e["code"] != -32603.0 {
					t.Fatalf("%s: want a -32603 error at the budget's end, got HTTP %d %v", id, r.status, last)
				}
				if c.progress && id == "stuck-1" && (!strings.HasPrefix(r.ctype, "text/event-stream") || len(r.msgs) < 2) {
					t.Errorf("%s: want the error as the last event of the started SSE response, got %s %v", id, r.ctype, r.msgs)
				}
				t.Logf("%s: HTTP %d %s %v", id, r.status, r.ctype, last)
			}
			if c.sigterm {
				waitExit(t, e.sc)
				return
			}
			select {
			case st := <-drained:
				if st["state"] != "drained" || st["inflightAtBudget"] != 2.0 || st["inflightAborted"] != 2.0 || st["inflightLeft"] != 0.0 {
					t.Fatalf("GET /drain answered %v", st)
				}
			case <-time.After(hang):
				t.Fatal("GET /drain did not return")
			}
		})
	}
}

// TestSIGTERMDrains: SIGTERM starts the same drain: every listen stream gets its complete, and
// the sidecar exits cleanly.
func TestSIGTERMDrains(t *testing.T) {
	e := newEnv(t, "--drain-delay", "100ms", "--drain-jitter", "50ms", "--drain-budget", "2s")
	streams := []*sse{
		listen(t, e.mcp, 1, `{"toolsListChanged":true}`),
		listen(t, e.mcp, "two", `{"promptsListChanged":true}`),
		listen(t, e.mcp, 3, `{"resourceSubscriptions":["test://watched-resource"]}`),
	}
	for _, s := range streams {
		s.next(t)
	}
	if err := e.sc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		// Skip any resources/updated that raced the signal.
		var m map[string]any
		m = s.next(t)
		for m["method"] != nil {
			m = s.next(t)
		}
		if res, _ := m["result"].(map[string]any); res["resultType"] != "complete" || subID(m) != m["id"] {
			t.Fatalf("final frame = %v", m)
		}
	}
	waitExit(t, e.sc)
}

// TestDrainClosesConnectionsOfEarlierResponses: a call whose SSE response
// started before the drain (so without Connection: close) and ends during it
// leaves its keep-alive connection to a client that was never told to close
// it. The sidecar closes that connection right after the response, during
// the drain, instead of leaving it idle for the Shutdown after the drain to
// close under the client's next request (a rolling update then loses that
// request: EOF or a reset, and a POST is not retried).
func TestDrainClosesConnectionsOfEarlierResponses(t *testing.T) {
	e := &env{upAddr: slowUpstream(t, false)}
	e.startSidecar(t, "--drain-delay", "100ms", "--drain-jitter", "0s", "--drain-budget", "300ms")
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(e.mcp, "http://"), "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hang))
	id := "stuck-1"
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{%s,"name":"stuck","arguments":{}}}`,
		id, strings.Replace(meta, `"_meta":{`, `"_meta":{"progressToken":"p",`, 1))
	req := rpcReq(t, e.mcp, id, "tools/call", "stuck", "")
	req.Body = io.NopCloser(strings.NewReader(body))
	req.ContentLength = int64(len(body))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("before the drain: HTTP %d, close %v", resp.StatusCode, resp.Close)
	}
	// The progress event came: the response started before the drain.
	rb := bufio.NewReader(resp.Body)
	if line, err := rb.ReadString('\n'); err != nil || !strings.HasPrefix(line, "event:") && !strings.HasPrefix(line, "data:") && !strings.HasPrefix(line, "id:") {
		t.Fatalf("no first event: %q %v", line, err)
	}
	drained := drainAsync(e.admin)
	// The budget's end answers the call; the response ends cleanly.
	if _, err := io.Copy(io.Discard, rb); err != nil {
		t.Fatalf("response cut: %v", err)
	}
	select {
	case st := <-drained:
		if st["state"] != "drained" {
			t.Fatalf("GET /drain answered %v", st)
		}
	case <-time.After(hang):
		t.Fatal("GET /drain did not return")
	}
	// Drained, not shut down: the connection that carried the call must be
	// closed already, not kept for a next request.
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("connection still open after the drain (read %d bytes, %v): the client may send its next request on it", n, err)
	}
}
