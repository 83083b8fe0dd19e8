package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// Pure functions that decide the status of the MCPServer and of its tools, resources and
// prompts from what the phases observed (the scope). patchStatus and
// writeItemStatusAndPruneReports write what they decide.

// serverStatus decides the MCPServer's status: the status it had, updated with what the phases
// computed and observed, and with the failure of a phase, if any.
func serverStatus(s *scope, reconcileErr error) mcpv1alpha1.MCPServerStatus {
	server := s.server
	st := *s.before.Status.DeepCopy()
	gen := server.Generation
	set := func(c metav1.Condition) {
		c.ObservedGeneration = gen
		meta.SetStatusCondition(&st.Conditions, c)
	}
	if s.catalog != nil {
		st.CatalogRevision = s.revision
		st.Tools, st.Resources, st.Prompts = 0, int32(len(s.catalog.Resources)), int32(len(s.catalog.Prompts))
		for _, t := range s.catalog.Tools {
			if !t.Disabled {
				st.Tools++
			}
		}
		st.Audit = auditStatus(s.catalog.Audit)
	}
	if c := s.credentials; c != nil {
		set(condition(mcpv1alpha1.ConditionUpstreamCredentials, c.reason == mcpv1alpha1.ReasonCredentialsResolved, c.reason, c.message))
	} else if s.catalog != nil {
		meta.RemoveStatusCondition(&st.Conditions, string(mcpv1alpha1.ConditionUpstreamCredentials))
	}
	st.URL = urlFor(server, s.names)
	st.Selector = labels.SelectorFromSet(inject.SelectorFor(server)).String()
	var ready, propagated *metav1.Condition
	if s.observed {
		available := availableCondition(s.workload)
		p, upToDate := propagationCondition(s.reports)
		r := readyCondition(available, p)
		ready, propagated = &r, &p
		set(available)
		set(p)
		set(toolsServedCondition(s.reports))
		set(verifiedCondition(s.reports))
		if c, ok := toolsDriftedCondition(server, s.resolution.accepted.Tools, toolPins(s.resolution.accepted.Tools, s.reports), s.reports); ok {
			set(keepKnown(meta.FindStatusCondition(st.Conditions, string(mcpv1alpha1.ConditionToolsDrifted)), c))
		} else {
			meta.RemoveStatusCondition(&st.Conditions, string(mcpv1alpha1.ConditionToolsDrifted))
		}
		st.CatalogUpToDateReplicas = upToDate
		if up := upstreamStatus(s.reports); up != nil {
			st.Upstream = up
		}
		if s.workload.External {
			sidecars, stale := sidecarsCondition(s.cfg, s.pods)
			set(sidecars)
			st.StaleSidecarReplicas = stale
		} else {
			meta.RemoveStatusCondition(&st.Conditions, string(mcpv1alpha1.ConditionSidecarsUpToDate))
			st.StaleSidecarReplicas = 0
		}
		if d := s.workload.Deployment; d != nil {
			st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas
		} else {
			st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = int32(len(s.pods)), s.workload.ReadyPods, 0
		}
	}
	if reconcileErr != nil {
		f := failureCondition(reconcileErr)
		ready = &f
	}
	if ready == nil {
		// Deleted before anything was observed: the status stays as it was.
		return st
	}
	set(*ready)
	stalled, reconciling := progressConditions(*ready, propagated, s.workload, reconcileErr)
	setOrRemove(&st.Conditions, mcpv1alpha1.ConditionStalled, stalled, gen)
	setOrRemove(&st.Conditions, mcpv1alpha1.ConditionReconciling, reconciling, gen)
	// The status describes this generation on the failure path too: a GitOps tool that sees an
	// older observedGeneration waits (kstatus InProgress) instead of reading Stalled.
	st.ObservedGeneration = gen
	return st
}

// setOrRemove sets an abnormal-true condition (Stalled, Reconciling) of the given generation,
// or removes it when nil: it is absent while everything is normal.
func setOrRemove(conds *[]metav1.Condition, typ mcpv1alpha1.ConditionType, c *metav1.Condition, gen int64) {
	if c == nil {
		meta.RemoveStatusCondition(conds, string(typ))
		return
	}
	c.ObservedGeneration = gen
	meta.SetStatusCondition(conds, *c)
}

