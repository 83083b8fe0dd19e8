package overlay

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
)

// List describes one of the four merged lists. The sidecar's method table
// points at these for the lists' methods.
type List struct {
	Method string
	Member string // the result member holding the entries
	// Kind is the change kind whose list_changed covers the list.
	Kind protocol.Kind
	// Capability is the server capability that says the upstream serves it.
	Capability func(*upstream.Info) bool
	// Merge applies the catalog's rules to the upstream's entries.
	Merge func(c *catalog.Catalog, up []json.RawMessage) []rules.Entry
}

// Lists are the merged lists in a fixed order (the overlay reads and diffs
// them in this order; tools/list first).
var Lists = [...]*List{
	{Method: "tools/list", Member: "tools", Kind: protocol.KindTools,
		Capability: func(i *upstream.Info) bool { return i.Caps.Tools != nil },
		Merge: func(c *catalog.Catalog, up []json.RawMessage) []rules.Entry {
			l, _ := rules.MergeTools(c, up)
			return l
		}},
	{Method: "prompts/list", Member: "prompts", Kind: protocol.KindPrompts,
		Capability: promptsCap, Merge: rules.MergePrompts},
	{Method: "resources/list", Member: "resources", Kind: protocol.KindResources,
		Capability: resourcesCap, Merge: resourcesBy("uri")},
	{Method: "resources/templates/list", Member: "resourceTemplates", Kind: protocol.KindResources,
		Capability: resourcesCap, Merge: resourcesBy("uriTemplate")},
}

func promptsCap(i *upstream.Info) bool   { return i.Caps.Prompts != nil }
func resourcesCap(i *upstream.Info) bool { return i.Caps.Resources != nil }

// resourcesBy merges a resource list keyed by keyMember ("uri" or "uriTemplate").
func resourcesBy(keyMember string) func(*catalog.Catalog, []json.RawMessage) []rules.Entry {
	return func(c *catalog.Catalog, up []json.RawMessage) []rules.Entry {
		return rules.MergeResources(c, up, keyMember)
	}
}

// ListOf returns the merged list a method reads (nil for any other method).
func ListOf(method string) *List {
	for _, l := range Lists {
		if l.Method == method {
			return l
		}
	}
	return nil
}
