package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// legacyServer is go-sdk v1.4.1's everything-server (stdio without flags).
func legacyServer(t *testing.T) string {
	t.Helper()
	bin, err := testservers.LegacyEverythingServer()
	if err != nil {
		t.Fatalf("installing the 2025-era everything-server: %v", err)
	}
	return bin
}

// syncBuffer collects the child's stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

type harness struct {
	b      *Bridge
	url    string
	stderr *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startBridge runs a bridge in front of argv on a free loopback port and
// stops it (drain included) when the test ends.
func startBridge(t *testing.T, argv []string, tweak func(*Config)) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{stderr: &syncBuffer{}, done: make(chan error, 1)}
	cfg := Config{
		Listen:      ln.Addr().String(),
		Command:     argv,
		Stderr:      h.stderr,
		DrainBudget: 10 * time.Second,
		StdinGrace:  2 * time.Second,
		TermGrace:   2 * time.Second,
		Logger:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	h.b, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.url = "http://" + ln.Addr().String() + DefaultPath
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.b.Serve(ctx, ln) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *harness) stop(t *testing.T) {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("bridge: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("bridge did not stop within 30s")
	}
}

// testWriter sends the bridge's log to the test log (shown on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// childPid is the running child's pid, waiting for it to be initialized.
func (h *harness) childPid(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := h.b.waitChild(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c.cmd.Process.Pid
}

func (h *harness) generation() uint64 {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	return h.b.gen
}

// rawSession is a 2025-era client written by hand, so that tests choose the
// request ids and progress tokens (to make them collide across clients).
type rawSession struct {
	url, sid string
	http     *http.Client
}

func (h *harness) session(t *testing.T) *rawSession {
	t.Helper()
	s := &rawSession{url: h.url, http: &http.Client{Timeout: 60 * time.Second}}
	resp, status, hdr := s.post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if status != http.StatusOK || resp[0].Error != nil {
		t.Fatalf("initialize: HTTP %d %+v", status, resp)
	}
	s.sid = hdr.Get(headerSession)
	if s.sid == "" {
		t.Fatal("initialize answered without Mcp-Session-Id")
	}
	if _, status, _ := s.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d", status)
	}
	return s
}

type rpcMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// post sends one message and returns every message of the answer (one for
// JSON, the events in order for SSE).
func (s *rawSession) post(t *testing.T, body string) ([]rpcMsg, int, http.Header) {
	t.Helper()
	msgs, status, hdr, err := s.postErr(context.Background(), body)
	if err != nil {
		t.Fatal(err)
	}
	return msgs, status, hdr
}

func (s *rawSession) postErr(ctx context.Context, body string) ([]rpcMsg, int, http.Header, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		req.Header.Set(headerSession, s.sid)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var out []rpcMsg
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m rpcMsg
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					return nil, 0, nil, err
				}
				out = append(out, m)
			}
		}
		return out, resp.StatusCode, resp.Header, sc.Err()
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, nil, err
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var m rpcMsg
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, 0, nil, fmt.Errorf("%w: %s", err, data)
		}
		out = append(out, m)
	}
	return out, resp.StatusCode, resp.Header, nil
}

// listen opens the session's GET stream; messages arrive on the channel.
func (s *rawSession) listen(ctx context.Context, t *testing.T) <-chan rpcMsg {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSession, s.sid)
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // closed by the reading goroutine below
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	ch := make(chan rpcMsg, 64)
	go func() {
		defer close(ch)
		defer func() { _ = resp.Body.Close() }()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m rpcMsg
				if json.Unmarshal([]byte(d), &m) == nil {
					ch <- m
				}
			}
		}
	}()
	return ch
}

func final(t *testing.T, msgs []rpcMsg) rpcMsg {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("no answer")
	}
	m := msgs[len(msgs)-1]
	if m.Method != "" {
		t.Fatalf("last message is %s, not the answer", m.Method)
	}
	return m
}

