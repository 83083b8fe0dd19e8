// Command sidecarbench measures the sidecar side by side with bare Go
// baselines on 127.0.0.1 (docs/performance.md):
//
//   - memory per idle listen stream (sidecar) vs idle SSE streams held by a
//     plain net/http handler and by a hijacked connection, at several N;
//   - time to fan one notification out to N streams;
//   - tools/call latency, throughput and CPU per request through the
//     sidecar vs direct, a minimal net/http proxy and httputil.ReverseProxy,
//     for 2026-07-28 calls and for 2025-era calls (a session the sidecar
//     serves), against the cheap echo upstream and, with -everything-server,
//     against go-sdk's everything-server as a real MCP upstream.
//
// Every loop is bounded in count and in time. Usage:
//
//	make bench
//
// or by hand:
//
//	go build -o bin/sidecarbench ./hack/sidecarbench
//	go build -o bin/sidecarbench-baselines ./hack/sidecarbench/baselines
//	bin/sidecarbench -sidecar bin/sidecar -baselines bin/sidecarbench-baselines [-streams 1000,10000,19000] [-fanout-n 10000]
//
// The bare baselines run from their own binary; see ./baselines for why.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/switchboard-mcp/switchboard/internal/benchkit"
	"github.com/switchboard-mcp/switchboard/internal/freeport"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "upstream":
			serveUpstream(os.Args[2])
			return
		case "load": // load URL C N [legacy]: one closed-loop run of echo calls, for profiling
			c, _ := strconv.Atoi(os.Args[3])
			n, _ := strconv.Atoi(os.Args[4])
			call := modernEcho
			if len(os.Args) > 5 && os.Args[5] == "legacy" { // 2025-11-25 calls in a session the sidecar serves
				call = legacyEcho
				call.session = initSession(os.Args[2])
			}
			r := load(os.Args[2], c, n, call)
			fmt.Printf("p50 %v p99 %v rps %.0f errors %d\n", r.p50, r.p99, r.rps, r.errors)
			return
		}
	}
	sidecar := flag.String("sidecar", "bin/sidecar", "sidecar binary")
	baselines := flag.String("baselines", "bin/sidecarbench-baselines", "binary of the bare baseline servers (./hack/sidecarbench/baselines)")
	streams := flag.String("streams", "1000,10000,19000", "idle stream counts")
	fanoutN := flag.Int("fanout-n", 10000, "streams for the fan-out measurement")
	rounds := flag.Int("rounds", 5, "fan-out rounds (median reported)")
	c1 := flag.Int("c1-requests", 5000, "requests measured at concurrency 1")
	c8 := flag.Int("c8-requests", 20000, "requests measured at concurrency 8")
	skip := flag.String("skip", "", "comma-separated parts to skip: idle,fanout,forward,echo (forwarding with the echo upstream)")
	out := flag.String("json", "", "also append JSON records to this file")
	repeats := flag.Int("repeats", 3, "forwarding repeats (medians reported)")
	cycles := flag.Int("cycles", 2, "fan-out cycles over the targets (medians reported)")
	targets := flag.String("targets", "plain,hijack,sidecar,sidecar-legacy", "servers whose idle streams are measured (sidecar-legacy: 2025-era GET streams)")
	everything := flag.String("everything-server", "", "go-sdk's everything-server binary: also measure forwarding with it as the upstream (a real MCP server)")
	flag.Parse()
	b := &bench{sidecar: *sidecar, baselines: *baselines, self: must(os.Executable()), repeats: max(1, *repeats), cycles: max(1, *cycles)}
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		b.jsonOut = f
	}
	defer b.stopAll()
	skipped := strings.Split(*skip, ",")
	if !slices.Contains(skipped, "idle") || !slices.Contains(skipped, "fanout") {
		b.idleAndFanout(strings.Split(*targets, ","), parseInts(*streams), *fanoutN, *rounds, slices.Contains(skipped, "idle"), slices.Contains(skipped, "fanout"))
	}
	if !slices.Contains(skipped, "forward") {
		if !slices.Contains(skipped, "echo") {
			b.forwarding(*c1, *c8, "")
		}
		if *everything != "" {
			b.forwarding(*c1, *c8, *everything)
		}
	}
}

