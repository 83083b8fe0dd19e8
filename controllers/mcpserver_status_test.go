package controllers

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func deployment(gen, observed int64, ready int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	d.Generation = gen
	d.Status.ObservedGeneration = observed
	d.Status.ReadyReplicas = ready
	d.Status.Conditions = conds
	return d
}

func dcond(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason string) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason}
}

func TestAvailableCondition(t *testing.T) {
	for name, tc := range map[string]struct {
		w          workload
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		"external with ready pods": {workload{External: true, ReadyPods: 1}, metav1.ConditionTrue, string(mcpv1alpha1.ReasonExternalWorkload)},
		"external without pods":    {workload{External: true}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonExternalWorkload)},
		"scaled to zero":           {workload{Replicas: 0, Deployment: deployment(1, 1, 0)}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonScaledToZero)},
		"no deployment yet":        {workload{Replicas: 1}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonDeploymentProgressing)},
		"not observed yet":         {workload{Replicas: 1, Deployment: deployment(2, 1, 1, dcond(appsv1.DeploymentAvailable, corev1.ConditionTrue, ""))}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonDeploymentProgressing)},
		"available": {workload{Replicas: 2, Deployment: deployment(1, 1, 2, dcond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable"))},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonDeploymentAvailable)},
		"progressing": {workload{Replicas: 2, Deployment: deployment(1, 1, 0,
			dcond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable"),
			dcond(appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated"))},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonDeploymentProgressing)},
		"deadline exceeded": {workload{Replicas: 2, Deployment: deployment(1, 1, 0,
			dcond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable"),
			dcond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded"))},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonDeploymentUnavailable)},
	} {
		t.Run(name, func(t *testing.T) {
			c := availableCondition(tc.w)
			if c.Type != string(mcpv1alpha1.ConditionAvailable) || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.Message == "" {
				t.Fatalf("got %+v, want %s/%s", c, tc.wantStatus, tc.wantReason)
			}
		})
	}
}

func TestPropagationCondition(t *testing.T) {
	ok := func(rev string) string { return catalog.Report{Revision: rev}.String() }
	for name, tc := range map[string]struct {
		p            propagation
		wantStatus   metav1.ConditionStatus
		wantReason   string
		wantUpToDate int32
	}{
		"all up to date": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": ok("r2"), "b": ok("r2")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllReplicasUpToDate), 2},
		"one behind": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": ok("r2"), "b": ok("r1")}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonPropagationPending), 1},
		"not reported": {propagation{Revision: "r2", ReadyPods: []string{"a"}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonPropagationPending), 0},
		"garbage report": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": "{"}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonPropagationPending), 0},
		"reports of unready pods do not count": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": ok("r2"), "gone": ok("r1")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllReplicasUpToDate), 1},
		"rejected": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": ok("r2"),
			"b": catalog.Report{Revision: "r1", RejectedRevision: "r2", Reason: "bad"}.String()}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonCatalogRejected), 1},
		"an older rejection does not count": {propagation{Revision: "r3", ReadyPods: []string{"a"}, Reports: map[string]string{
			"a": catalog.Report{Revision: "r3", RejectedRevision: "r2", Reason: "bad"}.String()}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllReplicasUpToDate), 1},
		"no ready replicas": {propagation{Revision: "r2"}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonNoReadyReplicas), 0},
		"too large":         {propagation{Revision: "r1", TooLarge: true, TooLargeMessage: "too big", ReadyPods: []string{"a"}, Reports: map[string]string{"a": ok("r1")}}, metav1.ConditionFalse, string(mcpv1alpha1.ReasonCatalogTooLarge), 1},
	} {
		t.Run(name, func(t *testing.T) {
			c, n := propagationCondition(parseReports(tc.p))
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || n != tc.wantUpToDate {
				t.Fatalf("got %s/%s (%s), %d up to date; want %s/%s, %d", c.Status, c.Reason, c.Message, n, tc.wantStatus, tc.wantReason, tc.wantUpToDate)
			}
		})
	}
}

// TestUnreadableReportIsNamed: a report that does not parse is not up to date, and the
// CatalogPropagated message names its pod instead of reading as a plain wait.
func TestUnreadableReportIsNamed(t *testing.T) {
	p := parseReports(propagation{Revision: "r2", ReadyPods: []string{"b", "a"},
		Reports: map[string]string{"a": "{", "b": catalog.Report{Revision: "r2"}.String()}})
	if len(p.Ready) != 2 || p.Ready[0].Pod != "a" || p.Ready[0].Err == nil || !p.Ready[1].parsed() {
		t.Fatalf("parsed reports: %+v", p.Ready)
	}
	c, n := propagationCondition(p)
	if c.Reason != string(mcpv1alpha1.ReasonPropagationPending) || n != 1 || !strings.Contains(c.Message, "pod a:") || strings.Contains(c.Message, "pod b") {
		t.Fatalf("got %s (%s), %d up to date", c.Reason, c.Message, n)
	}
}

func TestToolsServedCondition(t *testing.T) {
	rep := func(rev string, missing ...string) string {
		r := catalog.Report{Revision: rev, ToolsChecked: true, MissingTools: missing, MissingToolCount: len(missing)}
		return r.String()
	}
	many := catalog.Report{Revision: "r2", ToolsChecked: true, MissingTools: []string{"a1", "a2"}, MissingToolCount: 25}.String()
	unchecked := catalog.Report{Revision: "r2"}.String() // not compared yet, or an older sidecar
	for name, tc := range map[string]struct {
		p           propagation
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage []string // substrings
	}{
		"every tool served": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": rep("r2"), "b": rep("r2")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllToolsServed), []string{"all 2 reporting"}},
		"one pod misses two tools": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": rep("r2"), "b": rep("r2", "ghost", "phantom")}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonToolsMissingUpstream), []string{"pod b: ghost, phantom", "spec.upstreamName"}},
		"more missing than reported": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": many}},
			metav1.ConditionFalse, string(mcpv1alpha1.ReasonToolsMissingUpstream), []string{"pod a: a1, a2 and 23 more"}},
		"a report of an older revision does not count": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": rep("r2"), "b": rep("r1", "ghost")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllToolsServed), []string{"all 1 reporting"}},
		"an unready pod does not count": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": rep("r2"), "gone": rep("r2", "ghost")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllToolsServed), nil},
		"nobody reported yet": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": rep("r1")}},
			metav1.ConditionUnknown, string(mcpv1alpha1.ReasonNotYetReported), []string{"r2"}},
		"no ready replicas": {propagation{Revision: "r2"}, metav1.ConditionUnknown, string(mcpv1alpha1.ReasonNotYetReported), nil},
		"not checked yet": {propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{"a": unchecked}},
			metav1.ConditionUnknown, string(mcpv1alpha1.ReasonNotYetReported), []string{"checked"}},
		"only checked reports count": {propagation{Revision: "r2", ReadyPods: []string{"a", "b"}, Reports: map[string]string{"a": unchecked, "b": rep("r2")}},
			metav1.ConditionTrue, string(mcpv1alpha1.ReasonAllToolsServed), []string{"all 1 reporting"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := toolsServedCondition(parseReports(tc.p))
			if c.Type != string(mcpv1alpha1.ConditionToolsServed) || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Fatalf("got %s %s/%s (%s); want %s/%s", c.Type, c.Status, c.Reason, c.Message, tc.wantStatus, tc.wantReason)
			}
			for _, m := range tc.wantMessage {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q does not say %q", c.Message, m)
				}
			}
		})
	}
}

