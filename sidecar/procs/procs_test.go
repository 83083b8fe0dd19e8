package procs

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Large fan-outs widen a narrowed process and the last one to end narrows it again; small ones
// and a process Limit never narrowed are left alone.
func TestWiden(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	Widen(WidenMin)()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("without Limit, Widen changed GOMAXPROCS from %d to %d", before, got)
	}
	t.Cleanup(LimitStatic(1, 3))
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after LimitStatic(1, 3) = %d, want 1", got)
	}
	small := Widen(WidenMin - 1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("a small fan-out widened the process to %d", got)
	}
	small()
	first := Widen(WidenMin)
	second := Widen(10 * WidenMin)
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
	setBusy(true)
	Widen(WidenMin)()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("busy, after a fan-out: GOMAXPROCS = %d, want 3", got)
	}
	setBusy(false)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("calm again: GOMAXPROCS = %d, want 1", got)
	}
}

// setBusy sets what the load sampling decided, as watchLoad does.
func setBusy(busy bool) {
	procs.mu.Lock()
	defer procs.mu.Unlock()
	procs.load.busy = busy
	applyProcs()
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

// An idle narrow process is sampled every idleTick; one that works, queues or is wide, every
// procsTick.
func TestLoadStateNext(t *testing.T) {
	idle := loadSample{waiting: 0, cores: 0.002}
	var l loadState
	if got := l.next(idle); got != idleTick {
		t.Errorf("idle: next sample in %v, want %v", got, idleTick)
	}
	if got := l.next(loadSample{cores: 0.07}); got != procsTick {
		t.Errorf("a call every 5 ms: next sample in %v, want %v", got, procsTick)
	}
	l.observe(loadSample{waiting: 0.65, cores: 0.04}) // queueing counted, not yet wide
	if got := l.next(idle); got != procsTick {
		t.Errorf("counting towards widening: next sample in %v, want %v", got, procsTick)
	}
	l = loadState{busy: true}
	if got := l.next(idle); got != procsTick {
		t.Errorf("wide: next sample in %v, want %v", got, procsTick)
	}
}

// The meter reads real queueing: eight goroutines that each run ~20 µs and yield, on one P,
// keep seven waiting for it (the runtime's sampled histogram shows about an eighth of that); an
// idle process keeps none. As TestActiveWakesSampling, it tries three times: the queueing needs
// CPU time, which a heavily loaded machine may not give one attempt.
func TestLoadMeterSeesQueueing(t *testing.T) {
	threeAttempts(t, loadMeterSeesQueueing)
}

// threeAttempts runs attempt up to three times, until it says nothing went wrong, and fails
// with what went wrong in each.
func threeAttempts(t *testing.T, attempt func(*testing.T) string) {
	t.Helper()
	var failures []string
	for i := 1; i <= 3; i++ {
		failure := attempt(t)
		if failure == "" {
			return
		}
		t.Logf("attempt %d: %s", i, failure)
		failures = append(failures, failure)
	}
	t.Fatalf("three attempts: %q", failures)
}

// loadMeterSeesQueueing runs one attempt of TestLoadMeterSeesQueueing and says what went
// wrong, if anything.
func loadMeterSeesQueueing(t *testing.T) string {
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
	// What matters is that the meter would widen the process (waitingWiden); on a machine whose
	// other processes take most of the cores this process gets less time to queue in (0.40 was
	// seen at load average 20 on 2 cores, against about 0.9 on a quiet one).
	if s.waiting < waitingWiden || s.cores <= 0.1 {
		return fmt.Sprintf("eight goroutines taking turns on one P: %+v, want waiting >= %v and some CPU", s, waitingWiden)
	}
	time.Sleep(300 * time.Millisecond)
	s = m.sample()
	t.Logf("idle: %+v", s)
	if s.waiting >= waitingWiden/10 {
		return fmt.Sprintf("idle: %+v, want waiting < %v", s, waitingWiden/10)
	}
	return ""
}

// A load that starts while the process is idle (sampled every idleTick)
// widens it within widenAfter samples of the first request (Active), not
// after idleTick. The widening needs the process to get CPU time to queue in:
// on a machine whose other processes take the cores (a CI run beside a
// benchmark, load average 6-9 on 2 cores) one attempt can miss it, so the
// test tries three times; Active that does not wake the sampling misses every
// attempt.
func TestActiveWakesSampling(t *testing.T) {
	threeAttempts(t, activeWakesSampling)
}

// activeWakesSampling runs one attempt of TestActiveWakesSampling and says
// what went wrong, if anything.
func activeWakesSampling(t *testing.T) string {
	undo := Limit(1, 2)
	defer undo()
	deadline := time.Now().Add(3 * time.Second)
	for !slow.Load() { // the first sample (after procsTick) finds the test idle
		if time.Now().After(deadline) {
			return "the idle process is still sampled every procsTick"
		}
		time.Sleep(5 * time.Millisecond)
	}
	began := time.Now()
	Active()
	if slow.Load() {
		return "Active left the sampling slow"
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 { // requests queueing on the one P
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				spinFor(20 * time.Microsecond)
				runtime.Gosched()
			}
		})
	}
	for runtime.GOMAXPROCS(0) != 2 && time.Since(began) < idleTick {
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(began)
	close(stop)
	wg.Wait()
	t.Logf("widened %v after Active (GOMAXPROCS %d)", took, runtime.GOMAXPROCS(0))
	if runtime.GOMAXPROCS(0) != 2 || took >= idleTick-procsTick {
		return fmt.Sprintf("GOMAXPROCS %d %v after Active under a queueing load; want 2 within %v (widenAfter samples of %v), before the idle sampling's next (%v)",
			runtime.GOMAXPROCS(0), took, widenAfter*procsTick, procsTick, idleTick)
	}
	return ""
}

// Limit narrows the process at once, samples the load until undone, and undo restores
// GOMAXPROCS as it was.
func TestLimit(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	undo := Limit(1, 2)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after Limit(1, 2) = %d, want 1", got)
	}
	if got := FanoutWorkers(); got != 2 {
		t.Fatalf("FanoutWorkers after Limit(1, 2) = %d, want 2", got)
	}
	undo()
	undo() // a second call changes nothing
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS after undo = %d, want %d", got, before)
	}
	Limit(0, 2)()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("Limit(0, 2) changed GOMAXPROCS to %d", got)
	}

	// A fan-out that outlives an undo and the next Limit does not unbalance that Limit.
	undo = LimitStatic(1, 2)
	narrow := Widen(WidenMin)
	undo()
	defer LimitStatic(1, 2)()
	narrow()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after a fan-out that outlived an undo, GOMAXPROCS = %d, want 1", got)
	}
	stillWide := Widen(WidenMin)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("during a fan-out GOMAXPROCS = %d, want 2", got)
	}
	stillWide()
}

// spinFor keeps the CPU busy for d.
func spinFor(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		runtime.KeepAlive(end)
	}
}

// EnvSet follows the runtime: only a positive integer in $GOMAXPROCS sets GOMAXPROCS.
func TestEnvSet(t *testing.T) {
	for v, want := range map[string]bool{"": false, "x": false, "0": false, "-1": false, "1.5": false, "1": true, "3": true} {
		t.Setenv("GOMAXPROCS", v)
		if got := EnvSet(); got != want {
			t.Errorf("GOMAXPROCS=%q: EnvSet() = %v, want %v", v, got, want)
		}
	}
}
