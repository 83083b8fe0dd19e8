//go:build e2e

package main_test

// A rolling update, end to end, with real sidecar processes: replicas A and
// B (sidecar + go-sdk upstream each) behind a local TCP round-robin front
// that, like a Service through kube-proxy, sends new connections to the
// replicas whose /readyz passes. Clients listen, re-listen on complete, and
// call tools at a steady rate while A is drained, A' comes up, and B is
// drained.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// front is an L4 round-robin load balancer over ready backends.
type front struct {
	ln net.Listener
	// mu guards backends and next.
	mu       sync.Mutex
	backends []*backend
	next     int
}

type backend struct {
	addr  string // sidecar MCP host:port
	admin string // sidecar admin base URL
	ready atomic.Bool
}

func newFront(t *testing.T) *front {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &front{ln: ln}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); ln.Close() })
	go f.probe(ctx)
	go f.serve()
	return f
}

func (f *front) url() string { return "http://" + f.ln.Addr().String() + "/mcp" }

// probe polls every backend's readiness, as the kubelet and the endpoints
// controller do (much faster than they do, so the drain delay dominates).
func (f *front) probe(ctx context.Context) {
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for ctx.Err() == nil {
		f.mu.Lock()
		bs := slices.Clone(f.backends)
		f.mu.Unlock()
		for _, b := range bs {
			r, err := c.Get(b.admin + "/readyz")
			ok := err == nil && r.StatusCode == http.StatusOK
			if err == nil {
				r.Body.Close()
			}
			b.ready.Store(ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *front) add(b *backend) {
	f.mu.Lock()
	f.backends = append(f.backends, b)
	f.mu.Unlock()
}

func (f *front) remove(b *backend) {
	f.mu.Lock()
	f.backends = slices.DeleteFunc(f.backends, func(x *backend) bool { return x == b })
	f.mu.Unlock()
}

func (f *front) pick() *backend {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range len(f.backends) {
		b := f.backends[f.next%len(f.backends)]
		f.next++
		if b.ready.Load() {
			return b
		}
	}
	return nil
}

func (f *front) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			b := f.pick()
			if b == nil {
				c.Close()
				return
			}
			u, err := net.Dial("tcp", b.addr)
			if err != nil {
				c.Close()
				return
			}
			go func() {
				_, _ = io.Copy(u, c)
				_ = u.(*net.TCPConn).CloseWrite()
			}()
			_, _ = io.Copy(c, u)
			c.Close()
			u.Close()
		}()
	}
}

// world is the shared state every replica serves: the version a client
// reads with the "version" tool. A change bumps it, then makes every
// replica's upstream announce tools/list_changed.
type world struct {
	// mu guards servers and version changes.
	mu      sync.Mutex
	servers []*mcp.Server
	version atomic.Int64
}

func (w *world) newServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "rollout-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "work"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "version"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.FormatInt(w.version.Load(), 10)}}}, nil, nil
	})
	w.mu.Lock()
	w.servers = append(w.servers, srv)
	w.mu.Unlock()
	return srv
}

// change publishes version k to every replica.
func (w *world) change() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.version.Add(1)
	for _, srv := range w.servers {
		// A tool whose name changes with every version: the list changed.
		srv.AddTool(&mcp.Tool{Name: "marker-" + strconv.FormatInt(k, 10), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
		srv.RemoveTools("marker-" + strconv.FormatInt(k-1, 10))
	}
	return k
}

// replica is one pod: an upstream of the world and its sidecar process.
type replica struct {
	name string
	env  *env
	be   *backend
}

func startReplica(t *testing.T, w *world, f *front, name string, sidecarArgs ...string) *replica {
	t.Helper()
	srv := w.newServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	addr := freePort(t)
	hs := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: hang}
	go func() { _ = hs.ListenAndServe() }()
	t.Cleanup(func() { hs.Close() })
	e := &env{upAddr: addr}
	e.startSidecar(t, sidecarArgs...)
	r := &replica{name: name, env: e, be: &backend{addr: strings.TrimSuffix(strings.TrimPrefix(e.mcp, "http://"), "/mcp"), admin: e.admin}}
	f.add(r.be)
	eventually.True(t, "the replica to be ready", r.be.ready.Load)
	return r
}

// stop is the pod's termination: preStop GET /drain (blocks until done),
// then TERM, then the endpoint is gone.
func (r *replica) stop(t *testing.T, f *front) map[string]any {
	t.Helper()
	var st map[string]any
	select {
	case st = <-drainAsync(r.env.admin):
	case <-time.After(hang):
		t.Fatalf("%s: GET /drain did not return", r.name)
	}
	if err := r.env.sc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- r.env.sc.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("%s: sidecar exit: %v", r.name, err)
		}
	case <-time.After(hang):
		t.Fatalf("%s: sidecar did not exit after SIGTERM", r.name)
	}
	f.remove(r.be)
	return st
}