// progressConditions decides the MCPServer's Stalled and Reconciling (nil: absent, which is
// normal) from Ready, CatalogPropagated (nil when the phases failed before observing), the
// workload and the failure of a phase. Stalled wins: the controller cannot progress without a
// change by a person. Otherwise Reconciling is True while Ready is not, or while a rollout
// still replaces old pods behind a Ready server.
func progressConditions(ready metav1.Condition, propagated *metav1.Condition, w workload, reconcileErr error) (stalled, reconciling *metav1.Condition) {
	on := func(typ mcpv1alpha1.ConditionType, reason mcpv1alpha1.ConditionReason, message string) *metav1.Condition {
		c := condition(typ, true, reason, message)
		return &c
	}
	switch {
	case reconcileErr != nil && needsAChange(reconcileErr):
		return on(mcpv1alpha1.ConditionStalled, mcpv1alpha1.ConditionReason(ready.Reason), ready.Message), nil
	case propagated != nil && (propagated.Reason == string(mcpv1alpha1.ReasonCatalogTooLarge) || propagated.Reason == string(mcpv1alpha1.ReasonCatalogRejected)):
		return on(mcpv1alpha1.ConditionStalled, mcpv1alpha1.ConditionReason(propagated.Reason), propagated.Message), nil
	}
	if msg := deadlineExceeded(w); msg != "" && ready.Status != metav1.ConditionTrue {
		return on(mcpv1alpha1.ConditionStalled, mcpv1alpha1.ReasonProgressDeadlineExceeded, msg), nil
	}
	if ready.Status != metav1.ConditionTrue {
		return nil, on(mcpv1alpha1.ConditionReconciling, mcpv1alpha1.ConditionReason(ready.Reason), ready.Message)
	}
	if msg := rollingOut(w); msg != "" {
		return nil, on(mcpv1alpha1.ConditionReconciling, mcpv1alpha1.ReasonRollingOut, msg)
	}
	return nil, nil
}

// needsAChange reports whether a failed reconcile cannot succeed by retrying alone: invalid
// input (a terminal error), or a child the API server refused as invalid, malformed, too
// large or forbidden (RBAC, a ResourceQuota, an admission policy). Conflicts and an overloaded
// or unreachable API server pass by themselves.
func needsAChange(err error) bool {
	var r *refusal
	if errors.Is(err, reconcile.TerminalError(nil)) || errors.As(err, &r) {
		return true
	}
	refused := func(err error) bool {
		return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
			apierrors.IsRequestEntityTooLargeError(err)
	}
	var children childErrors
	if errors.As(err, &children) && slices.ContainsFunc(children, func(c childError) bool { return refused(c.err) }) {
		return true
	}
	return refused(err)
}

// deadlineExceeded is the Deployment's message when its rollout exceeded
// spec.progressDeadlineSeconds (Progressing=False, ProgressDeadlineExceeded), else "".
func deadlineExceeded(w workload) string {
	if w.External || w.Deployment == nil || w.Deployment.Status.ObservedGeneration < w.Deployment.Generation {
		return ""
	}
	p := deploymentCondition(w.Deployment, appsv1.DeploymentProgressing)
	if p == nil || p.Status != corev1.ConditionFalse || p.Reason != "ProgressDeadlineExceeded" {
		return ""
	}
	return fmt.Sprintf("the Deployment made no progress within its deadline (%s); check the pods' events and the MCP server container's logs, then fix the MCPServer", p.Message)
}

// rollingOut says what a Deployment whose rollout is not complete still does, or "" when it is
// complete: every wanted replica runs the current pod template and is available, and no old
// replica is left (the test kubectl rollout status and kstatus make).
func rollingOut(w workload) string {
	d := w.Deployment
	if w.External || d == nil {
		return ""
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return "waiting for the Deployment controller to observe the new spec"
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("%d of %d replicas run the current pod template", st.UpdatedReplicas, want)
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas are still being replaced", st.Replicas-st.UpdatedReplicas)
	case st.AvailableReplicas < st.UpdatedReplicas:
		return fmt.Sprintf("%d of %d updated replicas are available", st.AvailableReplicas, st.UpdatedReplicas)
	}
	return ""
}