func TestReadyCondition(t *testing.T) {
	avail := condition(mcpv1alpha1.ConditionAvailable, true, mcpv1alpha1.ReasonDeploymentAvailable, "")
	unavail := condition(mcpv1alpha1.ConditionAvailable, false, mcpv1alpha1.ReasonDeploymentUnavailable, "pods crash")
	prop := condition(mcpv1alpha1.ConditionCatalogPropagated, true, mcpv1alpha1.ReasonAllReplicasUpToDate, "")
	pending := condition(mcpv1alpha1.ConditionCatalogPropagated, false, mcpv1alpha1.ReasonPropagationPending, "1 of 2")
	for name, tc := range map[string]struct {
		a, p       metav1.Condition
		wantReason string
	}{
		"ready":                  {avail, prop, string(mcpv1alpha1.ReasonReady)},
		"unavailable wins":       {unavail, pending, string(mcpv1alpha1.ReasonDeploymentUnavailable)},
		"propagation summarised": {avail, pending, string(mcpv1alpha1.ReasonPropagationPending)},
		"scaled to zero is ready": {condition(mcpv1alpha1.ConditionAvailable, false, mcpv1alpha1.ReasonScaledToZero, ""),
			condition(mcpv1alpha1.ConditionCatalogPropagated, false, mcpv1alpha1.ReasonNoReadyReplicas, ""), string(mcpv1alpha1.ReasonScaledToZero)},
	} {
		t.Run(name, func(t *testing.T) {
			c := readyCondition(tc.a, tc.p)
			wantTrue := tc.wantReason == string(mcpv1alpha1.ReasonReady) || tc.wantReason == string(mcpv1alpha1.ReasonScaledToZero)
			if c.Type != string(mcpv1alpha1.ConditionReady) || c.Reason != tc.wantReason || (c.Status == metav1.ConditionTrue) != wantTrue {
				t.Fatalf("got %+v", c)
			}
		})
	}
}

