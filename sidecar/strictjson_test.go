package sidecar

import (
	"net/http"
	"testing"
	"unicode"
	"unicode/utf8"
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

		{"Method", `{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}`, codeInvalidRequest},
		{"escaped METHOD", `{"jsonrpc":"2.0","id":1,"method":"a","\u004dETHOD":"b"}`, codeInvalidRequest},
		{"ID", `{"jsonrpc":"2.0","ID":1,"method":"a"}`, codeInvalidRequest},
		{"Id next to id", `{"jsonrpc":"2.0","id":1,"Id":2,"method":"a"}`, codeInvalidRequest},
		{"JSONRPC", `{"JSONRPC":"2.0","jsonrpc":"2.0","id":1,"method":"a"}`, codeInvalidRequest},
		{"Params", `{"jsonrpc":"2.0","id":1,"method":"a","params":{},"Params":{}}`, codeInvalidRequest},
		{"params with U+017F", `{"jsonrpc":"2.0","id":1,"method":"a","paramſ":{}}`, codeInvalidRequest},
		{"params with escaped U+017F", `{"jsonrpc":"2.0","id":1,"method":"a","param\u017f":{}}`, codeInvalidRequest},
		{"Result", `{"jsonrpc":"2.0","id":1,"result":{},"Result":{}}`, codeInvalidRequest},
		{"escaped duplicate method", `{"jsonrpc":"2.0","id":1,"method":"a","\u006dethod":"b"}`, codeInvalidRequest},

		{"Name", call(`,"name":"a","Name":"b"`), codeInvalidParams},
		{"escaped Name", call(`,"name":"a","\u004eame":"b"`), codeInvalidParams},
		{"Name alone", call(`,"Name":"b"`), codeInvalidParams},
		{"duplicate name", call(`,"name":"a","name":"b"`), codeInvalidParams},
		{"escaped duplicate name", call(`,"name":"a","\u006eame":"b"`), codeInvalidParams},
		{"URI with dotless i", call(`,"uri":"a","urı":"b"`), codeInvalidParams},
		{"urİ", call(`,"urİ":"b"`), codeInvalidParams},
		{"Arguments", call(`,"name":"a","arguments":{},"Arguments":{}`), codeInvalidParams},
		{"duplicate _meta", `{"jsonrpc":"2.0","id":1,"method":"a","params":{` + m + `,` + m + `}}`, codeInvalidParams},
		{"_Meta", call(`,"_Meta":{}`), codeInvalidParams},
		{"REQUESTSTATE", call(`,"requestState":"a","REQUESTSTATE":"b"`), codeInvalidParams},
		{"cursor with U+017F", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + m + `,"curſor":"x"}}`, codeInvalidParams},
		{"_meta claim case variant", `{"jsonrpc":"2.0","id":1,"method":"a","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.MODELCONTEXTPROTOCOL/PROTOCOLVERSION":"x"}}}`, codeInvalidParams},
		{"_meta claim duplicate", `{"jsonrpc":"2.0","id":1,"method":"a","params":{"_meta":{"io.modelcontextprotocol/logLevel":"info","io.modelcontextprotocol/logLevel":"debug"}}}`, codeInvalidParams},
		{"ref Name", call(`,"ref":{"type":"ref/prompt","name":"p","Name":"q"}`), codeInvalidParams},
		{"ref TYPE", call(`,"ref":{"type":"ref/prompt","TYPE":"ref/resource"}`), codeInvalidParams},

		{"invalid UTF-8", call(`,"name":"a` + "\xff" + `"`), codeParseError},
		{"UTF-8 encoded surrogate", call(`,"name":"` + "\xed\xa0\x80" + `"`), codeParseError},
		{"lone high surrogate", call(`,"name":"\ud800"`), codeParseError},
		{"lone low surrogate", call(`,"name":"\udc00x"`), codeParseError},
		{"high surrogate then a non-low escape", call(`,"name":"\ud800\u0041"`), codeParseError},
		{"high surrogate at the end of a string", call(`,"x":"\uD83D"`), codeParseError},
		{"batch", `[` + call(`,"name":"a"`) + `]`, codeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, e := parseRequest([]byte(c.body))
			switch {
			case c.code == 0 && e != nil:
				t.Fatalf("refused: %d %s", e.code, e.message)
			case c.code != 0 && e == nil:
				t.Fatalf("accepted %s", c.body)
			case c.code != 0 && (e.code != c.code || e.status != http.StatusBadRequest):
				t.Fatalf("got HTTP %d %d %s, want 400 %d", e.status, e.code, e.message, c.code)
			}
		})
	}
}

