package controllers

import (
	"reflect"
	"testing"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

func TestUpstreamStatus(t *testing.T) {
	legacy := `{"revision":"r1","rejectedRevision":"","reason":"","upstream":{"protocolVersion":"2025-11-25","serverName":"everything","serverVersion":"1.0.0","capabilities":["prompts","tools"]}}`
	modern := `{"revision":"r1","rejectedRevision":"","reason":"","upstream":{"protocolVersion":"2026-07-28","serverName":"everything","serverVersion":"2.0.0"}}`
	old := `{"revision":"r1","rejectedRevision":"","reason":""}`
	for _, tc := range []struct {
		name    string
		ready   []string
		reports map[string]string
		want    *mcpv1alpha1.UpstreamStatus
	}{
		{name: "no reports", ready: []string{"a"}, want: nil},
		{name: "older sidecar", ready: []string{"a"}, reports: map[string]string{"a": old}, want: nil},
		{name: "one legacy upstream", ready: []string{"a", "b"}, reports: map[string]string{"a": legacy, "b": legacy},
			want: &mcpv1alpha1.UpstreamStatus{ProtocolVersions: []string{"2025-11-25"}, ProtocolVersion: "2025-11-25", ServerName: "everything", ServerVersion: "1.0.0", Capabilities: []string{"prompts", "tools"}}},
		{name: "rollout between generations", ready: []string{"b", "a"}, reports: map[string]string{"a": modern, "b": legacy},
			want: &mcpv1alpha1.UpstreamStatus{ProtocolVersions: []string{"2025-11-25", "2026-07-28"}, ProtocolVersion: "2025-11-25,2026-07-28", ServerName: "everything", ServerVersion: "2.0.0"}},
		{name: "not ready pods do not count", ready: []string{"b"}, reports: map[string]string{"a": modern, "b": legacy},
			want: &mcpv1alpha1.UpstreamStatus{ProtocolVersions: []string{"2025-11-25"}, ProtocolVersion: "2025-11-25", ServerName: "everything", ServerVersion: "1.0.0", Capabilities: []string{"prompts", "tools"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := upstreamStatus(parseReports(propagation{Revision: "r1", ReadyPods: tc.ready, Reports: tc.reports}))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
