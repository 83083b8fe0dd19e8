//go:build e2e

package main_test

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// Benchmarks of tools/call (go-sdk's everything-server, test_simple_text) through the sidecar in
// front of a 2025-era upstream, over HTTP and over stdio behind the bridge, each beside the
// same upstream called directly, and the 2026-07-28 path for comparison (go-sdk v1.8.0's
// everything-server, stateless). Real processes on 127.0.0.1. Each reports latency p50/p99,
// the CPU the sidecar and bridge processes used per call and that of the HTTP upstream (from
// /proc), plus the bridge's resident memory. Figures: docs/performance.md. Run:
//
//	go test -tags e2e ./cmd/sidecar -run '^$' -bench BenchmarkUpstreamKinds -benchtime 2000x
//
// Single runs of one path move by ±30 % on a 2-core machine; for ratios between paths, run the
// paths in interleaved rounds (sub-benchmarks named …#01, #02, …) and compare round by round:
//
//	go test -tags e2e ./cmd/sidecar -run '^$' -bench BenchmarkUpstreamKinds -benchtime 2000x -args -upstream-kinds-rounds 5
func BenchmarkUpstreamKinds(b *testing.B) {
	legacy, err := testservers.LegacyEverythingServer()
	if err != nil {
		b.Fatal(err)
	}
	type target = upstreamKind
	mk := func(b *testing.B) []target {
		var ts []target

		modernUp := benchPort(b)
		mUp := benchStart(b, upstreamBin, "-http="+modernUp, "-stateless").Process.Pid
		waitTCP(b, modernUp)
		ts = append(ts, target{name: "modern/direct", call: modernCaller("http://" + modernUp + "/mcp"), up: mUp})
		mSC := benchSidecar(b, "http://"+modernUp+"/mcp")
		ts = append(ts, target{name: "modern/sidecar", call: modernCaller(mSC.url), procs: []int{mSC.pid}, up: mUp})

		httpUp := benchPort(b)
		hUp := benchStart(b, legacy, "-http="+httpUp).Process.Pid
		waitTCP(b, httpUp)
		ts = append(ts, target{name: "legacy-http/direct", call: legacyCaller(b, "http://"+httpUp+"/mcp"), up: hUp})
		hSC := benchSidecar(b, "http://"+httpUp+"/mcp")
		ts = append(ts, target{name: "legacy-http/sidecar", call: modernCaller(hSC.url), procs: []int{hSC.pid}, up: hUp})

		bridgeAddr := benchPort(b)
		br := benchStart(b, sidecarBin, "stdio", "--listen", bridgeAddr, "--", legacy)
		waitTCP(b, bridgeAddr)
		ts = append(ts, target{name: "stdio/bridge-direct", call: legacyCaller(b, "http://"+bridgeAddr+"/mcp"), procs: []int{br.Process.Pid}})
		sSC := benchSidecar(b, "http://"+bridgeAddr+"/mcp")
		ts = append(ts, target{name: "stdio/sidecar+bridge", call: modernCaller(sSC.url), procs: []int{sSC.pid, br.Process.Pid}})
		b.Cleanup(func() {
			b.Logf("bridge VmRSS after the runs: %d KiB", rssKiB(br.Process.Pid))
		})
		return ts
	}
	ts := mk(b)
	for range *upstreamKindsRounds {
		runUpstreamKinds(b, ts)
	}
	for _, tc := range ts {
		if strings.HasPrefix(tc.name, "stdio/bridge") {
			b.ReportMetric(float64(rssKiB(tc.procs[0])), "bridge-rss-KiB")
		}
	}
}

var upstreamKindsRounds = flag.Int("upstream-kinds-rounds", 1, "BenchmarkUpstreamKinds: rounds over every path, interleaved")

// upstreamKind is one path of BenchmarkUpstreamKinds.
type upstreamKind struct {
	name  string
	call  func() error
	procs []int // pids whose CPU is charged to the path
	up    int   // the HTTP upstream's pid (its CPU per call is reported too), 0 for none
}

// runUpstreamKinds measures every path once, at one and at eight callers.
func runUpstreamKinds(b *testing.B, ts []upstreamKind) {
	for _, tc := range ts {
		for _, conc := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/c%d", tc.name, conc), func(b *testing.B) {
				for range 50 { // warm up connections and sessions
					if err := tc.call(); err != nil {
						b.Fatal(err)
					}
				}
				lat := make([]time.Duration, b.N)
				cpu0, up0 := cpuTicks(tc.procs), cpuTicks([]int{tc.up})
				var next atomic.Int64
				var wg sync.WaitGroup
				var failed atomic.Value
				b.ResetTimer()
				began := time.Now()
				for range conc {
					wg.Go(func() {
						for {
							i := next.Add(1) - 1
							if i >= int64(b.N) {
								return
							}
							t0 := time.Now()
							if err := tc.call(); err != nil {
								failed.Store(err)
								return
							}
							lat[i] = time.Since(t0)
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(began)
				b.StopTimer()
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
				if len(tc.procs) > 0 {
					// clock ticks are 10 ms: meaningful over a few thousand calls.
					b.ReportMetric(float64(cpuTicks(tc.procs)-cpu0)*10000/float64(b.N), "cpu-µs/call")
				}
				if tc.up != 0 {
					// What the upstream spends, directly and behind the sidecar:
					// a proxy that makes the upstream work more (say, a new
					// connection per call) shows here, not in its own CPU.
					b.ReportMetric(float64(cpuTicks([]int{tc.up})-up0)*10000/float64(b.N), "upstream-cpu-µs/call")
				}
			})
		}
	}
}

// benchStart runs a process for the benchmark and kills it at cleanup.
func benchStart(b testing.TB, bin string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func benchPort(b testing.TB) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type benchSC struct {
	url string
	pid int
}

func benchSidecar(b *testing.B, upstream string) benchSC {
	b.Helper()
	mcpAddr, adminAddr := benchPort(b), benchPort(b)
	p := benchStart(b, sidecarBin, "--upstream", upstream, "--listen", mcpAddr, "--admin-listen", adminAddr, "--log-level", "warn")
	eventually.True(b, "the sidecar to be ready", func() bool {
		r, err := http.Get("http://" + adminAddr + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
	return benchSC{url: "http://" + mcpAddr + "/mcp", pid: p.Process.Pid}
}

func waitTCP(b testing.TB, addr string) {
	eventually.True(b, "a listener on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}

const callParams = `"name":"test_simple_text","arguments":{}`

// modernCaller calls tools/call as a 2026-07-28 client.
func modernCaller(url string) func() error {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `,` + callParams + `}}`
	return func() error {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "test_simple_text")
		return expectResult(req)
	}
}

// legacyCaller calls tools/call as a 2025-11-25 client on one session.
func legacyCaller(b testing.TB, url string) func() error {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	req, _ = http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err = benchClient.Do(req); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	var n atomic.Int64
	return func() error {
		body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(n.Add(1), 10) + `,"method":"tools/call","params":{` + callParams + `}}`
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		return expectResult(req)
	}
}

func expectResult(req *http.Request) error {
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"result"`) {
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, data)
	}
	return nil
}

// cpuTicks is the user+system CPU of the processes, in clock ticks (1/100 s).
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		// fields after ")": state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
		if len(f) > 14 {
			for _, i := range []int{11, 12} {
				v, _ := strconv.ParseInt(f[i], 10, 64)
				sum += v
			}
		}
	}
	return sum
}

// rssKiB is a process's resident memory (VmRSS).
func rssKiB(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}
