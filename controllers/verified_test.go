package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

func TestVerifiedCondition(t *testing.T) {
	id := func(name, version, tools string) string {
		return catalog.Report{Revision: "r", Upstream: &catalog.UpstreamReport{ProtocolVersion: "2026-07-28",
			ServerName: name, ServerVersion: version, Capabilities: []string{"tools"}, ToolsDigest: tools}}.String()
	}
	cases := []struct {
		name    string
		ready   []string
		reports map[string]string
		status  metav1.ConditionStatus
		reason  string
		want    []string
	}{
		{name: "nothing reported", ready: []string{"a"}, reports: map[string]string{"a": catalog.Report{Revision: "r"}.String()},
			status: metav1.ConditionUnknown, reason: string(mcpv1alpha1.ReasonNotYetReported)},
		{name: "all agree", ready: []string{"a", "b"}, reports: map[string]string{"a": id("weather", "1.0.0", "sha256:aaaa"), "b": id("weather", "1.0.0", "sha256:aaaa")},
			status: metav1.ConditionTrue, reason: string(mcpv1alpha1.ReasonUpstreamVerified), want: []string{"all 2", "weather 1.0.0"}},
		{name: "a rollout: versions differ", ready: []string{"a", "b", "c"},
			reports: map[string]string{"a": id("weather", "1.0.0", "sha256:aaaa"), "b": id("weather", "1.1.0", "sha256:bbbb"), "c": id("weather", "1.0.0", "sha256:aaaa")},
			status:  metav1.ConditionFalse, reason: string(mcpv1alpha1.ReasonUpstreamMismatch),
			want: []string{"serverInfo.version, tools differ", "weather 1.0.0 (protocol 2026-07-28, tools aaaa) on a, c", "weather 1.1.0 (protocol 2026-07-28, tools bbbb) on b"}},
		{name: "another server", ready: []string{"a", "b"}, reports: map[string]string{"a": id("weather", "1.0.0", "sha256:aaaa"), "b": id("evil", "1.0.0", "sha256:aaaa")},
			status: metav1.ConditionFalse, reason: string(mcpv1alpha1.ReasonUpstreamMismatch), want: []string{"(serverInfo.name differ)", "evil 1.0.0", "on b"}},
		{name: "a pod that is not ready does not count", ready: []string{"a"}, reports: map[string]string{"a": id("weather", "1.0.0", "sha256:aaaa"), "gone": id("evil", "6", "sha256:ffff")},
			status: metav1.ConditionTrue, reason: string(mcpv1alpha1.ReasonUpstreamVerified)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := verifiedCondition(parseReports(propagation{ReadyPods: tc.ready, Reports: tc.reports}))
			if c.Type != string(mcpv1alpha1.ConditionVerified) || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message lacks %q: %s", w, c.Message)
				}
			}
		})
	}
	if eventType(string(mcpv1alpha1.ReasonUpstreamMismatch)) != "Warning" {
		t.Fatal("a mismatch is a Warning event")
	}
}
