package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestPinOf(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pin      string
		observed []string
		want     toolPin
	}{
		{"no pin, nothing observed", "", nil, toolPin{State: mcpv1alpha1.PinUnpinned}},
		{"no pin, observed", "", []string{digestA}, toolPin{Observed: digestA, State: mcpv1alpha1.PinUnpinned}},
		{"pin, nothing observed", digestA, nil, toolPin{State: mcpv1alpha1.PinUnknown}},
		{"pin matches", digestA, []string{digestA, digestA}, toolPin{Observed: digestA, State: mcpv1alpha1.PinPinned}},
		{"pin differs", digestA, []string{digestB}, toolPin{Observed: digestB, State: mcpv1alpha1.PinDrifted}},
		{"one replica of two drifted: never hidden", digestA, []string{digestA, digestB}, toolPin{Observed: digestB, State: mcpv1alpha1.PinDrifted}},
	} {
		if got := pinOf(tc.pin, tc.observed); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func pinnedTool(obj, name, pin string, disabled bool) mcpv1alpha1.MCPTool {
	t := mcpv1alpha1.MCPTool{Spec: mcpv1alpha1.MCPToolSpec{Name: name, UpstreamDigest: pin, State: mcpv1alpha1.ToolEnabled}}
	t.Name = obj
	if disabled {
		t.Spec.State = mcpv1alpha1.ToolDisabled
	}
	return t
}

func TestToolsDriftedCondition(t *testing.T) {
	report := func(rev string, digests map[string]string, withheld ...string) string {
		return catalog.Report{Revision: rev, ToolsChecked: true, ToolDigests: digests, WithheldTools: withheld, WithheldToolCount: len(withheld)}.String()
	}
	tools := []mcpv1alpha1.MCPTool{
		pinnedTool("weather-tool", "weather", digestA, false),
		pinnedTool("echo-tool", "echo", "", false),
		pinnedTool("off-tool", "off", digestA, true),
	}
	server := func(mode mcpv1alpha1.ToolPinning) *mcpv1alpha1.MCPServer {
		s := newServer("ns", "weather", 1)
		s.Spec.ToolPinning = mode
		return s
	}
	cases := []struct {
		name    string
		mode    mcpv1alpha1.ToolPinning
		reports map[string]string
		absent  bool
		status  metav1.ConditionStatus
		reason  string
		want    []string
		pins    map[string]mcpv1alpha1.PinState
	}{
		{name: "Off: no condition", mode: mcpv1alpha1.ToolPinningOff, absent: true,
			reports: map[string]string{"a": report("r", map[string]string{"weather": digestB})},
			pins:    map[string]mcpv1alpha1.PinState{"weather-tool": mcpv1alpha1.PinDrifted}},
		{name: "not yet reported", mode: "", reports: map[string]string{"a": catalog.Report{Revision: "r"}.String()},
			status: metav1.ConditionUnknown, reason: string(mcpv1alpha1.ReasonNotYetReported),
			pins: map[string]mcpv1alpha1.PinState{"weather-tool": "", "echo-tool": ""}}, // not decided: kept as they were
		{name: "an older revision's report does not count", mode: mcpv1alpha1.ToolPinningWarn,
			reports: map[string]string{"a": report("old", map[string]string{"weather": digestB})},
			status:  metav1.ConditionUnknown, reason: string(mcpv1alpha1.ReasonNotYetReported)},
		{name: "Warn, all match; an unpinned tool is not drifted", mode: mcpv1alpha1.ToolPinningWarn,
			reports: map[string]string{"a": report("r", map[string]string{"weather": digestA, "echo": digestB, "off": digestB})},
			status:  metav1.ConditionFalse, reason: string(mcpv1alpha1.ReasonToolsMatchPins), want: []string{"1 pinned tools match their pins on all 1"},
			pins: map[string]mcpv1alpha1.PinState{"weather-tool": mcpv1alpha1.PinPinned, "echo-tool": mcpv1alpha1.PinUnpinned, "off-tool": mcpv1alpha1.PinDrifted}},
		{name: "Warn (the default), drifted on one replica", mode: "",
			reports: map[string]string{"a": report("r", map[string]string{"weather": digestA}), "b": report("r", map[string]string{"weather": digestB})},
			status:  metav1.ConditionTrue, reason: string(mcpv1alpha1.ReasonPinnedToolsDrifted),
			want: []string{"1 pinned tools, still served", "weather (MCPTool weather-tool): pinned aaaaaaaaaaaa, served bbbbbbbbbbbb", `set spec.upstreamDigest to "` + digestB + `"`},
			pins: map[string]mcpv1alpha1.PinState{"weather-tool": mcpv1alpha1.PinDrifted}},
		{name: "Enforce, drifted, and unpinned tools withheld", mode: mcpv1alpha1.ToolPinningEnforce,
			reports: map[string]string{"a": report("r", map[string]string{"weather": digestB}, "echo", "weather", "zz")},
			status:  metav1.ConditionTrue, reason: string(mcpv1alpha1.ReasonPinnedToolsDrifted),
			want: []string{"withheld from clients (toolPinning Enforce)", "withheld because they have no pin (Enforce with toolPolicy All): echo, zz;"}},
		{name: "a pinned tool nobody reports is named, not counted as matching", mode: mcpv1alpha1.ToolPinningWarn,
			reports: map[string]string{"a": report("r", map[string]string{})},
			status:  metav1.ConditionFalse, reason: string(mcpv1alpha1.ReasonToolsMatchPins),
			want: []string{"0 pinned tools match", "nothing was compared: weather"},
			pins: map[string]mcpv1alpha1.PinState{"weather-tool": mcpv1alpha1.PinUnknown, "echo-tool": mcpv1alpha1.PinUnpinned}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := propagation{Revision: "r", ReadyPods: []string{"b", "a"}, Reports: tc.reports}
			if len(tc.reports) == 1 {
				p.ReadyPods = []string{"a"}
			}
			pins := toolPins(tools, parseReports(p))
			for obj, want := range tc.pins {
				if pins[obj].State != want {
					t.Errorf("%s: pin %s, want %s", obj, pins[obj].State, want)
				}
			}
			c, ok := toolsDriftedCondition(server(tc.mode), tools, pins, parseReports(p))
			if ok == tc.absent {
				t.Fatalf("condition present = %v, want %v", ok, !tc.absent)
			}
			if tc.absent {
				return
			}
			if c.Type != string(mcpv1alpha1.ConditionToolsDrifted) || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message lacks %q: %s", w, c.Message)
				}
			}
		})
	}
	if eventType(string(mcpv1alpha1.ReasonPinnedToolsDrifted)) != "Warning" || eventType(string(mcpv1alpha1.ReasonToolsMatchPins)) != "Normal" {
		t.Fatal("a drift is a Warning event, a match a Normal one")
	}
}

