// Command drainbench measures the sidecar's graceful drain on 127.0.0.1
// (docs/performance.md, docs/drain.md): N clients hold a subscriptions/listen
// stream on replica A; A is drained (GET /drain, as the preStop hook does);
// every client, on its complete result, re-listens on replica B at once.
//
// Reported per jitter window J: time from the end of the propagation delay
// to each complete result (first, p50, p99, last; goal: last ≤ 1 s + J),
// the re-listen latency (complete → B's acknowledgement), and the peak
// reconnect rate B sees (densest 100 ms and 1 s windows) against the even
// spread N/J.
//
// Every loop is bounded in count and in time. Usage:
//
//	go build -o bin/sidecar ./cmd/sidecar
//	go build -o bin/drainbench ./hack/drainbench
//	bin/drainbench -sidecar bin/sidecar [-n 10000] [-jitters 0s,1s,2s] [-delay 1s]
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/benchkit"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
)

// runTimeout bounds one run from the drain to the last re-listen.
const runTimeout = 60 * time.Second

func main() {
	sidecar := flag.String("sidecar", "bin/sidecar", "sidecar binary")
	n := flag.Int("n", 10000, "listen streams")
	jitters := flag.String("jitters", "0s,1s,2s", "drain jitter windows to measure")
	delay := flag.Duration("delay", time.Second, "drain propagation delay (the wait before the completes)")
	out := flag.String("json", "", "also append JSON records to this file")
	relisten := flag.Bool("relisten", true, "clients re-listen on replica B on complete (false: only record the complete, so the figures show the sidecar's schedule without the reconnect wave's CPU on the same cores)")
	flag.Parse()

	up := startUpstream()
	var jsonOut io.Writer
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		jsonOut = f
	}
	fmt.Printf("| N | jitter J | first complete | p50 | p99 | last complete | goal (1 s + J) | re-listen p50 | p99 | max | completes in densest 100 ms | re-listens at B in densest 100 ms (as /s) | densest 1 s | even spread N/J | sidecar endStreamsMs |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for j := range strings.SplitSeq(*jitters, ",") {
		jitter, err := time.ParseDuration(strings.TrimSpace(j))
		if err != nil {
			log.Fatal(err)
		}
		r := run(*sidecar, up, *n, *delay, jitter, *relisten)
		even := "burst"
		if jitter > 0 {
			even = fmt.Sprintf("%.0f/s", float64(*n)/jitter.Seconds())
		}
		goal := "no"
		if r.Last <= time.Second+jitter {
			goal = "met"
		}
		fmt.Printf("| %d | %v | %v | %v | %v | **%v** | %s | %v | %v | %v | %d | %d (%d/s) | %d | %s | %d |\n",
			r.N, jitter, ms(r.First), ms(r.P50), ms(r.P99), ms(r.Last), goal, ms(r.Relisten50), ms(r.Relisten99), ms(r.RelistenMax),
			r.PeakComplete100ms, r.Peak100ms, r.Peak100ms*10, r.Peak1s, even, r.SidecarEndMs)
		if r.Errors > 0 {
			fmt.Printf("\n%d errors in this run (missing, duplicate or misaddressed completes, failed re-listens)\n", r.Errors)
		}
		if jsonOut != nil {
			b, _ := json.Marshal(r)
			_, _ = jsonOut.Write(append(b, '\n'))
		}
	}
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// result is one run's figures (durations from the end of the delay).
type result struct {
	N           int
	Jitter      time.Duration
	Delay       time.Duration
	Completes   int
	First       time.Duration
	P50         time.Duration
	P99         time.Duration
	Last        time.Duration
	Relisten50  time.Duration
	Relisten99  time.Duration
	RelistenMax time.Duration
	Peak100ms   int // re-listens acknowledged by B, densest 100 ms
	Peak1s      int
	// PeakComplete100ms is the densest 100 ms of complete arrivals, i.e.
	// of reconnect attempts, before the client's own scheduling.
	PeakComplete100ms int
	SidecarEndMs      int64
	Errors            int
	Relisten          bool
}

