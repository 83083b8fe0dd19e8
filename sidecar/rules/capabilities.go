package rules

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// MergedCapabilities adds what the sidecar provides to the upstream's
// capabilities: listChanged for every list the upstream serves (the sidecar
// relays the upstream's changes and will emit the catalog's), and resource
// subscriptions when the upstream serves resources. It never adds a
// capability for a list the upstream does not serve, so the advertised
// capabilities keep matching the handlers. With a catalog overlay the
// sidecar serves all three lists itself (declared prompts and resources need
// no upstream support), so all of them are advertised.
func MergedCapabilities(raw json.RawMessage, overlay bool) (json.RawMessage, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(raw, &caps); err != nil {
		return nil, err
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	if overlay {
		for _, name := range []string{"tools", "prompts", "resources"} {
			if c, ok := caps[name]; !ok || !wire.IsObject(c) {
				caps[name] = json.RawMessage(`{}`)
			}
		}
	} else if len(caps) == 0 {
		return json.RawMessage(`{}`), nil
	}
	for name, extra := range map[string][]string{
		"tools": {"listChanged"}, "prompts": {"listChanged"}, "resources": {"listChanged", "subscribe"},
	} {
		c, ok := caps[name]
		if !ok || !wire.IsObject(c) {
			continue
		}
		var sets []wire.KV
		for _, k := range extra {
			sets = append(sets, wire.KV{Key: k, Val: []byte("true")})
		}
		nc, err := wire.SetMembers(c, sets, nil)
		if err != nil {
			return nil, err
		}
		caps[name] = nc
	}
	return json.Marshal(caps)
}
