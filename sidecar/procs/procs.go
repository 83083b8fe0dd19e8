// Package procs sets how many OS threads run the sidecar's (and the stdio
// bridge's) Go code: one while serving requests, more while a large fan-out
// runs or requests queue.
//
// It knows no MCP, no HTTP and no room above it: the rooms say how wide a piece of
// work is (Widen), and it reads the Go runtime's scheduler metrics for queueing.
package procs

import (
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// How many OS threads run the Go code (GOMAXPROCS).
//
// A forwarded request hands off between goroutines three times or more (the
// client's connection, the HTTP client's writer and reader of the upstream
// connection). With an idle P, each hand-off wakes another thread, which
// often finds nothing to do and sleeps again: on the machine of
// docs/performance.md the sidecar switched threads 13.5 times per
// sequential call with GOMAXPROCS 2, and 7 times with GOMAXPROCS 1, where it
// spent a quarter to a third less CPU per call, for a lower latency; with
// calls that arrive 5 ms apart, each waking the process from idle, the
// saving was the same. The sidecar serves on one P ("narrow").
//
// It widens to the GOMAXPROCS Go would have picked (the container's CPU
// limit, else the node's CPUs) in two cases, and narrows again after:
//   - a large fan-out (the sidecar's Hub.fanout and Hub.EndAll call Widen)
//     runs: thousands of independent socket writes run in parallel on more
//     cores;
//   - requests queue for the one P: sampled every procsTick (idleTick while
//     the process is idle, until Active reports a request), the time
//     goroutines spent runnable but not running, per second, was
//     waitingWiden or more for widenAfter samples in a row. Once the
//     process used less than quietCores of CPU for narrowAfter samples in a
//     row, it narrows again.
//
// Limit is called once, by the sidecar's and the stdio bridge's main, unless
// $GOMAXPROCS sets GOMAXPROCS (EnvSet); until then nothing here changes it.

// DefaultMax is the GOMAXPROCS for serving requests (--max-procs).
const DefaultMax = 1

// WidenMin is the fan-out size from which Widen widens the process: two
// stop-the-world pauses of a few microseconds each are nothing against
// writing this many streams, and a smaller fan-out is over in about a
// millisecond anyway.
const WidenMin = 512

const (
	// procsTick is how often the load is sampled while the process works;
	// idleTick while it is idle (under idleCores), so that an idle sidecar is
	// not woken five times a second (measured: 12 against 1 clock tick of
	// CPU per idle minute with and without sampling at procsTick).
	procsTick = 200 * time.Millisecond
	idleTick  = 2 * time.Second
	idleCores = 0.05
	// waitingWiden is the loadSample.waiting at which a narrow process is
	// overloaded. Measured on one P: 0.04 for sequential calls at 2,700/s,
	// 0.65 for eight concurrent callers at 7,000/s, 0.005 for a call every
	// 5 ms.
	waitingWiden = 0.25
	// widenAfter is how many overloaded samples in a row widen the process.
	widenAfter = 2
	// quietCores is the CPU use (cores) under which a widened process is
	// calm enough for one P again.
	quietCores = 0.4
	// narrowAfter is how many calm samples in a row narrow it.
	narrowAfter = 5
)

var procs struct {
	mu      sync.Mutex
	narrow  int // GOMAXPROCS when nothing widens it (0: Limit not called)
	wide    int // GOMAXPROCS while something does
	fanouts int // large fan-outs running
	load    loadState
}

// slow is set while the load is sampled every idleTick; Active clears it and
// wakes the sampling.
var (
	slow atomic.Bool
	wake = make(chan struct{}, 1)
)

// Active reports a request. While the process was idle, the load is sampled
// only every idleTick; the first request after that restarts sampling at
// procsTick, so that a load starting from idle widens the process within
// widenAfter samples (400 ms) instead of up to idleTick later (measured:
// eight callers from idle queued on one P for up to 2.2 s). It costs one
// atomic load per request otherwise.
func Active() {
	if slow.Load() && slow.CompareAndSwap(true, false) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// EnvSet reports whether $GOMAXPROCS sets GOMAXPROCS: as the runtime reads
// it, a positive integer (an empty or malformed value is ignored, and Go's
// default applies). Its callers leave GOMAXPROCS alone when it does.
func EnvSet() bool {
	n, err := strconv.ParseInt(os.Getenv("GOMAXPROCS"), 10, 32)
	return err == nil && n > 0
}

// Limit sets GOMAXPROCS to n, and lets large fan-outs and a load that
// queues on n run on wide (GOMAXPROCS as it was before the call when wide
// is 0) while they last. n <= 0 changes nothing. undo stops the load
// sampling and restores GOMAXPROCS as it was.
func Limit(n, wide int) (undo func()) {
	return limit(n, wide, true)
}

// LimitStatic is Limit without the load sampling: only fan-outs widen the
// process (tests, where a busy machine would widen it at random).
func LimitStatic(n, wide int) (undo func()) {
	return limit(n, wide, false)
}

func limit(n, wide int, sample bool) func() {
	if n <= 0 {
		return func() {}
	}
	procs.mu.Lock()
	before := runtime.GOMAXPROCS(0)
	if wide <= 0 {
		wide = before
	}
	procs.narrow, procs.wide, procs.fanouts = n, max(wide, n), 0
	procs.load = loadState{}
	applyProcs()
	canWiden := procs.wide > procs.narrow
	procs.mu.Unlock()
	done := make(chan struct{})
	if sample && canWiden {
		go watchLoad(done)
	}
	return sync.OnceFunc(func() {
		close(done)
		procs.mu.Lock()
		defer procs.mu.Unlock()
		procs.narrow, procs.wide, procs.fanouts, procs.load = 0, 0, 0, loadState{}
		runtime.GOMAXPROCS(before)
	})
}

// applyProcs sets GOMAXPROCS for the current state; procs.mu is held.
func applyProcs() {
	want := procs.narrow
	if procs.fanouts > 0 || procs.load.busy {
		want = procs.wide
	}
	if want > 0 && runtime.GOMAXPROCS(0) != want {
		runtime.GOMAXPROCS(want)
	}
}

// Widen raises GOMAXPROCS for a fan-out to n streams when it is large and
// Limit narrowed the process; the returned func undoes it when the last
// widened fan-out ends (unless the load keeps the process wide).
func Widen(n int) (narrow func()) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if n < WidenMin || procs.wide <= procs.narrow {
		return func() {}
	}
	procs.fanouts++
	applyProcs()
	return sync.OnceFunc(func() {
		procs.mu.Lock()
		defer procs.mu.Unlock()
		if procs.fanouts > 0 { // 0 when Limit was undone or called again meanwhile
			procs.fanouts--
		}
		applyProcs()
	})
}

// FanoutWorkers is how many goroutines a fan-out writes with by default: as
// many as a widened process runs at once.
func FanoutWorkers() int {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	if procs.wide > 0 {
		return procs.wide
	}
	return runtime.GOMAXPROCS(0)
}

// loadSample is what one procsTick saw. waiting is the time goroutines
// spent runnable but not running, per second, from the runtime's
// /sched/latencies histogram (Little's law: the average number of
// goroutines waiting for a P); the runtime records about one transition in
// eight there, so it reads about an eighth of the true average, which the
// thresholds were measured with. cores is the CPU the process used.
type loadSample struct {
	waiting, cores float64
}

// loadState decides from samples whether the load keeps the process wide.
type loadState struct {
	busy bool
	run  int // samples in a row that point the other way
}

// observe takes one sample; it reports whether busy changed.
func (l *loadState) observe(s loadSample) bool {
	if !l.busy && s.waiting >= waitingWiden || l.busy && s.cores < quietCores {
		l.run++
	} else {
		l.run = 0
	}
	if !l.busy && l.run >= widenAfter || l.busy && l.run >= narrowAfter {
		l.busy, l.run = !l.busy, 0
		return true
	}
	return false
}

// next is the wait until the sample after s.
func (l *loadState) next(s loadSample) time.Duration {
	if !l.busy && l.run == 0 && s.cores < idleCores {
		return idleTick
	}
	return procsTick
}

// watchLoad samples the load every procsTick until done is closed.
func watchLoad(done <-chan struct{}) {
	t := time.NewTimer(procsTick)
	defer t.Stop()
	var m loadMeter
	m.sample()
	for {
		select {
		case <-done:
			slow.Store(false)
			return
		case <-wake:
			// Requests after idleTick: the load is measured from now.
			m.sample()
			t.Reset(procsTick)
			continue
		case <-t.C:
		}
		s := m.sample()
		procs.mu.Lock()
		if procs.load.observe(s) {
			applyProcs()
		}
		next := procs.load.next(s)
		procs.mu.Unlock()
		t.Reset(next)
		slow.Store(next == idleTick)
	}
}

// loadMeter turns the scheduler's latency histogram and the process's CPU
// time into loadSamples.
type loadMeter struct {
	m      [1]metrics.Sample
	counts []uint64
	cpu    time.Duration
	at     time.Time
}

// sample returns the load since the previous call (zero on the first).
func (m *loadMeter) sample() loadSample {
	m.m[0].Name = "/sched/latencies:seconds"
	metrics.Read(m.m[:])
	now := time.Now()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	var s loadSample
	if m.m[0].Value.Kind() != metrics.KindFloat64Histogram {
		return s
	}
	h := m.m[0].Value.Float64Histogram()
	if m.counts != nil && len(m.counts) == len(h.Counts) {
		waited := 0.0 // seconds goroutines spent runnable, not running
		for i, c := range h.Counts {
			waited += float64(c-m.counts[i]) * bucketMid(h.Buckets[i], h.Buckets[i+1])
		}
		if d := now.Sub(m.at).Seconds(); d > 0 {
			s = loadSample{waiting: waited / d, cores: (cpu - m.cpu).Seconds() / d}
		}
	}
	m.counts = append(m.counts[:0], h.Counts...)
	m.cpu, m.at = cpu, now
	return s
}

// bucketMid is a histogram bucket's representative value.
func bucketMid(lo, hi float64) float64 {
	switch {
	case math.IsInf(lo, -1):
		return max(hi, 0)
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}
