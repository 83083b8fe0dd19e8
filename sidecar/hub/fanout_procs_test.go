package hub

import (
	"runtime"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/procs"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// procsWriter records the GOMAXPROCS its writes ran under.
type procsWriter struct {
	mu   *sync.Mutex
	seen map[int]int
}

func (w procsWriter) WriteEvent(ev []byte, scratch []byte) ([]byte, error) {
	w.record()
	return scratch, nil
}

func (w procsWriter) End([]byte) { w.record() }

func (w procsWriter) record() {
	n := runtime.GOMAXPROCS(0)
	w.mu.Lock()
	w.seen[n]++
	w.mu.Unlock()
}

// A hub built in a narrowed process writes a large fan-out, and the drain's complete results, on
// as many goroutines as the wide process runs, widened; then the process is narrow again.
func TestFanoutWidens(t *testing.T) {
	t.Cleanup(procs.LimitStatic(1, 2))
	h := New(Options{Keepalive: -1})
	if h.opts.Writers != 2 {
		t.Fatalf("fan-out writers = %d, want 2 (the wide GOMAXPROCS)", h.opts.Writers)
	}
	var mu sync.Mutex
	seen := map[int]int{}
	const n = 2 * procs.WidenMin
	for i := range n {
		st := &Stream{ID: []byte(`"` + string(rune('a'+i%26)) + `"`), Kinds: protocol.KindTools}
		if !h.Reserve() || !h.Add(st) || !st.Start(procsWriter{&mu, seen}) {
			t.Fatalf("stream %d not admitted", i)
		}
	}
	if got := h.Publish(protocol.KindTools, ""); got != n {
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
