package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// DefaultItemSettle is how long the first status of an item's generation waits for the server's
// replicas to report the catalog revision that publishes it. A new or edited item is published
// at once, and its replicas report within moments (a running sidecar applies a new revision in
// milliseconds; a starting one before its pod turns Ready): writing the item's status then, once,
// says Ready with the observed tool digest in one patch, where writing at once says Ready (or
// Reconciling) first and the digest (or Ready) a moment later. At 100 servers of 12 items that
// was about 10 of the 40 writes per server of a cold start (docs/performance.md, "Fleet scale").
// Until the write the item's status still describes its previous generation (observedGeneration
// lags, which kstatus reads as in progress), or nothing for a new item: never a state it is not
// in. Past the wait the status is written as it stands, and again when the replicas report.
// While no replica of the server is ready yet the wait is startingSettleFactor times longer.
const DefaultItemSettle = 5 * time.Second

// startingSettleFactor stretches the wait while no replica of the server is ready yet (its pods
// start: scheduling, image pulls, the sidecar's first catalog), which takes longer than a running
// sidecar's report: a fleet created at once waited more than 5 s for its pods on a busy control
// plane, and its items were written twice.
const startingSettleFactor = 6

// settleWait is how long an item's first status waits for the replicas: wait, or
// startingSettleFactor times it while no replica is ready yet.
func settleWait(s *scope, wait time.Duration) time.Duration {
	if len(s.reports.Ready) == 0 {
		return startingSettleFactor * wait
	}
	return wait
}

// awaitingReplicas reports whether the server's replicas are still to report the current catalog
// revision, and to compare its tools with their MCP server: replicas are wanted (not scaled to
// zero), the catalog could be stored, and no ready replica rejected it, but not every ready
// replica has checked it yet, or none is ready yet.
func awaitingReplicas(s *scope) bool {
	if !s.observed || s.tooLarge || s.revision == "" || (!s.workload.External && s.workload.Replicas == 0) {
		return false
	}
	r := s.reports
	for _, pr := range r.Ready {
		if pr.parsed() && pr.Report.RejectedRevision == s.revision {
			return false
		}
	}
	return len(r.Ready) == 0 || len(r.Checked) < len(r.Ready)
}

// settles reports whether an item's decided status is one its replicas' next reports change:
// the first status of its generation, accepted and published, and not stalled (Ready, or
// Reconciling while the replicas catch up). Refusals and waits for a person are written at once.
func settles(u itemStatusUpdate) bool {
	return u.object.GetCatalogItemStatus().ObservedGeneration != u.object.GetGeneration() &&
		u.accepted.Status == metav1.ConditionTrue && u.published.Status == metav1.ConditionTrue && u.stalled == nil
}

// settleClock remembers when each item's generation was first held back (settles): the wait
// counts from then, not from the item's creation, since a manager behind a burst of creates may
// first see an item long after it was created. mu guards the fields.
type settleClock struct {
	mu     sync.Mutex
	seen   map[types.UID]heldSince
	pruned time.Time
}

type heldSince struct {
	generation int64
	at         time.Time
}

// settleForget is how long an entry outlives its wait before it is pruned (an item deleted while
// held back is never written, so never forgotten otherwise).
const settleForget = time.Minute

// left returns how much of the wait the item has left at now (<= 0: none), starting the wait on
// the first call for its generation.
func (c *settleClock) left(obj mcpv1alpha1.CatalogItem, now time.Time, wait time.Duration) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.UID]heldSince{}
	}
	if now.Sub(c.pruned) > settleForget {
		for uid, h := range c.seen {
			if now.Sub(h.at) > startingSettleFactor*wait+settleForget {
				delete(c.seen, uid)
			}
		}
		c.pruned = now
	}
	h, ok := c.seen[obj.GetUID()]
	if !ok || h.generation != obj.GetGeneration() {
		h = heldSince{generation: obj.GetGeneration(), at: now}
		c.seen[obj.GetUID()] = h
	}
	return h.at.Add(wait).Sub(now)
}

// forget drops the item's entry: its status is written.
func (c *settleClock) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, uid)
}
