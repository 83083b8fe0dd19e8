package main

// The cheap JSON-RPC upstream every forwarding path and the sidecar's relay
// talk to (this binary with a subcommand, so its CPU stays out of the
// measured processes), and helpers for streams. The bare servers measured
// against the sidecar are in ./baselines, a binary of their own.

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
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/benchkit"
)

// serveUpstream runs a cheap MCP-shaped upstream: discover, listen (held,
// fed by POST /broadcast), and an echo for every other request that answers
// a ~300 B request with a ~500 B result.
func serveUpstream(addr string) {
	reg := &benchkit.Registry{}
	pad := strings.Repeat("x", 380)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /broadcast", func(w http.ResponseWriter, r *http.Request) {
		targets := reg.Conns()
		for _, t := range targets {
			_ = t(nil)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		body := benchkit.ReadBody(r)
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
			reg.Add(func([]byte) error {
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
