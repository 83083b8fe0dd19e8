package upstream

import (
	"reflect"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// The propagation report names the upstream's protocol revision (the 2025 one a legacy
// upstream negotiated, from the transport's discover answer), serverInfo and capabilities.
func TestUpstreamReport(t *testing.T) {
	for _, tc := range []struct {
		name, discover string
		want           *catalog.UpstreamReport
	}{
		{"2026-07-28 upstream", `{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"logging":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}}`,
			&catalog.UpstreamReport{ProtocolVersion: "2026-07-28", ServerName: "s", ServerVersion: "2", Capabilities: []string{"logging", "tools"}}},
		{"2025-era upstream", `{"supportedVersions":["2026-07-28"],"capabilities":{"prompts":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"old","version":"1"},"dev.switchboard/upstreamProtocolVersion":"2025-06-18"}}`,
			&catalog.UpstreamReport{ProtocolVersion: "2025-06-18", ServerName: "old", ServerVersion: "1", Capabilities: []string{"prompts"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := New("http://127.0.0.1:1/mcp", 0)
			if u.Report() != nil {
				t.Fatal("a report before any discover")
			}
			if _, err := u.Store([]byte(tc.discover)); err != nil {
				t.Fatal(err)
			}
			if got := u.Report(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