// itemStatusUpdate is the decided status of one tool, resource or prompt.
type itemStatusUpdate struct {
	object                     mcpv1alpha1.CatalogItem
	accepted, published, ready metav1.Condition
	// stalled and reconciling are nil when absent (normal).
	stalled, reconciling *metav1.Condition
	revision             string
	// pin is set for accepted MCPTools once the replicas were observed.
	pin *toolPin
}

// conditions returns the conditions to set, and the abnormal-true types to remove.
func (u itemStatusUpdate) conditions() (set []metav1.Condition, remove []string) {
	set = []metav1.Condition{u.accepted, u.published, u.ready}
	for _, c := range []struct {
		typ  string
		cond *metav1.Condition
	}{{string(mcpv1alpha1.ConditionStalled), u.stalled}, {string(mcpv1alpha1.ConditionReconciling), u.reconciling}} {
		if c.cond != nil {
			set = append(set, *c.cond)
		} else {
			remove = append(remove, c.typ)
		}
	}
	return set, remove
}

// itemStatuses decides Accepted, Published, Ready, Stalled, Reconciling and catalogRevision of
// every tool, resource and prompt of the server. Objects being deleted (no verdict) are left
// out.
func itemStatuses(s *scope) []itemStatusUpdate {
	var propagated *metav1.Condition
	if s.observed {
		p, _ := propagationCondition(s.reports)
		propagated = &p
	}
	var out []itemStatusUpdate
	var pins map[string]toolPin
	var withheld map[string]bool
	if s.observed {
		pins = toolPins(s.resolution.accepted.Tools, s.reports)
		withheld = withheldTools(s.reports)
	}
	for _, obj := range s.items.objects() {
		v, ok := s.resolution.verdicts[keyOf(obj)]
		if !ok {
			continue
		}
		accepted := metav1.Condition{Type: string(mcpv1alpha1.ConditionAccepted), Status: metav1.ConditionFalse, Reason: string(v.Reason), Message: v.Message}
		if v.Accepted {
			accepted.Status = metav1.ConditionTrue
		}
		var src sourceProblem
		if _, isResource := obj.(*mcpv1alpha1.MCPResource); isResource && v.Accepted {
			src = s.sourceProblems[obj.GetName()]
		}
		st := obj.GetCatalogItemStatus()
		in := itemInputs{accepted: accepted, current: s.revision, propagated: propagated, wasInFlight: inFlight(st)}
		in.published, in.revision = publishedCondition(v, src, s.tooLarge, s.revision, s.tooLargeMessage)
		in.published, in.revision = publishedSince(st, obj.GetGeneration(), in.published, in.revision)
		if src.waits() && graceLeft(obj, s.now, s.grace) > 0 {
			in.appearing = s.grace
		}
		var observedPin *toolPin
		if t, isTool := obj.(*mcpv1alpha1.MCPTool); isTool && s.observed {
			pin, known := pins[obj.GetName()]
			isWithheld := withheld[t.Spec.Name]
			switch {
			case !v.Accepted:
				pin, known = toolPin{}, true // cleared: not part of the server
			case !known:
				// Not reported yet (just after a catalog change): the last observed state stays,
				// withholding included, so Ready does not flip on every catalog edit.
				pin = toolPin{Observed: t.Status.ObservedUpstreamDigest, State: t.Status.Pin}
				isWithheld = wasWithheld(t)
			}
			if known {
				observedPin = &pin
			}
			if toolPinningOf(s.server) == mcpv1alpha1.ToolPinningEnforce && t.Spec.State != mcpv1alpha1.ToolDisabled &&
				(pin.State == mcpv1alpha1.PinDrifted || isWithheld) {
				in.withheld = &pin
			}
		}
		u := decideItemStatus(obj, in)
		u.pin = observedPin
		out = append(out, u)
	}
	return out
}