func TestFailureCondition(t *testing.T) {
	if c := failureCondition(reconcile.TerminalError(errors.New("bad name"))); c.Reason != string(mcpv1alpha1.ReasonInvalidSpec) || c.Status != metav1.ConditionFalse {
		t.Fatalf("terminal: %+v", c)
	}
	if c := failureCondition(errors.New("conflict")); c.Reason != string(mcpv1alpha1.ReasonReconcileFailed) || c.Message != "conflict" {
		t.Fatalf("transient: %+v", c)
	}
}

func TestPublishedCondition(t *testing.T) {
	accepted := verdict{Accepted: true, Reason: mcpv1alpha1.ReasonAccepted}
	for name, tc := range map[string]struct {
		v             verdict
		missing       sourceProblem
		tooLarge      bool
		wantReason    string
		wantRevision  string
		wantPublished bool
	}{
		"published":    {accepted, sourceProblem{}, false, string(mcpv1alpha1.ReasonPublished), "r1", true},
		"not accepted": {verdict{Reason: mcpv1alpha1.ReasonNameConflict}, sourceProblem{}, false, string(mcpv1alpha1.ReasonNotAccepted), "", false},
		"key missing": {accepted, sourceProblem{reason: mcpv1alpha1.ReasonSourceNotFound, message: "Secret x has no key y", inCatalog: true},
			false, string(mcpv1alpha1.ReasonSourceNotFound), "r1", false},
		"source not exposed": {accepted, sourceProblem{reason: mcpv1alpha1.ReasonSourceNotExposed, message: "label it"},
			false, string(mcpv1alpha1.ReasonSourceNotExposed), "", false},
		"too large": {accepted, sourceProblem{}, true, string(mcpv1alpha1.ReasonCatalogTooLarge), "", false},
	} {
		t.Run(name, func(t *testing.T) {
			c, rev := publishedCondition(tc.v, tc.missing, tc.tooLarge, "r1", "too large")
			if c.Reason != tc.wantReason || rev != tc.wantRevision || (c.Status == metav1.ConditionTrue) != tc.wantPublished {
				t.Fatalf("got %+v, revision %q", c, rev)
			}
		})
	}
}