// TestPinCatalog: only Enforce puts pins into the catalog, so Warn and Off keep the bytes (and
// the revision) a catalog had before pinning existed.
func TestPinCatalog(t *testing.T) {
	tools := []mcpv1alpha1.MCPTool{pinnedTool("w", "weather", digestA, false), pinnedTool("e", "echo", "", false)}
	var revs []string
	for _, mode := range []mcpv1alpha1.ToolPinning{"", mcpv1alpha1.ToolPinningOff, mcpv1alpha1.ToolPinningWarn, mcpv1alpha1.ToolPinningEnforce} {
		s := newServer("ns", "weather", 1)
		s.Spec.ToolPinning = mode
		c := catalogFor(s, items{Tools: tools})
		enc, err := catalog.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, catalog.Revision(enc))
		enforce := mode == mcpv1alpha1.ToolPinningEnforce
		if got := strings.Contains(string(enc), digestA); got != enforce {
			t.Errorf("%q: catalog carries the pin = %v", mode, got)
		}
		if got := c.Server.ToolPinning == catalog.ToolPinningEnforce; got != enforce {
			t.Errorf("%q: server.toolPinning = %q", mode, c.Server.ToolPinning)
		}
		if _, err := catalog.Decode(enc); err != nil {
			t.Errorf("%q: the sidecar would reject it: %v", mode, err)
		}
		if strings.Contains(string(enc), "toolPinning") != enforce || strings.Contains(string(enc), "upstreamDigest") != enforce {
			t.Errorf("%q: %s", mode, enc)
		}
	}
	if revs[0] != revs[1] || revs[1] != revs[2] || revs[2] == revs[3] {
		t.Errorf("revisions %v: Off and Warn must not change the catalog, Enforce must", revs)
	}
}

