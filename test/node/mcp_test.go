//go:build node

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// hostHeader sends every request with the Host a client in the cluster uses (the Service's
// name): the sidecar answers 403 to any Host outside --allowed-hosts, pod IPs included.
type hostHeader struct {
	host string
	base http.RoundTripper
}

func (h hostHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	return h.base.RoundTrip(r)
}

// client returns an MCP client for http://addr/mcp sending Host host.
func client(addr, host string) *mcptest.Client {
	c := mcptest.New("http://" + addr + "/mcp")
	c.HTTP = &http.Client{Transport: hostHeader{host: host, base: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}}
	return c
}

// serviceClient is a client of the sample MCPServer through its ClusterIP Service (kube-proxy).
func serviceClient(t *testing.T) *mcptest.Client {
	t.Helper()
	svc, err := cs.CoreV1().Services(sampleNamespace).Get(context.Background(), sampleServer, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return client(fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), sampleServerHost)
}

// podClient is a client of one pod's sidecar (MCP port 8800).
func podClient(p corev1.Pod, host string) *mcptest.Client {
	return client(p.Status.PodIP+":8800", host)
}

type tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func tools(t *testing.T, c *mcptest.Client) []tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.Call(ctx, "tools/list", nil)
	if err != nil || resp.Error != nil {
		t.Fatalf("tools/list: %v %+v", err, resp)
	}
	var r struct {
		Tools []tool `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &r); err != nil {
		t.Fatal(err)
	}
	return r.Tools
}

func toolNames(t *testing.T, c *mcptest.Client) []string {
	t.Helper()
	var n []string
	for _, x := range tools(t, c) {
		n = append(n, x.Name)
	}
	slices.Sort(n)
	return n
}

// frame is one message of a listen stream, with when it arrived.
type frame struct {
	At       time.Time
	Method   string // a notification's method; "" for the final result
	Complete bool   // the final result with resultType "complete"
}

// stream is a raw subscriptions/listen stream: every frame is kept, the final result too, so a
// test can count `complete` results exactly.
type stream struct {
	frames chan frame // closed when the stream ends
	cancel context.CancelFunc
	end    error // why it ended (io.EOF: closed by the server); set before frames is closed
}

// listen opens a listen stream for tool list changes and returns once it is acknowledged; it
// ends with its server, s.cancel or parent.
func listen(c *mcptest.Client) (*stream, error) { return listenCtx(context.Background(), c) }

func listenCtx(parent context.Context, c *mcptest.Client) (*stream, error) {
	resp, cancel, err := c.OpenListen(parent, map[string]any{"toolsListChanged": true}) //nolint:bodyclose // closed by the reader goroutine
	if err != nil {
		return nil, err
	}
	rd := wire.NewSSEReader(resp.Body, 1<<20)
	ev, err := rd.Next()
	ack := ev.Data
	if err != nil || !bytes.Contains(ack, []byte("notifications/subscriptions/acknowledged")) {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("listen: no acknowledgement (%s): %v", ack, err) //nolint:errorlint // err may be nil: printed, not wrapped
	}
	s := &stream{frames: make(chan frame, 64), cancel: cancel}
	go func() {
		defer close(s.frames)
		defer resp.Body.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				s.end = err
				return
			}
			data := ev.Data
			var m struct {
				Method string `json:"method"`
				Result struct {
					ResultType string `json:"resultType"`
				} `json:"result"`
			}
			_ = json.Unmarshal(data, &m)
			s.frames <- frame{At: time.Now(), Method: m.Method, Complete: m.Result.ResultType == "complete"}
		}
	}()
	return s, nil
}

// rss is the resident memory of a container's main process, read from /proc on this node.
func rss(t *testing.T, p corev1.Pod, container string) string {
	t.Helper()
	pid, err := containerPID(p, container)
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return "unknown"
	}
	for l := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