// rolloutClient listens (re-listening on complete) and calls tools.
type rolloutClient struct {
	id    int
	url   string
	hc    *http.Client
	known atomic.Int64 // highest version read
	dirty chan struct{}

	// mu guards the fields below.
	mu         sync.Mutex
	failures   []string
	completes  int
	reacks     int
	dropped    int // streams that ended without complete
	reackDelay []time.Duration
	calls      int
}

func (c *rolloutClient) fail(format string, args ...any) {
	c.mu.Lock()
	c.failures = append(c.failures, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

// call makes one tools/call and returns the text of its result.
func (c *rolloutClient) call(ctx context.Context, id, tool string) (string, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{%s,"name":%q,"arguments":{}}}`, id, meta, tool)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var res struct {
		ID     string              `json:"id"`
		Result *mcp.CallToolResult `json:"result"`
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		d, _ := strings.CutPrefix(line, "data: ")
		if json.Unmarshal([]byte(d), &res) == nil && res.Result != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK || res.ID != id || res.Result == nil || res.Result.IsError || len(res.Result.Content) == 0 {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	text, ok := res.Result.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("tools/call %s answered %T content: %s", id, res.Result.Content[0], b)
	}
	return text.Text, nil
}

// work calls the 50 ms tool every 20 ms.
func (c *rolloutClient) work(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		id := fmt.Sprintf("c%d-w%d", c.id, i)
		if _, err := c.call(context.WithoutCancel(ctx), id, "work"); err != nil {
			c.fail("tools/call %s failed: %v", id, err)
		}
		c.mu.Lock()
		c.calls++
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

// reread reads the version after every list change and every (re-)listen.
func (c *rolloutClient) reread(ctx context.Context) {
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-c.dirty:
		}
		id := fmt.Sprintf("c%d-v%d", c.id, i)
		txt, err := c.call(context.WithoutCancel(ctx), id, "version")
		if err != nil {
			c.fail("tools/call %s failed: %v", id, err)
			continue
		}
		v, _ := strconv.ParseInt(txt, 10, 64)
		for {
			old := c.known.Load()
			if v <= old || c.known.CompareAndSwap(old, v) {
				break
			}
		}
	}
}

func (c *rolloutClient) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// listen keeps one listen stream open, re-listening at once on complete.
func (c *rolloutClient) listen(ctx context.Context, listening chan<- struct{}) {
	var completedAt time.Time
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("c%d-l%d", c.id, n)
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"subscriptions/listen","params":{%s,"notifications":{"toolsListChanged":true}}}`, id, meta)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				c.fail("listen %s: %v", id, err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		complete := c.readStream(ctx, resp, id, &completedAt, listening)
		listening = nil
		if ctx.Err() != nil {
			return
		}
		if !complete {
			c.mu.Lock()
			c.dropped++
			c.mu.Unlock()
			completedAt = time.Time{}
		}
	}
}