// itemInputs is everything one item's status is decided from (decideItemStatus).
type itemInputs struct {
	// accepted and published are the item's Accepted and Published conditions.
	accepted, published metav1.Condition
	// revision is the catalog revision the item is published since (publishedSince); current is
	// the server's current one.
	revision, current string
	// propagated is the server's CatalogPropagated about the current revision: nil when the
	// replicas were not observed, or there is no server.
	propagated *metav1.Condition
	// wasInFlight: the item's status said it waits for the replicas to serve its change
	// (inFlight).
	wasInFlight bool
	// appearing, when not zero, is the appear grace the item is still in while what it misses
	// (its server, a resource's ConfigMap or Secret) may be on its way: Reconciling instead of
	// Stalled, the message saying how long it is waited for.
	appearing time.Duration
	// withheld is the pin of an MCPTool the sidecars withhold under toolPinning Enforce (it
	// drifted, or it has no pin under toolPolicy All); nil otherwise.
	withheld *toolPin
}

// decideItemStatus decides an item's Ready, Stalled and Reconciling once, from its inputs, by
// the first rule that holds:
//
//  1. not Accepted, then 2. not Published: Stalled with that condition's reason (a server that
//     does not exist, a name conflict, an invalid spec, a missing resource source, a catalog too
//     large), or Reconciling while in.appearing;
//  3. the revision that concerns the item was rejected by the sidecars: Stalled CatalogRejected;
//  4. the sidecars withhold the tool (in.withheld): Stalled ToolWithheld;
//  5. ready replicas still serve an older revision than the one that concerns the item:
//     Reconciling PropagationPending;
//  6. otherwise Ready.
//
// The server's CatalogPropagated concerns the item only while it is in flight: the current
// revision added or changed it (revision is current), or it was already waiting (wasInFlight)
// for a revision that a later one replaced before every replica served it. An item whose change
// every ready replica served is served the same by replicas of later revisions, so another
// item's edit neither holds it back nor writes its status. A server without ready replicas
// (scaled to zero, or not yet started) holds nothing back: its replicas start with the current
// revision, and its own status tells.
func decideItemStatus(obj mcpv1alpha1.CatalogItem, in itemInputs) itemStatusUpdate {
	u := itemStatusUpdate{object: obj, accepted: in.accepted, published: in.published, revision: in.revision}
	on := func(typ mcpv1alpha1.ConditionType, c metav1.Condition) *metav1.Condition {
		out := condition(typ, true, mcpv1alpha1.ConditionReason(c.Reason), c.Message)
		return &out
	}
	notReady := func(c metav1.Condition) metav1.Condition {
		return condition(mcpv1alpha1.ConditionReady, false, mcpv1alpha1.ConditionReason(c.Reason), c.Message)
	}
	stall := func(c metav1.Condition) {
		u.ready, u.stalled = notReady(c), on(mcpv1alpha1.ConditionStalled, c)
	}
	blocked := func(c metav1.Condition) {
		if in.appearing == 0 {
			stall(c)
			return
		}
		c.Message = fmt.Sprintf("%s (waited for up to %s after creation, in case it is being applied together with this object)", c.Message, in.appearing)
		u.ready, u.reconciling = notReady(c), on(mcpv1alpha1.ConditionReconciling, c)
	}
	concerned := in.propagated != nil && (in.revision == in.current || in.wasInFlight)
	switch {
	case in.accepted.Status != metav1.ConditionTrue:
		blocked(in.accepted)
	case in.published.Status != metav1.ConditionTrue:
		blocked(in.published)
	case concerned && in.propagated.Reason == string(mcpv1alpha1.ReasonCatalogRejected):
		stall(*in.propagated)
	case in.withheld != nil:
		stall(withheldCondition(*in.withheld))
	case concerned && in.propagated.Reason == string(mcpv1alpha1.ReasonPropagationPending):
		// The message names nothing that changes with later revisions or reports, so an item
		// in flight is written when it starts and when it ends to wait, not in between.
		waiting := condition(mcpv1alpha1.ConditionReconciling, true, mcpv1alpha1.ConditionReason(in.propagated.Reason),
			"published since catalog revision "+in.revision+"; waiting for every ready replica of the server to serve it (the server's CatalogPropagated counts them)")
		u.ready, u.reconciling = notReady(waiting), &waiting
	default:
		u.ready = condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonReady,
			"accepted, and published since catalog revision "+in.revision+", which the server's ready replicas serve")
	}
	return u
}