type bench struct {
	sidecar, self string
	baselines     string
	repeats       int
	cycles        int
	procs         []*exec.Cmd
	jsonOut       io.Writer
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func parseInts(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func (b *bench) record(kind string, v map[string]any) {
	if b.jsonOut == nil {
		return
	}
	v["kind"] = kind
	v["time"] = time.Now().UTC().Format(time.RFC3339)
	_ = json.NewEncoder(b.jsonOut).Encode(v)
}

func freeAddr() string { return must(freeport.Addr()) }

func (b *bench) start(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	b.procs = append(b.procs, cmd)
	return cmd
}

func (b *bench) stopAll() {
	for _, c := range b.procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	b.procs = nil
}

func waitUp(addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := waitListening(ctx, addr); err != nil {
		log.Fatal(err)
	}
}

// procStat reads RSS (bytes) and CPU time of pid from /proc.
func procStat(pid int) (rss int64, cpu time.Duration) {
	st := must(os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)))
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			rss = kb << 10
		}
	}
	s := string(must(os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))))
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stt, _ := strconv.ParseInt(f[12], 10, 64)
	cpu = time.Duration(ut+stt) * (time.Second / 100) // USER_HZ = 100
	return
}

// cpuMeter tells how much CPU other processes used during a measurement,
// so a busy machine shows in the figures.
type cpuMeter struct {
	b          *bench
	sys0, own0 time.Duration
	t0         time.Time
}

