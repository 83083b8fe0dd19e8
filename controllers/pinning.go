package controllers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// Tool pinning (docs/security.md, "Tool pinning"): the sidecars report the upstream digest of
// every declared tool as their MCP server serves it; the controller compares it with the
// MCPTool's pin (spec.upstreamDigest) and shows the result on the MCPTool (status.pin,
// status.observedUpstreamDigest) and on the server (ToolsDrifted). Under Enforce the catalog
// also carries the pins, and the sidecar withholds what does not match.

// toolPinningOf is the server's pinning mode (the API default, Warn, when unset).
func toolPinningOf(s *mcpv1alpha1.MCPServer) mcpv1alpha1.ToolPinning {
	return cmp.Or(s.Spec.ToolPinning, mcpv1alpha1.ToolPinningWarn)
}

// pinCatalog adds what the sidecar needs to enforce pins to a compiled catalog: only under
// Enforce (Warn and Off leave the catalog, and its revision, as they were).
func pinCatalog(c *catalog.Catalog, s *mcpv1alpha1.MCPServer, tools []mcpv1alpha1.MCPTool) {
	if toolPinningOf(s) != mcpv1alpha1.ToolPinningEnforce {
		return
	}
	c.Server.ToolPinning = catalog.ToolPinningEnforce
	pins := map[string]string{}
	for i := range tools {
		pins[tools[i].Spec.Name] = tools[i].Spec.UpstreamDigest
	}
	for i := range c.Tools {
		c.Tools[i].UpstreamDigest = pins[c.Tools[i].Name]
	}
}

// toolPin is what the replicas observed of one MCPTool's definition.
type toolPin struct {
	Observed string
	State    mcpv1alpha1.PinState
}

// pinOf decides one tool's pin state from the digests the checked reports give for its name.
// When replicas disagree, the observed digest shown is the first (by pod) that differs from the
// pin, so a drift on one replica is never hidden by the others.
func pinOf(pin string, observed []string) toolPin {
	switch {
	case len(observed) == 0 && pin == "":
		return toolPin{State: mcpv1alpha1.PinUnpinned}
	case len(observed) == 0:
		return toolPin{State: mcpv1alpha1.PinUnknown}
	case pin == "":
		return toolPin{Observed: observed[0], State: mcpv1alpha1.PinUnpinned}
	}
	for _, d := range observed {
		if d != pin {
			return toolPin{Observed: d, State: mcpv1alpha1.PinDrifted}
		}
	}
	return toolPin{Observed: pin, State: mcpv1alpha1.PinPinned}
}

// toolPins decides the pin state of every accepted MCPTool, by object name. It is nil while no
// ready replica has reported the current revision's tools (just after a catalog change): the
// MCPTools then keep the state last observed, instead of flipping to Unknown and back on every
// catalog change (two status writes per pinned tool each time).
func toolPins(tools []mcpv1alpha1.MCPTool, p reports) map[string]toolPin {
	if len(p.Checked) == 0 {
		return nil
	}
	out := make(map[string]toolPin, len(tools))
	for i := range tools {
		t := &tools[i]
		var observed []string
		for _, r := range p.Checked {
			if d := r.Report.ToolDigests[t.Spec.Name]; d != "" {
				observed = append(observed, d)
			}
		}
		out[t.Name] = pinOf(t.Spec.UpstreamDigest, observed)
	}
	return out
}

