package controllers

import (
	"slices"
	"strings"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// upstreamStatus sums up what the sidecars of the ready replicas report about their MCP server
// container: the protocol revision (every distinct one, comma-separated, when replicas differ),
// and the serverInfo and capabilities of the first ready pod (by name) that reported them.
// Nil when no ready replica has reported it yet (or runs a sidecar too old to).
func upstreamStatus(p propagation) *mcpv1alpha1.UpstreamStatus {
	pods := slices.Sorted(slices.Values(p.ReadyPods))
	var out *mcpv1alpha1.UpstreamStatus
	var versions []string
	for _, pod := range pods {
		r, err := catalog.ParseReport(p.Reports[pod])
		if err != nil || r.Upstream == nil || r.Upstream.ProtocolVersion == "" {
			continue
		}
		if !slices.Contains(versions, r.Upstream.ProtocolVersion) {
			versions = append(versions, r.Upstream.ProtocolVersion)
		}
		if out == nil {
			out = &mcpv1alpha1.UpstreamStatus{
				ServerName:    clip(r.Upstream.ServerName, 128),
				ServerVersion: clip(r.Upstream.ServerVersion, 64),
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
	out.ProtocolVersion = clip(strings.Join(versions, ","), 128)
	return out
}

// clip bounds a string a sidecar reported to what the API field accepts.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