// A real 2025 client (go-sdk's) sees the stdio server as a Streamable HTTP
// server: initialize, lists, calls, prompts, resources, progress.
func TestBridgeServesEverythingServerToGoSDKClient(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var progress sync.Map
	for i := range 2 { // a second client is answered from the one initialize
		client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				progress.Store(fmt.Sprintf("%d/%v", i, r.Params.Progress), true)
			},
		})
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
		if err != nil {
			t.Fatalf("client %d connect: %v", i, err)
		}
		if got := cs.InitializeResult().ServerInfo.Name; got != "mcp-conformance-test-server" {
			t.Errorf("serverInfo.name = %q", got)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) < 10 {
			t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
		if err != nil || len(res.Content) != 1 {
			t.Fatalf("tools/call: %v %+v", err, res)
		}
		if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, "simple text") {
			t.Errorf("test_simple_text = %q", txt)
		}
		p := &mcp.CallToolParams{Name: "test_tool_with_progress"}
		p.SetProgressToken("tok")
		if _, err := cs.CallTool(ctx, p); err != nil {
			t.Fatalf("progress tool: %v", err)
		}
		pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments", Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
		if err != nil || len(pr.Messages) == 0 {
			t.Fatalf("prompts/get: %v", err)
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
		if err != nil || len(rr.Contents) != 1 {
			t.Fatalf("resources/read: %v", err)
		}
		_ = cs.Close()
	}
	for i := range 2 {
		for _, p := range []string{"0", "50", "100"} {
			if _, ok := progress.Load(fmt.Sprintf("%d/%s", i, p)); !ok {
				t.Errorf("client %d: no progress %s%%", i, p)
			}
		}
	}
	if g := h.generation(); g != 1 {
		t.Errorf("child generation %d, want 1 (initialize must reach the child once)", g)
	}
}