func systemBusy() time.Duration {
	st := string(must(os.ReadFile("/proc/stat")))
	f := strings.Fields(strings.SplitN(st, "\n", 2)[0])[1:]
	var busy int64
	for i, v := range f {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * (time.Second / 100)
}

func (b *bench) ownCPU() time.Duration {
	_, total := procStat(os.Getpid())
	for _, c := range b.procs {
		_, cpu := procStat(c.Process.Pid)
		total += cpu
	}
	return total
}

func (b *bench) meter() *cpuMeter {
	return &cpuMeter{b: b, sys0: systemBusy(), own0: b.ownCPU(), t0: time.Now()}
}

// foreignPct is other processes' CPU as a percentage of one core.
func (m *cpuMeter) foreignPct() float64 {
	sys := systemBusy() - m.sys0
	own := m.b.ownCPU() - m.own0
	return max(0, float64(sys-own)) / float64(time.Since(m.t0)) * 100
}

// target is one server under test for the stream measurements.
type target struct {
	name    string
	cmd     *exec.Cmd // the measured process
	addr    string
	request func(i int) []byte
	trigger func()
	// prepare runs before the baseline is taken (2025-era sessions are
	// initialized then, so their garbage is not counted per stream).
	prepare func(n int)
}

func listenRequest(addr string, i int) []byte {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"notifications":{"toolsListChanged":true}}}`, i)
	return fmt.Appendf(nil, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
}

func post(url string) {
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		log.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func (b *bench) startTarget(name string) *target {
	addr := freeAddr()
	t := &target{name: name, addr: addr, request: func(i int) []byte { return listenRequest(addr, i) }}
	switch name {
	case "plain", "hijack":
		t.cmd = b.start(b.baselines, "sse", addr, name)
		t.trigger = func() { post("http://" + addr + "/broadcast") }
		waitUp(addr)
	case "sidecar", "sidecar-legacy":
		up := freeAddr()
		b.start(b.self, "upstream", up)
		waitUp(up)
		admin := freeAddr()
		t.cmd = b.start(b.sidecar, "--upstream", "http://"+up+"/mcp", "--listen", addr, "--admin-listen", admin,
			"--max-listen-streams", "20000", "--keepalive", "1h", "--log-level", "error")
		waitUp(addr)
		waitReady("http://" + admin + "/readyz")
		t.trigger = func() { post("http://" + up + "/broadcast") }
		if name == "sidecar-legacy" {
			// A 2025-11-25 session per stream (initialize), then its GET stream.
			url := "http://" + addr + "/mcp"
			var sids []string
			t.prepare = func(n int) {
				sids = make([]string, n)
				var wg sync.WaitGroup
				var next atomic.Int64
				for range 8 {
					wg.Go(func() {
						for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
							sids[i] = initSession(url)
						}
					})
				}
				wg.Wait()
			}
			t.request = func(i int) []byte {
				return fmt.Appendf(nil, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: %s\r\n\r\n", addr, sids[i])
			}
		}
	}
	return t
}

func waitReady(url string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	log.Fatal("not ready: " + url)
}

// open opens n streams against t with 64 concurrent openers, each read up
// to its first event.
func open(t *target, n int) ([]net.Conn, time.Duration) {
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := net.DialTimeout("tcp", t.addr, 10*time.Second)
				if err == nil {
					_, err = c.Write(t.request(i))
				}
				if err == nil {
					err = readUntilFrame(c)
				}
				if err != nil {
					failed.Add(1)
					if c != nil {
						c.Close()
					}
					continue
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if f := failed.Load(); f > 0 {
		log.Printf("%s: %d of %d streams failed to open", t.name, f, n)
	}
	return slices.DeleteFunc(conns, func(c net.Conn) bool { return c == nil }), took
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// fanoutRound triggers one broadcast and returns the time from the trigger
// until the last stream has received bytes, and how many did.
func fanoutRound(t *target, conns []net.Conn) (time.Duration, int) {
	var got, last atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for _, c := range conns {
		wg.Go(func() {
			var buf [512]byte
			_ = c.SetReadDeadline(deadline)
			if _, err := c.Read(buf[:]); err == nil {
				now := time.Now().UnixNano()
				for {
					l := last.Load()
					if now <= l || last.CompareAndSwap(l, now) {
						break
					}
				}
				got.Add(1)
			}
		})
	}
	// Let every reader park in Read before the trigger.
	time.Sleep(300 * time.Millisecond)
	start := time.Now().UnixNano()
	t.trigger()
	wg.Wait()
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Time{})
	}
	return time.Duration(last.Load() - start), int(got.Load())
}

func (b *bench) idleAndFanout(names []string, ns []int, fanoutN, rounds int, skipIdle, skipFanout bool) {
	if !skipIdle {
		fmt.Println("## Memory per idle stream (RSS of the serving process, after a 2 s settle)")
		fmt.Println()
		fmt.Println("| server | N | open all N | RSS / stream |")
		fmt.Println("|---|---|---|---|")
		for _, n := range ns {
			for _, name := range names {
				t := b.startTarget(name)
				if t.prepare != nil {
					t.prepare(n)
					time.Sleep(2 * time.Second)
				}
				time.Sleep(time.Second)
				base, _ := procStat(t.cmd.Process.Pid)
				conns, took := open(t, n)
				time.Sleep(2 * time.Second)
				rss, _ := procStat(t.cmd.Process.Pid)
				per := float64(rss-base) / float64(len(conns)) / 1000
				fmt.Printf("| %s | %d | %v | %.1f KB |\n", name, len(conns), took.Round(time.Millisecond), per)
				b.record("idle", map[string]any{"server": name, "n": len(conns), "open_ms": took.Milliseconds(), "rss_per_stream_kb": per})
				closeAll(conns)
				b.stopAll()
			}
		}
		fmt.Println()
	}
	if !skipFanout {
		fmt.Printf("## Fan-out of one notification to %d streams (median of %d cycles × %d rounds; time until the last stream has it)\n\n", fanoutN, b.cycles, rounds)
		fmt.Println("| server | N | median | min | max | ratio to hijack baseline | foreign CPU |")
		fmt.Println("|---|---|---|---|---|---|---|")
		// Targets take turns (cycles × rounds each) so that a busy spell on
		// the machine does not land on one target only.
		names := []string{"hijack", "plain", "sidecar"}
		ds := map[string][]time.Duration{}
		fps := map[string][]float64{}
		n := map[string]int{}
		for range b.cycles {
			for _, name := range names {
				t := b.startTarget(name)
				if t.prepare != nil {
					t.prepare(fanoutN)
				}
				conns, _ := open(t, fanoutN)
				n[name] = len(conns)
				m := b.meter()
				for range rounds {
					d, got := fanoutRound(t, conns)
					if got != len(conns) {
						log.Printf("%s: only %d of %d streams received the broadcast", name, got, len(conns))
					}
					ds[name] = append(ds[name], d)
					time.Sleep(300 * time.Millisecond)
				}
				fps[name] = append(fps[name], m.foreignPct())
				closeAll(conns)
				b.stopAll()
			}
		}
		var bare time.Duration
		for _, name := range names {
			d := ds[name]
			slices.Sort(d)
			med := d[len(d)/2]
			if name == "hijack" {
				bare = med
			}
			fp := fps[name]
			slices.Sort(fp)
			fmt.Printf("| %s | %d | %v | %v | %v | %.2f | %.0f %% |\n", name, n[name], med.Round(100*time.Microsecond), d[0].Round(100*time.Microsecond), d[len(d)-1].Round(100*time.Microsecond), float64(med)/float64(bare), fp[len(fp)/2])
			b.record("fanout", map[string]any{"server": name, "n": n[name], "rounds": len(d), "median_ms": med.Seconds() * 1000, "min_ms": d[0].Seconds() * 1000, "max_ms": d[len(d)-1].Seconds() * 1000, "foreign_cpu_pct": fp[len(fp)/2]})
		}
		fmt.Println()
	}
}

// forwarding measures tools/call through each path, with the echo upstream
// (everything == "") or go-sdk's everything-server.
func (b *bench) forwarding(c1, c8 int, everything string) {
	up := freeAddr()
	var upCmd *exec.Cmd
	upstreamName := "echo upstream"
	modern, legacy := modernEcho, legacyEcho
	if everything != "" {
		upCmd = b.start(everything, "-http="+up, "-stateless")
		upstreamName = "go-sdk everything-server (-stateless)"
		modern, legacy = modernEverything, legacyEverything
	} else {
		upCmd = b.start(b.self, "upstream", up)
	}
	waitUp(up)
	upURL := "http://" + up + "/mcp"
	paths := []fwdPath{{name: "direct", url: upURL}}
	minAddr, rpAddr, scAddr, scAdmin := freeAddr(), freeAddr(), freeAddr(), freeAddr()
	paths = append(paths,
		fwdPath{"minimal proxy", "http://" + minAddr + "/mcp", b.start(b.baselines, "minproxy", minAddr, upURL)},
		fwdPath{"ReverseProxy+pool", "http://" + rpAddr + "/mcp", b.start(b.baselines, "rproxy", rpAddr, upURL)},
		fwdPath{"sidecar", "http://" + scAddr + "/mcp", b.start(b.sidecar, "--upstream", upURL, "--listen", scAddr, "--admin-listen", scAdmin, "--log-level", "error")},
	)
	for _, p := range paths {
		waitUp(strings.TrimSuffix(strings.TrimPrefix(p.url, "http://"), "/mcp"))
	}
	waitReady("http://" + scAdmin + "/readyz")
	_ = upCmd
	// A 2025-era session on the sidecar (the direct and proxy paths get the
	// same request; neither upstream needs a session in stateless mode).
	legacy.session = initSession("http://" + scAddr + "/mcp")
	for _, call := range []*callKind{modern, legacy} {
		b.forwardTable(paths, call, upstreamName, c1, c8)
	}
}

type fwdPath struct {
	name string
	url  string
	cmd  *exec.Cmd
}

// forwardTable measures one kind of call through every path.
func (b *bench) forwardTable(paths []fwdPath, call *callKind, upstreamName string, c1, c8 int) {
	fmt.Printf("## tools/call forwarding: %s, %s\n", call.name, upstreamName)
	fmt.Println()
	fmt.Println("| path | c | p50 | p99 | req/s | Δp50 vs direct | Δp99 vs direct | throughput vs direct | proxy CPU / request | Δp50 ÷ minimal proxy's | CPU ÷ minimal proxy's | foreign CPU |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	minimal := slices.IndexFunc(paths, func(p fwdPath) bool { return p.name == "minimal proxy" })
	for _, cc := range []struct{ c, n int }{{1, c1}, {8, c8}} {
		// Paths run interleaved, repeats times; each figure is the median
		// over the repeats (deltas are taken within the same repeat).
		type sample struct {
			r      loadResult
			cpuPer float64
			fp     float64
		}
		samples := make([][]sample, len(paths))
		for range b.repeats {
			for i, p := range paths {
				var cpu0 time.Duration
				if p.cmd != nil {
					_, cpu0 = procStat(p.cmd.Process.Pid)
				}
				m := b.meter()
				call := call
				if p.name != "sidecar" {
					call = call.withoutSession()
				}
				r := load(p.url, cc.c, cc.n, call)
				sm := sample{r: r, fp: m.foreignPct()}
				if p.cmd != nil {
					_, cpu1 := procStat(p.cmd.Process.Pid)
					sm.cpuPer = float64((cpu1 - cpu0).Microseconds()) / float64(r.n+r.warm+r.errors)
				}
				if r.errors > 0 {
					log.Printf("%s c=%d: %d errors", p.name, cc.c, r.errors)
				}
				samples[i] = append(samples[i], sm)
			}
		}
		med := func(f func(i, rep int) float64, i int) float64 {
			var v []float64
			for rep := range samples[i] {
				v = append(v, f(i, rep))
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		for i, p := range paths {
			p50 := med(func(i, k int) float64 { return float64(samples[i][k].r.p50.Microseconds()) }, i)
			p99 := med(func(i, k int) float64 { return float64(samples[i][k].r.p99.Microseconds()) }, i)
			rps := med(func(i, k int) float64 { return samples[i][k].r.rps }, i)
			d50 := med(func(i, k int) float64 { return float64((samples[i][k].r.p50 - samples[0][k].r.p50).Microseconds()) }, i)
			d99 := med(func(i, k int) float64 { return float64((samples[i][k].r.p99 - samples[0][k].r.p99).Microseconds()) }, i)
			ratio := med(func(i, k int) float64 { return samples[i][k].r.rps / samples[0][k].r.rps }, i)
			fp := med(func(i, k int) float64 { return samples[i][k].fp }, i)
			cpuPer := "–"
			cpu := 0.0
			if p.cmd != nil {
				cpu = med(func(i, k int) float64 { return samples[i][k].cpuPer }, i)
				cpuPer = fmt.Sprintf("%.0f µs", cpu)
			}
			// The goals' ratios, taken repeat by repeat (the paths of one
			// repeat ran back to back) and then the median: the machine's
			// speed drifts more between repeats than within one.
			vsMin, cpuVsMin := "–", "–"
			var rd50, rcpu float64
			if minimal >= 0 && p.cmd != nil && i != minimal {
				rd50 = med(func(i, k int) float64 {
					return float64(samples[i][k].r.p50-samples[0][k].r.p50) / float64(samples[minimal][k].r.p50-samples[0][k].r.p50)
				}, i)
				rcpu = med(func(i, k int) float64 { return samples[i][k].cpuPer / samples[minimal][k].cpuPer }, i)
				vsMin, cpuVsMin = fmt.Sprintf("%.2f", rd50), fmt.Sprintf("%.2f", rcpu)
			}
			fmt.Printf("| %s | %d | %.0f µs | %.0f µs | %.0f | %+.0f µs | %+.0f µs | %.2f | %s | %s | %s | %.0f %% |\n",
				p.name, cc.c, p50, p99, rps, d50, d99, ratio, cpuPer, vsMin, cpuVsMin, fp)
			b.record("forward", map[string]any{"path": p.name, "call": call.name, "upstream": upstreamName, "c": cc.c, "n": cc.n, "repeats": b.repeats, "foreign_cpu_pct": fp,
				"p50_us": p50, "p99_us": p99, "rps": rps, "dp50_us": d50, "dp99_us": d99, "throughput_ratio": ratio, "cpu_per_req_us": cpu,
				"dp50_vs_minimal": rd50, "cpu_vs_minimal": rcpu})
		}
	}
	fmt.Println()
}

type loadResult struct {
	p50, p99 time.Duration
	rps      float64
	n, warm  int
	errors   int
}

// callKind is one kind of tools/call request.
type callKind struct {
	name    string
	body    []byte
	headers map[string]string
	session string // Mcp-Session-Id (2025-era calls through the sidecar)
}

func (k *callKind) withoutSession() *callKind {
	c := *k
	c.session = ""
	return &c
}

// pad300 pads a request body to 300 B with the echo argument.
func pad300(prefix, suffix string) []byte {
	return []byte(prefix + strings.Repeat("y", max(0, 300-len(prefix)-len(suffix))) + suffix)
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

var (
	modernHeaders = func(name string) map[string]string {
		return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
	}
	legacyHeaders = map[string]string{"MCP-Protocol-Version": "2025-11-25"}
	// The echo upstream answers a ~300 B request with a ~500 B JSON result.
	modernEcho = &callKind{name: "2026-07-28 call (300 B request, ~500 B JSON result)",
		body:    pad300(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"echo","arguments":{"text":"`, `"}}}`),
		headers: modernHeaders("echo")}
	legacyEcho = &callKind{name: "2025-11-25 call in a session the sidecar serves (300 B request, ~500 B JSON result)",
		body:    pad300(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`, `"}}}`),
		headers: legacyHeaders}
	// go-sdk's everything-server: test_simple_text, no arguments.
	modernEverything = &callKind{name: "2026-07-28 call of test_simple_text",
		body:    []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"test_simple_text","arguments":{}}}`),
		headers: modernHeaders("test_simple_text")}
	legacyEverything = &callKind{name: "2025-11-25 call of test_simple_text in a session the sidecar serves",
		body:    []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`),
		headers: legacyHeaders}
)

