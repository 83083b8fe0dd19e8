// Command catalogbench measures catalog propagation end to end (docs/performance.md): the test
// API server, the manager's controllers, one real sidecar process watching its catalog ConfigMap
// as its own ServiceAccount, and -clients listening clients. It applies an MCPTool change -n
// times and measures, for each, the time from the moment the apply call returns to the moment
// the last client receives notifications/tools/list_changed.
//
//	go build -o bin/sidecar ./cmd/sidecar && go run ./hack/catalogbench -sidecar bin/sidecar
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

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
	flag.Parse()
	if err := run(*sidecarBin, *clients, *n, *gap); err != nil {
		fmt.Fprintln(os.Stderr, "catalogbench:", err)
		os.Exit(1)
	}
}

func run(sidecarBin string, clients, n int, gap time.Duration) error {
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
		s, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
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
		if err := st.Env.Client.Get(ctx, key, &tool); err != nil {
			return err
		}
		tool.Spec.Description = fmt.Sprintf("Daily forecast, revision %d.", i)
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
		if err := st.Env.Client.Update(ctx, &tool); err != nil {
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
	fmt.Printf("clients=%d changes=%d  apply-return → last client's tools/list_changed: p50=%v p90=%v p99=%v max=%v min=%v\n",
		clients, len(lat), q(0.50).Round(100*time.Microsecond), q(0.90).Round(100*time.Microsecond),
		q(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond), lat[0].Round(100*time.Microsecond))
	return nil
}