// toolsDriftedCondition decides ToolsDrifted; ok is false under Off (the condition is removed).
// Only pinned, enabled tools whose definition drifted make it True (a Warning Event): a tool
// without a pin is not drifted, so Warn on a server without pins says nothing. Under Enforce
// the message also names what the sidecars withhold for want of a pin (toolPolicy All).
func toolsDriftedCondition(s *mcpv1alpha1.MCPServer, tools []mcpv1alpha1.MCPTool, pins map[string]toolPin, p reports) (metav1.Condition, bool) {
	const typ = mcpv1alpha1.ConditionToolsDrifted
	mode := toolPinningOf(s)
	if mode == mcpv1alpha1.ToolPinningOff {
		return metav1.Condition{}, false
	}
	if len(p.Checked) == 0 {
		return metav1.Condition{Type: string(typ), Status: metav1.ConditionUnknown, Reason: string(mcpv1alpha1.ReasonNotYetReported),
			Message: "no ready replica has reported the tool definitions of catalog revision " + p.Revision + " yet"}, true
	}
	sorted := slices.Clone(tools)
	slices.SortFunc(sorted, func(a, b mcpv1alpha1.MCPTool) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	var drifted, unseen []string
	pinned := 0
	for i := range sorted {
		t := &sorted[i]
		if t.Spec.State == mcpv1alpha1.ToolDisabled || t.Spec.UpstreamDigest == "" {
			continue
		}
		switch pin := pins[t.Name]; pin.State {
		case mcpv1alpha1.PinPinned:
			pinned++
		case mcpv1alpha1.PinUnknown:
			unseen = append(unseen, t.Spec.Name)
		case mcpv1alpha1.PinDrifted:
			drifted = append(drifted, fmt.Sprintf("%s (MCPTool %s): pinned %s, served %s; to accept it set spec.upstreamDigest to %q",
				t.Spec.Name, t.Name, shortDigest(t.Spec.UpstreamDigest), shortDigest(pin.Observed), pin.Observed))
		}
	}
	withheld := ""
	if len(unseen) > 0 {
		withheld = fmt.Sprintf("; no reporting replica serves these pinned tools, so nothing was compared: %s (the MCP server does not list them, or its sidecar predates pinning)",
			strings.Join(unseen, ", "))
	}
	if mode == mcpv1alpha1.ToolPinningEnforce {
		// The first reporting pod's list: replicas normally agree (Verified says when not).
		r := p.Checked[0].Report
		var unpinned []string
		for _, name := range r.WithheldTools {
			if !slices.ContainsFunc(sorted, func(t mcpv1alpha1.MCPTool) bool { return t.Spec.Name == name && t.Spec.UpstreamDigest != "" }) {
				unpinned = append(unpinned, name)
			}
		}
		if len(unpinned) > 0 {
			more := ""
			if n := r.WithheldToolCount - len(r.WithheldTools); n > 0 {
				more = fmt.Sprintf(" and %d more", n)
			}
			withheld += fmt.Sprintf("; withheld because they have no pin (Enforce with toolPolicy All): %s%s; pin them with an MCPTool's spec.upstreamDigest",
				strings.Join(unpinned, ", "), more)
		}
	}
	if len(drifted) > 0 {
		what := "still served (toolPinning Warn)"
		if mode == mcpv1alpha1.ToolPinningEnforce {
			what = "withheld from clients (toolPinning Enforce)"
		}
		return condition(typ, true, mcpv1alpha1.ReasonPinnedToolsDrifted, clip(fmt.Sprintf(
			"the MCP server changed the definition of %d pinned tools, %s; review each new definition (kubectl mcp, or tools/list), then accept it: %s%s",
			len(drifted), what, strings.Join(drifted, "; "), withheld), maxConditionMessage)), true
	}
	return condition(typ, false, mcpv1alpha1.ReasonToolsMatchPins, clip(fmt.Sprintf(
		"%d pinned tools match their pins on all %d reporting ready replicas%s", pinned, len(p.Checked), withheld), maxConditionMessage)), true
}

// keepKnown keeps the last known ToolsDrifted while the replicas have not reported the current
// catalog revision yet (after every catalog change, for a moment): Unknown only when nothing was
// ever known, so a catalog edit does not record two Events (Unknown, then back) on every server.
func keepKnown(prev *metav1.Condition, c metav1.Condition) metav1.Condition {
	if c.Status == metav1.ConditionUnknown && prev != nil && prev.Status != metav1.ConditionUnknown {
		return *prev
	}
	return c
}

// driftChanged reports whether ToolsDrifted stays True but names other tools or digests: the
// generic condition Events fire only on a change of status or reason, and a second tool that
// drifts must be announced too.
func driftChanged(before, after []metav1.Condition) (metav1.Condition, bool) {
	var b, a *metav1.Condition
	for i := range before {
		if before[i].Type == string(mcpv1alpha1.ConditionToolsDrifted) {
			b = &before[i]
		}
	}
	for i := range after {
		if after[i].Type == string(mcpv1alpha1.ConditionToolsDrifted) {
			a = &after[i]
		}
	}
	if a == nil || b == nil || a.Status != metav1.ConditionTrue || b.Status != a.Status || b.Reason != a.Reason || b.Message == a.Message {
		return metav1.Condition{}, false
	}
	return *a, true
}

// withheldTools are the tools (by the name clients see) that a ready replica serving the current
// revision reports it withholds (toolPinning Enforce).
func withheldTools(p reports) map[string]bool {
	out := map[string]bool{}
	for _, r := range p.Checked {
		for _, name := range r.Report.WithheldTools {
			out[name] = true
		}
	}
	return out
}