// readStream reads one listen stream and reports whether it ended with its
// complete result.
func (c *rolloutClient) readStream(ctx context.Context, resp *http.Response, id string, completedAt *time.Time, listening chan<- struct{}) bool {
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) {
				c.fail("listen %s ended with %v", id, err)
			}
			return false
		}
		d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: ")
		if !ok {
			continue
		}
		var m struct {
			ID     string          `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(d), &m) != nil {
			c.fail("listen %s: unparseable %s", id, d)
			continue
		}
		switch {
		case m.Method == "notifications/subscriptions/acknowledged":
			if listening != nil {
				listening <- struct{}{}
			}
			if !completedAt.IsZero() {
				c.mu.Lock()
				c.reacks++
				c.reackDelay = append(c.reackDelay, time.Since(*completedAt))
				c.mu.Unlock()
				*completedAt = time.Time{}
			}
			c.markDirty() // re-read what may have changed meanwhile
		case m.Method == "notifications/tools/list_changed":
			c.markDirty()
		case m.Result != nil:
			if m.ID != id || !strings.Contains(string(m.Result), `"resultType":"complete"`) {
				c.fail("listen %s ended with %s", id, d)
			}
			c.mu.Lock()
			c.completes++
			c.mu.Unlock()
			*completedAt = time.Now()
			// Nothing may follow the complete result but the end.
			if rest, err := io.ReadAll(rd); err != nil || strings.Contains(string(rest), "data:") {
				c.fail("listen %s: after complete: %q %v", id, rest, err)
			}
			return true
		}
	}
}

func TestRollingUpdate(t *testing.T) {
	const clients = 16
	args := []string{"--drain-delay", "500ms", "--drain-jitter", "300ms", "--drain-budget", "3s"}
	w := &world{}
	f := newFront(t)
	a := startReplica(t, w, f, "A", args...)
	b := startReplica(t, w, f, "B", args...)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cs := make([]*rolloutClient, clients)
	listening := make(chan struct{}, clients)
	for i := range cs {
		c := &rolloutClient{id: i, url: f.url(), dirty: make(chan struct{}, 1),
			// Idle connections expire before the drain delay is over: a
			// keep-alive connection that carried no request since the drain
			// began (so never saw its Connection: close) must not still be
			// pooled when the sidecar exits and closes it — that is the
			// generic HTTP/1.1 close-while-reusing race, not the drain's.
			hc: &http.Client{Transport: &http.Transport{IdleConnTimeout: 250 * time.Millisecond, MaxIdleConnsPerHost: 4}}}
		cs[i] = c
		wg.Go(func() { c.listen(ctx, listening) })
		wg.Go(func() { c.reread(ctx) })
		wg.Go(func() { c.work(ctx) })
	}
	for range clients {
		select {
		case <-listening:
		case <-time.After(hang):
			t.Fatal("clients did not start listening")
		}
	}

	// Changes at a steady pace through the whole rollout: after each one,
	// every client must learn the new version from its listen stream (a
	// notification, or the re-read after a re-listen) before the next.
	var changes, changesDuringDrain atomic.Int64
	var draining atomic.Bool
	pubDone := make(chan struct{})
	var lost []string
	go func() {
		defer close(pubDone)
		for ctx.Err() == nil {
			k := w.change()
			changes.Add(1)
			if draining.Load() {
				changesDuringDrain.Add(1)
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, c := range cs {
				for c.known.Load() < k && time.Now().Before(deadline) && ctx.Err() == nil {
					time.Sleep(2 * time.Millisecond)
				}
				if c.known.Load() < k && ctx.Err() == nil {
					lost = append(lost, fmt.Sprintf("client %d never learned version %d (knows %d)", c.id, k, c.known.Load()))
				}
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()

	// Each phase lasts until ten more changes went through (about half a second).
	tenMoreChanges := func(phase string) {
		t.Helper()
		k := changes.Load()
		eventually.True(t, "ten changes "+phase, func() bool { return changes.Load() >= k+10 })
	}
	tenMoreChanges("before the rollout")
	draining.Store(true)
	stA := a.stop(t, f)
	draining.Store(false)
	a2 := startReplica(t, w, f, "A'", args...)
	tenMoreChanges("after A was replaced")
	draining.Store(true)
	stB := b.stop(t, f)
	draining.Store(false)
	tenMoreChanges("after B stopped")
	cancel()
	<-pubDone
	wg.Wait()
	_ = a2

	var failures []string
	var completes, reacks, dropped, calls int
	var delays []time.Duration
	for _, c := range cs {
		failures = append(failures, c.failures...)
		completes += c.completes
		reacks += c.reacks
		dropped += c.dropped
		calls += c.calls
		delays = append(delays, c.reackDelay...)
	}
	ended := int(stA["streamsEnded"].(float64) + stB["streamsEnded"].(float64))
	slices.Sort(delays)
	if len(delays) == 0 {
		t.Fatalf("no re-listen was acknowledged; failures: %v", failures)
	}
	t.Logf("A drain %v; B drain %v", stA, stB)
	t.Logf("%d tool calls; %d changes (%d during drains); %d completes, %d re-listens acked; re-listen latency p50 %v max %v",
		calls, changes.Load(), changesDuringDrain.Load(), completes, reacks, delays[len(delays)/2], delays[len(delays)-1])
	for _, f := range failures {
		t.Error(f)
	}
	for _, l := range lost {
		t.Error(l)
	}
	if dropped != 0 {
		t.Errorf("%d listen streams ended without their complete result", dropped)
	}
	// Both drains ended every client's stream: each client listened on A or
	// B when it drained, and the streams on B include those moved from A.
	if ended < clients || completes != ended || reacks != completes {
		t.Errorf("streams ended by the drains %d, completes received %d, re-listens acknowledged %d", ended, completes, reacks)
	}
	if changesDuringDrain.Load() == 0 {
		t.Error("no change was published during a drain; the test did not exercise it")
	}
	if delays[len(delays)-1] > 3*time.Second {
		t.Errorf("a re-listen took %v after its complete", delays[len(delays)-1])
	}
}
