package controllers

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TestAwaitingReplicas: an item's first status waits only while the server's replicas are still
// to report (and check) the current revision; not for a server scaled to zero, a catalog too
// large to store, or a revision a replica rejected.
func TestAwaitingReplicas(t *testing.T) {
	checked := func(pod, rev string) podReport {
		return podReport{Pod: pod, Report: catalog.Report{Revision: rev, ToolsChecked: true}}
	}
	applied := func(pod, rev string) podReport { return podReport{Pod: pod, Report: catalog.Report{Revision: rev}} }
	for _, tc := range []struct {
		name string
		s    scope
		want bool
	}{
		{"no ready replica yet", scope{observed: true, revision: "r1", workload: workload{Replicas: 1}}, true},
		{"ready, not reported", scope{observed: true, revision: "r1", workload: workload{Replicas: 1},
			reports: reports{Ready: []podReport{{Pod: "a", Missing: true}}}}, true},
		{"applied, tools not checked yet", scope{observed: true, revision: "r1", workload: workload{Replicas: 1},
			reports: reports{Ready: []podReport{applied("a", "r1")}}}, true},
		{"one of two checked", scope{observed: true, revision: "r1", workload: workload{Replicas: 2},
			reports: reports{Ready: []podReport{checked("a", "r1"), applied("b", "r0")}, Checked: []podReport{checked("a", "r1")}}}, true},
		{"every ready replica checked", scope{observed: true, revision: "r1", workload: workload{Replicas: 2},
			reports: reports{Ready: []podReport{checked("a", "r1"), checked("b", "r1")}, Checked: []podReport{checked("a", "r1"), checked("b", "r1")}}}, false},
		{"rejected", scope{observed: true, revision: "r1", workload: workload{Replicas: 1},
			reports: reports{propagation: propagation{Revision: "r1"}, Ready: []podReport{{Pod: "a", Report: catalog.Report{Revision: "r0", RejectedRevision: "r1"}}}}}, false},
		{"scaled to zero", scope{observed: true, revision: "r1", workload: workload{Replicas: 0}}, false},
		{"external without pods", scope{observed: true, revision: "r1", workload: workload{External: true}}, true},
		{"catalog too large", scope{observed: true, revision: "r0", tooLarge: true, workload: workload{Replicas: 1}}, false},
		{"replicas not observed", scope{revision: "r1", workload: workload{Replicas: 1}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := awaitingReplicas(&tc.s); got != tc.want {
				t.Fatalf("awaitingReplicas = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestSettles: what waits is the first status of a generation that is accepted, published and
// not stalled; a written generation and every refusal are written at once.
func TestSettles(t *testing.T) {
	accepted := condition(mcpv1alpha1.ConditionAccepted, true, mcpv1alpha1.ReasonAccepted, "")
	published := condition(mcpv1alpha1.ConditionPublished, true, mcpv1alpha1.ReasonPublished, "")
	tool := func(generation, observed int64) *mcpv1alpha1.MCPTool {
		t := &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
		t.Status.ObservedGeneration = observed
		return t
	}
	stalled := condition(mcpv1alpha1.ConditionStalled, true, mcpv1alpha1.ReasonToolWithheld, "")
	for _, tc := range []struct {
		name string
		u    itemStatusUpdate
		want bool
	}{
		{"new", itemStatusUpdate{object: tool(1, 0), accepted: accepted, published: published}, true},
		{"edited", itemStatusUpdate{object: tool(3, 2), accepted: accepted, published: published}, true},
		{"generation written", itemStatusUpdate{object: tool(2, 2), accepted: accepted, published: published}, false},
		{"not accepted", itemStatusUpdate{object: tool(1, 0), accepted: condition(mcpv1alpha1.ConditionAccepted, false, mcpv1alpha1.ReasonNameConflict, ""),
			published: condition(mcpv1alpha1.ConditionPublished, false, mcpv1alpha1.ReasonNotAccepted, "")}, false},
		{"not published", itemStatusUpdate{object: tool(1, 0), accepted: accepted,
			published: condition(mcpv1alpha1.ConditionPublished, false, mcpv1alpha1.ReasonSourceNotFound, "")}, false},
		{"stalled", itemStatusUpdate{object: tool(1, 0), accepted: accepted, published: published, stalled: &stalled}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settles(tc.u); got != tc.want {
				t.Fatalf("settles = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestSettleClock: a wait counts from when the item's generation was first held, not from its
// creation (a manager behind a burst of creates sees items late); a new generation starts a new
// wait, and a forgotten item starts over. While no replica is ready the wait is longer.
func TestSettleClock(t *testing.T) {
	now := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	const wait = 5 * time.Second
	item := func(uid string, generation int64, created time.Time) *mcpv1alpha1.MCPTool {
		return &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Generation: generation, CreationTimestamp: metav1.NewTime(created)}}
	}
	var c settleClock
	if left := c.left(item("late", 1, now.Add(-time.Minute)), now, wait); left != wait {
		t.Errorf("an item created a minute ago, first held now, has %v left, want %v", left, wait)
	}
	edited := item("edited", 4, now.Add(-time.Hour))
	if left := c.left(edited, now, wait); left != wait {
		t.Errorf("an edit first held now has %v left, want %v", left, wait)
	}
	if left := c.left(edited, now.Add(4*time.Second), wait); left != time.Second {
		t.Errorf("the same edit 4 s later has %v left, want 1s", left)
	}
	edited.Generation = 5
	if left := c.left(edited, now.Add(4*time.Second), wait); left != wait {
		t.Errorf("a further edit has %v left, want a new wait of %v", left, wait)
	}
	c.forget(edited.UID)
	if left := c.left(edited, now.Add(6*time.Second), wait); left != wait {
		t.Errorf("a forgotten item has %v left, want a new wait of %v", left, wait)
	}
	if left := c.left(edited, now.Add(wait+6*time.Second), wait); left > 0 {
		t.Errorf("past the wait %v is left", left)
	}
	starting := scope{observed: true, revision: "r1", workload: workload{Replicas: 1}}
	running := scope{observed: true, revision: "r1", workload: workload{Replicas: 1}, reports: reports{Ready: []podReport{{Pod: "a", Missing: true}}}}
	if got := settleWait(&starting, wait); got != startingSettleFactor*wait {
		t.Errorf("while no replica is ready the wait is %v, want %v", got, startingSettleFactor*wait)
	}
	if got := settleWait(&running, wait); got != wait {
		t.Errorf("with a ready replica the wait is %v, want %v", got, wait)
	}
}

// TestHoldsServerStatus: a Ready server's status waits for its replicas' reports of a new
// catalog revision; a first status, an unchanged revision, a failure, a server with no ready
// replica and any other reason not to be Ready are written at once.
func TestHoldsServerStatus(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) mcpv1alpha1.MCPServerStatus {
		return mcpv1alpha1.MCPServerStatus{CatalogRevision: "r0", Conditions: []metav1.Condition{{Type: string(mcpv1alpha1.ConditionReady), Status: status, Reason: string(reason)}}}
	}
	wasReady := ready(metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
	pending := ready(metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
	applied := podReport{Pod: "a", Report: catalog.Report{Revision: "r1"}}
	edited := scope{observed: true, revision: "r1", workload: workload{Replicas: 1}, reports: reports{Ready: []podReport{{Pod: "a", Report: catalog.Report{Revision: "r0", ToolsChecked: true}}}}}
	appliedNotChecked := edited
	appliedNotChecked.reports = reports{Ready: []podReport{applied}}
	checked := edited
	checked.reports = reports{Ready: []podReport{{Pod: "a", Report: catalog.Report{Revision: "r1", ToolsChecked: true}}}}
	checked.reports.Checked = checked.reports.Ready
	noReplica := edited
	noReplica.reports = reports{}
	unchanged := edited
	unchanged.revision = "r0"
	for _, tc := range []struct {
		name          string
		s             scope
		err           error
		before, after mcpv1alpha1.MCPServerStatus
		want          bool
	}{
		{"an edit, not reported yet", edited, nil, wasReady, pending, true},
		{"an edit, applied but the tools not checked yet", appliedNotChecked, nil, wasReady, wasReady, true},
		{"an edit, checked by every ready replica", checked, nil, wasReady, wasReady, false},
		{"the first status", edited, nil, mcpv1alpha1.MCPServerStatus{}, pending, false},
		{"not Ready before", edited, nil, pending, pending, false},
		{"the revision the status was written with", unchanged, nil, wasReady, pending, false},
		{"no ready replica", noReplica, nil, wasReady, ready(metav1.ConditionFalse, mcpv1alpha1.ReasonNoReadyReplicas), false},
		{"rolling out", edited, nil, wasReady, ready(metav1.ConditionFalse, mcpv1alpha1.ReasonRollingOut), false},
		{"a failed phase", edited, errItemChanged, wasReady, ready(metav1.ConditionFalse, mcpv1alpha1.ReasonReconcileFailed), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdsServerStatus(&tc.s, tc.err, tc.before, tc.after); got != tc.want {
				t.Fatalf("holdsServerStatus = %t, want %t", got, tc.want)
			}
		})
	}
}

// TestHoldsProgress: once a generation's status is written, a status that only tells of more
// progress toward Ready waits (at most progressSettle); the first status of a generation, Ready,
// a Warning reason anywhere and a failed phase are written at once.
func TestHoldsProgress(t *testing.T) {
	status := func(gen int64, conds ...metav1.Condition) mcpv1alpha1.MCPServerStatus {
		return mcpv1alpha1.MCPServerStatus{ObservedGeneration: gen, Conditions: conds}
	}
	cond := func(typ mcpv1alpha1.ConditionType, st metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: st, Reason: string(reason)}
	}
	reconciling := func(reason mcpv1alpha1.ConditionReason) metav1.Condition {
		return cond(mcpv1alpha1.ConditionReconciling, metav1.ConditionTrue, reason)
	}
	notReady := func(reason mcpv1alpha1.ConditionReason) metav1.Condition {
		return cond(mcpv1alpha1.ConditionReady, metav1.ConditionFalse, reason)
	}
	rollout := status(3, notReady(mcpv1alpha1.ReasonDeploymentProgressing), reconciling(mcpv1alpha1.ReasonDeploymentProgressing))
	noReplica := status(3, notReady(mcpv1alpha1.ReasonNoReadyReplicas), reconciling(mcpv1alpha1.ReasonNoReadyReplicas))
	pending := status(3, notReady(mcpv1alpha1.ReasonPropagationPending), reconciling(mcpv1alpha1.ReasonPropagationPending))
	ready := status(3, cond(mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady))
	unavailable := status(3, notReady(mcpv1alpha1.ReasonDeploymentUnavailable), reconciling(mcpv1alpha1.ReasonDeploymentUnavailable))
	stalled := status(3, notReady(mcpv1alpha1.ReasonProgressDeadlineExceeded),
		cond(mcpv1alpha1.ConditionStalled, metav1.ConditionTrue, mcpv1alpha1.ReasonProgressDeadlineExceeded))
	warnedBeside := pending
	warnedBeside.Conditions = append(slices.Clone(pending.Conditions), cond(mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsKeyMissing))
	s := scope{server: &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Generation: 3}}}
	for _, tc := range []struct {
		name          string
		err           error
		before, after mcpv1alpha1.MCPServerStatus
		want          bool
	}{
		{"the rollout observed, no replica ready yet", nil, rollout, noReplica, true},
		{"a replica ready, its report pending", nil, noReplica, pending, true},
		{"the same progress", nil, pending, pending, true},
		{"Ready", nil, pending, ready, false},
		{"the first status", nil, mcpv1alpha1.MCPServerStatus{}, rollout, false},
		{"the first status of a new generation", nil, status(2, rollout.Conditions...), rollout, false},
		{"a Warning reason", nil, rollout, unavailable, false},
		{"stalled", nil, rollout, stalled, false},
		{"a Warning in another condition", nil, pending, warnedBeside, false},
		{"from a Warning back to progress", nil, unavailable, rollout, false},
		{"a failed phase", errItemChanged, rollout, noReplica, false},
		{"from Ready", nil, ready, pending, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdsProgress(&s, tc.err, tc.before, tc.after); got != tc.want {
				t.Fatalf("holdsProgress = %t, want %t", got, tc.want)
			}
		})
	}
}
