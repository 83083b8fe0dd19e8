// Command baselines runs the bare Go servers hack/sidecarbench measures the
// sidecar against: SSE servers (plain net/http and hijacked connections),
// a minimal forwarding proxy and httputil.ReverseProxy.
//
// It is its own binary on purpose. The load generator and the upstream run
// from the sidecarbench binary; a server running from that same binary
// executes net/http and the runtime at the same code addresses as the load
// generator and the upstream on the same two cores, and was measured 7-9 %
// cheaper in CPU and 15-20 µs faster at concurrency 1 than the same code
// built into another binary (docs/performance.md). The sidecar never gets
// that advantage, so the baselines must not either.
//
// Usage: baselines sse ADDR plain|hijack | minproxy ADDR UPSTREAM | rproxy ADDR UPSTREAM
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchkit"
)

func main() {
	if len(os.Args) < 4 {
		log.Fatal("usage: baselines sse ADDR plain|hijack | minproxy ADDR UPSTREAM | rproxy ADDR UPSTREAM")
	}
	switch os.Args[1] {
	case "sse":
		serveSSE(os.Args[2], os.Args[3])
	case "minproxy":
		serveMinProxy(os.Args[2], os.Args[3])
	case "rproxy":
		serveReverseProxy(os.Args[2], os.Args[3])
	default:
		log.Fatalf("unknown server %q", os.Args[1])
	}
}

// serveSSE runs a bare SSE server: mode "plain" (net/http handler parked
// per stream) or "hijack" (hijacked conn, one reader goroutine per stream).
func serveSSE(addr, mode string) {
	reg := &benchkit.Registry{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /broadcast", func(w http.ResponseWriter, r *http.Request) {
		reg.Broadcast()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		benchkit.ReadBody(r)
		first := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{}}\n\n")
		if mode == "hijack" {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Time{})
			var mu sync.Mutex
			write := func(ev []byte) error {
				mu.Lock()
				defer mu.Unlock()
				_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, err := c.Write(fmt.Appendf(nil, "%x\r\n%s\r\n", len(ev), ev))
				return err
			}
			_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"))
			_ = write(first)
			reg.Add(write)
			go func() {
				var b [1]byte
				for {
					if _, err := c.Read(b[:]); err != nil {
						c.Close()
						return
					}
				}
			}()
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		var mu sync.Mutex
		write := func(ev []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := w.Write(ev); err != nil {
				return err
			}
			return rc.Flush()
		}
		_ = write(first)
		done := make(chan struct{})
		reg.Add(func(ev []byte) error {
			select {
			case <-done:
				return io.EOF
			default:
			}
			return write(ev)
		})
		<-r.Context().Done()
		mu.Lock()
		close(done)
		mu.Unlock()
	})
	log.Fatal((&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}

// serveMinProxy is the bare minimal forwarding proxy: net/http server and a
// tuned http.Client, both bodies streamed.
func serveMinProxy(addr, upstream string) {
	h := benchkit.MinimalProxy(&http.Client{Transport: benchkit.TunedTransport()}, upstream)
	log.Fatal((&http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}

type bufPool struct{ p sync.Pool }

func (b *bufPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufPool) Put(x []byte) { b.p.Put(&x) }

// serveReverseProxy is httputil.ReverseProxy with a BufferPool.
func serveReverseProxy(addr, upstream string) {
	u, err := url.Parse(upstream)
	if err != nil {
		log.Fatal(err)
	}
	pool := &bufPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
	rp := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.Out.URL.Path = u.Path },
		Transport:  benchkit.TunedTransport(),
		BufferPool: pool,
	}
	log.Fatal((&http.Server{Addr: addr, Handler: rp, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}