// publishedCondition decides Published for one accepted-or-not object, and the catalog revision
// it is part of.
func publishedCondition(v verdict, src sourceProblem, tooLarge bool, revision, tooLargeMessage string) (metav1.Condition, string) {
	c := metav1.Condition{Type: string(mcpv1alpha1.ConditionPublished), Status: metav1.ConditionFalse}
	switch {
	case !v.Accepted:
		c.Reason, c.Message = string(mcpv1alpha1.ReasonNotAccepted), "not part of the catalog: "+string(v.Reason)
	case tooLarge:
		c.Reason, c.Message = string(mcpv1alpha1.ReasonCatalogTooLarge), tooLargeMessage
	case src.reason != "" && src.inCatalog:
		// The resource is in the catalog, but reading it fails until the key exists.
		c.Reason, c.Message = string(src.reason), src.message
		return c, revision
	case src.reason != "":
		// Left out of the catalog: the sidecar may not read the source.
		c.Reason, c.Message = string(src.reason), src.message
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, string(mcpv1alpha1.ReasonPublished), publishedMessage(revision)
		return c, revision
	}
	return c, ""
}

func publishedMessage(revision string) string {
	return "part of the server's catalog since revision " + revision
}

// publishedSince keeps the revision an object was first published in, for as long as it stays
// published, unchanged, in the same way: an object is part of every later revision of its
// server's catalog too (the server's status.catalogRevision names the current one), so a change
// to one tool does not rewrite the status of every other object of the server (one status write
// per changed object instead of one per object of the server, docs/performance.md). A changed
// generation, reason or status records the current revision.
func publishedSince(before *mcpv1alpha1.CatalogItemStatus, generation int64, published metav1.Condition, revision string) (metav1.Condition, string) {
	if before == nil || revision == "" || before.ObservedGeneration != generation {
		return published, revision
	}
	since := before.PublishedRevision
	if since == "" {
		// Written by a manager that knew only the deprecated catalogRevision.
		since = before.CatalogRevision //nolint:staticcheck // SA1019: read on purpose, from an older manager
	}
	if since == "" {
		return published, revision
	}
	old := meta.FindStatusCondition(before.Conditions, string(mcpv1alpha1.ConditionPublished))
	if old == nil || old.ObservedGeneration != generation || old.Status != published.Status || old.Reason != published.Reason {
		return published, revision
	}
	if published.Reason == string(mcpv1alpha1.ReasonPublished) {
		published.Message = publishedMessage(since)
	}
	return published, since
}

// graceLeft is how much of an appear grace (DefaultAppearGrace) an object has left at now
// (<= 0: none).
func graceLeft(obj client.Object, now time.Time, grace time.Duration) time.Duration {
	return obj.GetCreationTimestamp().Add(grace).Sub(now)
}

// withheldCondition is the Stalled condition of a tool the sidecars withhold under toolPinning
// Enforce: its MCP server serves a definition other than the pinned one (or, under toolPolicy
// All, it has no pin), and only a person can accept the definition.
func withheldCondition(pin toolPin) metav1.Condition {
	msg := "the sidecars withhold this tool from clients (spec.toolPinning: Enforce): "
	switch {
	case pin.State == mcpv1alpha1.PinDrifted:
		msg += fmt.Sprintf("the MCP server's definition (%s) differs from spec.upstreamDigest; review the change, then set spec.upstreamDigest to %s to accept it",
			pin.Observed, pin.Observed)
	case pin.Observed != "":
		msg += fmt.Sprintf("it has no spec.upstreamDigest; review it, then set spec.upstreamDigest to %s to pin it", pin.Observed)
	default:
		msg += "it has no spec.upstreamDigest matching the MCP server's definition; see status.observedUpstreamDigest"
	}
	return condition(mcpv1alpha1.ConditionStalled, true, mcpv1alpha1.ReasonToolWithheld, msg)
}

