package main

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// fakeTimers runs the simulation's timers by deadline, and those due at the same time newest
// first, as the Go runtime starts the goroutines of timers that expire together.
type fakeTimers struct {
	now     time.Duration
	seq     int
	pending []fakeTimer
}

type fakeTimer struct {
	at  time.Duration
	seq int
	f   func()
}

func (c *fakeTimers) after(d time.Duration, f func()) {
	c.seq++
	c.pending = append(c.pending, fakeTimer{at: c.now + d, seq: c.seq, f: f})
}

// runUntil fires every timer due by end, in deadline order, including those they schedule.
func (c *fakeTimers) runUntil(end time.Duration) {
	for {
		next := -1
		for i, t := range c.pending {
			if t.at <= end && (next < 0 || t.at < c.pending[next].at || (t.at == c.pending[next].at && t.seq > c.pending[next].seq)) {
				next = i
			}
		}
		if next < 0 {
			c.now = max(c.now, end)
			return
		}
		t := c.pending[next]
		c.pending = append(c.pending[:next], c.pending[next+1:]...)
		c.now = t.at
		t.f()
	}
}

// setReports records the reports set, in order.
type setReports []catalog.Report

func (r *setReports) Set(rep catalog.Report) { *r = append(*r, rep) }

func TestSimulatedReportsEndWithTheNewestRevision(t *testing.T) {
	const lag, checkLag = 100 * time.Millisecond, 50 * time.Millisecond
	tests := []struct {
		name string
		// gaps are the times between the catalog revisions the pod sees.
		gaps []time.Duration
	}{
		{"one revision", nil},
		{"two revisions at once", []time.Duration{0}},
		{"the next revision as the applied report of the first is set", []time.Duration{lag}},
		{"the next revision's applied report due with the first's check", []time.Duration{checkLag}},
		{"three revisions", []time.Duration{time.Millisecond, 0}},
		{"revisions after the reports", []time.Duration{time.Second, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &fakeTimers{}
			var got setReports
			key := types.NamespacedName{Namespace: "fleet", Name: "s0000-abc"}
			sp := &simPod{server: "s0000", started: true, reporter: &got}
			s := &sidecarSim{mode: reportsBefore, lag: lag, checkLag: checkLag, after: clock.after,
				pods: map[types.NamespacedName]*simPod{key: sp}, servers: map[string]*simServer{"s0000": {status: true}}}
			revisions := []string{"r0"}
			for i := range tt.gaps {
				revisions = append(revisions, "r"+string(rune('1'+i)))
			}
			for i, rev := range revisions {
				if i > 0 {
					clock.runUntil(clock.now + tt.gaps[i-1])
				}
				s.mu.Lock()
				s.servers["s0000"].revision = rev
				s.maybeReport(key, sp)
				s.mu.Unlock()
			}
			clock.runUntil(clock.now + time.Hour)

			newest := revisions[len(revisions)-1]
			if len(got) == 0 {
				t.Fatalf("no report set; want revision %s checked", newest)
			}
			if last := got[len(got)-1]; last.Revision != newest || !last.ToolsChecked {
				t.Errorf("last report: revision %s, toolsChecked %v; want revision %s checked (all set: %v)",
					last.Revision, last.ToolsChecked, newest, got)
			}
			seen := map[string]bool{}
			for i, rep := range got {
				if i > 0 && rep.Revision != got[i-1].Revision && seen[rep.Revision] {
					t.Errorf("revision %s reported again after %s: %v", rep.Revision, got[i-1].Revision, got)
				}
				// Only the first report is of a revision applied and not yet checked.
				if rep.ToolsChecked == (i == 0) {
					t.Errorf("report %d of %s: toolsChecked %v: %v", i, rep.Revision, rep.ToolsChecked, got)
				}
				seen[rep.Revision] = true
			}
		})
	}
}