// TestServerStatus: the status is decided from the scope alone; observedGeneration moves only
// when every phase succeeded, and a failed phase makes Ready False with its reason.
func TestServerStatus(t *testing.T) {
	server := newServer("tools", "weather", 2)
	server.Generation = 3
	server.Status.ObservedGeneration = 2
	scopeFor := func(observed bool) *scope {
		s := &scope{server: server, before: server.DeepCopy(), names: inject.NamesFor(server), revision: "r1",
			catalog: &catalog.Catalog{
				Tools:     []catalog.Tool{{Name: "a"}, {Name: "b", Disabled: true}},
				Resources: []catalog.Resource{{URI: "docs://x"}},
			}}
		if observed {
			s.observed = true
			s.workload = workload{Replicas: 2, Deployment: rollout(2, 2, 2, 2)}
			s.reports = parseReports(propagation{Revision: "r1", ReadyPods: []string{"p1", "p2"},
				Reports: map[string]string{"p1": `{"revision":"r1"}`, "p2": `{"revision":"r1"}`}})
		}
		return s
	}

	st := serverStatus(scopeFor(true), nil)
	if st.ObservedGeneration != 3 || st.CatalogRevision != "r1" || st.Tools != 1 || st.Resources != 1 || st.CatalogUpToDateReplicas != 2 {
		t.Fatalf("status: %+v", st)
	}
	if st.URL != "http://weather.tools.svc/mcp" || st.Selector != "app.kubernetes.io/instance=weather,mcp.switchboard.dev/server=weather" {
		t.Fatalf("url %q, selector %q", st.URL, st.Selector)
	}
	if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady); err != nil {
		t.Fatal(err)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 {
			t.Fatalf("condition %s observed generation %d", c.Type, c.ObservedGeneration)
		}
	}

	// A failed reconcile describes this generation too (kstatus reads Stalled or Reconciling
	// only once status.observedGeneration has reached metadata.generation).
	st = serverStatus(scopeFor(false), errors.New("the API server is away"))
	if st.ObservedGeneration != 3 {
		t.Fatalf("a failed reconcile left observedGeneration at %d", st.ObservedGeneration)
	}
	if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonReconcileFailed); err != nil {
		t.Fatal(err)
	}
	if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionReconciling, metav1.ConditionTrue, mcpv1alpha1.ReasonReconcileFailed); err != nil {
		t.Fatal(err)
	}
	if len(st.Conditions) != 2 {
		t.Fatalf("nothing was observed, yet conditions %+v", st.Conditions)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != 3 {
			t.Fatalf("condition %s observed generation %d", c.Type, c.ObservedGeneration)
		}
	}

	// Recovery removes the abnormal-true conditions; a terminal error sets Stalled instead.
	s := scopeFor(true)
	s.before.Status = st
	st = serverStatus(s, nil)
	if c := findConditionIn(st.Conditions, mcpv1alpha1.ConditionReconciling); c.Type != "" {
		t.Fatalf("Reconciling left after recovery: %+v", c)
	}
	st = serverStatus(scopeFor(false), reconcile.TerminalError(errors.New("bad name")))
	if err := conditionIs(st.Conditions, mcpv1alpha1.ConditionStalled, metav1.ConditionTrue, mcpv1alpha1.ReasonInvalidSpec); err != nil {
		t.Fatal(err)
	}
	if server.Status.ObservedGeneration != 2 || len(server.Status.Conditions) != 0 {
		t.Fatal("serverStatus changed the server it was given")
	}
}

// TestItemStatuses: every item with a verdict gets Accepted and Published; a resource whose
// source is missing is published but says so; items being deleted (no verdict) are left out.
func TestItemStatuses(t *testing.T) {
	in := items{
		Tools: []mcpv1alpha1.MCPTool{*newTool("tools", "forecast", "weather", "forecast"), *newTool("tools", "later", "weather", "forecast")},
		Resources: []mcpv1alpha1.MCPResource{*newResource("tools", "handbook", "weather", "docs://handbook",
			mcpv1alpha1.ResourceSource{ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "h", Key: "k"}})},
	}
	s := &scope{items: in, resolution: resolve(in), revision: "r1",
		sourceProblems: map[string]sourceProblem{"handbook": {reason: mcpv1alpha1.ReasonSourceNotFound, message: `ConfigMap "h" has no key "k"`, inCatalog: true}}}
	gone := *newTool("tools", "leaving", "weather", "other")
	s.items.Tools = append(s.items.Tools, gone) // listed, but resolved before it appeared

	got := map[string]itemStatusUpdate{}
	for _, u := range itemStatuses(s) {
		got[u.object.GetName()] = u
	}
	if len(got) != 3 {
		t.Fatalf("updates for %d objects, want 3: %v", len(got), got)
	}
	for name, want := range map[string]struct {
		accepted, published string
		revision            string
	}{
		"forecast": {string(mcpv1alpha1.ReasonAccepted), string(mcpv1alpha1.ReasonPublished), "r1"},
		"later":    {string(mcpv1alpha1.ReasonNameConflict), string(mcpv1alpha1.ReasonNotAccepted), ""},
		"handbook": {string(mcpv1alpha1.ReasonAccepted), string(mcpv1alpha1.ReasonSourceNotFound), "r1"},
	} {
		u := got[name]
		if u.accepted.Reason != want.accepted || u.published.Reason != want.published || u.revision != want.revision {
			t.Errorf("%s: accepted %s, published %s, revision %q; want %s, %s, %q", name,
				u.accepted.Reason, u.published.Reason, u.revision, want.accepted, want.published, want.revision)
		}
	}
}

