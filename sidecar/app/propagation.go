package app

import (
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
)

// propagationLog logs, once per catalog revision, where the sidecar's part of its propagation
// went: from the delivery of the watch event to the last listen stream's write. One line per
// revision (revisions change at the speed of people and GitOps, not of requests); the catalog
// benchmark reads it (docs/performance.md).
type propagationLog struct {
	log *slog.Logger

	// mu guards rev and received: the revision last delivered and not published yet, and when
	// its watch event was delivered.
	mu       sync.Mutex
	rev      string
	received time.Time
}

// arrived records the delivery of revision rev at t, before it is applied (the overlay may
// publish it before Apply returns).
func (p *propagationLog) arrived(rev string, t time.Time) {
	p.mu.Lock()
	p.rev, p.received = rev, t
	p.mu.Unlock()
}

// published logs the stages of the first computation that covered the revision last arrived;
// other computations (an upstream's change, a referenced ConfigMap's) are not logged.
func (p *propagationLog) published(t overlay.PublishTimes) {
	p.mu.Lock()
	if p.rev == "" || t.Revision != p.rev || t.Applied.IsZero() {
		p.mu.Unlock()
		return
	}
	received := p.received
	p.rev = ""
	p.mu.Unlock()
	p.log.Info("Catalog revision published", "revision", t.Revision, "received", received,
		"decode", t.Applied.Sub(received), "coalesce", t.Coalesced.Sub(t.Applied),
		"compute", t.Computed.Sub(t.Coalesced), "publish", t.Published.Sub(t.Computed),
		"total", t.Published.Sub(received))
}
