//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

// tcpProxy forwards raw TCP from a fixed 127.0.0.1 address to target (TLS passes through
// untouched). cut closes the listener and every open connection, so clients see the API server
// vanish; restore listens again on the same address.
type tcpProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *tcpProxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		_, _ = c.Close(), u.Close()
		return
	}
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) { _, _ = io.Copy(dst, src); done <- struct{}{} }
	go cp(u, c)
	go cp(c, u)
	<-done // either side ending ends both
	_, _ = c.Close(), u.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// startProxiedSidecar starts a second sidecar process with the stack sidecar's exact arguments
// (its own ports and pod name, the same sample upstream) whose kubeconfig reaches the API server
// only through proxy.
func startProxiedSidecar(t *testing.T) (proxy *tcpProxy, mcpURL, adminURL string) {
	t.Helper()
	var pod corev1.Pod
	if err := stack.Env.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.Namespace, Name: stack.Pod}, &pod); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kc, err := framework.ImpersonatingKubeconfig(stack.Env.Environment.KubeConfig, dir, stack.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			t.Fatal(err)
		}
		if proxy == nil {
			proxy = startProxy(t, u.Host)
		} else if proxy.target != u.Host {
			t.Fatalf("kubeconfig clusters disagree: %s and %s", proxy.target, u.Host)
		}
		u.Host = proxy.addr // the serving certificate names 127.0.0.1, so only the port changes
		c.Server = u.String()
	}
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	mcpAddr, adminAddr := freeAddr(t), freeAddr(t)
	args, err := framework.SidecarArgs(&pod, mcpAddr, adminAddr, stack.UpstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if strings.HasPrefix(a, "--pod-name=") {
			args[i] = "--pod-name=" + stack.Pod + "-outage"
		}
	}
	logPath := filepath.Join(dir, "sidecar.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sidecarBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("proxied sidecar log:\n%s", b)
		}
	})
	mcpURL, adminURL = "http://"+mcpAddr+"/mcp", "http://"+adminAddr
	eventually.True(t, "the proxied sidecar ready", func() bool {
		select {
		case <-exited:
			t.Fatal("the proxied sidecar exited")
		default:
		}
		return ready(t.Context(), adminURL)
	})
	return proxy, mcpURL, adminURL
}

func freeAddr(t *testing.T) string { t.Helper(); return freeport.ForTest(t) }

func ready(ctx context.Context, adminURL string) bool {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, adminURL+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// The issue's claim: "The API server being unreachable for minutes changes nothing for clients;
// the watch resumes and catches up." A test cannot afford minutes; outage is long enough for
// client-go's watch to fail and its reflector to retry with growing backoff several times,
// which is the mechanism minutes would exercise too.
const outage = 12 * time.Second

func TestAPIServerOutageChangesNothingForClientsAndTheWatchCatchesUp(t *testing.T) {
	proxy, mcpURL, adminURL := startProxiedSidecar(t)
	c := mcptest.New(mcpURL)
	streams := map[string]*mcptest.Stream{}
	for name, f := range map[string]map[string]any{
		"tools":    {"toolsListChanged": true},
		"tools2":   {"toolsListChanged": true, "promptsListChanged": true},
		"handbook": {"resourcesListChanged": true, "resourceSubscriptions": []string{"docs://weather/handbook"}},
	} {
		s, err := c.Listen(t.Context(), f)
		if err != nil {
			t.Fatalf("listen %s: %v", name, err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	names := func() []string {
		t.Helper()
		r, err := c.Call(t.Context(), "tools/list", nil)
		if err != nil || r.Error != nil {
			t.Fatalf("tools/list: %v %+v", err, r)
		}
		var res mcp.ListToolsResult
		if err := json.Unmarshal(r.Result, &res); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	before := names()
	if slices.Contains(before, "short_forecast") {
		t.Fatalf("short_forecast already listed: %v", before)
	}

	proxy.cut()
	t.Logf("API server cut off for %s", outage)
	// The MCPTool change the sidecar cannot see until the API server is back: through the real
	// API server, not the proxy. Cleanup deletes it the same way.
	if err := applyTool(t, "Short forecast.", "Enabled"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = stack.Kubectl(context.Background(), "", "delete", "mcptool", "weather-forecast-short", "--ignore-not-found")
	})
	end := time.Now().Add(outage)
	rounds := 0
	for time.Now().Before(end) {
		rounds++
		if got := names(); !slices.Equal(got, before) {
			t.Fatalf("during the outage tools/list = %v, want the last good %v", got, before)
		}
		r, err := c.Call(t.Context(), "tools/call", map[string]any{"name": "celsius_to_fahrenheit", "arguments": map[string]any{"celsius": 100}})
		if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "212") {
			t.Fatalf("during the outage tools/call of the renamed tool: %v %+v", err, r)
		}
		r, err = c.Call(t.Context(), "resources/read", map[string]any{"uri": "docs://weather/handbook"})
		if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "Weather desk handbook") {
			t.Fatalf("during the outage resources/read of the ConfigMap resource: %v %+v", err, r)
		}
		if !ready(t.Context(), adminURL) {
			t.Fatal("during the outage /readyz is not OK")
		}
		for name, s := range streams {
			select {
			case n, ok := <-s.C:
				if !ok {
					t.Fatalf("during the outage stream %s ended", name)
				}
				t.Fatalf("during the outage stream %s received %s %s", name, n.Method, n.URI)
			default:
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d rounds of tools/list, tools/call, resources/read and /readyz answered during the outage", rounds)

	proxy.restore(t)
	restored := time.Now()
	var caught time.Time
	for _, name := range []string{"tools", "tools2"} {
		select {
		case n, ok := <-streams[name].C:
			if !ok {
				t.Fatalf("stream %s ended", name)
			}
			if n.Method != "notifications/tools/list_changed" {
				t.Fatalf("stream %s received %s %s, want notifications/tools/list_changed", name, n.Method, n.URI)
			}
			if caught.IsZero() {
				caught = n.At
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("stream %s: no notifications/tools/list_changed within 60 s of the API server's return", name)
		}
	}
	t.Logf("caught up %s after the API server came back", caught.Sub(restored).Round(time.Millisecond))
	// Exactly one: nothing more on any stream (the relists of the catalog and of the handbook
	// ConfigMap must not replay unchanged content as changes).
	for name, s := range streams {
		for _, n := range s.Collect(quiet) {
			t.Errorf("stream %s also received %s %s", name, n.Method, n.URI)
		}
	}
	if got := names(); !slices.Contains(got, "short_forecast") {
		t.Errorf("after catching up tools/list = %v, want short_forecast in it", got)
	}
	if !ready(t.Context(), adminURL) {
		t.Error("after the outage /readyz is not OK")
	}
}
