//go:build e2e

package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// Tests of 2026-07-28 clients in front of 2025-era upstreams: go-sdk
// v1.4.1's everything-server over HTTP, and over stdio behind the real
// `sidecar stdio` bridge process.

func legacyBin(t *testing.T) string {
	t.Helper()
	bin, err := testservers.LegacyEverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// legacyEnv starts a 2025-era upstream (HTTP, or stdio through the bridge)
// and a sidecar in front of it, waiting for /readyz.
// eachLegacyUpstream runs f as a subtest against a 2025-era upstream over HTTP ("http") and
// behind the stdio bridge ("stdio-bridge").
func eachLegacyUpstream(t *testing.T, f func(t *testing.T, stdio bool)) {
	for _, tc := range []struct {
		name  string
		stdio bool
	}{{"http", false}, {"stdio-bridge", true}} {
		t.Run(tc.name, func(t *testing.T) { f(t, tc.stdio) })
	}
}

func legacyEnv(t *testing.T, stdio bool, sidecarArgs ...string) *env {
	t.Helper()
	e := &env{upAddr: freePort(t)}
	if stdio {
		e.up = start(t, sidecarBin, "stdio", "--listen", e.upAddr, "--", legacyBin(t))
	} else {
		e.up = start(t, legacyBin(t), "-http="+e.upAddr)
	}
	eventually.True(t, "the legacy upstream to listen", func() bool {
		c, err := net.Dial("tcp", e.upAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	e.startSidecar(t, sidecarArgs...)
	return e
}

func TestLegacyUpstreams(t *testing.T) {
	eachLegacyUpstream(t, func(t *testing.T, stdio bool) {
		e := legacyEnv(t, stdio)

		// server/discover is answered from the upstream's initialize.
		st, _, msg := do(t, rpcReq(t, e.mcp, "d", "server/discover", "", ""))
		res, _ := msg["result"].(map[string]any)
		if st != 200 || res == nil {
			t.Fatalf("server/discover: HTTP %d %v", st, msg)
		}
		if v := fmt.Sprint(res["supportedVersions"]); !strings.Contains(v, "2026-07-28") {
			t.Errorf("supportedVersions %s", v)
		}
		m, _ := res["_meta"].(map[string]any)
		si, _ := m["io.modelcontextprotocol/serverInfo"].(map[string]any)
		if si["name"] != "mcp-conformance-test-server" {
			t.Errorf("serverInfo %v", m)
		}
		if m["dev.switchboard/upstreamProtocolVersion"] != "2025-11-25" {
			t.Errorf("upstream protocol version %v", m["dev.switchboard/upstreamProtocolVersion"])
		}

		// Lists carry resultType and the cache hints.
		st, _, msg = do(t, rpcReq(t, e.mcp, "l", "tools/list", "", ""))
		res, _ = msg["result"].(map[string]any)
		if st != 200 || res["resultType"] != "complete" || res["ttlMs"] == nil || res["cacheScope"] == nil {
			t.Fatalf("tools/list: HTTP %d %v", st, msg)
		}

		// Eight concurrent calls with the same id: each gets its answer.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, _, msg := do(t, progressReq(t, e.mcp, "same", fmt.Sprintf("p%d", i)))
				res, _ := msg["result"].(map[string]any)
				if st != 200 || msg["id"] != "same" || res["resultType"] != "complete" {
					t.Errorf("call %d: HTTP %d %v", i, st, msg)
				}
			}()
		}
		wg.Wait()

		// Progress reaches the call's own stream.
		s := openStream(t, progressReq(t, e.mcp, "prog", "mine"))
		p, _ := s.nextMethod(t, "notifications/progress")
		if pp, _ := p["params"].(map[string]any); pp["progressToken"] != "mine" {
			t.Errorf("progress %v", p)
		}
		// Its answer ends the call (a stdio server's question below
		// reaches a client only while one call is in flight).
		for {
			if m := s.next(t); m["id"] != nil {
				break
			}
		}

		// A server-to-client request during a call from a client that
		// did not declare the capability: -32021 (legacy_input_test.go
		// has the input_required mapping).
		st, _, msg = do(t, rpcReq(t, e.mcp, "samp", "tools/call", "test_sampling", `,"name":"test_sampling","arguments":{"prompt":"hi"}`))
		if er, _ := msg["error"].(map[string]any); st != http.StatusBadRequest || fmt.Sprint(er["code"]) != "-32021" {
			t.Errorf("test_sampling: HTTP %d %v", st, msg)
		}

		// resources/updated through an upstream subscription.
		l := listen(t, e.mcp, "sub", `{"resourceSubscriptions":["test://watched-resource"]}`)
		if ack := l.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first frame %v", ack)
		}
		u, _ := l.nextMethod(t, "notifications/resources/updated")
		if up, _ := u["params"].(map[string]any); up["uri"] != "test://watched-resource" || subID(u) != "sub" {
			t.Errorf("resources/updated %v", u)
		}

		// The removed and unknown methods get 404 -32601 like from a 2026 server.
		st, _, msg = do(t, rpcReq(t, e.mcp, 5, "unknown/method", "", ""))
		if e, _ := msg["error"].(map[string]any); st != 404 || fmt.Sprint(e["code"]) != "-32601" || fmt.Sprint(msg["id"]) != "5" {
			t.Errorf("unknown/method: HTTP %d %v", st, msg)
		}
	})
}

// The upstream goes away and comes back (its sessions lost): the sidecar
// finds the upstream again, initializes a new session, clients' calls work,
// and listening clients are told to re-read (list_changed).
func TestLegacyHTTPUpstreamRestart(t *testing.T) {
	e := legacyEnv(t, false)
	l := listen(t, e.mcp, "tl", `{"toolsListChanged":true}`)
	if ack := l.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first frame %v", ack)
	}
	callTool(t, e.mcp, "test_simple_text")
	e.up.kill()
	e.up = start(t, legacyBin(t), "-http="+e.upAddr)
	eventually.True(t, "tools/call to succeed again", func() bool {
		st, _, msg := doQuiet(rpcReq(t, e.mcp, "again", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`))
		return st == 200 && msg["error"] == nil
	})
	callTool(t, e.mcp, "test_simple_text")
	l2 := listen(t, e.mcp, "tl2", `{"toolsListChanged":true}`)
	if ack := l2.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first frame after the restart %v", ack)
	}
	_ = l
}

// The stdio child dies: the bridge restarts it and the sidecar's listen
// clients get tools/list_changed (the catalog may differ), and calls work.
func TestLegacyStdioChildRestartNotifiesClients(t *testing.T) {
	e := legacyEnv(t, true)
	l := listen(t, e.mcp, "tl", `{"toolsListChanged":true}`)
	if ack := l.next(t); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first frame %v", ack)
	}
	// The bridge's child is the only everything-server started by it.
	pid := childOf(t, e.up.cmd.Process.Pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n, _ := l.nextMethod(t, "notifications/tools/list_changed")
	if subID(n) != "tl" {
		t.Errorf("list_changed %v", n)
	}
	eventually.True(t, "tools/call to succeed again", func() bool {
		st, _, msg := doQuiet(rpcReq(t, e.mcp, "again", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`))
		return st == 200 && msg["error"] == nil
	})
}

