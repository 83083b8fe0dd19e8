package hub

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSubscriptionBytesBoundsTheRelayBody: what the subscription budget counts for a URI is at
// least what the relay's filter encoding takes for it, so the relay's body stays within
// --max-subscription-bytes whatever the URIs hold.
func TestSubscriptionBytesBoundsTheRelayBody(t *testing.T) {
	for _, u := range []string{
		"file:///a/b.txt", `q"uote\back`, "a&b<c>d", "ctl\n\t\x01\x1f", "sep\u2028\u2029", "bad\xff\xfeutf8", "ünïcode",
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(u); err != nil {
			t.Fatal(err)
		}
		encoded := int64(buf.Len() - 1) // the newline
		if got := SubscriptionBytes(u); got < encoded {
			t.Errorf("SubscriptionBytes(%q) = %d, below its encoded %d bytes %s", u, got, encoded, buf.Bytes())
		}
	}
	if got := SubscriptionBytes("file:///a&b<c>"); got != int64(len("file:///a&b<c>"))+2 {
		t.Errorf("a plain URI costs %d, want its length and two quotes", got)
	}
}
