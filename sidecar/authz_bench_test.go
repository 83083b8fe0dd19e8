package sidecar

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// Benchmarks of the identity-aware fan-out (docs/performance.md, "Caller identity"):
//
//	go test ./sidecar -run '^$' -bench 'PolicyEdit|IdleStreamMemory' -benchtime 20x

// countingWriter is a stream transport that counts what it is given and writes nowhere.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) WriteEvent(_ []byte, scratch []byte) ([]byte, error) {
	w.n.Add(1)
	return scratch, nil
}

func (w countingWriter) End([]byte) {}

// benchPolicyCatalog is a catalog of a server with 100 upstream tools and one rule per caller
// (ServiceAccount bench/agent-<i>): tools tool-<i>, tool-<i+1> and shared; extra is granted to
// the callers for which it returns true.
func benchPolicyCatalog(callers int, extra func(i int) bool) []byte {
	c := authzCatalog(&catalog.Access{})
	c.Tools, c.Prompts, c.Resources = nil, nil, nil
	for i := range callers {
		r := catalog.AccessRule{Policy: fmt.Sprintf("p%d/0", i),
			Source: catalog.AccessSource{ServiceAccounts: []string{fmt.Sprintf("bench/agent-%d", i)}},
			Tools:  []string{fmt.Sprintf("tool-%d", i), fmt.Sprintf("tool-%d", (i+1)%callers), "shared"}}
		if extra(i) {
			r.Tools = append(r.Tools, "extra")
		}
		c.Access.Rules = append(c.Access.Rules, r)
	}
	b, err := catalog.Encode(c)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkPolicyEditFanout: one policy edit (a new catalog revision whose Access differs) with
// 1,000 listen streams of 100 callers open, from Apply to every notification written: the
// overlay's computation, each caller's view weighed once, and the fan-out. "one-caller" changes
// one caller's grants (its 10 streams are woken); "every-caller" changes all of them.
func BenchmarkPolicyEditFanout(b *testing.B) {
	const callers, streams, tools = 100, 1000, 100
	for _, bc := range []struct {
		name  string
		extra func(i int) bool
		woken int
	}{
		{"one-caller", func(i int) bool { return i == 0 }, streams / callers},
		{"every-caller", func(int) bool { return true }, streams},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := hub.New(hub.Options{Keepalive: -1})
			o := NewOverlay(OverlayOptions{Hub: h, Logger: slog.New(slog.DiscardHandler)})
			up := make([]json.RawMessage, 0, tools+2)
			for i := range tools {
				up = append(up, json.RawMessage(fmt.Sprintf(`{"name":"tool-%d","description":"Tool %d of the benchmark server.","inputSchema":{"type":"object"}}`, i, i)))
			}
			up = append(up, json.RawMessage(`{"name":"shared","inputSchema":{"type":"object"}}`), json.RawMessage(`{"name":"extra","inputSchema":{"type":"object"}}`))
			o.upLists = map[string][]json.RawMessage{"tools/list": up}
			var written atomic.Int64
			for j := range streams {
				id := &authn.Identity{Subject: fmt.Sprintf("system:serviceaccount:bench:agent-%d", j%callers),
					ServiceAccount: fmt.Sprintf("bench/agent-%d", j%callers)}
				st := &hub.Stream{ID: []byte(fmt.Sprint(j)), Kinds: protocol.KindTools | protocol.KindPrompts | protocol.KindResources, Caller: id}
				if !h.Reserve() || !h.Add(st) || !st.Start(countingWriter{&written}) {
					b.Fatal("stream not registered")
				}
			}
			revs := [2][]byte{benchPolicyCatalog(callers, func(int) bool { return false }), benchPolicyCatalog(callers, bc.extra)}
			if err := o.Apply(revs[0], ""); err != nil {
				b.Fatal(err)
			}
			o.last = o.compute()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := o.Apply(revs[i%2], ""); err != nil {
					b.Fatal(err)
				}
				next := o.compute()
				o.publishDiff(o.last, next, nil, 0)
				o.last = next
			}
			if got := written.Load() / int64(i); got != int64(bc.woken) {
				b.Fatalf("%d streams written per edit, want %d", got, bc.woken)
			}
			b.ReportMetric(float64(bc.woken), "streams-woken/op")
		})
	}
}

// BenchmarkIdleStreamMemory opens 5,000 real listen streams (hijacked connections, a watcher
// goroutine each) on the sidecar and reports the process's heap and stacks per stream: without a
// caller (authentication off) and with a caller whose token expires in an hour (its caller
// group, grant and expiry timer). Client and server share the process; the client side of each
// stream is one idle TCP connection, the same in both cases, so the difference is the
// authenticated stream's cost.
func BenchmarkIdleStreamMemory(b *testing.B) {
	const n = 5000
	for _, bc := range []struct {
		name   string
		caller string
	}{{"anonymous", ""}, {"authenticated", "a"}} {
		b.Run(bc.name, func(b *testing.B) {
			env := newAuthzEnv(b, authzAccess())
			u, _ := url.Parse(env.front.URL)
			exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
			open := func(n int) []net.Conn {
				var conns []net.Conn
				for j := range n {
					c, err := net.Dial("tcp", u.Host)
					if err != nil {
						b.Fatal(err)
					}
					body := `{"jsonrpc":"2.0","id":` + fmt.Sprint(j) + `,"method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`
					var req strings.Builder
					fmt.Fprintf(&req, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
						"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n", u.Host, len(body))
					if bc.caller != "" {
						fmt.Fprintf(&req, "X-Test-Caller: %s\r\nX-Test-Expiry: %s\r\n", bc.caller, exp)
					}
					req.WriteString("\r\n" + body)
					if _, err := c.Write([]byte(req.String())); err != nil {
						b.Fatal(err)
					}
					rd := bufio.NewReaderSize(c, 512)
					for {
						line, err := rd.ReadString('\n')
						if err != nil {
							b.Fatal(err)
						}
						if strings.Contains(line, "acknowledged") {
							break
						}
					}
					conns = append(conns, c)
				}
				return conns
			}
			closeAll := func(conns []net.Conn) {
				for _, c := range conns {
					c.Close()
				}
				for env.hub.Len() > 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
			closeAll(open(n / 4)) // warm-up: pools, goroutines and caches that stay
			for b.Loop() {
				before := inuse()
				conns := open(n)
				after := inuse()
				b.ReportMetric(float64(after-before)/n, "B/stream")
				closeAll(conns)
			}
		})
	}
}

// inuse is the live heap and the goroutine stacks after a collection.
func inuse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}
