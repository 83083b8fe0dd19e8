package sidecar

import (
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// The fast header lookups index the map directly, so every name they use
// must already be canonical.
func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, k := range []string{protocol.HeaderProtocolVersion, protocol.HeaderMethod, protocol.HeaderName, "Content-Type", "Origin", "Accept", "Connection", "Content-Length"} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}