func TestDriftChanged(t *testing.T) {
	c := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: string(mcpv1alpha1.ConditionToolsDrifted), Status: status, Reason: reason, Message: msg}}
	}
	drift := mcpv1alpha1.ReasonPinnedToolsDrifted
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          bool
	}{
		{"another tool drifts too", c("True", string(drift), "a"), c("True", string(drift), "a; b"), true},
		{"unchanged", c("True", string(drift), "a"), c("True", string(drift), "a"), false},
		{"first drift (the generic Event covers it)", c("False", string(mcpv1alpha1.ReasonToolsMatchPins), "x"), c("True", string(drift), "a"), false},
		{"resolved", c("True", string(drift), "a"), c("False", string(mcpv1alpha1.ReasonToolsMatchPins), "x"), false},
		{"no condition before", nil, c("True", string(drift), "a"), false},
	} {
		if _, got := driftChanged(tc.before, tc.after); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

// TestPinsKeptUntilReported: just after a catalog change (no replica has reported the new
// revision) the tools' pin state and ToolsDrifted keep their last known value.
func TestPinsKeptUntilReported(t *testing.T) {
	tools := []mcpv1alpha1.MCPTool{pinnedTool("w", "weather", digestA, false)}
	p := propagation{Revision: "new", ReadyPods: []string{"a"},
		Reports: map[string]string{"a": catalog.Report{Revision: "old", ToolsChecked: true, ToolDigests: map[string]string{"weather": digestB}}.String()}}
	if pins := toolPins(tools, parseReports(p)); pins != nil {
		t.Fatalf("pins decided from no report of the current revision: %v", pins)
	}
	c, _ := toolsDriftedCondition(newServer("ns", "weather", 1), tools, nil, parseReports(p))
	drifted := metav1.Condition{Type: string(mcpv1alpha1.ConditionToolsDrifted), Status: metav1.ConditionTrue, Reason: string(mcpv1alpha1.ReasonPinnedToolsDrifted)}
	if got := keepKnown(&drifted, c); got.Status != metav1.ConditionTrue || got.Reason != string(mcpv1alpha1.ReasonPinnedToolsDrifted) {
		t.Errorf("kept %+v", got)
	}
	if got := keepKnown(nil, c); got.Status != metav1.ConditionUnknown {
		t.Errorf("nothing known before: %+v", got)
	}
	matched := metav1.Condition{Type: string(mcpv1alpha1.ConditionToolsDrifted), Status: metav1.ConditionFalse, Reason: string(mcpv1alpha1.ReasonToolsMatchPins)}
	if got := keepKnown(&drifted, matched); got.Status != metav1.ConditionFalse {
		t.Errorf("a known value replaced by the old one: %+v", got)
	}
}

// TestWithheldKeptUntilReported: under Enforce, an MCPTool the sidecars withhold stays Stalled
// (ToolWithheld) while the replicas have not reported the current catalog revision (just after
// any catalog edit), instead of flipping to Ready and back; once a report of the current
// revision exists, it decides.
func TestWithheldKeptUntilReported(t *testing.T) {
	server := newServer("ns", "weather", 1)
	server.Spec.ToolPinning = mcpv1alpha1.ToolPinningEnforce
	withheld := pinnedTool("weather-tool", "weather", digestA, false)
	withheld.Namespace, withheld.Spec.ServerRef = "ns", mcpv1alpha1.ServerReference{Name: "weather"}
	withheld.Generation = 1
	withheld.Status.Pin, withheld.Status.ObservedUpstreamDigest = mcpv1alpha1.PinDrifted, digestB
	withheld.Status.Conditions = []metav1.Condition{
		condition(mcpv1alpha1.ConditionStalled, true, mcpv1alpha1.ReasonToolWithheld, "withheld")}
	served := pinnedTool("echo-tool", "echo", digestA, false)
	served.Namespace, served.Spec.ServerRef = "ns", mcpv1alpha1.ServerReference{Name: "weather"}
	served.Generation = 1

	// Withheld as unpinned (toolPolicy All): only its Stalled condition says so.
	unpinned := pinnedTool("extra-tool", "extra", "", false)
	unpinned.Namespace, unpinned.Spec.ServerRef = "ns", mcpv1alpha1.ServerReference{Name: "weather"}
	unpinned.Generation = 1
	unpinned.Status.Pin, unpinned.Status.ObservedUpstreamDigest = mcpv1alpha1.PinUnpinned, digestB
	unpinned.Status.Conditions = withheld.Status.Conditions

	statuses := func(reportRevision string, digests map[string]string) map[string]itemStatusUpdate {
		in := items{Tools: []mcpv1alpha1.MCPTool{withheld, served, unpinned}}
		s := &scope{server: server, items: in, resolution: resolve(in), revision: "r2", observed: true,
			reports: parseReports(propagation{Revision: "r2", ReadyPods: []string{"a"}, Reports: map[string]string{
				"a": catalog.Report{Revision: reportRevision, ToolsChecked: true, ToolDigests: digests}.String()}})}
		out := map[string]itemStatusUpdate{}
		for _, u := range itemStatuses(s) {
			out[u.object.GetName()] = u
		}
		return out
	}

	// The replica still reports r1: nothing is known of r2's tools.
	got := statuses("r1", map[string]string{"weather": digestB, "echo": digestA})
	if u := got["weather-tool"]; u.stalled == nil || u.stalled.Reason != string(mcpv1alpha1.ReasonToolWithheld) || u.pin != nil {
		t.Errorf("withheld tool before the report: stalled %+v, pin %+v; want ToolWithheld kept, pin untouched", u.stalled, u.pin)
	}
	if u := got["echo-tool"]; u.stalled != nil || u.pin != nil {
		t.Errorf("served tool before the report: stalled %+v, pin %+v", u.stalled, u.pin)
	}
	if u := got["extra-tool"]; u.stalled == nil || u.stalled.Reason != string(mcpv1alpha1.ReasonToolWithheld) || u.pin != nil {
		t.Errorf("unpinned withheld tool before the report: stalled %+v, pin %+v; want ToolWithheld kept", u.stalled, u.pin)
	}

	// The report of r2: the pin now matches for weather, and echo drifted.
	got = statuses("r2", map[string]string{"weather": digestA, "echo": digestB})
	if u := got["weather-tool"]; u.stalled != nil || u.pin == nil || u.pin.State != mcpv1alpha1.PinPinned {
		t.Errorf("weather after the report: stalled %+v, pin %+v; want served and Pinned", u.stalled, u.pin)
	}
	if u := got["echo-tool"]; u.stalled == nil || u.stalled.Reason != string(mcpv1alpha1.ReasonToolWithheld) || u.pin == nil || u.pin.State != mcpv1alpha1.PinDrifted {
		t.Errorf("echo after the report: stalled %+v, pin %+v; want ToolWithheld and Drifted", u.stalled, u.pin)
	}
}
