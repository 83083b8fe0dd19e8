package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	}
	st.URL = urlFor(server, s.names)
	st.Selector = labels.SelectorFromSet(inject.SelectorFor(server)).String()
	if s.observed {
		available := availableCondition(s.workload)
		propagated, upToDate := propagationCondition(s.propagation)
		set(available)
		set(propagated)
		set(readyCondition(available, propagated))
		set(toolsServedCondition(s.propagation))
		set(verifiedCondition(s.propagation))
		if c, ok := toolsDriftedCondition(server, s.resolution.accepted.Tools, toolPins(s.resolution.accepted.Tools, s.propagation), s.propagation); ok {
			set(c)
		} else {
			meta.RemoveStatusCondition(&st.Conditions, mcpv1alpha1.ConditionToolsDrifted)
		}
		st.CatalogUpToDateReplicas = upToDate
		if up := upstreamStatus(s.propagation); up != nil {
			st.Upstream = up
		}
		if s.workload.External {
			sidecars, stale := sidecarsCondition(s.cfg, s.pods)
			set(sidecars)
			st.StaleSidecarReplicas = stale
		} else {
			meta.RemoveStatusCondition(&st.Conditions, mcpv1alpha1.ConditionSidecarsUpToDate)
			st.StaleSidecarReplicas = 0
		}
		if d := s.workload.Deployment; d != nil {
			st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = d.Status.Replicas, d.Status.ReadyReplicas, d.Status.UpdatedReplicas
		} else {
			st.Replicas, st.ReadyReplicas, st.UpdatedReplicas = int32(len(s.pods)), s.workload.ReadyPods, 0
		}
	}
	if reconcileErr != nil {
		set(failureCondition(reconcileErr))
	} else {
		st.ObservedGeneration = gen
	}
	return st
}

// itemStatusUpdate is the decided status of one tool, resource or prompt.
type itemStatusUpdate struct {
	object              client.Object
	accepted, published metav1.Condition
	revision            string
	// pin is set for accepted MCPTools once the replicas were observed.
	pin *toolPin
}

// itemStatuses decides Accepted, Published and catalogRevision of every tool, resource and
// prompt of the server. Objects being deleted (no verdict) are left out.
func itemStatuses(s *scope) []itemStatusUpdate {
	var out []itemStatusUpdate
	var pins map[string]toolPin
	if s.observed {
		pins = toolPins(s.resolution.accepted.Tools, s.propagation)
	}
	for _, obj := range s.items.objects() {
		v, ok := s.resolution.verdicts[kindOf(obj)][obj.GetName()]
		if !ok {
			continue
		}
		accepted := metav1.Condition{Type: mcpv1alpha1.ConditionAccepted, Status: metav1.ConditionFalse, Reason: v.Reason, Message: v.Message}
		if v.Accepted {
			accepted.Status = metav1.ConditionTrue
		}
		missing := ""
		if _, isResource := obj.(*mcpv1alpha1.MCPResource); isResource {
			missing = s.missingSources[obj.GetName()]
		}
		published, revision := publishedCondition(v, missing, s.tooLarge, s.revision, s.tooLargeMessage)
		published, revision = publishedSince(itemStatus(obj), obj.GetGeneration(), published, revision)
		u := itemStatusUpdate{object: obj, accepted: accepted, published: published, revision: revision}
		if _, isTool := obj.(*mcpv1alpha1.MCPTool); isTool && s.observed {
			pin := pins[obj.GetName()] // none (cleared) when not accepted
			if !v.Accepted {
				pin = toolPin{}
			}
			u.pin = &pin
		}
		out = append(out, u)
	}
	return out
}

