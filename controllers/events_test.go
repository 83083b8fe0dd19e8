package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// TestConditionEvents: a condition's change is an Event when it reaches a Warning reason, when it
// reaches its good state (True; False for ToolsDrifted and Stalled) from a Warning reason, and
// when Ready turns True. Entering a Normal wait (such as a catalog edit's PropagationPending and
// NotYetReported), or leaving one for the good state, is not: Ready's Event tells the return. At
// 1,000 servers one Event per condition reaching its good state was 6 Events per server of a cold
// start (docs/performance.md, "Fleet scale").
func TestConditionEvents(t *testing.T) {
	const (
		propagated = mcpv1alpha1.ConditionCatalogPropagated
		served     = mcpv1alpha1.ConditionToolsServed
	)
	cond := func(typ mcpv1alpha1.ConditionType, status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: status, Reason: string(reason), Message: "m"}
	}
	upToDate := cond(propagated, metav1.ConditionTrue, mcpv1alpha1.ReasonAllReplicasUpToDate)
	pending := cond(propagated, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
	rejected := cond(propagated, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogRejected)
	allServed := cond(served, metav1.ConditionTrue, mcpv1alpha1.ReasonAllToolsServed)
	notReported := cond(served, metav1.ConditionUnknown, mcpv1alpha1.ReasonNotYetReported)
	drifted := cond(mcpv1alpha1.ConditionToolsDrifted, metav1.ConditionTrue, mcpv1alpha1.ReasonPinnedToolsDrifted)
	matched := cond(mcpv1alpha1.ConditionToolsDrifted, metav1.ConditionFalse, mcpv1alpha1.ReasonToolsMatchPins)
	driftUnknown := cond(mcpv1alpha1.ConditionToolsDrifted, metav1.ConditionUnknown, mcpv1alpha1.ReasonNotYetReported)
	reconciling := cond(mcpv1alpha1.ConditionReconciling, metav1.ConditionTrue, mcpv1alpha1.ReasonPropagationPending)
	settled := cond(mcpv1alpha1.ConditionReconciling, metav1.ConditionFalse, mcpv1alpha1.ReasonReady)
	ready := cond(mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
	readyPending := cond(mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
	readyRejected := cond(mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogRejected)
	scaledToZero := cond(mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonScaledToZero)
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          []mcpv1alpha1.ConditionReason // in order
	}{
		{"an edit: True to a Normal wait", []metav1.Condition{upToDate, allServed, settled, ready}, []metav1.Condition{pending, notReported, reconciling, readyPending}, nil},
		{"the wait ends: back to True, told by Ready alone", []metav1.Condition{pending, notReported, reconciling, readyPending}, []metav1.Condition{upToDate, allServed, settled, ready},
			[]mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonReady}},
		{"first state, a wait", nil, []metav1.Condition{pending, notReported, reconciling, readyPending}, nil},
		{"first state, True: Ready alone", nil, []metav1.Condition{upToDate, allServed, matched, ready}, []mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonReady}},
		{"a condition reaches its good state while Ready stays True", []metav1.Condition{notReported, ready}, []metav1.Condition{allServed, ready}, nil},
		{"Ready True for a server scaled to zero", nil, []metav1.Condition{scaledToZero}, []mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonScaledToZero}},
		{"True to a Warning", []metav1.Condition{upToDate}, []metav1.Condition{rejected}, []mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonCatalogRejected}},
		{"a wait to a Warning", []metav1.Condition{pending}, []metav1.Condition{rejected}, []mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonCatalogRejected}},
		{"Ready repeats the Warning of the condition it summarises", []metav1.Condition{pending, readyPending}, []metav1.Condition{rejected, readyRejected},
			[]mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonCatalogRejected}},
		{"a Warning fixed: the condition's good state is an Event, and Ready's", []metav1.Condition{rejected, readyRejected}, []metav1.Condition{upToDate, ready},
			[]mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonAllReplicasUpToDate, mcpv1alpha1.ReasonReady}},
		{"a Warning left for a wait: no Event", []metav1.Condition{rejected}, []metav1.Condition{pending}, nil},
		{"drift resolved: ToolsDrifted back to False", []metav1.Condition{drifted}, []metav1.Condition{matched},
			[]mcpv1alpha1.ConditionReason{mcpv1alpha1.ReasonToolsMatchPins}},
		{"drift not yet checked", []metav1.Condition{matched}, []metav1.Condition{driftUnknown}, nil},
		{"unchanged", []metav1.Condition{upToDate, allServed}, []metav1.Condition{upToDate, allServed}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := events.NewFakeRecorder(10)
			emitConditionEvents(rec, nil, tc.before, tc.after)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("recorded %q, want Events with reasons %q", got, tc.want)
			}
			for i, reason := range tc.want {
				if f := strings.Fields(got[i]); len(f) < 2 || f[1] != string(reason) {
					t.Errorf("Event %d is %q, want reason %s", i, got[i], reason)
				}
			}
		})
	}
}
