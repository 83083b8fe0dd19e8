package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// TestReadinessFollowsEvents: the counts follow the events of servers and items, Ready only for
// the generation it was decided for; a server is done once it and all its items are Ready, and
// the reason a server is not Ready is the first one's by name.
func TestReadinessFollowsEvents(t *testing.T) {
	w := &fleetWatch{o: options{tools: 1}, readiness: &readiness{servers: map[string]string{}, items: map[string]itemReadiness{}}}
	r := w.readiness
	conds := func(status metav1.ConditionStatus, observed int64) []metav1.Condition {
		return []metav1.Condition{{Type: string(mcpv1alpha1.ConditionReady), Status: status, Reason: "R", Message: "m", ObservedGeneration: observed}}
	}
	server := func(name string, status metav1.ConditionStatus, observed int64) *mcpv1alpha1.MCPServer {
		s := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Generation: 1}}
		s.Name, s.Status.Conditions = name, conds(status, observed)
		return s
	}
	ref := func(name string) mcpv1alpha1.ServerReference { return mcpv1alpha1.ServerReference{Name: name} }
	tool := &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Name: "a-t", Generation: 2}, Spec: mcpv1alpha1.MCPToolSpec{ServerRef: ref("a")}}
	tool.Status.Conditions = conds(metav1.ConditionTrue, 1) // Ready, but for the generation before
	res := &mcpv1alpha1.MCPResource{ObjectMeta: metav1.ObjectMeta{Name: "a-r", Generation: 1}, Spec: mcpv1alpha1.MCPResourceSpec{ServerRef: ref("a")}}
	res.Status.Conditions = conds(metav1.ConditionTrue, 1)
	prompt := &mcpv1alpha1.MCPPrompt{ObjectMeta: metav1.ObjectMeta{Name: "a-p", Generation: 1}, Spec: mcpv1alpha1.MCPPromptSpec{ServerRef: ref("a")}}
	prompt.Status.Conditions = conds(metav1.ConditionTrue, 1)

	r.set(server("b", metav1.ConditionFalse, 1))
	r.set(server("a", metav1.ConditionTrue, 1))
	r.set(server("c", metav1.ConditionFalse, 1))
	for _, o := range []any{tool, res, prompt} {
		r.set(o)
	}
	if s, i, done := w.ready(); s != 1 || i != 2 || len(done) != 0 {
		t.Errorf("ready = %d servers, %d items, done %v; want 1, 2, none", s, i, done)
	}
	if got, want := w.notReady(), "b: Ready=False R: m"; got != want {
		t.Errorf("notReady = %q, want %q", got, want)
	}
	tool = tool.DeepCopy()
	tool.Status.Conditions = conds(metav1.ConditionTrue, 2)
	r.set(tool)
	if s, i, done := w.ready(); s != 1 || i != 3 || !done["a"] || len(done) != 1 {
		t.Errorf("ready = %d servers, %d items, done %v; want 1, 3, a", s, i, done)
	}
	r.gone(toolscache.DeletedFinalStateUnknown{Obj: tool})
	r.gone(server("b", metav1.ConditionFalse, 1))
	if s, i, done := w.ready(); s != 1 || i != 2 || len(done) != 0 {
		t.Errorf("after deletions: ready = %d servers, %d items, done %v; want 1, 2, none", s, i, done)
	}
	if got, want := w.notReady(), "c: Ready=False R: m"; got != want {
		t.Errorf("after deletions: notReady = %q, want %q", got, want)
	}
}

// Each server's p99 is by nearest rank: of 100 servers ready 1…100 s after being declared, the
// 99th (99 s), not the slowest; a server never seen ready is left out.
func TestServerReadyLatencyNearestRank(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	declared := make([]time.Time, 101)
	ready := map[string]time.Time{}
	for i := range declared {
		declared[i] = t0
		if i < 100 {
			ready[serverName(i)] = t0.Add(time.Duration(i+1) * time.Second)
		}
	}
	l := serverReadyLatency(declared, ready)
	if l.P50 != 50 || l.P99 != 99 || l.Max != 100 || l.Servers != 100 {
		t.Fatalf("latency = %+v, want p50 50, p99 99, max 100 of 100 servers", l)
	}
}

// TestPerServer: the report's per-server lines divide each count and the total by the servers,
// keys in order, for the writes (counts) and the manager's requests (counter values) alike.
func TestPerServer(t *testing.T) {
	if got, want := perServer(map[string]int{"switchboard": 2502, "kube-controller-manager": 1500}, 100),
		"total 40.02: kube-controller-manager=15.00 switchboard=25.02"; got != want {
		t.Errorf("writes: got %q, want %q", got, want)
	}
	if got, want := perServer(map[string]float64{"PUT": 9, "PATCH": 1200, "POST": 1301}, 100),
		"total 25.10: PATCH=12.00 POST=13.01 PUT=0.09"; got != want {
		t.Errorf("requests: got %q, want %q", got, want)
	}
}
