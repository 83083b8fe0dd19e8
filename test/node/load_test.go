//go:build node

package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// load is steady MCP traffic on the sample MCPServer through its Service while pods come and
// go: listeners that hold a listen stream each and re-listen whenever one ends, callers that
// call a tool in a loop, and a sampler of the Deployment's available replicas. It counts what
// the clients saw, so a test can require that nothing was lost.
type load struct {
	listeners int

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	calls, failed, conns, completes, relistens atomic.Int64
	badConns, listenErrs, open                 atomic.Int64
	minAvailable                               atomic.Int32

	mu       sync.Mutex
	failures []string
}

// startLoad opens `listeners` listen streams and starts `callers` callers through svc, and
// returns once every stream is open.
func startLoad(t *testing.T, svc *mcptest.Client, listeners, callers int) *load {
	t.Helper()
	l := &load{listeners: listeners}
	l.ctx, l.stop = context.WithCancel(context.Background())
	t.Cleanup(l.stop)
	opened := make(chan struct{}, listeners)
	for i := range listeners {
		l.wg.Go(func() {
			first := true
			for l.ctx.Err() == nil {
				s, err := listenCtx(l.ctx, svc)
				if err != nil {
					if l.ctx.Err() != nil {
						return
					}
					l.listenErrs.Add(1) // a pod between draining and leaving the endpoints; retried
					time.Sleep(100 * time.Millisecond)
					continue
				}
				l.conns.Add(1)
				if first {
					opened <- struct{}{}
					first = false
				} else {
					l.relistens.Add(1)
				}
				l.open.Add(1)
				n := 0
				for f := range s.frames {
					if f.Complete {
						n++
					}
				}
				l.open.Add(-1)
				s.cancel()
				time.Sleep(50 * time.Millisecond) // a draining pod answers a new listen with its complete at once
				if l.ctx.Err() != nil {
					return // ended by the test
				}
				l.completes.Add(int64(n))
				if n != 1 {
					l.badConns.Add(1)
					l.fail(fmt.Sprintf("listener %d: a stream ended with %d complete results", i, n))
				}
			}
		})
	}
	for range listeners {
		select {
		case <-opened:
		case <-time.After(hang):
			t.Fatalf("the %d listen streams did not open", listeners)
		}
	}
	for range callers {
		l.wg.Go(func() {
			for l.ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
				resp, err := svc.Call(cctx, "tools/call", map[string]any{"name": "get_forecast", "arguments": map[string]any{"city": "Oslo", "days": 1}})
				cancel()
				if l.ctx.Err() != nil {
					return
				}
				l.calls.Add(1)
				if err != nil || resp.Status != 200 || resp.Error != nil {
					l.failed.Add(1)
					l.fail(fmt.Sprintf("call: %v %+v", err, resp))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	l.minAvailable.Store(99)
	l.wg.Go(func() {
		for l.ctx.Err() == nil {
			if d, err := cs.AppsV1().Deployments(sampleNamespace).Get(l.ctx, sampleServer, metav1.GetOptions{}); err == nil {
				if a := d.Status.AvailableReplicas; a < l.minAvailable.Load() {
					l.minAvailable.Store(a)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return l
}

func (l *load) fail(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, msg)
}

// finish waits for every listener to be open again (re-listened on a pod still serving), lets
// the calls run 2 s more, stops the load and prints its figure.
func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	waitFor(t, time.Minute, "every listener re-listening", func() error {
		if n := l.open.Load(); n != int64(l.listeners) {
			return fmt.Errorf("%d of %d streams open", n, l.listeners)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // calls on the new pods
	l.stop()
	l.wg.Wait()
	fmt.Printf("FIGURE %s: %d calls, %d failed; %d stream connections, %d complete results, %d re-listens, %d listen retries; min available replicas %d\n",
		what, l.calls.Load(), l.failed.Load(), l.conns.Load(), l.completes.Load(), l.relistens.Load(), l.listenErrs.Load(), l.minAvailable.Load())
}

// requireNoLoss fails unless no call failed, every stream connection ended with exactly one
// complete, every first stream got its complete (each was on a pod that went away) and was
// followed by a re-listen, and the Deployment never had fewer than minAvailable available
// replicas.
func (l *load) requireNoLoss(t *testing.T, minAvailable int32) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed.Load() != 0 || l.badConns.Load() != 0 {
		t.Errorf("%d failed calls, %d stream connections without exactly one complete; first: %v", l.failed.Load(), l.badConns.Load(), l.failures[:min(5, len(l.failures))])
	}
	if l.completes.Load() < int64(l.listeners) {
		t.Errorf("%d complete results for %d streams: every first stream was on an old pod", l.completes.Load(), l.listeners)
	}
	if l.relistens.Load() < int64(l.listeners) {
		t.Errorf("%d re-listens, want at least %d", l.relistens.Load(), l.listeners)
	}
	if l.minAvailable.Load() < minAvailable {
		t.Errorf("the Deployment had %d available replicas, want at least %d", l.minAvailable.Load(), minAvailable)
	}
}