// TestFoldEqualMatchesEveryDecoderFold: a non-ASCII rune matches an ASCII
// letter exactly when Unicode simple folding, ToUpper, ToLower, ToTitle or
// their compositions map one to the other (the four runes U+017F, U+212A,
// U+0130, U+0131), so the check refuses whatever a case-insensitive decoder
// would match to a member the sidecar reads.
func TestFoldEqualMatchesEveryDecoderFold(t *testing.T) {
	var letterClass [26]rune
	for c := range letterClass {
		letterClass[c] = foldClass(rune('a' + c))
	}
	n := 0
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		cands := []rune{unicode.ToUpper(unicode.ToLower(r)), unicode.ToLower(unicode.ToUpper(r)),
			unicode.ToLower(r), unicode.ToUpper(r), unicode.ToTitle(r)}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			cands = append(cands, f)
		}
		var want byte
		for _, c := range cands {
			if c < 0x80 {
				want = byte(unicode.ToLower(c))
				break
			}
		}
		// foldEqual compares non-ASCII runes by foldClass.
		var got byte
		fc := foldClass(r)
		for c := byte('a'); c <= 'z'; c++ {
			if letterClass[c-'a'] == fc {
				got = c
			}
		}
		if got != want {
			t.Errorf("%U %q folds to %q, want %q", r, r, got, want)
		}
		if want != 0 && !foldEqual([]byte("x"+string(r)), "x"+string(want)) {
			t.Errorf("foldEqual(%q, %q) = false", "x"+string(r), "x"+string(want))
		}
		if want != 0 {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d non-ASCII runes fold to ASCII letters, want 4 (U+017F, U+212A, U+0130, U+0131)", n)
	}
	for _, c := range []struct {
		key, name string
		want      bool
	}{
		{"\u212Aind", "kind", true}, {"KIND", "kind", true}, {"paramſ", "params", true},
		{"Ärger", "ärger", true}, {"ärger", "ärger", true}, {"name", "names", false}, {"names", "name", false},
		{"n\u00e4me", "name", false}, {"_meta", "_META", true}, {"-meta", "_meta", false},
	} {
		if got := foldEqual([]byte(c.key), c.name); got != c.want {
			t.Errorf("foldEqual(%q, %q) = %v, want %v", c.key, c.name, got, c.want)
		}
	}
}

// TestBoundArgsErr: members on the path of a header-bound property must be
// given once and exactly; other arguments are the upstream's alone.
func TestBoundArgsErr(t *testing.T) {
	bindings := []paramBinding{{path: []string{"region"}, header: "Mcp-Param-Region"}, {path: []string{"spec", "kind"}, header: "Mcp-Param-Kind"}}
	for _, c := range []struct {
		args string
		ok   bool
	}{
		{`{"region":"eu","spec":{"kind":"a"}}`, true},
		{`{"Other":1,"other":2,"spec":{"x":1,"X":2}}`, true},
		{`{"region":"eu","spec":"not an object"}`, true},
		{`{"\u0072egion":"eu"}`, true},
		{`{"region":"eu","Region":"us"}`, false},
		{`{"region":"eu","region":"us"}`, false},
		{`{"region":"eu","\u0072egion":"us"}`, false},
		{`{"REGION":"us"}`, false},
		{`{"spec":{"kind":"a","\u212Aind":"b"}}`, false},
		{`{"spec":{"kind":"a"},"Spec":{"kind":"b"}}`, false},
	} {
		e := boundArgsErr([]byte(c.args), bindings)
		if (e == nil) != c.ok || (e != nil && (e.code != codeInvalidParams || e.status != http.StatusBadRequest)) {
			t.Errorf("%s: got %v, want ok=%v", c.args, e, c.ok)
		}
	}
}