// TestPublishedSince: an object that stays published, unchanged, keeps the revision it was first
// published in (no status write when another object of the server changes); a new generation, a
// different reason or a first publication records the current revision.
func TestPublishedSince(t *testing.T) {
	published := func(gen int64, rev string) *mcpv1alpha1.CatalogItemStatus {
		return &mcpv1alpha1.CatalogItemStatus{ObservedGeneration: gen, PublishedRevision: rev, CatalogRevision: rev, Conditions: []metav1.Condition{{ //nolint:staticcheck // SA1019: as the controller writes it
			Type: string(mcpv1alpha1.ConditionPublished), Status: metav1.ConditionTrue, Reason: string(mcpv1alpha1.ReasonPublished),
			ObservedGeneration: gen, Message: publishedMessage(rev)}}}
	}
	sourceMissing := &mcpv1alpha1.CatalogItemStatus{ObservedGeneration: 2, PublishedRevision: "r1", Conditions: []metav1.Condition{{
		Type: string(mcpv1alpha1.ConditionPublished), Status: metav1.ConditionFalse, Reason: string(mcpv1alpha1.ReasonSourceNotFound), ObservedGeneration: 2}}}
	legacy := published(2, "r1")
	legacy.PublishedRevision = ""
	accepted := verdict{Accepted: true, Reason: mcpv1alpha1.ReasonAccepted}
	now, _ := publishedCondition(accepted, sourceProblem{}, false, "r2", "")
	missing := sourceProblem{reason: mcpv1alpha1.ReasonSourceNotFound, message: "ConfigMap x has no key k", inCatalog: true}
	for name, tc := range map[string]struct {
		before  *mcpv1alpha1.CatalogItemStatus
		gen     int64
		missing sourceProblem
		want    string
	}{
		"first publication":           {&mcpv1alpha1.CatalogItemStatus{}, 2, sourceProblem{}, "r2"},
		"unchanged object keeps r1":   {published(2, "r1"), 2, sourceProblem{}, "r1"},
		"edited object (generation)":  {published(1, "r1"), 2, sourceProblem{}, "r2"},
		"source now missing":          {published(2, "r1"), 2, missing, "r2"},
		"source still missing":        {sourceMissing, 2, missing, "r1"},
		"source found again":          {sourceMissing, 2, sourceProblem{}, "r2"},
		"written before this release": {&mcpv1alpha1.CatalogItemStatus{ObservedGeneration: 2, CatalogRevision: "r1"}, 2, sourceProblem{}, "r2"}, //nolint:staticcheck // SA1019: an older manager's status
		// A manager that wrote only the deprecated catalogRevision: the revision is kept.
		"only catalogRevision written": {legacy, 2, sourceProblem{}, "r1"},
	} {
		t.Run(name, func(t *testing.T) {
			c, rev := publishedCondition(accepted, tc.missing, false, "r2", "")
			c, rev = publishedSince(tc.before, tc.gen, c, rev)
			if rev != tc.want {
				t.Fatalf("revision %q, want %q", rev, tc.want)
			}
			if c.Reason == string(mcpv1alpha1.ReasonPublished) && c.Message != publishedMessage(tc.want) {
				t.Fatalf("message %q does not name revision %s", c.Message, tc.want)
			}
		})
	}
	// Not published now: nothing to keep.
	notAccepted, rev := publishedCondition(verdict{Reason: mcpv1alpha1.ReasonNameConflict}, sourceProblem{}, false, "r2", "")
	if c, r := publishedSince(published(2, "r1"), 2, notAccepted, rev); r != "" || c.Status != metav1.ConditionFalse {
		t.Fatalf("a conflicting object: %+v, revision %q", c, r)
	}
	if now.Message != publishedMessage("r2") {
		t.Fatalf("message %q", now.Message)
	}
}
