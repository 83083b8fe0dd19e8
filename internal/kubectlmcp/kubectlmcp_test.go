package kubectlmcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A real go-sdk v1.8.0 server at 2026-07-28 (the sidecar path runs in test/e2e TestDevLoop,
// against the make dev stack; port-forward needs a kubelet, which this machine lacks).
func newServer(t *testing.T) (*mcp.Server, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "v1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 60000, "public" },
	})
	addTool(srv, "alpha")
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	return srv, ts.URL
}

func addTool(srv *mcp.Server, name string) {
	mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Says " + name + "."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Say string `json:"say,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + in.Say}}}, nil, nil
		})
}

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb strings.Builder
	code := Run(t.Context(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestTools(t *testing.T) {
	_, url := newServer(t)
	out, errOut, code := runCmd(t, "tools", "--url", url, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var l Listing
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if l.ProtocolVersion != "2026-07-28" || len(l.Lists) != 1 || l.Lists[0].TTLMs != 60000 || l.Lists[0].CacheScope != "public" ||
		len(l.Lists[0].Items) != 1 || l.Lists[0].Items[0].Name != "alpha" {
		t.Fatalf("listing: %s", out)
	}
	out, _, code = runCmd(t, "tools", "--url", url)
	if code != 0 || !strings.Contains(out, "# tools: 1, ttl 1m0s, scope public") || !strings.Contains(out, "alpha") {
		t.Fatalf("table (exit %d):\n%s", code, out)
	}
	out, _, code = runCmd(t, "resources", "--url", url, "-o", "yaml")
	if code != 0 || !strings.Contains(out, "kind: resources") || !strings.Contains(out, "kind: resourceTemplates") {
		t.Fatalf("resources yaml (exit %d):\n%s", code, out)
	}
}

func TestCall(t *testing.T) {
	_, url := newServer(t)
	out, errOut, code := runCmd(t, "call", "--url", url, "alpha", "--args", `{"say":"hi"}`)
	if code != 0 || out != "alpha:hi\n" {
		t.Fatalf("exit %d, out %q, err %q", code, out, errOut)
	}
	if _, _, code := runCmd(t, "call", "--url", url, "alpha", "--args", `[1]`); code != 1 {
		t.Fatalf("--args not an object: exit %d, want 1", code)
	}
	for _, args := range [][]string{{"call", "--url", url}, {"tools"}, {"frobnicate", "x"}, {"tools", "--url", url, "-o", "xml"}} {
		if _, _, code := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestWatch(t *testing.T) {
	srv, url := newServer(t)
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errb strings.Builder
		done <- Run(context.Background(), []string{"watch", "--url", url, "-o", "json", "--max-events", "2"}, pw, &errb)
		_ = pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	next := func() WatchEvent {
		t.Helper()
		got := make(chan string, 1)
		go func() {
			if lines.Scan() {
				got <- lines.Text()
			}
			close(got)
		}()
		select {
		case l, ok := <-got:
			if !ok {
				t.Fatal("watch ended early")
			}
			var e WatchEvent
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("no watch line")
		}
		return WatchEvent{}
	}
	if e := next(); e.Type != "acknowledged" {
		t.Fatalf("first event %+v, want acknowledged", e)
	}
	addTool(srv, "beta")
	if e := next(); e.Type != "notification" || e.Method != "notifications/tools/list_changed" {
		t.Fatalf("second event %+v, want tools/list_changed", e)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("watch exited %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop after --max-events")
	}
}

func TestPickPod(t *testing.T) {
	pod := func(name string, ready bool, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, ""},
		{"none ready", []corev1.Pod{pod("a", false, false)}, ""},
		{"first ready by name", []corev1.Pod{pod("c", true, false), pod("b", true, false), pod("a", false, false)}, "b"},
		{"not a terminating one", []corev1.Pod{pod("a", true, true), pod("b", true, false)}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := pickPod(tc.pods)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("picked %s, want an error", p.Name)
			case tc.want != "" && (err != nil || p.Name != tc.want):
				t.Fatalf("picked %v (%v), want %s", p, err, tc.want)
			}
		})
	}
}
