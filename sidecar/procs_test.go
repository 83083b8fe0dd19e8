package sidecar

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// restoreProcs restores GOMAXPROCS and the package state when the test ends.
func restoreProcs(t *testing.T) {
	t.Helper()
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		procs.mu.Lock()
		procs.narrow, procs.wide, procs.fanouts, procs.load = 0, 0, 0, loadState{}
		procs.mu.Unlock()
		runtime.GOMAXPROCS(before)
	})
}

// limitProcsForTest narrows the process as the sidecar's main does, without the load sampling
// (a busy test machine would widen it at random).
func limitProcsForTest(t *testing.T, narrow, wide int) {
	t.Helper()
	restoreProcs(t)
	setProcs(narrow, wide)
}

// Large fan-outs widen a narrowed process and the last one to end narrows it again; small ones
// and a process LimitProcs never narrowed are left alone.
func TestWiden(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	widen(widenMin)()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("without LimitProcs, widen changed GOMAXPROCS from %d to %d", before, got)
	}
	limitProcsForTest(t, 1, 3)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after LimitProcs(1, 3) = %d, want 1", got)
	}
	small := widen(widenMin - 1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("a small fan-out widened the process to %d", got)
	}
	small()
	first := widen(widenMin)
	second := widen(10 * widenMin)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("during two large fan-outs GOMAXPROCS = %d, want 3", got)
	}
	first()
	first() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("with one large fan-out left GOMAXPROCS = %d, want 3", got)
	}
	second()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after the last fan-out GOMAXPROCS = %d, want 1", got)
	}

	// A load that keeps the process wide outlasts a fan-out.
	procs.mu.Lock()
	procs.load.busy = true
	applyProcs()
	procs.mu.Unlock()
	widen(widenMin)()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("busy, after a fan-out: GOMAXPROCS = %d, want 3", got)
	}
	procs.mu.Lock()
	procs.load.busy = false
	applyProcs()
	procs.mu.Unlock()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("calm again: GOMAXPROCS = %d, want 1", got)
	}
}

// procsWriter records the GOMAXPROCS its writes ran under.
type procsWriter struct {
	mu   *sync.Mutex
	seen map[int]int
}

func (w procsWriter) write(ev []byte, scratch []byte) ([]byte, error) {
	w.record()
	return scratch, nil
}

func (w procsWriter) end([]byte) { w.record() }

func (w procsWriter) record() {
	n := runtime.GOMAXPROCS(0)
	w.mu.Lock()
	w.seen[n]++
	w.mu.Unlock()
}

// A hub built in a narrowed process writes a large fan-out, and the drain's complete results, on
// as many goroutines as the wide process runs, widened; then the process is narrow again.
func TestFanoutWidens(t *testing.T) {
	limitProcsForTest(t, 1, 2)
	h := NewHub(HubOptions{Keepalive: -1})
	if h.opts.Writers != 2 {
		t.Fatalf("fan-out writers = %d, want 2 (the wide GOMAXPROCS)", h.opts.Writers)
	}
	var mu sync.Mutex
	seen := map[int]int{}
	const n = 2 * widenMin
	for i := range n {
		st := &stream{id: []byte(`"` + string(rune('a'+i%26)) + `"`), kinds: KindTools}
		if !h.reserve() || !h.add(st) || !st.start(procsWriter{&mu, seen}) {
			t.Fatalf("stream %d not admitted", i)
		}
	}
	if got := h.Publish(KindTools, ""); got != n {
		t.Fatalf("published to %d streams, want %d", got, n)
	}
	if seen[2] != n {
		t.Fatalf("fan-out writes by GOMAXPROCS: %v, want all %d at 2", seen, n)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after the fan-out GOMAXPROCS = %d, want 1", got)
	}
	clear(seen)
	if got := h.EndAll(0); got != n {
		t.Fatalf("EndAll ended %d streams, want %d", got, n)
	}
	if seen[2] != n {
		t.Fatalf("EndAll's writes by GOMAXPROCS: %v, want all %d at 2", seen, n)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after EndAll GOMAXPROCS = %d, want 1", got)
	}
}

// A load that queues on the narrow process widens it after widenAfter samples in a row; a
// widened one narrows after narrowAfter calm samples in a row; a sample the other way restarts
// the count. The figures are those measured on one P (docs/performance.md).
func TestLoadStateObserve(t *testing.T) {
	seqCalls := loadSample{waiting: 0.04, cores: 0.55} // sequential calls at 2,700/s
	eight := loadSample{waiting: 0.65, cores: 0.7}     // eight concurrent callers
	idle := loadSample{waiting: 0.005, cores: 0.07}    // a call every 5 ms
	var l loadState
	for range 10 {
		if l.observe(seqCalls) || l.observe(idle) {
			t.Fatal("sequential or sparse calls widened the process")
		}
	}
	for i := range widenAfter {
		if changed := l.observe(eight); changed != (i == widenAfter-1) {
			t.Fatalf("eight concurrent callers: sample %d changed busy: %v, want a change at sample %d", i+1, changed, widenAfter)
		}
	}
	if !l.busy {
		t.Fatal("eight concurrent callers did not widen the process")
	}
	// Wide, the same load costs more CPU; sequential calls still keep it wide (above quietCores).
	for range 10 {
		if l.observe(loadSample{waiting: 0.01, cores: 0.8}) || l.observe(loadSample{waiting: 0.01, cores: 0.7}) {
			t.Fatal("a busy widened process narrowed")
		}
	}
	for i := range narrowAfter - 1 {
		if l.observe(idle) {
			t.Fatalf("narrowed after %d calm samples, want %d", i+1, narrowAfter)
		}
	}
	l.observe(loadSample{cores: 0.9}) // one busy sample restarts the count
	for range narrowAfter - 1 {
		l.observe(idle)
	}
	if !l.busy {
		t.Fatal("narrowed although a busy sample came within the last narrowAfter")
	}
	if !l.observe(idle) || l.busy {
		t.Fatal("did not narrow after narrowAfter calm samples")
	}
}

// The meter reads real queueing: eight goroutines that each run ~20 µs and yield, on one P,
// keep seven waiting for it (the runtime's sampled histogram shows about an eighth of that); an
// idle process keeps none.
func TestLoadMeterSeesQueueing(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var m loadMeter
	m.sample()
	stop := time.Now().Add(300 * time.Millisecond)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				spinFor(20 * time.Microsecond)
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	s := m.sample()
	t.Logf("eight goroutines taking turns: %+v", s)
	if s.waiting < 2*waitingWiden || s.cores <= 0.1 {
		t.Fatalf("eight goroutines taking turns on one P: %+v, want waiting >= %v and some CPU", s, 2*waitingWiden)
	}
	time.Sleep(300 * time.Millisecond)
	s = m.sample()
	t.Logf("idle: %+v", s)
	if s.waiting >= waitingWiden/10 {
		t.Fatalf("idle: %+v, want waiting < %v", s, waitingWiden/10)
	}
}

// LimitProcs narrows the process at once and samples the load until stopped.
func TestLimitProcs(t *testing.T) {
	restoreProcs(t)
	stop := LimitProcs(1, 2)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after LimitProcs(1, 2) = %d, want 1", got)
	}
	stop()
	stop() // a second call changes nothing
	LimitProcs(0, 2)()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("LimitProcs(0, 2) changed GOMAXPROCS to %d", got)
	}
}

// spinFor keeps the CPU busy for d.
func spinFor(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		runtime.KeepAlive(end)
	}
}