// Eight clients send requests with the same id and the same progress token
// at once: each gets its own answer and its own progress.
func TestBridgeEightConcurrentCallsWithCollidingIDs(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	sessions := make([]*rawSession, 8)
	for i := range sessions {
		sessions[i] = h.session(t)
	}
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":"same-%d"}}}`, i%2)
			msgs, status, _, err := s.postErr(context.Background(), body)
			if err != nil || status != http.StatusOK {
				errs <- fmt.Errorf("client %d: HTTP %d %w", i, status, err)
				return
			}
			var prog int
			for _, m := range msgs[:len(msgs)-1] {
				var p struct {
					Token string `json:"progressToken"`
				}
				_ = json.Unmarshal(m.Params, &p)
				if m.Method != "notifications/progress" || p.Token != fmt.Sprintf("same-%d", i%2) {
					errs <- fmt.Errorf("client %d: foreign message %s %s", i, m.Method, m.Params)
				}
				prog++
			}
			last := msgs[len(msgs)-1]
			if string(last.ID) != "42" || last.Error != nil || last.Result == nil {
				errs <- fmt.Errorf("client %d: answer id=%s err=%v", i, last.ID, last.Error)
			}
			if prog != 3 {
				errs <- fmt.Errorf("client %d: %d progress notifications, want 3", i, prog)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A child killed during a call: the call gets an error with its id, the
// child is started again, the next call works, and listening clients are
// told that the lists may have changed.
func TestBridgeChildKilledMidCall(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	pid := h.childPid(t)
	s := h.session(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := s.listen(ctx, t)

	// The progress tool runs ~150 ms; kill the child while it runs.
	type answer struct {
		msgs []rpcMsg
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		msgs, _, _, err := s.postErr(ctx, `{"jsonrpc":"2.0","id":"mid","method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":1}}}`)
		got <- answer{msgs, err}
	}()
	waitUntil(t, func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return len(h.b.pending) == 1
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	m := final(t, a.msgs)
	if string(m.ID) != `"mid"` || m.Error == nil || !strings.Contains(m.Error.Message, "exited") {
		t.Fatalf("answer to the killed call: id=%s error=%+v", m.ID, m.Error)
	}
	msgs, _, _ := s.post(t, `{"jsonrpc":"2.0","id":"next","method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`)
	if m := final(t, msgs); m.Error != nil || string(m.ID) != `"next"` {
		t.Fatalf("call after the restart: %+v", m)
	}
	if newPid := h.childPid(t); newPid == pid {
		t.Fatal("child pid unchanged")
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !seen["notifications/tools/list_changed"] {
		select {
		case m, ok := <-events:
			if !ok {
				t.Fatal("GET stream ended")
			}
			seen[m.Method] = true
		case <-deadline:
			t.Fatalf("no tools/list_changed after the restart; saw %v", seen)
		}
	}
}

// A message over --max-line-bytes whose id comes first (go-sdk writes it
// so): that request gets an error, the child keeps running.
func TestBridgeHugeLineIDFirst(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, func(c *Config) {
		c.MaxLineBytes = 256 << 10
		c.MaxBodyBytes = 4 << 20
	})
	pid := h.childPid(t)
	s := h.session(t)
	big := strings.Repeat("x", 1<<20)
	msgs, _, _ := s.post(t, `{"jsonrpc":"2.0","id":"big","method":"prompts/get","params":{"name":"test_prompt_with_arguments","arguments":{"arg1":"`+big+`","arg2":"b"}}}`)
	m := final(t, msgs)
	if string(m.ID) != `"big"` || m.Error == nil || !strings.Contains(m.Error.Message, "--max-line-bytes") {
		t.Fatalf("answer over the limit: id=%s error=%+v", m.ID, m.Error)
	}
	msgs, _, _ = s.post(t, `{"jsonrpc":"2.0","id":"small","method":"prompts/get","params":{"name":"test_prompt_with_arguments","arguments":{"arg1":"a","arg2":"b"}}}`)
	if m := final(t, msgs); m.Error != nil {
		t.Fatalf("next call: %+v", m.Error)
	}
	if h.childPid(t) != pid || h.generation() != 1 {
		t.Error("the child was restarted; an over-long answer with a readable id must only fail its request")
	}
}

// The TypeScript SDK writes "id" last, so an over-long answer cannot be
// matched to its request: the bridge restarts the child, the request gets an
// error with its id, and the next call works. Real package from npm.
func TestBridgeHugeLineIDLastRestartsChild(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "big.txt"), bytes.Repeat([]byte("y"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	argv, err := testservers.FilesystemServer(root)
	if err != nil {
		t.Fatal(err)
	}
	h := startBridge(t, argv, func(c *Config) { c.MaxLineBytes = 256 << 10 })
	pid := h.childPid(t)
	s := h.session(t)
	msgs, _, _ := s.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":%q}}}`, filepath.Join(root, "big.txt")))
	m := final(t, msgs)
	if string(m.ID) != "7" || m.Error == nil {
		t.Fatalf("answer over the limit: id=%s error=%+v", m.ID, m.Error)
	}
	msgs, _, _ = s.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":%q}}}`, root))
	if m := final(t, msgs); m.Error != nil || !strings.Contains(string(m.Result), "big.txt") {
		t.Fatalf("call after the restart: %s %+v", m.Result, m.Error)
	}
	if h.childPid(t) == pid {
		t.Error("child not restarted")
	}
}

// The npm filesystem server through the bridge: tools, and eight concurrent
// calls on one child.
func TestBridgeFilesystemServerFromNPM(t *testing.T) {
	root := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d.txt", i)), []byte(fmt.Sprintf("content %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	argv, err := testservers.FilesystemServer(root)
	if err != nil {
		t.Fatal(err)
	}
	h := startBridge(t, argv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if cs.InitializeResult().ServerInfo.Name != "secure-filesystem-server" {
		t.Errorf("serverInfo %+v", cs.InitializeResult().ServerInfo)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": filepath.Join(root, fmt.Sprintf("f%d.txt", i))}})
			if err != nil {
				t.Errorf("call %d: %v", i, err)
				return
			}
			if txt := res.Content[0].(*mcp.TextContent).Text; txt != fmt.Sprintf("content %d", i) {
				t.Errorf("call %d read %q", i, txt)
			}
		}()
	}
	wg.Wait()
}

// resources/updated reaches the sessions subscribed to the URI and no other;
// the child sees one subscription however many sessions hold it.
func TestBridgeResourceSubscriptions(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	a, b := h.session(t), h.session(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	evA, evB := a.listen(ctx, t), b.listen(ctx, t)
	for i, s := range []*rawSession{a, a} { // subscribing twice is one subscription
		msgs, _, _ := s.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"test://watched-resource"}}`, i))
		if m := final(t, msgs); m.Error != nil {
			t.Fatalf("subscribe: %+v", m.Error)
		}
	}
	h.b.mu.Lock()
	n := h.b.subs["test://watched-resource"]
	h.b.mu.Unlock()
	if n != 1 {
		t.Fatalf("subscription count %d, want 1", n)
	}
	// The everything-server updates the watched resource every 3 s.
	deadline := time.After(15 * time.Second)
	for got := false; !got; {
		select {
		case m := <-evA:
			got = m.Method == "notifications/resources/updated"
		case m := <-evB:
			if m.Method == "notifications/resources/updated" {
				t.Fatal("an unsubscribed session got resources/updated")
			}
		case <-deadline:
			t.Fatal("no resources/updated within 15s")
		}
	}
	msgs, _, _ := a.post(t, `{"jsonrpc":"2.0","id":9,"method":"resources/unsubscribe","params":{"uri":"test://watched-resource"}}`)
	if m := final(t, msgs); m.Error != nil {
		t.Fatalf("unsubscribe: %+v", m.Error)
	}
	h.b.mu.Lock()
	_, left := h.b.subs["test://watched-resource"]
	h.b.mu.Unlock()
	if left {
		t.Error("subscription kept after the last unsubscribe")
	}
}

// Drain: a call in flight finishes, new requests are refused, the child is
// stopped through its stdin and the bridge returns.
func TestBridgeDrain(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	h.childPid(t)
	s := h.session(t)
	type answer struct {
		msgs []rpcMsg
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		msgs, _, _, err := s.postErr(context.Background(), `{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":1}}}`)
		got <- answer{msgs, err}
	}()
	waitUntil(t, func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return len(h.b.pending) == 1
	})
	c := h.b.child
	h.cancel()
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	if m := final(t, a.msgs); m.Error != nil || string(m.ID) != `"slow"` {
		t.Fatalf("in-flight call during the drain: %+v", m)
	}
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.cancel = nil
	if !c.exited() {
		t.Fatal("child still running after the drain")
	}
	if c.err != nil {
		t.Errorf("child exit %v, want a clean exit on stdin EOF", c.err)
	}
	if _, _, _, err := s.postErr(context.Background(), `{"jsonrpc":"2.0","id":1,"method":"ping"}`); err == nil {
		t.Error("the drained bridge still answers")
	}
}

// A child that writes an endless stderr line costs bounded memory: the line
// reaches the log cut, and the server behind works.
func TestBridgeStderrLinesBounded(t *testing.T) {
	srv := legacyServer(t)
	h := startBridge(t, []string{"/bin/sh", "-c", `head -c 3000000 /dev/zero | tr '\0' x >&2; echo >&2; echo after >&2; exec "$0"`, srv}, func(c *Config) {
		c.MaxStderrLine = 1024
	})
	s := h.session(t)
	msgs, _, _ := s.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if m := final(t, msgs); m.Error != nil {
		t.Fatal(m.Error)
	}
	waitUntil(t, func() bool { return strings.Contains(h.stderr.String(), "after\n") })
	out := h.stderr.String()
	if len(out) > 8<<10 {
		t.Errorf("stderr copy is %d bytes for a 3 MB line cut at 1 KiB", len(out))
	}
	if !strings.Contains(out, "line of 3000000 bytes cut") {
		t.Errorf("no cut notice in %q", out[:min(len(out), 300)])
	}
}

// Malformed and session-less requests get the transport's errors.
func TestBridgeRequestErrors(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, nil)
	h.childPid(t)
	none := &rawSession{url: h.url, http: http.DefaultClient}
	for _, tc := range []struct {
		name, sid, body string
		status          int
		code            int64
	}{
		{"no session", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, -32600},
		{"unknown session", "nope", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 404, -32600},
		{"not JSON", "", `{"jsonrpc":`, 400, -32700},
		{"batch", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400, -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			none.sid = tc.sid
			msgs, status, _ := none.post(t, tc.body)
			if status != tc.status || len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Code != tc.code {
				t.Fatalf("HTTP %d %+v, want %d %d", status, msgs, tc.status, tc.code)
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBridgeSlowBody: a client that sends a POST's headers and then not its body loses the
// connection at the body deadline instead of holding it and a goroutine for good; a normal
// client is served meanwhile.
func TestBridgeSlowBody(t *testing.T) {
	h := startBridge(t, []string{legacyServer(t)}, func(c *Config) { c.BodyReadTimeout = time.Second })
	h.childPid(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), DefaultPath)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 16000\r\n\r\n{", DefaultPath, addr)
	none := &rawSession{url: h.url, http: http.DefaultClient}
	if _, status, _ := none.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusBadRequest {
		t.Fatalf("a normal request: HTTP %d, want 400 (no session)", status)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the bridge kept the slow connection open (read %q)", b)
	}
}
