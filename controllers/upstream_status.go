package controllers

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// upstreamStatus sums up what the sidecars of the ready replicas report about their MCP server
// container: the protocol revisions (every distinct one, when replicas differ; also joined with
// commas in the deprecated protocolVersion),
// and the serverInfo and capabilities of the first ready pod (by name) that reported them.
// Nil when no ready replica has reported it yet (or runs a sidecar too old to).
func upstreamStatus(p reports) *mcpv1alpha1.UpstreamStatus {
	var out *mcpv1alpha1.UpstreamStatus
	var versions []string
	for _, pr := range p.Ready {
		r := pr.Report
		if !pr.parsed() || r.Upstream == nil || r.Upstream.ProtocolVersion == "" {
			continue
		}
		if !slices.Contains(versions, r.Upstream.ProtocolVersion) {
			versions = append(versions, r.Upstream.ProtocolVersion)
		}
		if out == nil {
			out = &mcpv1alpha1.UpstreamStatus{
				ServerName:    clip(r.Upstream.ServerName, 128),
				ServerVersion: clip(r.Upstream.ServerVersion, 64),
				ToolsDigest:   clip(r.Upstream.ToolsDigest, 71),
			}
			for _, c := range r.Upstream.Capabilities {
				if len(out.Capabilities) < 16 {
					out.Capabilities = append(out.Capabilities, clip(c, 64))
				}
			}
		}
	}
	if out == nil {
		return nil
	}
	slices.Sort(versions)
	for _, v := range versions {
		if len(out.ProtocolVersions) < maxProtocolVersions {
			out.ProtocolVersions = append(out.ProtocolVersions, clip(v, maxProtocolVersionLength))
		}
	}
	out.ProtocolVersion = clip(strings.Join(versions, ","), 128)
	return out
}

// Bounds of UpstreamStatus.ProtocolVersions (its kubebuilder markers).
const (
	maxProtocolVersions      = 8
	maxProtocolVersionLength = 32
)

// maxConditionMessage is the longest message metav1.Condition accepts.
const maxConditionMessage = 32768

// clip bounds a string a sidecar reported to what the API field accepts.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// verifiedCondition decides Verified: every ready replica that reported its upstream reports the
// same identity (protocol revision, serverInfo, capabilities, tool-list digest). When they differ
// the message groups the pods by identity and names the fields that differ.
func verifiedCondition(p reports) metav1.Condition {
	const typ = mcpv1alpha1.ConditionVerified
	type group struct {
		id   *catalog.UpstreamReport
		pods []string
	}
	var groups []*group
	for _, pr := range p.Ready {
		pod, r := pr.Pod, pr.Report
		if !pr.parsed() || r.Upstream == nil || r.Upstream.ProtocolVersion == "" {
			continue
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.id.Equal(r.Upstream) })
		if i < 0 {
			groups = append(groups, &group{id: r.Upstream})
			i = len(groups) - 1
		}
		groups[i].pods = append(groups[i].pods, pod)
	}
	switch len(groups) {
	case 0:
		return metav1.Condition{Type: string(typ), Status: metav1.ConditionUnknown, Reason: string(mcpv1alpha1.ReasonNotYetReported),
			Message: "no ready replica has reported what its MCP server announced yet"}
	case 1:
		id := groups[0].id
		return condition(typ, true, mcpv1alpha1.ReasonUpstreamVerified, fmt.Sprintf(
			"all %d reporting ready replicas front the same MCP server: %s %s, protocol %s, tools %s",
			len(groups[0].pods), id.ServerName, id.ServerVersion, id.ProtocolVersion, shortDigest(id.ToolsDigest)))
	}
	first := groups[0].id
	var differ []string
	for _, f := range []struct {
		name string
		get  func(*catalog.UpstreamReport) string
	}{
		{"protocolVersion", func(u *catalog.UpstreamReport) string { return u.ProtocolVersion }},
		{"serverInfo.name", func(u *catalog.UpstreamReport) string { return u.ServerName }},
		{"serverInfo.version", func(u *catalog.UpstreamReport) string { return u.ServerVersion }},
		{"capabilities", func(u *catalog.UpstreamReport) string { return strings.Join(u.Capabilities, ",") }},
		{"tools", func(u *catalog.UpstreamReport) string { return u.ToolsDigest }},
	} {
		for _, g := range groups[1:] {
			if f.get(g.id) != f.get(first) {
				differ = append(differ, f.name)
				break
			}
		}
	}
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%s %s (protocol %s, tools %s) on %s", g.id.ServerName, g.id.ServerVersion,
			g.id.ProtocolVersion, shortDigest(g.id.ToolsDigest), strings.Join(g.pods, ", ")))
	}
	return condition(typ, false, mcpv1alpha1.ReasonUpstreamMismatch, clip(fmt.Sprintf(
		"ready replicas front different MCP servers (%s differ): %s; expected while a rollout replaces the image, otherwise check which image each pod runs",
		strings.Join(differ, ", "), strings.Join(parts, "; ")), maxConditionMessage))
}

// shortDigest is a digest's first 12 hex digits, or "unknown".
func shortDigest(d string) string {
	d = strings.TrimPrefix(d, catalog.DigestPrefix)
	if d == "" {
		return "unknown"
	}
	return d[:min(12, len(d))]
}
