//go:build e2e

package main_test

import (
	"runtime"
	"testing"
)

// The sidecar serves requests on one OS thread at a time unless told otherwise: --max-procs
// sets another number, 0 keeps Go's default, and $GOMAXPROCS wins over the flag (an empty one
// is ignored, as the runtime ignores it). The process reports it as go_sched_gomaxprocs_threads.
// Every sidecar here gets GOMAXPROCS explicitly, so a value set for the tests is not inherited.
func TestMaxProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()        // Go's default, whatever $GOMAXPROCS says
	goDefault := runtime.GOMAXPROCS(prev) // returns that default, restores the test's own
	e := newEnv(t)
	for _, c := range []struct {
		env  string
		args []string
		want int
	}{
		{"GOMAXPROCS=", nil, 1},
		{"GOMAXPROCS=", []string{"--max-procs", "3"}, 3},
		{"GOMAXPROCS=", []string{"--max-procs", "0"}, goDefault},
		{"GOMAXPROCS=5", []string{"--max-procs", "2"}, 5},
	} {
		e.startSidecarEnv(t, []string{c.env}, c.args...)
		if got := metric(t, e.admin, "go_sched_gomaxprocs_threads"); got != float64(c.want) {
			t.Errorf("%s %v: GOMAXPROCS %v, want %d", c.env, c.args, got, c.want)
		}
	}
}