// wasWithheld reports whether a tool's status says the sidecars withheld it.
func wasWithheld(t *mcpv1alpha1.MCPTool) bool {
	c := meta.FindStatusCondition(t.Status.Conditions, string(mcpv1alpha1.ConditionStalled))
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(mcpv1alpha1.ReasonToolWithheld)
}

// inFlight reports whether an item's status says it waits for the replicas to serve its
// change: Reconciling, or Stalled because the sidecars rejected the revision.
func inFlight(st *mcpv1alpha1.CatalogItemStatus) bool {
	if st == nil {
		return false
	}
	if meta.IsStatusConditionTrue(st.Conditions, string(mcpv1alpha1.ConditionReconciling)) {
		return true
	}
	c := meta.FindStatusCondition(st.Conditions, string(mcpv1alpha1.ConditionStalled))
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(mcpv1alpha1.ReasonCatalogRejected)
}

// workload is what the controller observed of the pods' owner.
type workload struct {
	External bool
	// Replicas is spec.replicas (Managed).
	Replicas int32
	// Deployment is nil when it does not exist (yet).
	Deployment *appsv1.Deployment
	// ReadyPods counts pods that are Ready and not terminating.
	ReadyPods int32
}

func condition(typ mcpv1alpha1.ConditionType, ok bool, reason mcpv1alpha1.ConditionReason, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: string(typ), Status: status, Reason: string(reason), Message: message}
}

// availableCondition mirrors the Deployment's availability, or the External pods' readiness.
func availableCondition(w workload) metav1.Condition {
	const typ = mcpv1alpha1.ConditionAvailable
	switch {
	case w.External:
		return condition(typ, w.ReadyPods > 0, mcpv1alpha1.ReasonExternalWorkload,
			fmt.Sprintf("pods come from your own workload (labelled %s); %d ready", inject.LabelServer, w.ReadyPods))
	case w.Replicas == 0:
		return condition(typ, false, mcpv1alpha1.ReasonScaledToZero, "spec.replicas is 0; scale up to serve clients")
	case w.Deployment == nil:
		return condition(typ, false, mcpv1alpha1.ReasonDeploymentProgressing, "waiting for the Deployment to be created")
	}
	d := w.Deployment
	if d.Status.ObservedGeneration < d.Generation {
		return condition(typ, false, mcpv1alpha1.ReasonDeploymentProgressing, "waiting for the Deployment controller to observe the new spec")
	}
	avail := deploymentCondition(d, appsv1.DeploymentAvailable)
	if avail != nil && avail.Status == corev1.ConditionTrue {
		return condition(typ, true, mcpv1alpha1.ReasonDeploymentAvailable,
			fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, w.Replicas))
	}
	msg := fmt.Sprintf("%d of %d replicas ready", d.Status.ReadyReplicas, w.Replicas)
	if avail != nil && avail.Message != "" {
		msg += ": " + avail.Message
	}
	if p := deploymentCondition(d, appsv1.DeploymentProgressing); p != nil && p.Status == corev1.ConditionTrue {
		return condition(typ, false, mcpv1alpha1.ReasonDeploymentProgressing, msg)
	}
	return condition(typ, false, mcpv1alpha1.ReasonDeploymentUnavailable,
		msg+"; check the pods' events and the MCP server container's logs")
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// propagation is what the controller observed of the catalog's way to the sidecars.
type propagation struct {
	// Revision is the current catalog revision (status.catalogRevision).
	Revision string
	// TooLarge is set when the compiled catalog could not be stored; Revision is then the
	// previous one and TooLargeMessage says why.
	TooLarge        bool
	TooLargeMessage string
	// ReadyPods are the names of the pods that are Ready and not terminating.
	ReadyPods []string
	// Reports are the status ConfigMap's data: pod name -> catalog.Report JSON.
	Reports map[string]string
}