// publishedCondition decides Published for one accepted-or-not object, and the catalog revision
// it is part of.
func publishedCondition(v verdict, missingSource string, tooLarge bool, revision, tooLargeMessage string) (metav1.Condition, string) {
	c := metav1.Condition{Type: mcpv1alpha1.ConditionPublished, Status: metav1.ConditionFalse}
	switch {
	case !v.Accepted:
		c.Reason, c.Message = mcpv1alpha1.ReasonNotAccepted, "not part of the catalog: "+v.Reason
	case tooLarge:
		c.Reason, c.Message = mcpv1alpha1.ReasonCatalogTooLarge, tooLargeMessage
	case missingSource != "":
		// The resource is in the catalog, but reading it fails until the source exists.
		c.Reason, c.Message = mcpv1alpha1.ReasonSourceNotFound, missingSource
		return c, revision
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, mcpv1alpha1.ReasonPublished, publishedMessage(revision)
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
	if before == nil || before.CatalogRevision == "" || revision == "" || before.ObservedGeneration != generation {
		return published, revision
	}
	old := meta.FindStatusCondition(before.Conditions, mcpv1alpha1.ConditionPublished)
	if old == nil || old.ObservedGeneration != generation || old.Status != published.Status || old.Reason != published.Reason {
		return published, revision
	}
	if published.Reason == mcpv1alpha1.ReasonPublished {
		published.Message = publishedMessage(before.CatalogRevision)
	}
	return published, before.CatalogRevision
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

func condition(typ string, ok bool, reason, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message}
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

// propagationCondition decides CatalogPropagated and counts the up-to-date ready replicas.
func propagationCondition(p propagation) (metav1.Condition, int32) {
	const typ = mcpv1alpha1.ConditionCatalogPropagated
	var upToDate int32
	var rejected []string
	for _, pod := range p.ReadyPods {
		raw, ok := p.Reports[pod]
		if !ok {
			continue
		}
		r, err := catalog.ParseReport(raw)
		if err != nil {
			continue
		}
		if r.Revision == p.Revision {
			upToDate++
		}
		if r.RejectedRevision == p.Revision && p.Revision != "" {
			rejected = append(rejected, fmt.Sprintf("pod %s: %s", pod, r.Reason))
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
		return condition(typ, true, mcpv1alpha1.ReasonCatalogPropagated,
			fmt.Sprintf("all %d ready replicas serve catalog revision %s", upToDate, p.Revision)), upToDate
	}
	return condition(typ, false, mcpv1alpha1.ReasonPropagationPending,
		fmt.Sprintf("%d of %d ready replicas serve catalog revision %s", upToDate, len(p.ReadyPods), p.Revision)), upToDate
}

// toolsServedCondition decides ToolsServed from the reports of the ready replicas that serve the
// current revision and have checked its tools against their MCP server container: False, naming
// the tools, when any of them says the server does not list an enabled declared tool.
func toolsServedCondition(p propagation) metav1.Condition {
	const typ = mcpv1alpha1.ConditionToolsServed
	reported := 0
	var missing []string
	for _, pod := range p.ReadyPods {
		r, err := catalog.ParseReport(p.Reports[pod])
		if err != nil || r.Revision != p.Revision || p.Revision == "" || !r.ToolsChecked {
			continue
		}
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
		return metav1.Condition{Type: typ, Status: metav1.ConditionUnknown, Reason: mcpv1alpha1.ReasonToolsNotYetReported,
			Message: "no ready replica has checked the tools of catalog revision " + p.Revision + " against its MCP server yet"}
	}
	return condition(typ, true, mcpv1alpha1.ReasonAllToolsServed,
		fmt.Sprintf("the MCP server of all %d reporting ready replicas lists every enabled MCPTool", reported))
}

// readyCondition summarises Available and CatalogPropagated: the first one that is not True
// gives its reason and message.
func readyCondition(available, propagated metav1.Condition) metav1.Condition {
	for _, c := range []metav1.Condition{available, propagated} {
		if c.Status != metav1.ConditionTrue {
			return metav1.Condition{Type: mcpv1alpha1.ConditionReady, Status: c.Status, Reason: c.Reason, Message: c.Message}
		}
	}
	return condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonReady,
		"available, and every ready replica serves the current catalog")
}

// failureCondition is Ready when a phase failed: InvalidSpec for terminal errors (invalid input
// that retrying cannot fix), ReconcileFailed with the API error otherwise.
func failureCondition(err error) metav1.Condition {
	reason := mcpv1alpha1.ReasonReconcileFailed
	if errors.Is(err, reconcile.TerminalError(nil)) {
		reason = mcpv1alpha1.ReasonInvalidSpec
	}
	return condition(mcpv1alpha1.ConditionReady, false, reason, err.Error())
}

// warningReasons are the reasons a user has to act on; their events are Warnings.
var warningReasons = []string{
	mcpv1alpha1.ReasonInvalidSpec, mcpv1alpha1.ReasonReconcileFailed, mcpv1alpha1.ReasonDeploymentUnavailable,
	mcpv1alpha1.ReasonCatalogRejected, mcpv1alpha1.ReasonCatalogTooLarge, mcpv1alpha1.ReasonNameConflict,
	mcpv1alpha1.ReasonServerNotFound, mcpv1alpha1.ReasonSourceNotFound, mcpv1alpha1.ReasonStaleSidecars,
	mcpv1alpha1.ReasonToolsMissingUpstream, mcpv1alpha1.ReasonUpstreamMismatch, mcpv1alpha1.ReasonPinnedToolsDrifted,
}

func eventType(reason string) string {
	if slices.Contains(warningReasons, reason) {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
