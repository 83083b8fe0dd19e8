package controllers

import (
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// settleClock remembers when each item's generation, or each server's catalog revision, was
// first held back (settles, holdsServerStatus): the wait counts from then, not from the object's
// creation or edit, since a manager behind a burst of creates may first see an item long after
// it was created. mu guards the fields.
type settleClock struct {
	mu     sync.Mutex
	seen   map[types.UID]heldSince
	pruned time.Time
}

// heldSince is what is held back of an object (an item's generation, a server's catalog
// revision) and since when.
type heldSince struct {
	version string
	at      time.Time
}

// settleForget is how long an entry outlives its wait before it is pruned (an item deleted while
// held back is never written, so never forgotten otherwise).
const settleForget = time.Minute

// left returns how much of the wait the item has left at now (<= 0: none), starting the wait on
// the first call for its generation.
func (c *settleClock) left(obj mcpv1alpha1.CatalogItem, now time.Time, wait time.Duration) time.Duration {
	return c.hold(obj.GetUID(), strconv.FormatInt(obj.GetGeneration(), 10), now, wait)
}

// hold returns how much of the wait the object has left at now (<= 0: none), starting the wait
// on the first call for its version.
func (c *settleClock) hold(uid types.UID, version string, now time.Time, wait time.Duration) time.Duration {
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
	h, ok := c.seen[uid]
	if !ok || h.version != version {
		h = heldSince{version: version, at: now}
		c.seen[uid] = h
	}
	return h.at.Add(wait).Sub(now)
}

// forget drops the object's entry: its status is written.
func (c *settleClock) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, uid)
}

// holdsServerStatus reports whether the server's newly decided status (after) may wait for the
// replicas' reports instead of being written: the server was Ready, its catalog has a new
// revision (a catalog edit: an MCPTool added, edited or removed) that its ready replicas have
// still to report and check against their MCP server (awaitingReplicas), and the only reason it
// is not Ready now, if it is not, is that revision (PropagationPending). A running sidecar
// applies, checks and reports a new revision within moments; written at once, every catalog
// edit would write the server two or three times (Ready=False PropagationPending, Ready=True
// with ToolsServed unknown, then with the tools checked) and record its return to Ready, on
// every server a fleet-wide edit touches. Until the write the status still describes the revision before
// (status.catalogRevision, catalogUpToDateReplicas), which every ready replica served: never a
// state the server is not in. The wait is counted from the revision the status was written
// with, so edits that follow each other closer than the wait do not hold the status for longer
// than one wait. A failed phase, a rollout, a new pod or anything else that makes
// the server not Ready is written at once.
func holdsServerStatus(s *scope, reconcileErr error, before, after mcpv1alpha1.MCPServerStatus) bool {
	if reconcileErr != nil || len(s.reports.Ready) == 0 || !awaitingReplicas(s) || before.CatalogRevision == s.revision {
		return false
	}
	was := meta.FindStatusCondition(before.Conditions, string(mcpv1alpha1.ConditionReady))
	now := meta.FindStatusCondition(after.Conditions, string(mcpv1alpha1.ConditionReady))
	return was != nil && was.Status == metav1.ConditionTrue && now != nil &&
		(now.Status == metav1.ConditionTrue || now.Reason == string(mcpv1alpha1.ReasonPropagationPending))
}

// progressSettle is the least time between two writes of a server's status while it only makes
// progress toward Ready (holdsProgress).
const progressSettle = time.Second

// holdsProgress reports whether the server's newly decided status (after) may wait instead of
// being written: the status of this generation was written (kstatus reads the first write's
// observedGeneration and Reconciling at once), and both it and after say Reconciling with
// nothing for a person to act on (every reason Normal), so after only tells of more progress
// toward Ready (the Deployment controller observed the spec, a replica became ready, an item
// joined the catalog). A new server passes through four or five such states in under a second,
// each one status write; held, they are written at most once per progressSettle, and the state
// the status then describes is at most that old. Ready, a Warning reason, a failed phase and a
// new generation are written at once.
func holdsProgress(s *scope, reconcileErr error, before, after mcpv1alpha1.MCPServerStatus) bool {
	return reconcileErr == nil && before.ObservedGeneration == s.server.Generation &&
		after.ObservedGeneration == before.ObservedGeneration && progressing(before) && progressing(after)
}

// progressing reports whether a status says Reconciling and nothing a person acts on.
func progressing(st mcpv1alpha1.MCPServerStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, string(mcpv1alpha1.ConditionReconciling)) &&
		!slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool { return eventType(c.Reason) != corev1.EventTypeNormal })
}
