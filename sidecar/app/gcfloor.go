package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// DefaultMinHeapBytes is the sidecar's default heap floor (--min-heap-bytes).
const DefaultMinHeapBytes = 8 << 20

// liveHeapMetric is the heap the last GC cycle found reachable.
const liveHeapMetric = "/gc/heap/live:bytes"

// KeepHeapFloor makes the garbage collector wait until the heap reaches at
// least minHeap bytes before it collects, and behave exactly as GOGC=100
// above that: after every cycle it sets the GC percentage so that the next
// target is max(2 × live heap, minHeap).
//
// Why: Go's own floor is 4 MiB. The sidecar keeps about 0.9 MiB of live
// heap (client-go's core/v1 types, the metrics registry, the go-sdk types,
// the catalog) against a bare proxy's 0.25 MiB, so with Go's defaults it
// collects after every ~3 MiB of garbage, about every 300 forwarded
// requests, and each cycle marks that whole live heap while requests wait
// for the CPU. Under load that was the sidecar's whole p99 excess over a bare
// forwarding proxy. The default 8 MiB floor cuts the cycles more than
// twofold, at the cost of at most 4 MiB more heap than Go's default (the
// sidecar stays within its default 32 Mi memory request under load); once
// the live heap passes half the floor (about a thousand open listen streams)
// nothing changes. A 16 MiB floor did better still on latency but cost
// 12 MiB. docs/performance.md has the figures.
//
// It returns a function that stops the tuning and restores GOGC=100. It
// does nothing (and returns a no-op) when minHeap is 0 or when GOGC is set
// in the environment: an operator's explicit setting wins.
func KeepHeapFloor(minHeap uint64, gogcFromEnv bool) (stop func()) {
	if minHeap == 0 || gogcFromEnv {
		return func() {}
	}
	t := &heapFloor{min: minHeap, sample: []metrics.Sample{{Name: liveHeapMetric}}}
	t.adjust()
	t.arm()
	return func() {
		t.stopped.Store(true)
		debug.SetGCPercent(100)
	}
}

type heapFloor struct {
	min     uint64
	stopped atomic.Bool
	// sample and percent are only touched by adjust, which runs on the
	// finalizer goroutine (and once before the first cycle).
	sample  []metrics.Sample
	percent int
}

// sentinel is garbage from birth: its finalizer runs after the GC cycle
// that found it unreachable, and arms the next one.
type sentinel struct{ t *heapFloor }

func (t *heapFloor) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

func (t *heapFloor) adjust() {
	metrics.Read(t.sample)
	p := gcPercentFor(t.sample[0].Value.Uint64(), t.min)
	if p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// goHeapMinimum is the Go runtime's heap minimum at GOGC=100; the runtime
// scales it with the GC percentage (heapMinimum = 4 MiB × GOGC/100).
const goHeapMinimum = 4 << 20

// gcPercentFor is the GC percentage that puts the next heap target at
// max(2 × live, minHeap); it never goes below 100 (Go's default). The
// runtime's target is max(live × (1 + p/100), 4 MiB × p/100), so p is also
// capped where the scaled minimum alone reaches minHeap.
func gcPercentFor(live, minHeap uint64) int {
	const base = 100
	if 2*live >= minHeap {
		return base
	}
	p := minHeap * 100 / goHeapMinimum
	if live > 0 {
		// target = live × (1 + p/100) = minHeap.
		p = min(p, (minHeap-live)*100/live)
	}
	return int(max(p, base))
}
