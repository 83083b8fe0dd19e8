package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// +kubebuilder:rbac:groups=mcp.switchboard.dev,resources=mcpaccesspolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp.switchboard.dev,resources=mcpaccesspolicies/status,verbs=get;update;patch

// MCPAccessPolicyReconciler writes the status of MCPAccessPolicies, and nothing else: the
// MCPServer reconciler compiles them into the catalog. Both decide with policyVerdict, so the
// status says exactly what the sidecars enforce. It is the one writer of a policy's status.
type MCPAccessPolicyReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// TrustDomain is the SPIFFE trust domain of the cluster's ServiceAccounts (--trust-domain).
	TrustDomain string
	// AppearGrace is how long after the policy's creation a missing target is waited for
	// (DefaultAppearGrace).
	AppearGrace time.Duration
}

// Reconcile decides, for every target of the policy, whether it is enforced there, and writes
// status.ancestors (GEP-713) and the Ready/Stalled/Reconciling summary for GitOps tools.
func (r *MCPAccessPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &mcpv1alpha1.MCPAccessPolicy{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	verdicts := make([]verdict, len(p.Spec.TargetRefs))
	for i, t := range p.Spec.TargetRefs {
		server := &mcpv1alpha1.MCPServer{}
		err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: t.Name}, server)
		switch {
		case apierrors.IsNotFound(err):
			server = nil
		case err != nil:
			return ctrl.Result{}, err
		}
		verdicts[i] = policyVerdict(p, t.Name, server, r.TrustDomain)
	}
	before := p.DeepCopy()
	st, requeue := policyStatus(p, verdicts, time.Now(), r.AppearGrace)
	p.Status = st
	emitConditionEvents(r.Recorder, p, before.Status.Conditions, warnings(p.Status.Conditions))
	if equality.Semantic.DeepEqual(before.Status, p.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	return ctrl.Result{RequeueAfter: requeue}, client.IgnoreNotFound(r.Status().Patch(ctx, p, client.MergeFrom(before)))
}

// policyStatus is the status of a policy given the verdict for each target (in the order of
// spec.targetRefs). It keeps a condition's lastTransitionTime while its status stays the same.
// A target that does not exist yet is waited for during grace after the policy's
// creation (Reconciling; the returned duration is when to look again), as a pipeline may apply
// the policy before its server; then, like every other refusal, only a person helps (Stalled).
func policyStatus(p *mcpv1alpha1.MCPAccessPolicy, verdicts []verdict, now time.Time, grace time.Duration) (mcpv1alpha1.MCPAccessPolicyStatus, time.Duration) {
	gen := p.Generation
	st := mcpv1alpha1.MCPAccessPolicyStatus{ObservedGeneration: gen, Conditions: p.Status.Conditions}
	var refused *verdict
	for i, t := range p.Spec.TargetRefs {
		v := verdicts[i]
		cond := metav1.Condition{Type: string(mcpv1alpha1.ConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(v.Reason), Message: v.Message, ObservedGeneration: gen}
		if !v.Accepted {
			cond.Status = metav1.ConditionFalse
			if refused == nil {
				refused = &verdicts[i]
			}
		}
		anc := mcpv1alpha1.PolicyAncestorStatus{
			AncestorRef: mcpv1alpha1.ParentReference{Group: mcpv1alpha1.GroupVersion.Group, Kind: "MCPServer",
				Namespace: p.Namespace, Name: t.Name},
			ControllerName: mcpv1alpha1.PolicyControllerName,
		}
		if old := ancestorFor(p.Status.Ancestors, t.Name); old != nil {
			anc.Conditions = old.Conditions
		}
		meta.SetStatusCondition(&anc.Conditions, cond)
		st.Ancestors = append(st.Ancestors, anc)
	}

	var requeue time.Duration
	ready := metav1.Condition{Type: string(mcpv1alpha1.ConditionReady), Status: metav1.ConditionTrue, Reason: string(mcpv1alpha1.ReasonAccepted),
		Message: fmt.Sprintf("enforced on all %d targets", len(p.Spec.TargetRefs)), ObservedGeneration: gen}
	var stalled, reconciling *metav1.Condition
	if refused != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, string(refused.Reason), refused.Message
		c := ready
		if left := graceLeft(p, now, grace); refused.Reason == mcpv1alpha1.ReasonTargetNotFound && left > 0 {
			c.Type = string(mcpv1alpha1.ConditionReconciling)
			c.Message = fmt.Sprintf("%s (waited for up to %s after creation, in case it is being applied together with this policy)", c.Message, grace)
			c.Status = metav1.ConditionTrue
			ready.Message = c.Message
			reconciling, requeue = &c, left
		} else {
			c.Type, c.Status = string(mcpv1alpha1.ConditionStalled), metav1.ConditionTrue
			stalled = &c
		}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	setOrRemove(&st.Conditions, mcpv1alpha1.ConditionStalled, stalled, gen)
	setOrRemove(&st.Conditions, mcpv1alpha1.ConditionReconciling, reconciling, gen)
	return st, requeue
}

func ancestorFor(ancestors []mcpv1alpha1.PolicyAncestorStatus, name string) *mcpv1alpha1.PolicyAncestorStatus {
	for i := range ancestors {
		if ancestors[i].AncestorRef.Name == name {
			return &ancestors[i]
		}
	}
	return nil
}

// SetupWithManager watches the policies and the MCPServers they target: a server's creation,
// deletion, and a change of whether it authenticates callers change the verdict.
func (r *MCPAccessPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	fromServer := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var list mcpv1alpha1.MCPAccessPolicyList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{policyTargetIndex: o.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the MCPAccessPolicies of an MCPServer")
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, p := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&mcpv1alpha1.MCPAccessPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&mcpv1alpha1.MCPServer{}, fromServer, builder.WithPredicates(verdictInputsChanged)).
		Named("mcpaccesspolicy").
		Complete(r)
}

// verdictInputsChanged passes the MCPServer events that can change a policy's verdict: a
// server created or deleted, its deletion started, or its spec.auth.mode changed. Status
// patches and other spec edits do not.
var verdictInputsChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*mcpv1alpha1.MCPServer), e.ObjectNew.(*mcpv1alpha1.MCPServer)
		return o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || authRequired(o) != authRequired(n)
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}