// podReport is the report of one ready pod, parsed once per reconcile (parseReports).
type podReport struct {
	Pod string
	// Report is the parsed report: zero when the pod has not reported (Missing) or its report
	// does not parse (Err).
	Report  catalog.Report
	Missing bool
	Err     error
}

// parsed reports whether the pod's report was read.
func (r podReport) parsed() bool { return !r.Missing && r.Err == nil }

// reports is what the status functions read of the catalog's way to the sidecars: what observe
// saw (propagation), with the report of every ready pod parsed once, and the subset of them
// that serve the current revision and compared its tools with their MCP server (Checked). Both
// are sorted by pod name.
type reports struct {
	propagation
	Ready   []podReport
	Checked []podReport
}

// parseReports parses the report of each ready pod.
func parseReports(p propagation) reports {
	out := reports{propagation: p}
	for _, pod := range slices.Sorted(slices.Values(p.ReadyPods)) {
		r := podReport{Pod: pod}
		if raw, ok := p.Reports[pod]; ok {
			r.Report, r.Err = catalog.ParseReport(raw)
		} else {
			r.Missing = true
		}
		out.Ready = append(out.Ready, r)
		if r.parsed() && p.Revision != "" && r.Report.Revision == p.Revision && r.Report.ToolsChecked {
			out.Checked = append(out.Checked, r)
		}
	}
	return out
}

// propagationCondition decides CatalogPropagated and counts the up-to-date ready replicas. A
// report that does not parse counts as not up to date, and the message names it.
func propagationCondition(p reports) (metav1.Condition, int32) {
	const typ = mcpv1alpha1.ConditionCatalogPropagated
	var upToDate int32
	var rejected, unreadable []string
	for _, pr := range p.Ready {
		if pr.Err != nil {
			unreadable = append(unreadable, fmt.Sprintf("pod %s: %v", pr.Pod, pr.Err))
		}
		if !pr.parsed() {
			continue
		}
		r := pr.Report
		if r.Revision == p.Revision {
			upToDate++
		}
		if r.RejectedRevision == p.Revision && p.Revision != "" {
			rejected = append(rejected, fmt.Sprintf("pod %s: %s", pr.Pod, r.Reason))
		}
	}
	switch {
	case p.TooLarge:
		return condition(typ, false, mcpv1alpha1.ReasonCatalogTooLarge, p.TooLargeMessage), upToDate
	case len(p.ReadyPods) == 0:
		return condition(typ, false, mcpv1alpha1.ReasonNoReadyReplicas, "no replica is ready to serve the catalog"), 0
	case len(rejected) > 0:
		slices.Sort(rejected)
		return condition(typ, false, mcpv1alpha1.ReasonCatalogRejected, fmt.Sprintf(
			"sidecars rejected catalog revision %s and keep serving their last good one; fix the objects named here: %s",
			p.Revision, strings.Join(rejected, "; "))), upToDate
	case int(upToDate) == len(p.ReadyPods):
		return condition(typ, true, mcpv1alpha1.ReasonAllReplicasUpToDate,
			fmt.Sprintf("all %d ready replicas serve catalog revision %s", upToDate, p.Revision)), upToDate
	}
	msg := fmt.Sprintf("%d of %d ready replicas serve catalog revision %s", upToDate, len(p.ReadyPods), p.Revision)
	if len(unreadable) > 0 {
		msg += "; these reports in the status ConfigMap cannot be read (a sidecar of another version?): " + strings.Join(unreadable, "; ")
	}
	return condition(typ, false, mcpv1alpha1.ReasonPropagationPending, clip(msg, maxConditionMessage)), upToDate
}

