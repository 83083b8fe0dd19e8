package sidecar

import (
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// TestParseRequestRefusesAmbiguousMembers: every body two JSON decoders
// could read differently where the sidecar decides is refused with the
// spec's error; the same members given once, exactly (escaped or not), are
// accepted.
func TestParseRequestRefusesAmbiguousMembers(t *testing.T) {
	const m = fuzzMeta
	call := func(params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + params + `}}`
	}
	cases := []struct {
		name, body string
		code       int64 // 0: accepted
	}{
		{"plain", call(`,"name":"a"`), 0},
		{"escaped exact key", call(`,"\u006eame":"a"`), 0},
		{"unknown members in any case", call(`,"name":"a","Foo":1,"foo":2,"arguments":{"X":1,"x":2}`), 0},
		{"escaped value", call(`,"name":"\u00e9\ud83d\ude00"`), 0},
		{"escaped backslash before u", call(`,"name":"a\\ud800"`), 0},

		{"Method", `{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}`, wire.CodeInvalidRequest},
		{"escaped METHOD", `{"jsonrpc":"2.0","id":1,"method":"a","\u004dETHOD":"b"}`, wire.CodeInvalidRequest},
		{"ID", `{"jsonrpc":"2.0","ID":1,"method":"a"}`, wire.CodeInvalidRequest},
		{"Id next to id", `{"jsonrpc":"2.0","id":1,"Id":2,"method":"a"}`, wire.CodeInvalidRequest},
		{"JSONRPC", `{"JSONRPC":"2.0","jsonrpc":"2.0","id":1,"method":"a"}`, wire.CodeInvalidRequest},
		{"Params", `{"jsonrpc":"2.0","id":1,"method":"a","params":{},"Params":{}}`, wire.CodeInvalidRequest},
		{"params with U+017F", `{"jsonrpc":"2.0","id":1,"method":"a","paramſ":{}}`, wire.CodeInvalidRequest},
		{"params with escaped U+017F", `{"jsonrpc":"2.0","id":1,"method":"a","param\u017f":{}}`, wire.CodeInvalidRequest},
		{"Result", `{"jsonrpc":"2.0","id":1,"result":{},"Result":{}}`, wire.CodeInvalidRequest},
		{"escaped duplicate method", `{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}`, wire.CodeInvalidRequest},

		{"Name", call(`,"name":"a","Name":"b"`), wire.CodeInvalidParams},
		{"escaped Name", call(`,"name":"a","\u004eame":"b"`), wire.CodeInvalidParams},
		{"Name alone", call(`,"Name":"b"`), wire.CodeInvalidParams},
		{"duplicate name", call(`,"name":"a","name":"b"`), wire.CodeInvalidParams},
		{"escaped duplicate name", call(`,"name":"a","\u006eame":"b"`), wire.CodeInvalidParams},
		{"URI with dotless i", call(`,"uri":"a","urı":"b"`), wire.CodeInvalidParams},
		{"urİ", call(`,"urİ":"b"`), wire.CodeInvalidParams},
		{"Arguments", call(`,"name":"a","arguments":{},"Arguments":{}`), wire.CodeInvalidParams},
		{"duplicate _meta", `{"jsonrpc":"2.0","id":1,"method":"a","params":{` + m + `,` + m + `}}`, wire.CodeInvalidParams},
		{"_Meta", call(`,"_Meta":{}`), wire.CodeInvalidParams},
		{"REQUESTSTATE", call(`,"requestState":"a","REQUESTSTATE":"b"`), wire.CodeInvalidParams},
		{"cursor with U+017F", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + m + `,"curſor":"x"}}`, wire.CodeInvalidParams},
		{"_meta claim case variant", `{"jsonrpc":"2.0","id":1,"method":"a","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"x"}}}`, wire.CodeInvalidParams},
		{"_meta claim duplicate", `{"jsonrpc":"2.0","id":1,"method":"a","params":{"_meta":{"io.modelcontextprotocol/logLevel":"info","io.modelcontextprotocol/logLevel":"debug"}}}`, wire.CodeInvalidParams},
		{"ref Name", call(`,"ref":{"type":"ref/prompt","name":"p","Name":"q"}`), wire.CodeInvalidParams},
		{"ref TYPE", call(`,"ref":{"type":"ref/prompt","TYPE":"ref/resource"}`), wire.CodeInvalidParams},

		{"invalid UTF-8", call(`,"name":"a` + "\xff" + `"`), wire.CodeParseError},
		{"UTF-8 encoded surrogate", call(`,"name":"` + "\xed\xa0\x80" + `"`), wire.CodeParseError},
		{"lone high surrogate", call(`,"name":"\ud800"`), wire.CodeParseError},
		{"lone low surrogate", call(`,"name":"\udc00x"`), wire.CodeParseError},
		{"high surrogate then a non-low escape", call(`,"name":"\ud800\u0041"`), wire.CodeParseError},
		{"high surrogate at the end of a string", call(`,"x":"\uD83D"`), wire.CodeParseError},
		{"batch", `[` + call(`,"name":"a"`) + `]`, wire.CodeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := parseRequest([]byte(c.body))
			switch {
			case c.code == 0 && e != nil:
				t.Fatalf("refused: %d %s", e.Code, e.Message)
			case c.code != 0 && e == nil:
				t.Fatalf("accepted %s", c.body)
			case c.code != 0 && (e.Code != c.code || e.Status != http.StatusBadRequest):
				t.Fatalf("got HTTP %d %d %s, want 400 %d", e.Status, e.Code, e.Message, c.code)
			}
		})
	}
}
