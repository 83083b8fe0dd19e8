//go:build e2e

package client_test

// Test harness: real parts. TestMain builds the sidecar (cmd/sidecar) and a 2025-era MCP server
// (testdata/server2025, go-sdk v1.4.1); each test runs a go-sdk v1.8.0 server in process as the
// upstream and real sidecar processes in front of it on 127.0.0.1, configured by a catalog file.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
)

var sidecarBin, server2025Bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "client-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sidecarBin = filepath.Join(dir, "sidecar")
	server2025Bin = filepath.Join(dir, "server2025")
	build := []string{"build", "-o", sidecarBin}
	if os.Getenv("SIDECAR_TEST_RACE") != "" {
		build = append(build, "-race")
	}
	builds := []*exec.Cmd{
		exec.Command("go", append(build, "../cmd/sidecar")...),
		exec.Command("go", "build", "-o", server2025Bin, "."),
	}
	builds[1].Dir = "testdata/server2025"
	builds[1].Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	for _, b := range builds {
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building test binaries:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func freeAddr(t *testing.T) string { t.Helper(); return freeport.ForTest(t) }

// upstream is a go-sdk v1.8.0 server (stateless, 2026-07-28) run in process. Its tools/list
// counts calls per Authorization header and can hold answers at a gate.
type upstream struct {
	srv  *mcp.Server
	http *httptest.Server
	url  string

	mu     sync.Mutex
	calls  map[string]int // tools/list calls by Authorization
	gateOn string         // Authorization whose tools/list calls wait at the gate
	gate   chan chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{calls: map[string]int{}, gate: make(chan chan struct{})}
	u.srv = mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "v1"}, nil)
	for _, name := range []string{"alpha", "beta"} {
		u.addTool(name)
	}
	u.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			auth := ""
			if ex := req.GetExtra(); ex != nil && ex.Header != nil {
				auth = ex.Header.Get("Authorization")
			}
			u.mu.Lock()
			u.calls[auth]++
			gated := auth != "" && auth == u.gateOn
			u.mu.Unlock()
			// The answer is computed first, then held: what the sidecar merges it with was
			// decided when the request arrived, so the answer is as old as the request.
			res, err := next(ctx, method, req)
			if gated {
				release := make(chan struct{})
				select {
				case u.gate <- release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return res, err
		}
	})
	u.http = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	u.url = u.http.URL
	t.Cleanup(u.http.Close)
	return u
}

func (u *upstream) addTool(name string) {
	mcp.AddTool(u.srv, &mcp.Tool{Name: name, Description: "Upstream " + name + "."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Say string `json:"say,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + in.Say}}}, nil, nil
		})
}

func (u *upstream) listCalls(auth string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[auth]
}

// hold makes the next tools/list calls carrying auth wait at the gate.
func (u *upstream) hold(auth string) {
	u.mu.Lock()
	u.gateOn = auth
	u.mu.Unlock()
}

// arrived waits for a held tools/list call and returns its release.
func (u *upstream) arrived(t *testing.T) chan struct{} {
	t.Helper()
	select {
	case r := <-u.gate:
		return r
	case <-time.After(hang):
		t.Fatal("no tools/list call arrived at the gate")
	}
	return nil
}

// catalogFile writes a catalog whose tool hints are tools, overriding alpha's description.
type catalogFile struct {
	path  string
	tools catalog.CacheHint
	auth  *catalog.Auth // nil: auth mode Off
}

func newCatalog(t *testing.T, tools catalog.CacheHint, alphaDescription string) *catalogFile {
	t.Helper()
	c := &catalogFile{path: filepath.Join(t.TempDir(), "catalog.json"), tools: tools}
	c.write(t, alphaDescription)
	return c
}

func (c *catalogFile) write(t *testing.T, alphaDescription string) {
	t.Helper()
	h := catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "test", Name: "upstream", ToolPolicy: catalog.ToolPolicyAll,
			Caching: catalog.CacheDefaults{Discover: h, Tools: c.tools, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Auth:  c.auth,
		Tools: []catalog.Tool{{Name: "alpha", Description: alphaDescription}},
		Resources: []catalog.Resource{{URI: "docs://readme", Name: "readme", MimeType: "text/plain",
			Source: catalog.Source{Inline: &catalog.Inline{Text: "readme: " + alphaDescription}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		t.Fatal(err)
	}
}

// sidecar is a real sidecar process.
type sidecar struct {
	cmd       *exec.Cmd
	out       *syncBuffer
	mcp       string
	admin     string
	mcpAddr   string
	adminAddr string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startSidecar runs a sidecar in front of up with the catalog file, on the given addresses (""
// picks free ones), and waits until it is ready.
func startSidecar(t *testing.T, upURL, catalogPath, mcpAddr, adminAddr string, extra ...string) *sidecar {
	t.Helper()
	if mcpAddr == "" {
		mcpAddr = freeAddr(t)
	}
	if adminAddr == "" {
		adminAddr = freeAddr(t)
	}
	s := &sidecar{out: &syncBuffer{}, mcpAddr: mcpAddr, adminAddr: adminAddr,
		mcp: "http://" + mcpAddr + "/mcp", admin: "http://" + adminAddr}
	args := append([]string{"--upstream", upURL + "/mcp", "--listen", mcpAddr, "--admin-listen", adminAddr,
		"--catalog-file", catalogPath, "--drain-delay", "0s", "--drain-jitter", "0s", "--log-level", "debug"}, extra...)
	s.cmd = exec.Command(sidecarBin, args...)
	// The drain token, as the controller gives every pod (the sidecar refuses /drain without one).
	s.cmd.Env = append(os.Environ(), "SWITCHBOARD_DRAIN_TOKEN="+testDrainToken)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kill()
		if strings.Contains(s.out.String(), "WARNING: DATA RACE") {
			t.Error("the sidecar reported a data race")
		}
		if t.Failed() {
			t.Logf("sidecar %s log:\n%s", mcpAddr, s.out.String())
		}
	})
	eventually.True(t, "the sidecar is ready", func() bool { return s.ready() })
	return s
}

func (s *sidecar) ready() bool {
	r, err := http.Get(s.admin + "/readyz")
	if err != nil {
		return false
	}
	_ = r.Body.Close()
	return r.StatusCode == http.StatusOK
}

func (s *sidecar) kill() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// metric returns an unlabelled metric from the admin port.
func (s *sidecar) metric(t *testing.T, name string) string {
	t.Helper()
	r, err := http.Get(s.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

func canDial(addr string) bool {
	c, err := net.Dial("tcp", addr)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), hang)
}

// testDrainToken is the drain token of every test sidecar.
const testDrainToken = "client-test-drain-token-0123456789"

// drain is what a pod's preStop hook does: GET /drain with the drain token. It returns once the
// drain is over.
func (s *sidecar) drain() error {
	req, err := http.NewRequest(http.MethodGet, s.admin+"/drain", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+testDrainToken)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /drain: HTTP %d", r.StatusCode)
	}
	return nil
}
