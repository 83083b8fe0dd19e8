// Package rulestest holds the fixtures that the tests of the catalog rules
// (sidecar/rules) and of the live overlay above them (sidecar) share: an
// upstream's tool list and a catalog built on a given base.
package rulestest

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// Raws is ss as raw JSON values.
func Raws(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

// UpstreamTools is an upstream's tools/list: get_forecast, get_alerts and
// convert_temperature.
var UpstreamTools = Raws(
	`{"name":"get_forecast","description":"upstream forecast","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}`,
	`{"name":"get_alerts","description":"alerts","inputSchema":{"type":"object"}}`,
	`{"name":"convert_temperature","description":"convert","inputSchema":{"type":"object"}}`,
)

// Catalog is a copy of base for the server default/weather with the tool
// policy and the declared tools given.
func Catalog(base *catalog.Catalog, policy string, tools ...catalog.Tool) *catalog.Catalog {
	c := *base
	c.Server.Name, c.Server.Namespace, c.Server.ToolPolicy = "weather", "default", policy
	c.Tools = tools
	return &c
}

// Digest is the upstream digest of one tool object.
func Digest(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	d, err := catalog.ToolDigest(raw)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
