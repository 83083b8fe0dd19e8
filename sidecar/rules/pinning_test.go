package rules

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/rules/rulestest"
)

func enforce(c *catalog.Catalog) *catalog.Catalog {
	c.Server.ToolPinning = catalog.ToolPinningEnforce
	return c
}

// TestMergeToolsPinned tables what pinning withholds from tools/list: only Enforce withholds,
// a drifted pinned tool always, and with policy All a tool without a pin.
func TestMergeToolsPinned(t *testing.T) {
	forecast := rulestest.Digest(t, rulestest.UpstreamTools[0])
	alerts := rulestest.Digest(t, rulestest.UpstreamTools[1])
	stale := catalog.DigestPrefix + "0000000000000000000000000000000000000000000000000000000000000000"
	tests := []struct {
		name         string
		cat          *catalog.Catalog
		want         []string
		wantWithheld []string
	}{{
		name: "Warn and Off (no toolPinning in the catalog): a stale pin is served",
		cat:  testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale}),
		want: []string{"convert_temperature", "get_alerts", "get_forecast"},
	}, {
		name: "Enforce, All: the matching pin is served, unpinned tools are withheld",
		cat:  enforce(testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_forecast", UpstreamDigest: forecast})),
		want: []string{"get_forecast"}, wantWithheld: []string{"convert_temperature", "get_alerts"},
	}, {
		name: "Enforce, All: a drifted pin is withheld",
		cat: enforce(testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale},
			catalog.Tool{Name: "get_alerts", UpstreamDigest: alerts}, catalog.Tool{Name: "convert_temperature", UpstreamDigest: rulestest.Digest(t, rulestest.UpstreamTools[2])})),
		want: []string{"convert_temperature", "get_alerts"}, wantWithheld: []string{"get_forecast"},
	}, {
		name: "Enforce, Declared: an unpinned declared tool is served, a drifted one withheld",
		cat: enforce(testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale},
			catalog.Tool{Name: "get_alerts"})),
		want: []string{"get_alerts"}, wantWithheld: []string{"get_forecast"},
	}, {
		name: "the pin is on the upstream's definition, not the override: a renamed, redescribed tool matches",
		cat: enforce(testCatalog(catalog.ToolPolicyDeclared,
			catalog.Tool{Name: "forecast", UpstreamName: "get_forecast", Description: "ours", UpstreamDigest: forecast})),
		want: []string{"forecast"},
	}, {
		// F14: Disabled and pins belong to the upstream tool, not to one declaration of it.
		name: "a Disabled declaration hides every alias of the upstream tool",
		cat: testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", Disabled: true},
			catalog.Tool{Name: "forecast2", UpstreamName: "get_forecast"}, catalog.Tool{Name: "get_alerts"}),
		want: []string{"get_alerts"},
	}, {
		name: "Enforce, Declared: an unpinned alias of a drifted pinned tool is withheld too",
		cat: enforce(testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale},
			catalog.Tool{Name: "forecast2", UpstreamName: "get_forecast"})),
		want: []string{}, wantWithheld: []string{"forecast2", "get_forecast"},
	}, {
		name: "Enforce, Declared: an unpinned alias of a matching pinned tool is served",
		cat: enforce(testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", UpstreamDigest: forecast},
			catalog.Tool{Name: "forecast2", UpstreamName: "get_forecast"})),
		want: []string{"forecast2", "get_forecast"},
	}, {
		name: "a disabled tool is hidden, not withheld",
		cat:  enforce(testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale, Disabled: true})),
		want: []string{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, withheld := MergeToolsWithheld(tt.cat, rulestest.UpstreamTools)
			if !slices.Equal(keys(got), tt.want) {
				t.Errorf("tools = %v, want %v", keys(got), tt.want)
			}
			if !slices.Equal(withheld, tt.wantWithheld) {
				t.Errorf("withheld = %v, want %v", withheld, tt.wantWithheld)
			}
		})
	}
}

