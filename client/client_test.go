//go:build e2e

package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/client"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

var public60s = catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}

// The late read: a tools/list whose answer was computed before a catalog edit arrives after the
// client saw the edit's list_changed. Its caller gets it; the cache never does, and the next read
// returns the new list. The upstream holds each read at a gate the test opens; the test waits
// for the notification itself before opening it, so no sleep decides anything.
func TestLateReadIsNotCached(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	ev := newEvents()
	var discarded atomic.Int32
	c := connect(t, sc.mcp, &client.Options{Hooks: ev.hooks(),
		Metrics: client.Metrics{Discarded: func(client.Kind) { discarded.Add(1) }}})
	const cred = "Bearer gated"
	ctx := client.WithCredential(tctx(t), cred)

	up.hold(cred)
	type answer struct {
		tools []*mcp.Tool
		info  client.Info
		err   error
	}
	late := make(chan answer, 1)
	go func() {
		tools, info, err := c.ListTools(ctx)
		late <- answer{tools, info, err}
	}()
	releaseLate := up.arrived(t) // the read is at the upstream, its answer (with v1) decided
	from := ev.count()
	cat.write(t, "v2")
	ev.waitEvent(t, from, "tools/list_changed", isNotification("notifications/tools/list_changed"))
	close(releaseLate)

	var a answer
	select {
	case a = <-late:
	case <-time.After(hang):
		t.Fatal("the late read did not return")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if got := description(t, a.tools, "alpha"); got != "v1" {
		t.Fatalf("the late read returned alpha %q; the test needs it to be the old v1 to exercise the race", got)
	}
	if a.info.Stored {
		t.Fatal("the late read was stored in the cache")
	}

	// The invalidation makes the client read tools again for whoever uses them: that read waits
	// at the gate too, so the cache can be inspected while nothing newer has arrived.
	releaseFresh := up.arrived(t)
	if v, info, ok := c.Cached(ctx, client.Tools, ""); ok {
		t.Fatalf("the cache holds %v (%+v) before any read after the change returned", v, info)
	}
	up.hold("") // later reads pass straight through
	close(releaseFresh)
	tools, _, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := description(t, tools, "alpha"); got != "v2" {
		t.Fatalf("after the change the client returns alpha %q, want v2", got)
	}
	if n := discarded.Load(); n < 1 {
		t.Fatalf("Discarded counted %d reads, want the late one", n)
	}
}

func TestTTLExpiry(t *testing.T) {
	up := newUpstream(t)
	const ttl = time.Second
	cat := newCatalog(t, catalog.CacheHint{TTLMs: ttl.Milliseconds(), CacheScope: catalog.ScopePublic}, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	c := connect(t, sc.mcp, nil)
	const cred = "Bearer ttl"
	ctx := client.WithCredential(tctx(t), cred)

	_, first, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached || !first.Stored || first.TTL != ttl || first.Scope != "public" {
		t.Fatalf("first read: %+v, want stored with TTL %v, public", first, ttl)
	}
	expires := first.Received.Add(ttl)
	hits := 0
	for {
		_, info, err := c.ListTools(ctx)
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if info.Cached {
			hits++
			if after.After(expires.Add(time.Second)) {
				t.Fatalf("served from the cache at %v, its TTL ended at %v", after, expires)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// Read again: that is only right once the TTL has run out (nothing invalidated tools).
		if after.Before(expires) {
			t.Fatalf("read again at %v though the entry was fresh until %v", after, expires)
		}
		break
	}
	if hits == 0 {
		t.Fatal("no read was served from the cache within the TTL")
	}
	if n := up.listCalls(cred); n != 2 {
		t.Fatalf("the upstream saw %d tools/list calls with the credential, want 2", n)
	}
}

func TestPrivateScopeIsPerCredential(t *testing.T) {
	for _, scope := range []string{catalog.ScopePrivate, catalog.ScopePublic} {
		t.Run(scope, func(t *testing.T) {
			up := newUpstream(t)
			cat := newCatalog(t, catalog.CacheHint{TTLMs: 60000, CacheScope: scope}, "v1")
			sc := startSidecar(t, up.url, cat.path, "", "")
			c := connect(t, sc.mcp, nil)
			ctx := tctx(t)
			alice, bob := client.WithCredential(ctx, "Bearer alice"), client.WithCredential(ctx, "Bearer bob")

			if _, info, err := c.ListTools(alice); err != nil || info.Scope != client.CacheScope(scope) || !info.Stored {
				t.Fatalf("alice's first read: %+v, %v", info, err)
			}
			if _, info, err := c.ListTools(alice); err != nil || !info.Cached {
				t.Fatalf("alice's second read: %+v, %v; want it from the cache", info, err)
			}
			_, info, err := c.ListTools(bob)
			if err != nil {
				t.Fatal(err)
			}
			_, _, carolSees := c.Cached(client.WithCredential(ctx, "Bearer carol"), client.Tools, "")
			if scope == catalog.ScopePrivate {
				if info.Cached || up.listCalls("Bearer bob") != 1 {
					t.Fatalf("bob was served alice's private entry (%+v, %d upstream reads for bob)", info, up.listCalls("Bearer bob"))
				}
				if carolSees {
					t.Fatal("a third credential sees a private entry")
				}
			} else {
				if !info.Cached || up.listCalls("Bearer bob") != 0 {
					t.Fatalf("bob did not share alice's public entry (%+v)", info)
				}
				if !carolSees {
					t.Fatal("a public entry is not shared")
				}
			}
			if n := up.listCalls("Bearer alice"); n != 1 {
				t.Fatalf("the upstream saw %d reads for alice, want 1", n)
			}
		})
	}
}

func TestRebaselineAfterSidecarRestart(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	ev := newEvents()
	c := connect(t, sc.mcp, &client.Options{Hooks: ev.hooks(), MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	ctx := tctx(t)
	tools, _, err := c.ListTools(ctx)
	if err != nil || description(t, tools, "alpha") != "v1" {
		t.Fatal(err)
	}
	from := ev.count()
	sc.kill() // no complete: a crash
	from = ev.waitEvent(t, from, "the stream to drop", isType(client.EventDropped))
	cat.write(t, "v2") // nobody is listening: the client cannot hear of this
	startSidecar(t, up.url, cat.path, sc.mcpAddr, sc.adminAddr)
	ev.waitEvent(t, from, "a re-baseline", isType(client.EventRebaseline))
	tools, info, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := description(t, tools, "alpha"); got != "v2" {
		t.Fatalf("after the reconnect the client returns alpha %q (%+v), want v2", got, info)
	}
}

// front is a Service in miniature: each request goes to the next backend that is ready.
type front struct {
	mu       sync.Mutex
	backends []*sidecar
	next     int
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	var target *sidecar
	for range f.backends {
		b := f.backends[f.next%len(f.backends)]
		f.next++
		if b.ready() {
			target = b
			break
		}
	}
	f.mu.Unlock()
	if target == nil {
		http.Error(w, "no ready endpoint", http.StatusServiceUnavailable)
		return
	}
	u, _ := url.Parse("http://" + target.mcpAddr)
	p := httputil.NewSingleHostReverseProxy(u)
	p.FlushInterval = -1
	p.ServeHTTP(w, r)
}

// A replica drains: its listen stream ends with complete, the client listens again through the
// front, reaches the other replica, and a change made between the two streams is not lost.
func TestCompleteMovesToAnotherReplica(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	a := startSidecar(t, up.url, cat.path, "", "")
	b := startSidecar(t, up.url, cat.path, "", "")
	f := &front{backends: []*sidecar{a, b}}
	srv := &http.Server{Addr: freeAddr(t), Handler: f}
	go func() { _ = srv.ListenAndServe() }()
	t.Cleanup(func() { _ = srv.Close() })
	eventually.True(t, "the front listens", func() bool { return b.ready() && canDial(srv.Addr) })

	ev := newEvents()
	relisting, proceed := make(chan struct{}), make(chan struct{})
	hooks := ev.hooks()
	onEvent := hooks.OnEvent
	hooks.OnEvent = func(e client.Event) {
		onEvent(e)
		if e.Type == client.EventRelisten {
			close(relisting)
			<-proceed // the test makes its change while the client has no stream
		}
	}
	c := connect(t, "http://"+srv.Addr+"/mcp", &client.Options{Hooks: hooks, RelistJitter: 10 * time.Millisecond})
	ctx := tctx(t)
	if tools, _, err := c.ListTools(ctx); err != nil || description(t, tools, "alpha") != "v1" {
		t.Fatal(err)
	}
	streams := func(s *sidecar) string { return s.metric(t, "switchboard_sidecar_listen_streams") }
	var holder, other *sidecar
	eventually.True(t, "the listen stream to be counted", func() bool {
		switch {
		case streams(a) == "1" && streams(b) == "0":
			holder, other = a, b
		case streams(b) == "1" && streams(a) == "0":
			holder, other = b, a
		}
		return holder != nil
	})

	drained := make(chan error, 1)
	go func() { drained <- holder.drain() }()
	select {
	case <-relisting:
	case <-time.After(hang):
		t.Fatalf("no re-listen after the drain; events: %v", ev.snapshot())
	}
	cat.write(t, "v2")
	eventually.True(t, "the other replica to serve v2", func() bool {
		tools, err := rawTools(other)
		return err == nil && description(t, tools, "alpha") == "v2"
	})
	close(proceed)
	ev.waitEvent(t, 0, "a re-baseline", isType(client.EventRebaseline))
	// A read that was already under way when the re-baseline invalidated the list may still hand
	// its (older) result to a caller that joined it; it is never cached. So the client must come
	// to v2 well within the entry's 60 s TTL (hang is 30 s): a cached v1 would be served until
	// the TTL ran out and fail here.
	// (Not eventually.True: its bound outlasts the TTL, so a cached v1 would pass it.)
	for deadline := time.Now().Add(hang); ; time.Sleep(20 * time.Millisecond) {
		tools, _, err := c.ListTools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := description(t, tools, "alpha")
		if got == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after moving replicas the client still returns alpha %q after %s, want v2", got, hang)
		}
	}
	eventually.True(t, "the stream to be on the other replica", func() bool { return streams(other) == "1" })
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ev.snapshot(), func(s string) bool { return s == string(client.EventComplete) }) {
		t.Fatalf("no complete among %v", ev.snapshot())
	}
}

// rawTools lists a sidecar's tools with a client of its own (so the test's client is untouched).
func rawTools(s *sidecar) ([]*mcp.Tool, error) {
	ctx, cancel := contextWithTimeout()
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "v1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: s.mcp, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	r, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	return r.Tools, nil
}

func TestCallTool(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	c := connect(t, sc.mcp, nil)
	res, err := c.CallTool(tctx(t), "alpha", map[string]any{"say": "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "alpha:hi" {
		t.Fatalf("tools/call alpha: %+v", res)
	}
}

func TestResourceContentsFollowUpdates(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	ev := newEvents()
	c := connect(t, sc.mcp, &client.Options{Hooks: ev.hooks()})
	ctx := tctx(t)
	contents, _, err := c.ReadResource(ctx, "docs://readme")
	if err != nil || len(contents) != 1 || contents[0].Text != "readme: v1" {
		t.Fatalf("read: %v %v", contents, err)
	}
	// The first read subscribes: the listen stream is re-opened with the URI, and the URI read
	// again once that stream is acknowledged.
	ev.waitEvent(t, 0, "a listen acknowledging the URI", func(e client.Event) bool {
		return e.Type == client.EventAcknowledged && e.Filter != nil && slices.Contains(e.Filter.ResourceSubscriptions, "docs://readme")
	})
	from := ev.count()
	cat.write(t, "v2")
	ev.waitEvent(t, from, "resources/updated", func(e client.Event) bool {
		return e.Type == client.EventNotification && e.Method == "notifications/resources/updated" && e.URI == "docs://readme"
	})
	contents, _, err = c.ReadResource(ctx, "docs://readme")
	if err != nil || len(contents) != 1 || contents[0].Text != "readme: v2" {
		t.Fatalf("read after the update: %v %v", contents, err)
	}
}

// The fallback: a 2025-era server (go-sdk v1.4.1, which knows nothing of 2026-07-28) is spoken
// to at 2025-11-25, its list_changed arrives on the GET stream and invalidates the cache.
func TestFallbackTo20251125(t *testing.T) {
	addr, admin := freeAddr(t), freeAddr(t)
	cmd := exec.Command(server2025Bin, "-http", addr, "-admin", admin)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server2025 log:\n%s", out.String())
		}
	})
	eventually.True(t, "server2025 listens", func() bool { return canDial(addr) && canDial(admin) })

	ev := newEvents()
	c := connect(t, "http://"+addr+"/mcp", &client.Options{Hooks: ev.hooks()})
	if v := c.ProtocolVersion(); v != client.Version20251125 {
		t.Fatalf("protocol version %q, want %s", v, client.Version20251125)
	}
	ctx := tctx(t)
	tools, info, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 1 || !info.UntilChanged || !info.Stored {
		t.Fatalf("tools %d, %+v; want alpha, cached until changed", len(tools), info)
	}
	if _, info, _ := c.ListTools(ctx); !info.Cached {
		t.Fatalf("second read %+v, want it from the cache", info)
	}
	from := ev.count()
	r, err := http.Post("http://"+admin+"/add?name=beta", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Body.Close()
	ev.waitEvent(t, from, "tools/list_changed on the GET stream", isNotification("notifications/tools/list_changed"))
	tools, _, err = c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 {
		t.Fatalf("after list_changed %d tools, want 2", len(tools))
	}
	res, err := c.CallTool(ctx, "beta", nil)
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "beta" {
		t.Fatalf("tools/call beta: %v %v", res, err)
	}

	// The list is cached until the server says it changed; once nothing can be heard (the
	// server is gone), that promise is worth nothing and the entry is not served.
	if _, info, ok := c.Cached(ctx, client.Tools, ""); !ok || !info.UntilChanged {
		t.Fatalf("the list is not cached until changed (%+v)", info)
	}
	from = ev.count()
	_ = cmd.Process.Kill()
	ev.waitEvent(t, from, "the session to drop", isType(client.EventDropped))
	if v, _, ok := c.Cached(ctx, client.Tools, ""); ok {
		t.Fatalf("served %v although the server that would announce its change is gone", v)
	}
}

// A server that announces nothing (tools without listChanged) gets no listen: one would end at
// once with complete, and re-listening would spin. Entries then live by their ttlMs alone.
func TestNoListenWhenNothingIsAnnounced(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "quiet", Version: "v1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 60000, "public" },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "alpha"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	var listens atomic.Int32
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "subscriptions/listen" {
				listens.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	c := connect(t, ts.URL, nil)
	if _, info, err := c.ListTools(tctx(t)); err != nil || !info.Stored {
		t.Fatalf("%+v %v", info, err)
	}
	if n := listens.Load(); n != 0 || c.Listening() {
		t.Fatalf("%d listens opened (listening %v), want none", n, c.Listening())
	}
}

// Why this package owns its cache: the same late read through go-sdk v1.8.0's own client. Its
// ListTools stores the answer after the call returns although the list_changed handled during
// the call had cleared the cache, and then serves the old list until the TTL runs out. If a
// go-sdk upgrade makes this test fail, the race is fixed there: reconsider building on its cache.
func TestGoSDKClientCachesTheLateRead(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "")
	const cred = "Bearer gated"
	changed := make(chan struct{}, 16)
	cl := mcp.NewClient(&mcp.Implementation{Name: "go-sdk", Version: "v1.8.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx := tctx(t)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: sc.mcp,
		HTTPClient: &http.Client{Transport: authTransport(cred)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// go-sdk opens its listen without waiting for the acknowledgement: wait until the sidecar
	// counts it, so the change below is announced to it.
	eventually.True(t, "go-sdk's listen stream", func() bool { return sc.metric(t, "switchboard_sidecar_listen_streams") == "1" })

	up.hold(cred)
	late := make(chan *mcp.ListToolsResult, 1)
	go func() {
		r, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Error(err)
		}
		late <- r
	}()
	release := up.arrived(t)
	cat.write(t, "v2")
	select {
	case <-changed: // go-sdk cleared its cache before calling the handler
	case <-time.After(hang):
		t.Fatal("go-sdk's client got no tools/list_changed")
	}
	up.hold("")
	close(release)
	if r := <-late; r == nil || description(t, r.Tools, "alpha") != "v1" {
		t.Fatal("the late read did not return the old list")
	}
	r, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := description(t, r.Tools, "alpha"); got != "v1" {
		t.Fatalf("go-sdk's client returns alpha %q after the change: it no longer caches the late read", got)
	}
	if n := up.listCalls(cred); n != 1 {
		t.Fatalf("the upstream saw %d reads; the stale answer should have come from go-sdk's cache", n)
	}
}

type authTransport string

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", string(a))
	return http.DefaultTransport.RoundTrip(r)
}

// A server that refuses the listen (its limit reached) still gets a client: reads work by TTL,
// the client keeps trying, and once the listen opens it re-baselines.
func TestListenRefusedAtConnect(t *testing.T) {
	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "", "--max-listen-streams", "1")
	other, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	}).Connect(tctx(t), &mcp.StreamableClientTransport{Endpoint: sc.mcp}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the other client's listen", func() bool { return sc.metric(t, "switchboard_sidecar_listen_streams") == "1" })

	ev := newEvents()
	c := connect(t, sc.mcp, &client.Options{Hooks: ev.hooks(), MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if c.Listening() {
		t.Fatal("listening although the sidecar's only listen slot is taken")
	}
	if tools, _, err := c.ListTools(tctx(t)); err != nil || description(t, tools, "alpha") != "v1" {
		t.Fatalf("reads without a listen: %v", err)
	}
	_ = other.Close() // frees the slot
	ev.waitEvent(t, 0, "a re-baseline once the listen opens", isType(client.EventRebaseline))
	if !c.Listening() {
		t.Fatal("not listening after the re-baseline")
	}
}
