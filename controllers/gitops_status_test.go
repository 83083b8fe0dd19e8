package controllers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// rollout is a Deployment of want replicas whose status counts replicas, updated and available
// ones, and reports Available (and Progressing, when given).
func rollout(want, replicas, updated, available int32, progressing ...appsv1.DeploymentCondition) *appsv1.Deployment {
	d := deployment(1, 1, available, append([]appsv1.DeploymentCondition{dcond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable")}, progressing...)...)
	d.Spec.Replicas = ptr.To(want)
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = replicas, updated, available
	return d
}

// TestProgressConditions: which state of an MCPServer is Stalled (a person has to change
// something), which is Reconciling (the controller will get there) and which is neither.
func TestProgressConditions(t *testing.T) {
	ready := condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonReady, "")
	scaled := condition(mcpv1alpha1.ConditionReady, true, mcpv1alpha1.ReasonScaledToZero, "spec.replicas is 0")
	notReady := func(reason, msg string) metav1.Condition {
		return condition(mcpv1alpha1.ConditionReady, false, mcpv1alpha1.ConditionReason(reason), msg)
	}
	propagated := func(reason, msg string) *metav1.Condition {
		c := condition(mcpv1alpha1.ConditionCatalogPropagated, reason == string(mcpv1alpha1.ReasonAllReplicasUpToDate), mcpv1alpha1.ConditionReason(reason), msg)
		return &c
	}
	allServe := propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), "")
	done := workload{Replicas: 2, Deployment: rollout(2, 2, 2, 2)}
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	refused := childErrors{{kind: "Deployment", name: "x", err: apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "x",
		field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), "", "field is immutable")})}}
	quota := childErrors{{kind: "Service", name: "x", err: apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "x", errors.New("exceeded quota: q"))}}
	conflict := childErrors{{kind: "Deployment", name: "x", err: apierrors.NewConflict(gr, "x", errors.New("the object has been modified"))}}
	mixed := append(append(childErrors{}, conflict...), refused...)
	deadline := dcond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded")
	deadline.Message = `ReplicaSet "x" has timed out progressing.`

	for _, tc := range []struct {
		name       string
		ready      metav1.Condition
		propagated *metav1.Condition
		w          workload
		err        error
		// wantType is Stalled, Reconciling or "" (neither).
		wantType, wantReason, wantMessage string
	}{
		{"ready and rolled out", ready, allServe, done, nil, "", "", ""},
		{"scaled to zero", scaled, propagated(string(mcpv1alpha1.ReasonNoReadyReplicas), ""), workload{Deployment: rollout(0, 0, 0, 0)}, nil, "", "", ""},
		{"external with pods", ready, allServe, workload{External: true, ReadyPods: 1}, nil, "", "", ""},
		{"ready while old pods are replaced", ready, allServe, workload{Replicas: 2, Deployment: rollout(2, 3, 1, 2)},
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonRollingOut), "1 of 2 replicas run the current pod template"},
		{"ready while an old pod terminates", ready, allServe, workload{Replicas: 2, Deployment: rollout(2, 3, 2, 2)},
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonRollingOut), "1 old replicas"},
		{"ready while an updated pod becomes available", ready, allServe, workload{Replicas: 2, Deployment: rollout(2, 2, 2, 1)},
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonRollingOut), "1 of 2 updated replicas are available"},
		{"propagation pending", notReady(string(mcpv1alpha1.ReasonPropagationPending), "1 of 2 ready replicas"), propagated(string(mcpv1alpha1.ReasonPropagationPending), "1 of 2 ready replicas"), done,
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonPropagationPending), "1 of 2"},
		{"deployment progressing", notReady(string(mcpv1alpha1.ReasonDeploymentProgressing), "0 of 1 replicas ready"), propagated(string(mcpv1alpha1.ReasonNoReadyReplicas), ""),
			workload{Replicas: 1, Deployment: rollout(1, 1, 1, 0, dcond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated"))},
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonDeploymentProgressing), "0 of 1"},
		{"external without pods", notReady(string(mcpv1alpha1.ReasonExternalWorkload), "0 ready"), propagated(string(mcpv1alpha1.ReasonNoReadyReplicas), ""), workload{External: true},
			nil, string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonExternalWorkload), "0 ready"},
		{"progress deadline exceeded", notReady(string(mcpv1alpha1.ReasonDeploymentUnavailable), "0 of 1"), propagated(string(mcpv1alpha1.ReasonNoReadyReplicas), ""),
			workload{Replicas: 1, Deployment: rollout(1, 1, 1, 0, deadline)},
			nil, string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonProgressDeadlineExceeded), "has timed out progressing"},
		{"catalog too large, while the rollout goes on", notReady(string(mcpv1alpha1.ReasonDeploymentProgressing), ""), propagated(string(mcpv1alpha1.ReasonCatalogTooLarge), "the compiled catalog is 2000000 bytes"), done,
			nil, string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonCatalogTooLarge), "2000000 bytes"},
		{"catalog rejected", notReady(string(mcpv1alpha1.ReasonCatalogRejected), "pod a: bad schema"), propagated(string(mcpv1alpha1.ReasonCatalogRejected), "pod a: bad schema"), done,
			nil, string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonCatalogRejected), "bad schema"},
		{"invalid spec", failureCondition(reconcile.TerminalError(errors.New("metadata.name is not a DNS label"))), nil, workload{},
			reconcile.TerminalError(errors.New("metadata.name is not a DNS label")), string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonInvalidSpec), "DNS label"},
		{"child refused as invalid", failureCondition(refused), allServe, done, refused,
			string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonReconcileFailed), "field is immutable"},
		{"child over quota", failureCondition(quota), allServe, done, quota,
			string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonReconcileFailed), "ResourceQuota"},
		{"refused child among conflicts, joined with another error", failureCondition(errors.Join(mixed, errors.New("x"))), allServe, done, errors.Join(mixed, errors.New("x")),
			string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ReasonReconcileFailed), "field is immutable"},
		{"conflict is retried", failureCondition(conflict), allServe, done, conflict,
			string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonReconcileFailed), "retrying with backoff"},
		{"API server away is retried", failureCondition(errors.New("connection refused")), nil, workload{}, errors.New("connection refused"),
			string(mcpv1alpha1.ConditionReconciling), string(mcpv1alpha1.ReasonReconcileFailed), "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stalled, reconciling := progressConditions(tc.ready, tc.propagated, tc.w, tc.err)
			if stalled != nil && reconciling != nil {
				t.Fatalf("both Stalled and Reconciling: %+v, %+v", stalled, reconciling)
			}
			got := stalled
			if got == nil {
				got = reconciling
			}
			if tc.wantType == "" {
				if got != nil {
					t.Fatalf("want neither, got %+v", got)
				}
				return
			}
			if got == nil || got.Type != tc.wantType || got.Status != metav1.ConditionTrue || got.Reason != tc.wantReason || !strings.Contains(got.Message, tc.wantMessage) {
				t.Fatalf("got %+v, want %s=True %s with a message containing %q", got, tc.wantType, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

// TestNewItemStatus: an item's Ready, Stalled and Reconciling from its Accepted and Published
// and the server's CatalogPropagated.
func TestNewItemStatus(t *testing.T) {
	accepted := condition(mcpv1alpha1.ConditionAccepted, true, mcpv1alpha1.ReasonAccepted, `exposed as "route"`)
	published := condition(mcpv1alpha1.ConditionPublished, true, mcpv1alpha1.ReasonPublished, "part of catalog revision r1")
	not := func(c metav1.Condition, reason, msg string) metav1.Condition {
		return condition(mcpv1alpha1.ConditionType(c.Type), false, mcpv1alpha1.ConditionReason(reason), msg)
	}
	propagated := func(reason, msg string) *metav1.Condition {
		c := condition(mcpv1alpha1.ConditionCatalogPropagated, reason == string(mcpv1alpha1.ReasonAllReplicasUpToDate), mcpv1alpha1.ConditionReason(reason), msg)
		return &c
	}
	for _, tc := range []struct {
		name                string
		accepted, published metav1.Condition
		propagated          *metav1.Condition
		// wantReady is the Ready reason (True for Ready); wantType is Stalled, Reconciling or "".
		wantReady, wantType, wantMessage string
		// since is the revision the item is published since; "" is the current one, r1.
		since string
		// wasInFlight: the item's status said it waited for an older revision.
		wasInFlight bool
	}{
		{"served", accepted, published, propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), ""), string(mcpv1alpha1.ReasonReady), "", "revision r1", "", false},
		{"server without ready replicas", accepted, published, propagated(string(mcpv1alpha1.ReasonNoReadyReplicas), ""), string(mcpv1alpha1.ReasonReady), "", "revision r1", "", false},
		{"server not found", not(accepted, string(mcpv1alpha1.ReasonServerNotFound), "MCPServer nowhere does not exist"),
			not(published, string(mcpv1alpha1.ReasonNotAccepted), ""), nil, string(mcpv1alpha1.ReasonServerNotFound), string(mcpv1alpha1.ConditionStalled), "nowhere", "", false},
		{"name conflict", not(accepted, string(mcpv1alpha1.ReasonNameConflict), `"winner" already exposes it`),
			not(published, string(mcpv1alpha1.ReasonNotAccepted), ""), propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), ""), string(mcpv1alpha1.ReasonNameConflict), string(mcpv1alpha1.ConditionStalled), "winner", "", false},
		{"invalid spec", not(accepted, string(mcpv1alpha1.ReasonInvalidSpec), "{{to}} is no argument"),
			not(published, string(mcpv1alpha1.ReasonNotAccepted), ""), propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), ""), string(mcpv1alpha1.ReasonInvalidSpec), string(mcpv1alpha1.ConditionStalled), "{{to}}", "", false},
		{"source not found", accepted, not(published, string(mcpv1alpha1.ReasonSourceNotFound), `Secret "missing" does not exist`),
			propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), ""), string(mcpv1alpha1.ReasonSourceNotFound), string(mcpv1alpha1.ConditionStalled), "missing", "", false},
		{"catalog too large", accepted, not(published, string(mcpv1alpha1.ReasonCatalogTooLarge), "2000000 bytes"),
			propagated(string(mcpv1alpha1.ReasonCatalogTooLarge), "2000000 bytes"), string(mcpv1alpha1.ReasonCatalogTooLarge), string(mcpv1alpha1.ConditionStalled), "2000000", "", false},
		{"catalog rejected", accepted, published, propagated(string(mcpv1alpha1.ReasonCatalogRejected), "pod a: bad schema"),
			string(mcpv1alpha1.ReasonCatalogRejected), string(mcpv1alpha1.ConditionStalled), "bad schema", "", false},
		{"replicas still on an older revision", accepted, published, propagated(string(mcpv1alpha1.ReasonPropagationPending), "1 of 2 ready replicas serve catalog revision r1"),
			string(mcpv1alpha1.ReasonPropagationPending), string(mcpv1alpha1.ConditionReconciling), "waiting for every ready replica", "", false},
		// An item unchanged since r0 is served the same by replicas of r0: another item's edit
		// neither holds it back nor makes it Stalled.
		{"unchanged while another edit propagates", accepted, published, propagated(string(mcpv1alpha1.ReasonPropagationPending), "1 of 2 ready replicas serve catalog revision r1"),
			string(mcpv1alpha1.ReasonReady), "", "revision r0", "r0", false},
		{"unchanged in a rejected revision", accepted, published, propagated(string(mcpv1alpha1.ReasonCatalogRejected), "pod a: bad schema"),
			string(mcpv1alpha1.ReasonReady), "", "revision r0", "r0", false},
		// An item whose change (r0) no replica served before r1 replaced it waits for r1.
		{"still waiting for its own change", accepted, published, propagated(string(mcpv1alpha1.ReasonPropagationPending), "0 of 2 ready replicas serve catalog revision r1"),
			string(mcpv1alpha1.ReasonPropagationPending), string(mcpv1alpha1.ConditionReconciling), "since catalog revision r0", "r0", true},
		{"its own change not served, then rejected", accepted, published, propagated(string(mcpv1alpha1.ReasonCatalogRejected), "pod a: bad schema"),
			string(mcpv1alpha1.ReasonCatalogRejected), string(mcpv1alpha1.ConditionStalled), "bad schema", "r0", true},
		{"in flight until every ready replica serves the current revision", accepted, published, propagated(string(mcpv1alpha1.ReasonAllReplicasUpToDate), ""),
			string(mcpv1alpha1.ReasonReady), "", "revision r0", "r0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			since := tc.since
			if since == "" {
				since = "r1"
			}
			u := decideItemStatus(nil, itemInputs{accepted: tc.accepted, published: tc.published, propagated: tc.propagated,
				revision: since, current: "r1", wasInFlight: tc.wasInFlight})
			if u.ready.Type != string(mcpv1alpha1.ConditionReady) || u.ready.Reason != tc.wantReady ||
				(u.ready.Status == metav1.ConditionTrue) != (tc.wantReady == string(mcpv1alpha1.ReasonReady)) {
				t.Fatalf("Ready %+v, want reason %s", u.ready, tc.wantReady)
			}
			set, remove := u.conditions()
			types := map[string]metav1.Condition{}
			for _, c := range set {
				types[c.Type] = c
			}
			for _, typ := range []string{string(mcpv1alpha1.ConditionStalled), string(mcpv1alpha1.ConditionReconciling)} {
				c, isSet := types[typ]
				switch {
				case typ == tc.wantType && (!isSet || c.Status != metav1.ConditionTrue || c.Reason != tc.wantReady || !strings.Contains(c.Message, tc.wantMessage)):
					t.Errorf("%s: %+v, want True %s with a message containing %q", typ, c, tc.wantReady, tc.wantMessage)
				case typ != tc.wantType && isSet:
					t.Errorf("%s set: %+v", typ, c)
				case typ != tc.wantType && !strings.Contains(fmt.Sprint(remove), typ):
					t.Errorf("%s neither set nor removed (%v)", typ, remove)
				}
			}
			if !strings.Contains(u.ready.Message, tc.wantMessage) {
				t.Errorf("Ready message %q does not contain %q", u.ready.Message, tc.wantMessage)
			}
		})
	}
}

