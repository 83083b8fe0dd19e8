// Command catalogbench measures catalog propagation end to end (docs/performance.md): the test
// API server, the manager's controllers, one real sidecar process watching its catalog ConfigMap
// as its own ServiceAccount, and -clients listening clients. It applies an MCPTool change -n
// times and measures, for each, the time from the moment the apply call returns to the moment
// the last client receives notifications/tools/list_changed.
//
// With -legacy the clients are 2025-era sessions (initialize, then the session's GET stream)
// instead of subscriptions/listen streams.
//
//	go build -o bin/sidecar ./cmd/sidecar && go run ./hack/catalogbench -sidecar bin/sidecar [-legacy]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

func main() {
	sidecarBin := flag.String("sidecar", "bin/sidecar", "built cmd/sidecar")
	clients := flag.Int("clients", 100, "listening clients")
	n := flag.Int("n", 100, "MCPTool changes to apply")
	gap := flag.Duration("gap", 200*time.Millisecond, "pause between changes")
	legacy := flag.Bool("legacy", false, "clients are 2025-era sessions with GET streams")
	flag.Parse()
	if err := run(*sidecarBin, *clients, *n, *gap, *legacy); err != nil {
		fmt.Fprintln(os.Stderr, "catalogbench:", err)
		os.Exit(1)
	}
}

func run(sidecarBin string, clients, n int, gap time.Duration, legacy bool) error {
	ctx := context.Background()
	fmt.Println("Starting the control plane, the controllers and the sidecar…")
	st, err := framework.StartStack(ctx, framework.StackOptions{SidecarBin: sidecarBin, Namespace: "bench"})
	if err != nil {
		return err
	}
	defer st.Stop()

	c := mcptest.New(st.MCPURL)
	var streams []*mcptest.Stream
	for range clients {
		open := func() (*mcptest.Stream, error) { return c.Listen(ctx, map[string]any{"toolsListChanged": true}) }
		if legacy {
			open = func() (*mcptest.Stream, error) { return legacyStream(ctx, st.MCPURL) }
		}
		s, err := open()
		if err != nil {
			return err
		}
		streams = append(streams, s)
	}
	defer func() {
		for _, s := range streams {
			s.Close()
		}
	}()

	var tool mcpv1alpha1.MCPTool
	key := client.ObjectKey{Namespace: st.Namespace, Name: "weather-forecast"}
	var lat []time.Duration
	for i := range n + 1 { // the first change warms up and is not counted
		var wg sync.WaitGroup
		arrived := make([]time.Time, len(streams))
		for j, s := range streams {
			wg.Go(func() {
				select {
				case nt, ok := <-s.C:
					if ok {
						arrived[j] = nt.At
					}
				case <-time.After(10 * time.Second):
				}
			})
		}
		// The controller writes the MCPTool's status meanwhile: retry on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := st.Env.Client.Get(ctx, key, &tool); err != nil {
				return err
			}
			tool.Spec.Description = fmt.Sprintf("Daily forecast, revision %d.", i)
			return st.Env.Client.Update(ctx, &tool)
		}); err != nil {
			return err
		}
		applied := time.Now()
		wg.Wait()
		last := slices.MaxFunc(arrived, func(a, b time.Time) int { return a.Compare(b) })
		if slices.ContainsFunc(arrived, time.Time.IsZero) {
			return fmt.Errorf("change %d: a client got no notification within 10s\n%s", i, st.SidecarLog(20))
		}
		// Drain a duplicate (there must be none; count it as a failure).
		for _, s := range streams {
			select {
			case extra := <-s.C:
				return fmt.Errorf("change %d: a client got a second notification %s %v after the first\n%s", i, extra.Method, extra.At.Sub(last), st.SidecarLog(15))
			default:
			}
		}
		if i > 0 {
			lat = append(lat, last.Sub(applied))
		}
		time.Sleep(gap)
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	kind := "listen"
	if legacy {
		kind = "2025-era GET"
	}
	fmt.Printf("clients=%d (%s streams) changes=%d  apply-return → last client's tools/list_changed: p50=%v p90=%v p99=%v max=%v min=%v\n",
		clients, kind, len(lat), q(0.50).Round(100*time.Microsecond), q(0.90).Round(100*time.Microsecond),
		q(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond), lat[0].Round(100*time.Microsecond))
	return nil
}

// legacyStream opens a 2025-11-25 session (initialize, notifications/initialized) and its GET
// stream, and returns once the stream's priming event arrived.
func legacyStream(ctx context.Context, url string) (*mcptest.Stream, error) {
	post := func(body, sid string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("%s: HTTP %d", body, resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id"), nil
	}
	sid, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"catalogbench","version":"1"}}}`, "")
	if err != nil {
		return nil, err
	}
	if _, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the reader goroutine closes it
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET: HTTP %d", resp.StatusCode)
	}
	ch := make(chan mcptest.Notification, 64)
	primed := make(chan struct{})
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "id: ") {
				once.Do(func() { close(primed) })
				continue
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "notifications/tools/list_changed") {
				ch <- mcptest.Notification{Method: "notifications/tools/list_changed", At: time.Now()}
			}
		}
	}()
	select {
	case <-primed:
	case <-time.After(10 * time.Second):
		cancel()
		return nil, errors.New("no priming event on the GET stream")
	}
	return mcptest.NewStream(ch, cancel), nil
}