// TestPinWithheld tables the decision tools/call makes with the overlay's observed digest.
func TestPinWithheld(t *testing.T) {
	const pin, other = "sha256:aa", "sha256:bb"
	all := enforce(testCatalog(catalog.ToolPolicyAll))
	declared := enforce(testCatalog(catalog.ToolPolicyDeclared))
	warn := testCatalog(catalog.ToolPolicyAll)
	pinned := &catalog.Tool{Name: "t", UpstreamDigest: pin}
	for _, tc := range []struct {
		name     string
		cat      *catalog.Catalog
		decl     *catalog.Tool
		observed string
		want     string
	}{
		{"Warn serves a drifted tool", warn, pinned, other, ""},
		{"Warn serves an unpinned tool", warn, nil, "", ""},
		{"matching pin", all, pinned, pin, ""},
		{"drifted pin", all, pinned, other, withheldDrifted},
		{"pin, definition not known (fail closed)", all, pinned, "", withheldUnknown},
		{"undeclared under All", all, nil, pin, withheldUnpinned},
		{"declared without pin under All", all, &catalog.Tool{Name: "t"}, pin, withheldUnpinned},
		{"declared without pin under Declared", declared, &catalog.Tool{Name: "t"}, pin, ""},
		{"drifted under Declared", declared, pinned, other, withheldDrifted},
	} {
		if got := pinWithheld(tc.cat, tc.decl, tc.observed); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestObserveDigests: the overlay records every upstream tool's digest for tools/call, and
// reports those of the declared tools under the names clients see.
// TestDigestMemo: memoised digests are the digests, and the memo stays bounded.
func TestDigestMemo(t *testing.T) {
	for i := range maxMemoDigests + 10 {
		raw := json.RawMessage(fmt.Sprintf(`{"name":"t%d","description":"d"}`, i))
		if got, again := ObservedDigest(raw), ObservedDigest(raw); got != rulestest.Digest(t, raw) || again != got {
			t.Fatalf("tool %d: %s then %s, want %s", i, got, again, rulestest.Digest(t, raw))
		}
	}
	digestMemo.Lock()
	n := len(digestMemo.m)
	digestMemo.Unlock()
	if n > maxMemoDigests {
		t.Fatalf("memo holds %d digests, bound %d", n, maxMemoDigests)
	}
	if ObservedDigest(json.RawMessage(`{"name":"x","name":"y"}`)) != "" {
		t.Fatal("a tool with a duplicate member has a digest")
	}
}

// BenchmarkMergeToolsPinned: the cost tool pinning adds to one tools/list merge of 100 tools of
// a realistic size (a description and an input schema): without pinning, and under Enforce with
// every tool pinned (each tool's definition digested: RFC 8785 canonical JSON and SHA-256).
// Figures: docs/performance.md ("Tool pinning").
func BenchmarkMergeToolsPinned(b *testing.B) {
	up := make([]json.RawMessage, 100)
	var decl []catalog.Tool
	for i := range up {
		up[i] = json.RawMessage(fmt.Sprintf(`{"name":"tool_%03d","description":"Returns the forecast for a city, in metric units, for up to %d days.","inputSchema":{"type":"object","properties":{"city":{"type":"string","description":"City name"},"days":{"type":"integer","minimum":1,"maximum":16}},"required":["city"]},"annotations":{"readOnlyHint":true}}`, i, i))
		d, err := catalog.ToolDigest(up[i])
		if err != nil {
			b.Fatal(err)
		}
		decl = append(decl, catalog.Tool{Name: fmt.Sprintf("tool_%03d", i), UpstreamDigest: d})
	}
	for _, tc := range []struct {
		name string
		cat  *catalog.Catalog
		cold bool
	}{
		{"off", testCatalog(catalog.ToolPolicyAll, decl...), false},
		{"enforce", enforce(testCatalog(catalog.ToolPolicyAll, decl...)), false},
		{"enforce-memo-cleared", enforce(testCatalog(catalog.ToolPolicyAll, decl...)), true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if tc.cold {
					digestMemo.Lock()
					clear(digestMemo.m)
					digestMemo.Unlock()
				}
				if l, _, w := MergeToolsWithheld(tc.cat, up); len(l) != 100 || len(w) != 0 {
					b.Fatalf("%d listed, %d withheld", len(l), len(w))
				}
			}
		})
	}
}

// TestAliasesCannotReachWhatIsWithheld (F14): tools/call by an alias of a Disabled tool is
// unknown, and under Enforce an unpinned alias of a drifted pinned tool is refused.
func TestAliasesCannotReachWhatIsWithheld(t *testing.T) {
	stale := catalog.DigestPrefix + "0000000000000000000000000000000000000000000000000000000000000000"
	c := testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "delete_all", Disabled: true},
		catalog.Tool{Name: "x2", UpstreamName: "delete_all"})
	if up, _, ok := RouteTool(c, "x2"); ok {
		t.Errorf("x2 routes to %s: an alias re-exposes a Disabled tool", up)
	}
	c = enforce(testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", UpstreamDigest: stale},
		catalog.Tool{Name: "forecast2", UpstreamName: "get_forecast"}))
	up, _, ok := RouteTool(c, "forecast2")
	if !ok {
		t.Fatal("forecast2 does not route")
	}
	if why := ToolWithheld(c, up, rulestest.Digest(t, rulestest.UpstreamTools[0])); why != withheldDrifted {
		t.Errorf("the unpinned alias of a drifted tool: withheld %q, want %q", why, withheldDrifted)
	}
}

// TestServedToolsDropCaseVariants (F14): a member spelled like a known one in another case
// ("Description") is not served: a case-insensitive client could read it instead of the
// (overridden, digested) "description".
func TestServedToolsDropCaseVariants(t *testing.T) {
	up := rulestest.Raws(`{"name":"get_forecast","description":"upstream","Description":"evil","Annotations":{"destructiveHint":false},"inputSchema":{"type":"object"}}`)
	for _, c := range []*catalog.Catalog{
		testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "get_forecast", Description: "ours"}),
		testCatalog(catalog.ToolPolicyAll),
	} {
		got, _, _ := MergeToolsWithheld(c, up)
		if len(got) != 1 {
			t.Fatalf("tools %v", keys(got))
		}
		m := decodeObject(got[0].Raw)
		if _, ok := m["Description"]; ok {
			t.Errorf("served a case variant: %s", got[0].Raw)
		}
		if _, ok := m["Annotations"]; ok {
			t.Errorf("served a case variant: %s", got[0].Raw)
		}
	}
}