// TestStillAppearing: within the grace after creation, a missing server or source is waited
// for (Reconciling), not Stalled; other states are left as they are.
func TestStillAppearing(t *testing.T) {
	notFound := condition(mcpv1alpha1.ConditionAccepted, false, mcpv1alpha1.ReasonServerNotFound, "MCPServer nowhere does not exist")
	u := decideItemStatus(nil, itemInputs{accepted: notFound, published: condition(mcpv1alpha1.ConditionPublished, false, mcpv1alpha1.ReasonNotAccepted, ""),
		appearing: DefaultAppearGrace})
	if u.stalled != nil || u.reconciling == nil || u.reconciling.Type != string(mcpv1alpha1.ConditionReconciling) ||
		u.reconciling.Reason != string(mcpv1alpha1.ReasonServerNotFound) || !strings.Contains(u.reconciling.Message, "does not exist (waited for up to") {
		t.Fatalf("stalled %+v, reconciling %+v", u.stalled, u.reconciling)
	}
	if u.ready.Status != metav1.ConditionFalse || u.ready.Reason != string(mcpv1alpha1.ReasonServerNotFound) || u.ready.Message != u.reconciling.Message {
		t.Fatalf("ready %+v", u.ready)
	}
	in := itemInputs{accepted: condition(mcpv1alpha1.ConditionAccepted, true, mcpv1alpha1.ReasonAccepted, ""),
		published: condition(mcpv1alpha1.ConditionPublished, true, mcpv1alpha1.ReasonPublished, ""), revision: "r1", current: "r1"}
	ready := decideItemStatus(nil, in)
	in.appearing = DefaultAppearGrace
	if got := decideItemStatus(nil, in); got.stalled != nil || got.reconciling != nil || got.ready != ready.ready {
		t.Fatalf("a ready item changed: %+v", got)
	}
}