// startUpstream serves a go-sdk MCP server (tools with listChanged) in this
// process; it only carries the sidecars' discover and relay traffic.
func startUpstream() string {
	srv := mcp.NewServer(&mcp.Implementation{Name: "drainbench-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "noop"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	go func() { _ = (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return "http://" + ln.Addr().String() + "/mcp"
}

type sidecarProc struct {
	cmd   *exec.Cmd
	addr  string
	admin string
}

func freeAddr() string {
	a, err := freeport.Addr()
	if err != nil {
		log.Fatal(err)
	}
	return a
}

// drainToken is the drain token the benchmark's sidecars get (docs/security.md).
const drainToken = "drainbench"

func startSidecar(bin, upstream string, n int, args ...string) *sidecarProc {
	p := &sidecarProc{addr: freeAddr(), admin: freeAddr()}
	p.cmd = exec.Command(bin, append([]string{"--upstream", upstream, "--listen", p.addr, "--admin-listen", p.admin,
		"--max-listen-streams", strconv.Itoa(n + 100), "--log-level", "warn"}, args...)...)
	p.cmd.Stderr = os.Stderr
	p.cmd.Env = append(os.Environ(), app.DrainTokenEnv+"="+drainToken)
	if err := p.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r, err := http.Get("http://" + p.admin + "/readyz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatal("sidecar not ready")
	return nil
}

func (p *sidecarProc) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func listenRequest(addr, id string) []byte {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`, id)
	return fmt.Appendf(nil, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
}

// openListen dials addr, sends a listen and reads up to its ack.
func openListen(addr, id string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(listenRequest(addr, id)); err != nil {
		c.Close()
		return nil, nil, err
	}
	rd := bufio.NewReaderSize(c, 1024)
	for {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		if bytes.HasPrefix(line, []byte("data: ")) {
			if !bytes.Contains(line, []byte("notifications/subscriptions/acknowledged")) {
				c.Close()
				return nil, nil, fmt.Errorf("first event is not the ack: %s", line)
			}
			_ = c.SetDeadline(time.Time{})
			return c, rd, nil
		}
	}
}

// client is one listen stream's record.
type client struct {
	id       string
	complete time.Time // when its complete result arrived
	relisten time.Time // when B acknowledged the re-listen
	err      error
}

func run(bin, upstream string, n int, delay, jitter time.Duration, relisten bool) result {
	a := startSidecar(bin, upstream, n, "--drain-delay", delay.String(), "--drain-jitter", jitter.String(), "--drain-budget", "5s")
	b := startSidecar(bin, upstream, n)
	defer a.stop()
	defer b.stop()

	// Open n streams on A with 64 openers.
	clients := make([]*client, n)
	conns := make([]net.Conn, n)
	readers := make([]*bufio.Reader, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	openStart := time.Now()
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				clients[i] = &client{id: "s-" + strconv.Itoa(i)}
				conns[i], readers[i], clients[i].err = openListen(a.addr, clients[i].id)
			}
		})
	}
	wg.Wait()
	log.Printf("jitter %v: %d streams open on A in %v", jitter, n, time.Since(openStart).Round(time.Millisecond))
	time.Sleep(time.Second)

	// Every client waits for its complete, then re-listens on B.
	var bConns sync.Map
	deadline := time.Now().Add(runTimeout)
	for i, c := range clients {
		if c.err != nil {
			continue
		}
		wg.Go(func() {
			conn, rd := conns[i], readers[i]
			defer conn.Close()
			_ = conn.SetReadDeadline(deadline)
			want := `"id":"` + c.id + `","result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"` + c.id + `"}}`
			for {
				line, err := rd.ReadSlice('\n')
				if err != nil {
					c.err = fmt.Errorf("stream ended before its complete: %w", err)
					return
				}
				if !bytes.HasPrefix(line, []byte("data: ")) || !bytes.Contains(line, []byte(`"result"`)) {
					continue
				}
				c.complete = time.Now()
				if !bytes.Contains(line, []byte(want)) {
					c.err = fmt.Errorf("wrong complete: %s", line)
					return
				}
				break
			}
			// Nothing but the end of the response may follow.
			rest, err := io.ReadAll(rd)
			if err != nil || bytes.Contains(rest, []byte("data:")) {
				c.err = fmt.Errorf("after complete: %q: %w", rest, err)
			}
			if !relisten {
				return
			}
			bc, _, err := openListen(b.addr, c.id)
			if err != nil {
				c.err = fmt.Errorf("re-listen on B: %w", err)
				return
			}
			c.relisten = time.Now()
			bConns.Store(i, bc)
		})
	}
	drainStart := time.Now()
	var status struct {
		EndStreamsMs int64 `json:"endStreamsMs"`
		StreamsEnded int   `json:"streamsEnded"`
	}
	// As the preStop hook does: GET /drain with the pod's drain token.
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.admin+"/drain", nil)
	req.Header.Set("Authorization", "Bearer "+drainToken)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	_ = json.NewDecoder(r.Body).Decode(&status)
	r.Body.Close()
	wg.Wait()
	bConns.Range(func(_, v any) bool { v.(net.Conn).Close(); return true })

	delayEnd := drainStart.Add(delay)
	res := result{N: n, Jitter: jitter, Delay: delay, SidecarEndMs: status.EndStreamsMs, Relisten: relisten}
	var completes, relistens []time.Duration
	var acks, completeAt []time.Time
	for _, c := range clients {
		if c.err != nil {
			res.Errors++
			if res.Errors <= 5 {
				log.Printf("%s: %v", c.id, c.err)
			}
		}
		if !c.complete.IsZero() {
			completes = append(completes, c.complete.Sub(delayEnd))
			completeAt = append(completeAt, c.complete)
		}
		if !c.relisten.IsZero() {
			relistens = append(relistens, c.relisten.Sub(c.complete))
			acks = append(acks, c.relisten)
		}
	}
	res.Completes = len(completes)
	if status.StreamsEnded != n {
		log.Printf("A ended %d streams, want %d", status.StreamsEnded, n)
	}
	if len(completes) == 0 {
		log.Fatal("no completes recorded")
	}
	if len(relistens) == 0 {
		relistens = []time.Duration{0}
		acks = []time.Time{time.Now()}
	}
	slices.Sort(completes)
	slices.Sort(relistens)
	q := benchkit.Quantile[time.Duration]
	res.First, res.P50, res.P99, res.Last = completes[0], q(completes, 0.50), q(completes, 0.99), completes[len(completes)-1]
	res.Relisten50, res.Relisten99, res.RelistenMax = q(relistens, 0.50), q(relistens, 0.99), relistens[len(relistens)-1]
	res.Peak100ms = peak(acks, 100*time.Millisecond)
	res.Peak1s = peak(acks, time.Second)
	res.PeakComplete100ms = peak(completeAt, 100*time.Millisecond)
	return res
}

// peak returns the largest number of events in any window of length w.
func peak(ts []time.Time, w time.Duration) int {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
