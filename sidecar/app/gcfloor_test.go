package app

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, min uint64
		want      int
	}{
		{live: 1 << 20, min: 16 << 20, want: 400},   // 1 MiB live: the scaled 4 MiB minimum makes 16 MiB
		{live: 4 << 20, min: 16 << 20, want: 300},   // 4 MiB live: 4 × 4 = 16 MiB
		{live: 5 << 20, min: 16 << 20, want: 220},   // 5 × 3.2 = 16 MiB
		{live: 8 << 20, min: 16 << 20, want: 100},   // 2 × live reaches the floor
		{live: 100 << 20, min: 16 << 20, want: 100}, // far above: plain GOGC=100
		{live: 0, min: 16 << 20, want: 400},         // no cycle yet
		{live: 1 << 20, min: 4 << 20, want: 100},    // a floor at Go's own minimum changes nothing
	} {
		if got := gcPercentFor(c.live, c.min); got != c.want {
			t.Errorf("gcPercentFor(%d, %d) = %d, want %d", c.live, c.min, got, c.want)
		}
	}
}

func gogc(t *testing.T) uint64 { return readMetric(t, "/gc/gogc:percent") }

func readMetric(t *testing.T, name string) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestKeepHeapFloorFollowsTheLiveHeap runs the real runtime: the percentage
// is raised while the live heap is small, falls back to 100 once the live
// heap alone reaches half the floor, and is restored on stop.
func TestKeepHeapFloorFollowsTheLiveHeap(t *testing.T) {
	// Start from Go's default whatever GOGC this test process was given, and
	// give the process its own setting back afterwards.
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	stop := KeepHeapFloor(64<<20, false)
	defer stop()
	waitGOGC := func(ok func(uint64) bool) uint64 {
		var got uint64
		for range 50 {
			runtime.GC()
			runtime.Gosched()
			if got = gogc(t); ok(got) {
				break
			}
		}
		return got
	}
	if got := waitGOGC(func(p uint64) bool { return p > 100 }); got <= 100 {
		t.Fatalf("GOGC = %d with a small live heap and a 64 MiB floor; want the floor to raise it", got)
	}
	if goal := readMetric(t, "/gc/heap/goal:bytes"); goal < 60<<20 || goal > 68<<20 {
		t.Fatalf("heap goal = %d MiB with a small live heap; want the 64 MiB floor", goal>>20)
	}
	ballast := make([]*[1 << 20]byte, 48) // 48 MiB live: 2 × live is above the floor
	for i := range ballast {
		ballast[i] = new([1 << 20]byte)
	}
	if got := waitGOGC(func(p uint64) bool { return p == 100 }); got != 100 {
		t.Fatalf("GOGC = %d with 48 MiB live and a 64 MiB floor; want 100", got)
	}
	if goal := readMetric(t, "/gc/heap/goal:bytes"); goal < 96<<20 {
		t.Fatalf("heap goal = %d MiB with 48 MiB live; want 2 × live", goal>>20)
	}
	runtime.KeepAlive(ballast)
	stop()
	if got := gogc(t); got != 100 {
		t.Fatalf("GOGC = %d after stop; want 100", got)
	}
	if stop := KeepHeapFloor(64<<20, true); gogc(t) != 100 {
		stop()
		t.Fatal("an explicit GOGC must switch the floor off")
	}
}
