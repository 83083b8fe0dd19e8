// Package inflight is what the replica is serving, for its in-flight cap and
// its drain: the POSTs admitted within the cap, the requests in flight that a
// drain waits for, whether the replica is draining, and the drain budget's
// abort context that every request context derives from.
//
// It must not know HTTP routing, MCP or the rooms that serve requests: the
// request path admits, begins and ends requests here, the process (sidecar/app)
// drives the drain through the Server, and a request's handler asks whether its
// context was ended by the drain.
package inflight

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// ErrDrainBudget is the cause of the request contexts Abort ends.
var ErrDrainBudget = errors.New("drain budget over")

// Gate counts what is in flight. Its zero value is not ready: use New.
//
// The counters are atomics; abortMu guards ctx and cancel, which a drained
// replica that recovers replaces (ResetAbort).
type Gate struct {
	max int64
	// admitted counts the POSTs being served, from their headers on (a body still arriving
	// included), within max.
	admitted atomic.Int64
	inflight atomic.Int64 // requests in progress, listen streams aside (for drain)
	draining atomic.Bool
	aborted  atomic.Int64 // requests the drain's abort answered

	abortMu sync.Mutex
	ctx     context.Context
	cancel  context.CancelCauseFunc
}

// New returns a Gate admitting at most max POSTs at once.
func New(max int64) *Gate {
	g := &Gate{max: max}
	g.ctx, g.cancel = context.WithCancelCause(context.Background())
	return g
}

// Admit takes a slot within the cap, or reports that none is left.
func (g *Gate) Admit() bool {
	if g.admitted.Add(1) > g.max {
		g.admitted.Add(-1)
		return false
	}
	return true
}

// Release gives back a slot Admit took.
func (g *Gate) Release() { g.admitted.Add(-1) }

// Admitted returns how many POSTs hold a slot.
func (g *Gate) Admitted() int64 { return g.admitted.Load() }

// Begin and End bracket a request the drain waits for.
func (g *Gate) Begin() { g.inflight.Add(1) }

// End ends a request Begin started.
func (g *Gate) End() { g.inflight.Add(-1) }

// Inflight returns the number of requests between Begin and End.
func (g *Gate) Inflight() int64 { return g.inflight.Load() }

// SetDraining says whether the replica is draining.
func (g *Gate) SetDraining(on bool) { g.draining.Store(on) }

// Draining reports whether the replica is draining.
func (g *Gate) Draining() bool { return g.draining.Load() }

// Abort ends the context current now (Context) with ErrDrainBudget.
func (g *Gate) Abort() {
	g.abortMu.Lock()
	defer g.abortMu.Unlock()
	g.cancel(ErrDrainBudget)
}

// ResetAbort replaces an ended context with a fresh one.
func (g *Gate) ResetAbort() {
	g.abortMu.Lock()
	defer g.abortMu.Unlock()
	if g.ctx.Err() != nil {
		g.ctx, g.cancel = context.WithCancelCause(context.Background())
	}
}

// Context is the abort context current now.
func (g *Gate) Context() context.Context {
	g.abortMu.Lock()
	defer g.abortMu.Unlock()
	return g.ctx
}

// AbortedByDrain reports (and counts) a request whose context the drain
// budget ended, rather than its client going away.
func (g *Gate) AbortedByDrain(ctx context.Context) bool {
	if !errors.Is(context.Cause(ctx), ErrDrainBudget) {
		return false
	}
	g.aborted.Add(1)
	return true
}

// Aborted returns how many requests AbortedByDrain counted.
func (g *Gate) Aborted() int64 { return g.aborted.Load() }
