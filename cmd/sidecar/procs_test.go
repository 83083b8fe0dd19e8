package main_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// The sidecar serves requests on one OS thread at a time unless told otherwise: --max-procs
// sets another number, 0 keeps Go's default, and $GOMAXPROCS wins over the flag. The process
// reports it as go_sched_gomaxprocs_threads.
func TestMaxProcs(t *testing.T) {
	goDefault := runtime.GOMAXPROCS(0)
	if v, err := strconv.Atoi(os.Getenv("GOMAXPROCS")); err == nil && v > 0 {
		t.Skipf("GOMAXPROCS=%d is set for the tests, and the sidecars would inherit it", v)
	}
	e := newEnv(t)
	if got := metric(t, e.admin, "go_sched_gomaxprocs_threads"); got != 1 {
		t.Errorf("default: GOMAXPROCS %v, want 1", got)
	}
	e.startSidecar(t, "--max-procs", "3")
	if got := metric(t, e.admin, "go_sched_gomaxprocs_threads"); got != 3 {
		t.Errorf("--max-procs 3: GOMAXPROCS %v, want 3", got)
	}
	e.startSidecar(t, "--max-procs", "0")
	if got := metric(t, e.admin, "go_sched_gomaxprocs_threads"); got != float64(goDefault) {
		t.Errorf("--max-procs 0: GOMAXPROCS %v, want Go's default %d", got, goDefault)
	}
	e.startSidecarEnv(t, []string{"GOMAXPROCS=5"}, "--max-procs", "2")
	if got := metric(t, e.admin, "go_sched_gomaxprocs_threads"); got != 5 {
		t.Errorf("GOMAXPROCS=5 with --max-procs 2: GOMAXPROCS %v, want 5", got)
	}
}
