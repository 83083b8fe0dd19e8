package main

// The processes the benchmark measures besides the sidecar: bare SSE
// servers, a cheap JSON-RPC upstream, and bare forwarding proxies. Each runs
// as its own process (this binary with a subcommand) so its RSS and CPU can
// be read from /proc.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// broadcastFrame is the ~150 B event the bare servers fan out.
func broadcastFrame(seq int64) []byte {
	return fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"broadcast\",\"seq\":%010d}}\n\n", seq)
}

// registry is the bare servers' stream list; mu guards conns.
type registry struct {
	mu    sync.Mutex
	conns []func([]byte) error
	seq   atomic.Int64
}

func (r *registry) add(w func([]byte) error) {
	r.mu.Lock()
	r.conns = append(r.conns, w)
	r.mu.Unlock()
}

// broadcast writes one frame to every stream with GOMAXPROCS writers.
func (r *registry) broadcast() {
	r.mu.Lock()
	targets := append([]func([]byte) error(nil), r.conns...)
	r.mu.Unlock()
	frame := broadcastFrame(r.seq.Add(1))
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

func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	return b
}

// serveSSE runs a bare SSE server: mode "plain" (net/http handler parked
// per stream) or "hijack" (hijacked conn, one reader goroutine per stream).
func serveSSE(addr, mode string) {
	reg := &registry{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /broadcast", func(w http.ResponseWriter, r *http.Request) {
		reg.broadcast()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		readBody(r)
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
			reg.add(write)
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
		reg.add(func(ev []byte) error {
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

// serveUpstream runs a cheap MCP-shaped upstream: discover, listen (held,
// fed by POST /broadcast), and an echo for every other request that answers
// a ~300 B request with a ~500 B result.
func serveUpstream(addr string) {
	reg := &registry{}
	pad := strings.Repeat("x", 380)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /broadcast", func(w http.ResponseWriter, r *http.Request) {
		reg.mu.Lock()
		targets := append([]func([]byte) error(nil), reg.conns...)
		reg.mu.Unlock()
		for _, t := range targets {
			_ = t(nil)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		body := readBody(r)
		var env struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &env)
		switch env.Method {
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bench-upstream","version":"1"}},"ttlMs":0,"cacheScope":"public"}}`, env.ID)
		case "subscriptions/listen":
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			id := env.ID
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s},\"notifications\":{\"toolsListChanged\":true}}}\n\n", id)
			_ = rc.Flush()
			var mu sync.Mutex
			done := make(chan struct{})
			reg.add(func([]byte) error {
				mu.Lock()
				defer mu.Unlock()
				select {
				case <-done:
					return io.EOF
				default:
				}
				fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s}}}\n\n", id)
				return rc.Flush()
			})
			<-r.Context().Done()
			mu.Lock()
			close(done)
			mu.Unlock()
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","content":[{"type":"text","text":"%s"}],"isError":false}}`, env.ID, pad)
		}
	})
	log.Fatal((&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}

func tunedTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

var hop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// serveMinProxy is the bare minimal forwarding proxy: net/http server and a
// tuned http.Client, both bodies streamed.
func serveMinProxy(addr, upstream string) {
	client := &http.Client{Transport: tunedTransport()}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.ContentLength = r.ContentLength
		for k, v := range r.Header {
			req.Header[k] = v
		}
		for _, k := range hop {
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
		Transport:  tunedTransport(),
		BufferPool: pool,
	}
	log.Fatal((&http.Server{Addr: addr, Handler: rp, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe())
}

// waitListening polls until addr accepts connections.
func waitListening(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s never listened: %w", addr, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readUntilFrame reads from a fresh stream connection until the first SSE
// event has fully arrived.
func readUntilFrame(c net.Conn) error {
	br := bufio.NewReaderSize(c, 512)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	seenData := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
		}
		if bytes.HasPrefix(line, []byte("data: ")) {
			seenData = true
		}
		if seenData && (len(bytes.TrimRight(line, "\r\n")) == 0) && br.Buffered() == 0 {
			return nil
		}
		if seenData && len(bytes.TrimRight(line, "\r\n")) == 0 {
			// the chunk trailer "\r\n" may follow; drain what is buffered
			_, _ = br.Discard(br.Buffered())
			return nil
		}
	}
}
