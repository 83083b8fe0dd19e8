//go:build e2e

package main_test

// Test harness: real processes. TestMain builds the sidecar binary and
// go-sdk v1.8.0's conformance everything-server (pinned in go.mod); each
// test starts the ones it needs on free 127.0.0.1 ports.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
)

var (
	sidecarBin  string
	upstreamBin string
)

// hang is the generous bound on any single wait: it only catches hangs.
const hang = 15 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(tenantStdioEnv) != "" {
		// This binary is a stdio MCP server behind the bridge (notifications_test.go).
		serveTenantStdio()
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "sidecar-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "sidecar")
	upstreamBin = filepath.Join(dir, "everything-server")
	sidecarBuild := []string{"build", "-o", sidecarBin, "."}
	if os.Getenv("SIDECAR_TEST_RACE") != "" {
		// Build the sidecar under test with the race detector.
		sidecarBuild = []string{"build", "-race", "-o", sidecarBin, "."}
	}
	for _, b := range [][]string{
		sidecarBuild,
		{"build", "-o", upstreamBin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"},
	} {
		cmd := exec.Command("go", b...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building test binaries:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string { t.Helper(); return freeport.ForTest(t) }

// proc is a child process the test owns; it is killed at cleanup.
type proc struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

// testDrainToken is the drain token every test process gets, as the controller gives each pod
// its server's token; drain requests send it like the preStop hooks do (drainRequest).
const testDrainToken = "test-drain-token-0123456789abcdef"

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, []string{app.DrainTokenEnv + "=" + testDrainToken}, bin, args...)
}

// startEnv starts bin with these variables added to the test's environment.
func startEnv(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	sw := &syncWriter{w: &out}
	cmd.Stdout, cmd.Stderr = sw, sw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: &out}
	t.Cleanup(func() {
		p.kill()
		if strings.Contains(p.output(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", filepath.Base(bin))
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	w := p.cmd.Stdout.(*syncWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return p.out.String()
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// startUpstream runs the everything-server (stateless) on addr.
func startUpstream(t *testing.T, addr string) *proc {
	t.Helper()
	p := start(t, upstreamBin, "-http="+addr, "-stateless")
	eventually.True(t, "the upstream to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return p
}

// env is a running upstream + sidecar pair.
type env struct {
	upAddr string
	up     *proc
	sc     *proc
	mcp    string // sidecar MCP URL
	admin  string // sidecar admin base URL
}

func newEnv(t *testing.T, sidecarArgs ...string) *env {
	t.Helper()
	e := &env{upAddr: freePort(t)}
	e.up = startUpstream(t, e.upAddr)
	e.startSidecar(t, sidecarArgs...)
	return e
}

func (e *env) startSidecar(t *testing.T, extra ...string) {
	t.Helper()
	e.startSidecarEnv(t, nil, extra...)
}

// startSidecarEnv is startSidecar with these variables added to the environment.
func (e *env) startSidecarEnv(t *testing.T, vars []string, extra ...string) {
	t.Helper()
	mcpAddr, adminAddr := freePort(t), freePort(t)
	args := append([]string{"--upstream", "http://" + e.upAddr + "/mcp", "--listen", mcpAddr,
		"--admin-listen", adminAddr, "--log-level", "debug"}, extra...)
	e.sc = startEnv(t, append([]string{app.DrainTokenEnv + "=" + testDrainToken}, vars...), sidecarBin, args...)
	e.mcp = "http://" + mcpAddr + "/mcp"
	e.admin = "http://" + adminAddr
	eventually.True(t, "the sidecar to be ready", func() bool {
		r, err := http.Get(e.admin + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"}}`

// rpcReq builds a modern request with the headers a conformant client sends.
func rpcReq(t *testing.T, url string, id any, method, name, extraParams string) *http.Request {
	t.Helper()
	idj, _ := json.Marshal(id)
	params := "{" + meta + extraParams + "}"
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, idj, method, params)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return req
}

// do sends req and returns status, headers and the JSON-RPC response message
// (from a JSON body or the last message of an SSE body).
func do(t *testing.T, req *http.Request) (int, http.Header, map[string]any) {
	t.Helper()
	status, header, b := send(t, req)
	var msg map[string]any
	if strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil && (m["result"] != nil || m["error"] != nil) {
					msg = m
				}
			}
		}
	} else if len(b) > 0 {
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("HTTP %d body is not JSON: %q", status, b)
		}
	}
	return status, header, msg
}

// send sends req (bounded by hang) and returns the status, headers and whole body of the answer.
func send(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// sse is an open event stream read by a background goroutine.
type sse struct {
	resp   *http.Response
	events chan map[string]any
	raw    chan string // every data line, as sent
	cancel context.CancelFunc
}

func openStream(t *testing.T, req *http.Request) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := http.DefaultClient.Do(req.WithContext(ctx)) //nolint:bodyclose // the returned stream closes the body
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("listen answered HTTP %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &sse{resp: resp, events: make(chan map[string]any, 1024), raw: make(chan string, 1024), cancel: cancel}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			s.raw <- d
			var m map[string]any
			if json.Unmarshal([]byte(d), &m) != nil {
				m = map[string]any{"unparseable": d}
			}
			s.events <- m
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next returns the next message, failing the test on a hang or end.
func (s *sse) next(t *testing.T) map[string]any {
	t.Helper()
	return s.nextBy(t, time.Now().Add(hang))
}

func (s *sse) nextBy(t *testing.T, deadline time.Time) map[string]any {
	t.Helper()
	select {
	case m, ok := <-s.events:
		if !ok {
			t.Fatal("stream ended")
		}
		return m
	case <-time.After(time.Until(deadline)):
		t.Fatal("timed out waiting for a stream message")
	}
	return nil
}

// nextMethod skips messages until one with the given method arrives, within hang (a stream
// that keeps sending other messages does not make it wait longer), and returns the messages
// skipped.
func (s *sse) nextMethod(t *testing.T, method string) (map[string]any, []map[string]any) {
	t.Helper()
	deadline := time.Now().Add(hang)
	var skipped []map[string]any
	for {
		m := s.nextBy(t, deadline)
		if m["method"] == method {
			return m, skipped
		}
		skipped = append(skipped, m)
	}
}

func listen(t *testing.T, url string, id any, filter string) *sse {
	t.Helper()
	return openStream(t, rpcReq(t, url, id, "subscriptions/listen", "", `,"notifications":`+filter))
}

func subID(m map[string]any) any {
	p, _ := m["params"].(map[string]any)
	if p == nil {
		r, _ := m["result"].(map[string]any)
		p = r
	}
	mt, _ := p["_meta"].(map[string]any)
	return mt["io.modelcontextprotocol/subscriptionId"]
}

// callTool calls a tool through url and fails on an error response.
func callTool(t *testing.T, url, name string) map[string]any {
	t.Helper()
	st, _, msg := do(t, rpcReq(t, url, "call-"+name, "tools/call", name, `,"name":"`+name+`","arguments":{}`))
	if st != 200 || msg["error"] != nil {
		t.Fatalf("tools/call %s: HTTP %d %v", name, st, msg)
	}
	return msg
}

// sigterm sends SIGTERM, as the kubelet does, and waits for a clean exit.
func sigterm(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, p)
}

// waitExit waits for p, signalled already, to exit with status 0.
func waitExit(t *testing.T, p *proc) {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("%s exit: %v\n%s", filepath.Base(p.cmd.Path), err, p.output())
		}
	case <-time.After(hang):
		t.Fatalf("%s did not exit after SIGTERM", filepath.Base(p.cmd.Path))
	}
}
