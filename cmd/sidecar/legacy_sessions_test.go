//go:build e2e

package main_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// Upstream sessions of the 2025-era transport, against a real go-sdk server
// (stateful Streamable HTTP, narrowed to 2025-11-25) that builds one
// mcp.Server per session, a common pattern: its list_changed reaches only
// the session whose server changed, and the test can end one session while
// the server stays up.

type perSessionUpstream struct {
	mu      sync.Mutex
	servers []*mcp.Server // in creation order (the handler asks for one on every request; those with a session count)
	release chan struct{} // ends the "block" tool's calls
	started chan struct{} // one per "block" call that started
}

func (u *perSessionUpstream) server() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "per-session", Version: "1"},
		&mcp.ServerOptions{SupportedProtocolVersions: []string{"2025-11-25"}})
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "block"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		u.started <- struct{}{}
		select {
		case <-u.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	})
	u.mu.Lock()
	u.servers = append(u.servers, srv)
	u.mu.Unlock()
	return srv
}

// withSession returns the servers that got a session, in creation order.
func (u *perSessionUpstream) withSession() []*mcp.Server {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []*mcp.Server
	for _, s := range u.servers {
		for range s.Sessions() {
			out = append(out, s)
			break
		}
	}
	return out
}

func (u *perSessionUpstream) count() int { return len(u.withSession()) }

func (u *perSessionUpstream) nth(i int) *mcp.Server { return u.withSession()[i] }

func perSessionEnv(t *testing.T) (*env, *perSessionUpstream) {
	t.Helper()
	u := &perSessionUpstream{release: make(chan struct{}), started: make(chan struct{}, 8)}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.server() }, nil)
	e := &env{upAddr: freePort(t)}
	hs := &http.Server{Addr: e.upAddr, Handler: h}
	go hs.ListenAndServe()
	t.Cleanup(func() { hs.Close() })
	e.startSidecar(t)
	return e, u
}

// A change notified only on the second pooled session reaches clients'
// listens: every pooled session's GET stream is read.
func TestLegacyUpstreamNotificationOnAnyPooledSession(t *testing.T) {
	e, u := perSessionEnv(t)
	st, _, msg := do(t, rpcReq(t, e.mcp, "d", "server/discover", "", ""))
	if m, _ := msg["result"].(map[string]any)["_meta"].(map[string]any); st != 200 || m["dev.switchboard/upstreamProtocolVersion"] != "2025-11-25" {
		t.Fatalf("discover: HTTP %d %v", st, msg)
	}
	// One call blocks the first session: the next one opens a second.
	blocked := make(chan map[string]any, 1)
	go func() {
		_, _, msg := doQuiet(rpcReq(t, e.mcp, "b", "tools/call", "block", `,"name":"block","arguments":{}`))
		blocked <- msg
	}()
	<-u.started
	callTool(t, e.mcp, "echo")
	close(u.release)
	if msg := <-blocked; !strings.Contains(fmt.Sprint(msg["result"]), "released") {
		t.Fatalf("block: %v", msg)
	}
	if n := u.count(); n != 2 {
		t.Fatalf("upstream sessions = %d, want 2 (the pool grows while every session is busy)", n)
	}

	l := listen(t, e.mcp, "tl", `{"toolsListChanged":true}`)
	if ack := l.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first frame %v", ack)
	}
	// The second session's server changes: only that session is told.
	// (Its GET stream opens asynchronously: a change made before it is
	// open is not delivered by the server, so the change is repeated until
	// one arrives.)
	second := u.nth(1)
	got := make(chan struct{})
	go func() {
		defer close(got)
		if m, _ := l.nextMethod(t, "notifications/tools/list_changed"); subID(m) != "tl" {
			t.Errorf("list_changed %v", m)
		}
	}()
	for i := 0; ; i++ {
		mcp.AddTool(second, &mcp.Tool{Name: fmt.Sprintf("added-%d", i)}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		select {
		case <-got:
			return
		case <-time.After(200 * time.Millisecond):
		}
		if i == 50 {
			t.Fatal("no tools/list_changed from the second upstream session reached the listen")
		}
	}
}

// The upstream ends a session while it stays up: the next request on that
// session gets 404, and the sidecar initializes again and retries once, so
// the client sees its answer.
func TestLegacyUpstreamSessionExpired(t *testing.T) {
	e, u := perSessionEnv(t)
	callTool(t, e.mcp, "echo")
	// Usually one session; a second when the sidecar's own tools/list (for
	// the Mcp-Param-* bindings) held the first while the call came in.
	ended := u.withSession()
	if len(ended) == 0 {
		t.Fatal("no upstream session after a call")
	}
	for _, srv := range ended {
		for ss := range srv.Sessions() {
			if err := ss.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 {
		st, _, msg := do(t, rpcReq(t, e.mcp, i, "tools/call", "echo", `,"name":"echo","arguments":{}`))
		if st != 200 || !strings.Contains(fmt.Sprint(msg["result"]), "echo") {
			t.Fatalf("call %d after the session ended: HTTP %d %v", i, st, msg)
		}
	}
	live := u.withSession()
	if len(live) == 0 {
		t.Fatal("no upstream session after the calls")
	}
	for _, srv := range live {
		if slices.Contains(ended, srv) {
			t.Errorf("an ended upstream session is live again (%d live, %d ended)", len(live), len(ended))
		}
	}
	eventually.True(t, "the sidecar to log the re-initialize", func() bool {
		return strings.Contains(e.sc.output(), "Upstream dropped its session; initializing again")
	})
}
