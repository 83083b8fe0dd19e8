//go:build e2e

package main_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// upstreamTools lists the tools a client sees through url, as raw objects by name.
func upstreamTools(t testing.TB, url string) map[string]json.RawMessage {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":"list","method":"tools/list","params":{` + meta + `}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := benchClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || resp.StatusCode != http.StatusOK || msg.Result == nil {
		t.Fatalf("tools/list: HTTP %d %v", resp.StatusCode, err)
	}
	out := map[string]json.RawMessage{}
	for _, raw := range msg.Result.Tools {
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &named); err != nil {
			t.Fatal(err)
		}
		out[named.Name] = raw
	}
	return out
}

func pinCatalog(t testing.TB, policy string, tools ...catalog.Tool) []byte {
	t.Helper()
	h := catalog.CacheHint{TTLMs: 0, CacheScope: catalog.ScopePrivate}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "local", Name: "everything", ToolPolicy: policy, ToolPinning: catalog.ToolPinningEnforce,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPinningEveryUpstreamKind: under toolPinning Enforce the sidecar withholds a pinned tool
// whose definition differs from its pin, and a tool without a pin under toolPolicy All, from
// tools/list and tools/call, in front of every kind of upstream: a 2026-07-28 server (go-sdk
// v1.8.0's everything-server), a 2025-era one over HTTP and one over stdio through the bridge
// (go-sdk v1.4.1's). Listeners hear tools/list_changed when a pin change withholds or restores
// a tool. The digests are computed here from what the upstream lists, with catalog.ToolDigest.
func TestPinningEveryUpstreamKind(t *testing.T) {
	const stale = catalog.DigestPrefix + "0000000000000000000000000000000000000000000000000000000000000000"
	for _, tc := range []struct {
		name string
		env  func(t *testing.T, args ...string) *env
	}{
		{"2026-07-28", newEnv},
		{"2025-era http", func(t *testing.T, args ...string) *env { return legacyEnv(t, false, args...) }},
		{"2025-era stdio-bridge", func(t *testing.T, args ...string) *env { return legacyEnv(t, true, args...) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "catalog.json")
			// Before any pin: Enforce with toolPolicy All withholds every tool.
			writeFile(t, path, pinCatalog(t, catalog.ToolPolicyAll))
			e := tc.env(t, "--catalog-file", path)
			if got := upstreamTools(t, e.mcp); len(got) != 0 {
				t.Fatalf("unpinned tools served under Enforce with toolPolicy All: %v", slices.Sorted(maps.Keys(got)))
			}
			st, _, msg := do(t, rpcReq(t, e.mcp, "c0", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`))
			if st != 400 || !strings.Contains(fmt.Sprint(msg["error"]), "Tool withheld: test_simple_text: it has no pin") {
				t.Fatalf("tools/call of an unpinned tool: HTTP %d %v", st, msg)
			}

			// Learn the upstream's definitions through a catalog that pins nothing and
			// withholds nothing (toolPolicy Declared, declared tools unpinned).
			writeFile(t, path, pinCatalog(t, catalog.ToolPolicyDeclared,
				catalog.Tool{Name: "test_simple_text"}, catalog.Tool{Name: "test_image_content"}))
			var defs map[string]json.RawMessage
			eventually.True(t, "the declared tools listed", func() bool {
				defs = upstreamTools(t, e.mcp)
				return len(defs) == 2
			})
			text, err := catalog.ToolDigest(defs["test_simple_text"])
			if err != nil {
				t.Fatal(err)
			}
			image, err := catalog.ToolDigest(defs["test_image_content"])
			if err != nil {
				t.Fatal(err)
			}

			l := listen(t, e.mcp, "pins", `{"toolsListChanged":true}`)
			l.nextMethod(t, "notifications/subscriptions/acknowledged")
			// The overlay may still announce the previous catalog change (it publishes a
			// coalescing window after applying it): let that pass first.
			l.drain()
			// One pin matches, one is stale: the stale one is withheld, live.
			writeFile(t, path, pinCatalog(t, catalog.ToolPolicyDeclared,
				catalog.Tool{Name: "test_simple_text", UpstreamDigest: text}, catalog.Tool{Name: "test_image_content", UpstreamDigest: stale}))
			l.nextMethod(t, "notifications/tools/list_changed")
			if got := upstreamTools(t, e.mcp); len(got) != 1 || got["test_simple_text"] == nil {
				t.Fatalf("tools/list with one stale pin: %v", got)
			}
			callTool(t, e.mcp, "test_simple_text")
			st, _, msg = do(t, rpcReq(t, e.mcp, "c1", "tools/call", "test_image_content", `,"name":"test_image_content","arguments":{}`))
			if st != 400 || !strings.Contains(fmt.Sprint(msg["error"]), "no longer matches its pin") {
				t.Fatalf("tools/call of a drifted tool: HTTP %d %v", st, msg)
			}
			if n := metric(t, e.admin, "switchboard_sidecar_catalog_withheld_tools"); n != 1 {
				t.Errorf("withheld tools gauge = %v, want 1", n)
			}

			// Accepting the definition restores it.
			writeFile(t, path, pinCatalog(t, catalog.ToolPolicyDeclared,
				catalog.Tool{Name: "test_simple_text", UpstreamDigest: text}, catalog.Tool{Name: "test_image_content", UpstreamDigest: image}))
			l.nextMethod(t, "notifications/tools/list_changed")
			if got := upstreamTools(t, e.mcp); len(got) != 2 {
				t.Fatalf("tools/list after accepting: %v", got)
			}
			callTool(t, e.mcp, "test_image_content")
			if n := metric(t, e.admin, "switchboard_sidecar_pin_refused_calls_total"); n != 2 {
				t.Errorf("refused calls = %v, want 2", n)
			}
		})
	}
}

// BenchmarkPinnedToolsList: tools/list through a real sidecar in front of go-sdk's
// everything-server (2026-07-28, stateless, its whole tool list declared), without pinning and
// under Enforce with every tool pinned; sequential requests, real processes on 127.0.0.1.
// Figures: docs/performance.md ("Tool pinning"). Run:
//
//	go test -tags e2e ./cmd/sidecar -run '^$' -bench BenchmarkPinnedToolsList -benchtime 2000x
func BenchmarkPinnedToolsList(b *testing.B) {
	up := benchPort(b)
	benchStart(b, upstreamBin, "-http="+up, "-stateless")
	waitTCP(b, up)
	dir := b.TempDir()
	sidecar := func(cat []byte) string {
		path := filepath.Join(dir, fmt.Sprintf("catalog-%d.json", len(cat)))
		if err := os.WriteFile(path, cat, 0o600); err != nil {
			b.Fatal(err)
		}
		mcpAddr, adminAddr := benchPort(b), benchPort(b)
		benchStart(b, sidecarBin, "--upstream", "http://"+up+"/mcp", "--listen", mcpAddr, "--admin-listen", adminAddr,
			"--log-level", "warn", "--catalog-file", path)
		waitReady(b, "http://"+adminAddr)
		return "http://" + mcpAddr + "/mcp"
	}
	h := catalog.CacheHint{CacheScope: catalog.ScopePrivate}
	base := catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Server: catalog.Server{Namespace: "local", Name: "everything",
		ToolPolicy: catalog.ToolPolicyAll, Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}}}
	encode := func(c *catalog.Catalog) []byte {
		data, err := catalog.Encode(c)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	// The upstream's definitions, read through a sidecar that changes nothing.
	open := base
	defs := upstreamTools(b, sidecar(encode(&open)))
	var unpinned, pinned []catalog.Tool
	for name, raw := range defs {
		d, err := catalog.ToolDigest(raw)
		if err != nil {
			b.Fatal(err)
		}
		unpinned = append(unpinned, catalog.Tool{Name: name})
		pinned = append(pinned, catalog.Tool{Name: name, UpstreamDigest: d})
	}
	off := base
	off.Tools = unpinned
	enforced := base
	enforced.Server.ToolPinning, enforced.Tools = catalog.ToolPinningEnforce, pinned
	for _, tc := range []struct {
		name string
		cat  *catalog.Catalog
	}{{"off", &off}, {"enforce", &enforced}} {
		url := sidecar(encode(tc.cat))
		if got := upstreamTools(b, url); len(got) != len(defs) {
			b.Fatalf("%s: %d tools listed, want %d", tc.name, len(got), len(defs))
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`
		b.Run(fmt.Sprintf("%s/%d-tools", tc.name, len(defs)), func(b *testing.B) {
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("MCP-Protocol-Version", "2026-07-28")
				req.Header.Set("Mcp-Method", "tools/list")
				if err := expectResult(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func waitReady(b testing.TB, admin string) {
	b.Helper()
	eventually.True(b, "the sidecar to be ready", func() bool {
		r, err := http.Get(admin + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}