// toolsServedCondition decides ToolsServed from the reports of the ready replicas that serve the
// current revision and have checked its tools against their MCP server container: False, naming
// the tools, when any of them says the server does not list an enabled declared tool.
func toolsServedCondition(p reports) metav1.Condition {
	const typ = mcpv1alpha1.ConditionToolsServed
	reported := 0
	var missing []string
	for _, pr := range p.Checked {
		pod, r := pr.Pod, pr.Report
		reported++
		if r.MissingToolCount == 0 {
			continue
		}
		names := strings.Join(r.MissingTools, ", ")
		if more := r.MissingToolCount - len(r.MissingTools); more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		missing = append(missing, fmt.Sprintf("pod %s: %s", pod, names))
	}
	switch {
	case len(missing) > 0:
		slices.Sort(missing)
		return condition(typ, false, mcpv1alpha1.ReasonToolsMissingUpstream, fmt.Sprintf(
			"the MCP server does not list these enabled MCPTools, so clients do not see them; fix their spec.upstreamName (or spec.name), or the server's image: %s",
			strings.Join(missing, "; ")))
	case reported == 0:
		return metav1.Condition{Type: string(typ), Status: metav1.ConditionUnknown, Reason: string(mcpv1alpha1.ReasonNotYetReported),
			Message: "no ready replica has checked the tools of catalog revision " + p.Revision + " against its MCP server yet"}
	}
	return condition(typ, true, mcpv1alpha1.ReasonAllToolsServed,
		fmt.Sprintf("the MCP server of all %d reporting ready replicas lists every enabled MCPTool", reported))
}

// readyCondition summarises Available and CatalogPropagated: the first one that is not True
// gives its reason and message. A server scaled to zero is Ready (reason ScaledToZero): it runs
// what it was asked to, nothing, as a Deployment scaled to zero is current for kstatus.
func readyCondition(available, propagated metav1.Condition) metav1.Condition {
	if available.Reason == string(mcpv1alpha1.ReasonScaledToZero) {
		return condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonScaledToZero,
			"spec.replicas is 0: nothing serves clients, as asked; replicas that start serve the current catalog")
	}
	for _, c := range []metav1.Condition{available, propagated} {
		if c.Status != metav1.ConditionTrue {
			return metav1.Condition{Type: string(mcpv1alpha1.ConditionReady), Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonReady,
		"available, and every ready replica serves the current catalog")
}

// failureCondition is Ready when a phase failed: InvalidSpec for terminal errors (invalid input
// that retrying cannot fix), ReconcileFailed with the API error otherwise.
func failureCondition(err error) metav1.Condition {
	reason := mcpv1alpha1.ReasonReconcileFailed
	var r *refusal
	switch {
	case errors.As(err, &r):
		reason = mcpv1alpha1.ConditionReason(r.reason)
	case errors.Is(err, reconcile.TerminalError(nil)):
		reason = mcpv1alpha1.ReasonInvalidSpec
	}
	return condition(mcpv1alpha1.ConditionReady, false, reason, err.Error())
}

// warningReasons are the reasons a user has to act on; their events are Warnings.
var warningReasons = []mcpv1alpha1.ConditionReason{
	mcpv1alpha1.ReasonInvalidSpec, mcpv1alpha1.ReasonReconcileFailed, mcpv1alpha1.ReasonDeploymentUnavailable,
	mcpv1alpha1.ReasonCatalogRejected, mcpv1alpha1.ReasonCatalogTooLarge, mcpv1alpha1.ReasonNameConflict,
	mcpv1alpha1.ReasonServerNotFound, mcpv1alpha1.ReasonSourceNotFound, mcpv1alpha1.ReasonSourceNotExposed,
	mcpv1alpha1.ReasonSourceRefused, mcpv1alpha1.ReasonSecretNotOwned, mcpv1alpha1.ReasonStaleSidecars,
	mcpv1alpha1.ReasonToolsMissingUpstream, mcpv1alpha1.ReasonUpstreamMismatch, mcpv1alpha1.ReasonPinnedToolsDrifted,
	mcpv1alpha1.ReasonProgressDeadlineExceeded,
	mcpv1alpha1.ReasonCredentialsSecretNotExposed, mcpv1alpha1.ReasonCredentialsSecretRefused,
	mcpv1alpha1.ReasonCredentialsKeyMissing, mcpv1alpha1.ReasonCredentialsValueInvalid,
	mcpv1alpha1.ReasonTargetNotFound, mcpv1alpha1.ReasonAuthenticationOff, mcpv1alpha1.ReasonInvalid,
}

func eventType(reason string) string {
	if slices.Contains(warningReasons, mcpv1alpha1.ConditionReason(reason)) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