// TestWithheldByPin: a tool the sidecars withhold under Enforce is Stalled with the digest to
// accept; one that is not accepted or published keeps saying why.
func TestWithheldByPin(t *testing.T) {
	accepted := condition(mcpv1alpha1.ConditionAccepted, true, mcpv1alpha1.ReasonAccepted, "")
	published := condition(mcpv1alpha1.ConditionPublished, true, mcpv1alpha1.ReasonPublished, "")
	drifted := toolPin{Observed: "sha256:bb", State: mcpv1alpha1.PinDrifted}
	for _, tc := range []struct {
		name       string
		in         itemInputs
		pin        toolPin
		wantReason string
		wantMsg    string
	}{
		{"drifted", itemInputs{accepted: accepted, published: published, revision: "r1", current: "r1"}, drifted, string(mcpv1alpha1.ReasonToolWithheld), "set spec.upstreamDigest to sha256:bb to accept"},
		{"drifted while in flight", itemInputs{accepted: accepted, published: published, revision: "r1", current: "r1",
			propagated: ptr.To(condition(mcpv1alpha1.ConditionCatalogPropagated, false, mcpv1alpha1.ReasonPropagationPending, ""))},
			drifted, string(mcpv1alpha1.ReasonToolWithheld), "differs from spec.upstreamDigest"},
		{"unpinned under toolPolicy All", itemInputs{accepted: accepted, published: published, revision: "r1", current: "r1"}, toolPin{Observed: "sha256:cc", State: mcpv1alpha1.PinUnpinned},
			string(mcpv1alpha1.ReasonToolWithheld), "set spec.upstreamDigest to sha256:cc to pin"},
		{"name conflict says more", itemInputs{accepted: condition(mcpv1alpha1.ConditionAccepted, false, mcpv1alpha1.ReasonNameConflict, "winner"),
			published: condition(mcpv1alpha1.ConditionPublished, false, mcpv1alpha1.ReasonNotAccepted, ""), current: "r1"}, drifted, string(mcpv1alpha1.ReasonNameConflict), "winner"},
		{"a rejected revision says more", itemInputs{accepted: accepted, published: published, revision: "r1", current: "r1",
			propagated: ptr.To(condition(mcpv1alpha1.ConditionCatalogPropagated, false, mcpv1alpha1.ReasonCatalogRejected, "pod a: bad schema"))},
			drifted, string(mcpv1alpha1.ReasonCatalogRejected), "bad schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.withheld = &tc.pin
			u := decideItemStatus(nil, in)
			if u.stalled == nil || u.reconciling != nil || u.stalled.Reason != tc.wantReason || !strings.Contains(u.stalled.Message, tc.wantMsg) ||
				u.ready.Status != metav1.ConditionFalse || u.ready.Reason != tc.wantReason {
				t.Fatalf("stalled %+v, reconciling %+v, ready %+v", u.stalled, u.reconciling, u.ready)
			}
		})
	}
}