// initSession opens a 2025-11-25 session on the sidecar and returns its id.
func initSession(url string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sidecarbench","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp := must(http.DefaultClient.Do(req)) //nolint:bodyclose // closed below
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		log.Fatalf("initialize on the sidecar: HTTP %d, session %q", resp.StatusCode, sid)
	}
	return sid
}

// load runs a closed loop of n measured requests (after n/10 warm-up) with
// c workers, bounded to 60 s.
func load(url string, c, n int, call *callKind) loadResult {
	client := &http.Client{Transport: benchkit.TunedTransport(), Timeout: 10 * time.Second}
	warm := n / 10
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	var errs atomic.Int64
	var next atomic.Int64
	deadline := time.Now().Add(60 * time.Second)
	var measuredStart time.Time
	var startOnce sync.Once
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/c+1)
			for time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= warm+n {
					break
				}
				if i == warm {
					startOnce.Do(func() { measuredStart = time.Now() })
				}
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(call.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				for k, v := range call.headers {
					req.Header.Set(k, v)
				}
				if call.session != "" {
					req.Header.Set("Mcp-Session-Id", call.session)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				d := time.Since(t0)
				if err != nil {
					errs.Add(1)
					continue
				}
				if i >= warm {
					local = append(local, d)
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(measuredStart)
	slices.Sort(lat)
	r := loadResult{n: len(lat), warm: warm, errors: int(errs.Load())}
	if len(lat) > 0 {
		r.p50 = benchkit.Quantile(lat, 0.50)
		r.p99 = benchkit.Quantile(lat, 0.99)
		r.rps = float64(len(lat)) / elapsed.Seconds()
	}
	return r
}
