package sidecar

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A benchmark of the identity-aware fan-out (docs/performance.md, "Caller identity"; the policy
// edit's is sidecar/overlay's BenchmarkPolicyEditFanout):
//
//	go test ./sidecar -run '^$' -bench IdleStreamMemory -benchtime 20x

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