// doQuiet is do without failing the test on a transport error; the
// message is the JSON body's (nil for SSE or non-JSON).
func doQuiet(req *http.Request) (int, http.Header, map[string]any) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	var msg map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&msg)
	return resp.StatusCode, resp.Header, msg
}

// childOf returns the pid of a child process of parent (from /proc).
func childOf(t *testing.T, parent int) int {
	t.Helper()
	var pid int
	eventually.True(t, "the child process to appear", func() bool {
		// Any thread may have started it: scan every process's parent.
		ents, _ := os.ReadDir("/proc")
		for _, ent := range ents {
			p, err := strconv.Atoi(ent.Name())
			if err != nil {
				continue
			}
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
			if err != nil {
				continue
			}
			// pid (comm) state ppid …; comm may hold spaces: split after ")".
			rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
			if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(parent) {
				pid = p
				return true
			}
		}
		return false
	})
	return pid
}

// progressReq calls test_tool_with_progress with a progress token.
func progressReq(t *testing.T, url, id, token string) *http.Request {
	t.Helper()
	r := rpcReq(t, url, id, "tools/call", "test_tool_with_progress", `,"name":"test_tool_with_progress","arguments":{}`)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"test_tool_with_progress","arguments":{},"_meta":{"progressToken":%q,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, id, token)
	r.Body = io.NopCloser(strings.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Mcp-Name", "test_tool_with_progress")
	return r
}

// The catalog holds in front of 2025-era upstreams too: an MCPTool's description is served,
// and editing it reaches listen streams as tools/list_changed.
func TestLegacyUpstreamsWithCatalog(t *testing.T) {
	eachLegacyUpstream(t, func(t *testing.T, stdio bool) {
		path := filepath.Join(t.TempDir(), "catalog.json")
		writeFile(t, path, encodeCatalog(t, catalog.Tool{Name: "test_simple_text", Description: "v1 from the catalog"}))
		e := legacyEnv(t, stdio, "--catalog-file", path)
		described := func(want string) bool {
			_, _, msg := do(t, rpcReq(t, e.mcp, "l", "tools/list", "", ""))
			return strings.Contains(fmt.Sprint(msg["result"]), want)
		}
		eventually.True(t, "the catalog's description in tools/list", func() bool { return described("v1 from the catalog") })
		l := listen(t, e.mcp, "tl", `{"toolsListChanged":true}`)
		l.nextMethod(t, "notifications/subscriptions/acknowledged")
		writeFile(t, path, encodeCatalog(t, catalog.Tool{Name: "test_simple_text", Description: "v2 from the catalog"}))
		n, _ := l.nextMethod(t, "notifications/tools/list_changed")
		if subID(n) != "tl" {
			t.Errorf("list_changed %v", n)
		}
		if !described("v2 from the catalog") {
			t.Error("tools/list does not show the edited description")
		}
	})
}

// A 2025 server ends a call's SSE answer in a write of its own after the
// response event. The sidecar reads that end after answering, so the
// upstream connection is kept: without it, Go's transport discards the
// connection and every call opens a new one. A relay in front of go-sdk
// v1.4.1's everything-server holds each tools/call stream's end back for
// 2 ms, so that the sidecar always has the response before the end.
func TestLegacyUpstreamKeepsConnections(t *testing.T) {
	up := freePort(t)
	start(t, legacyBin(t), "-http="+up)
	target, _ := url.Parse("http://" + up)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	var mu sync.Mutex
	callConns := map[string]bool{} // client addresses that carried tools/call
	relay := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			mu.Lock()
			callConns[r.RemoteAddr] = true
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the stream's end is written when this returns
		}
	})}
	l, err := net.Listen("tcp", freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = relay.Serve(l) }()
	t.Cleanup(func() { relay.Close() })
	e := &env{upAddr: l.Addr().String()}
	e.startSidecar(t)
	const calls = 20
	for range calls {
		callTool(t, e.mcp, "test_simple_text")
		time.Sleep(50 * time.Millisecond) // the stream's end has come and the connection is idle again
	}
	mu.Lock()
	defer mu.Unlock()
	// One connection when nothing is late; a busy machine may delay a
	// stream's end past the next call now and then. Discarding them gave a
	// new connection to nearly every call (18 of 20).
	if len(callConns) > calls/4 {
		t.Errorf("%d calls to the upstream came on %d connections; want at most %d (connections kept)", calls, len(callConns), calls/4)
	}
}
