//go:build e2e

package main_test

// Translated 2025-era tools/call requests carry the Mcp-Param-* headers
// (SEP-2243) that go-sdk v1.8.0's everything-server requires for its
// x-mcp-header tool: without them it refuses the call (400 -32020).

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TestLegacyCallsCarryParamHeaders: a go-sdk client pinned to each 2025-era
// revision calls test_x_mcp_header ("region" is annotated x-mcp-header:
// Region) with plain, base64-needing and absent values, directly and under
// a catalog rename; a raw 2025-era request carrying a wrong Mcp-Param-Region
// of its own gets it replaced by the body's value.
func TestLegacyCallsCarryParamHeaders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	h := catalog.CacheHint{TTLMs: 0, CacheScope: catalog.ScopePrivate}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "local", Name: "everything", ToolPolicy: catalog.ToolPolicyAll,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools: []catalog.Tool{{Name: "regional", UpstreamName: "test_x_mcp_header"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, b)
	plain := newEnv(t)
	renamed := newEnv(t, "--catalog-file", path)
	for _, tc := range []struct {
		name string
		e    *env
		tool string
	}{{"transparent", plain, "test_x_mcp_header"}, {"renamed by the catalog", renamed, "regional"}} {
		for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
			t.Run(tc.name+"/"+v, func(t *testing.T) {
				cs := connectLegacy(t, tc.e.mcp, v)
				ctx, cancel := context.WithTimeout(context.Background(), hang)
				defer cancel()
				for _, region := range []any{"eu-west-1", "  Zürich\t", "=?base64?eA==?=", nil} {
					args := map[string]any{"level": 3}
					if region != nil {
						args["region"] = region
					}
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: args})
					if err != nil {
						t.Fatalf("region %q: %v", region, err)
					}
					want := "region="
					if region != nil {
						want += region.(string)
					}
					if got := res.Content[0].(*mcp.TextContent).Text; res.IsError || got != want {
						t.Errorf("region %q: %q (isError %v), want %q", region, got, res.IsError, want)
					}
				}
			})
		}
	}
	sid := legacyInit(t, plain.mcp, "2025-11-25")
	st, _, msg := do(t, legacyReq(t, plain.mcp, 1, "tools/call", `{"name":"test_x_mcp_header","arguments":{"region":"us-east-2"}}`,
		"Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25", "Mcp-Param-Region", "wrong", "mcp-param-other", "x"))
	res, _ := msg["result"].(map[string]any)
	if st != http.StatusOK || fmt.Sprint(res["content"]) != "[map[text:region=us-east-2 type:text]]" {
		t.Fatalf("raw call with a wrong Mcp-Param-Region: HTTP %d %v", st, msg)
	}
}
