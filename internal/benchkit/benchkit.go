// Package benchkit holds what the benchmarks share (hack/sidecarbench, its bare baselines and
// the sidecar package's Go benchmarks; hack/catalogbench and hack/scalebench): the stream
// registry the SSE servers fan out from, the HTTP client settings, and quantiles.
package benchkit

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// BroadcastFrame is the ~150 B event the bare servers fan out.
func BroadcastFrame(seq int64) []byte {
	return fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"broadcast\",\"seq\":%010d}}\n\n", seq)
}

// Registry is a list of open streams; mu guards conns.
type Registry struct {
	mu    sync.Mutex
	conns []func([]byte) error
	seq   atomic.Int64
}

// Add registers a stream's write function.
func (r *Registry) Add(w func([]byte) error) {
	r.mu.Lock()
	r.conns = append(r.conns, w)
	r.mu.Unlock()
}

// Broadcast writes one frame to every stream with GOMAXPROCS writers.
func (r *Registry) Broadcast() {
	r.mu.Lock()
	targets := append([]func([]byte) error(nil), r.conns...)
	r.mu.Unlock()
	frame := BroadcastFrame(r.seq.Add(1))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(targets) {
					return
				}
				_ = targets[i](frame)
			}
		})
	}
	wg.Wait()
}

// ReadBody reads a request body (at most 1 MiB).
func ReadBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	return b
}

// Conns returns the registered write functions.
func (r *Registry) Conns() []func([]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]func([]byte) error(nil), r.conns...)
}

// TunedTransport is the HTTP client transport of the load generator and the
// bare proxies: a large keep-alive pool, no proxy, no compression.
func TunedTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// Hop lists the hop-by-hop headers a proxy does not forward.
var Hop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// MinimalProxy is the bare forwarding handler the sidecar is measured
// against: every request goes to upstream with its headers (hop-by-hop ones
// aside), and the answer comes back as it arrives; both bodies are streamed.
func MinimalProxy(client *http.Client, upstream string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.ContentLength = r.ContentLength
		for k, v := range r.Header {
			req.Header[k] = v
		}
		for _, k := range Hop {
			req.Header.Del(k)
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
}

// Quantile is the p-quantile of sorted (ascending, not empty) by the nearest-rank method: the
// smallest value with at least a fraction p of the values at or below it. Of 100 values, p99 is
// the 99th, not the largest.
func Quantile[T cmp.Ordered](sorted []T, p float64) T {
	k := int(math.Ceil(p*float64(len(sorted))-1e-9)) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}
