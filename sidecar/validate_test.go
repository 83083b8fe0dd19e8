package sidecar

import (
	"net/http"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

func TestValidate(t *testing.T) {
	const m = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	modern := versionPolicy{supported: []string{"2026-07-28", "2025-11-25"}, serveLegacy: true}
	strict := versionPolicy{supported: []string{"2026-07-28"}}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		h.Set(protocol.HeaderProtocolVersion, "2026-07-28")
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
				continue
			}
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name   string
		body   string
		h      http.Header
		p      versionPolicy
		code   int64 // 0 = accepted
		legacy bool
	}{
		{"plain tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + m + `}}`, hdr(protocol.HeaderMethod, "tools/list"), modern, 0, false},
		{"Mcp-Name base64 decodes to the body name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"café"}}`,
			hdr(protocol.HeaderMethod, "tools/call", protocol.HeaderName, "=?base64?Y2Fmw6k=?="), modern, 0, false},
		{"Mcp-Name raw non-ASCII is invalid", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"café"}}`,
			hdr(protocol.HeaderMethod, "tools/call", protocol.HeaderName, "café"), modern, wire.CodeHeaderMismatch, false},
		{"Mcp-Name for prompts/get", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{` + m + `,"name":"p"}}`,
			hdr(protocol.HeaderMethod, "prompts/get", protocol.HeaderName, " p "), modern, 0, false},
		{"tools/call without a name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `}}`,
			hdr(protocol.HeaderMethod, "tools/call", protocol.HeaderName, "x"), modern, wire.CodeInvalidParams, false},
		{"claim-less legacy request is served", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
			hdr(protocol.HeaderProtocolVersion, ""), modern, 0, true},
		{"legacy header version is served", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			hdr(protocol.HeaderProtocolVersion, "2025-11-25"), modern, 0, true},
		{"legacy rejected when not served", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			hdr(protocol.HeaderProtocolVersion, "2025-11-25"), strict, wire.CodeUnsupportedProtocolVersion, false},
		{"claim-less request rejected, naming the versions, when not served", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			hdr(protocol.HeaderProtocolVersion, ""), strict, wire.CodeUnsupportedProtocolVersion, false},
		{"legacy _meta without a claim (progressToken) is a 2025-era request", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"x"}}`,
			hdr(protocol.HeaderProtocolVersion, "2025-11-25"), modern, 0, true},
		{"a modern header without the claim is a modern error", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"x"}}`,
			hdr(protocol.HeaderMethod, "tools/call", protocol.HeaderName, "x"), modern, wire.CodeInvalidParams, false},
		{"_meta without the version claim", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{}}}`,
			hdr(protocol.HeaderMethod, "tools/list"), modern, wire.CodeInvalidParams, false},
		{"_meta version 2025-11-25 is not served on the modern path", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			hdr(protocol.HeaderProtocolVersion, "2025-11-25", protocol.HeaderMethod, "tools/list"), modern, wire.CodeUnsupportedProtocolVersion, false},
		{"duplicate Mcp-Method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + m + `}}`,
			func() http.Header {
				h := hdr(protocol.HeaderMethod, "tools/list")
				h.Add(protocol.HeaderMethod, "tools/list")
				return h
			}(), modern, wire.CodeHeaderMismatch, false},
		{"notification without Mcp-Method", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + m + `}}`,
			hdr(), modern, wire.CodeHeaderMismatch, false},
		{"notification whose Mcp-Method names another method", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + m + `}}`,
			hdr(protocol.HeaderMethod, "subscriptions/listen"), modern, wire.CodeHeaderMismatch, false},
		{"notification with its headers", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{` + m + `,"requestId":1}}`,
			hdr(protocol.HeaderMethod, "notifications/cancelled"), modern, 0, false},
		{"notification without _meta (go-sdk clients send none)", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
			hdr(protocol.HeaderMethod, "notifications/cancelled"), modern, 0, false},
		{"removed method", `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{` + m + `}}`,
			hdr(protocol.HeaderMethod, "logging/setLevel"), modern, wire.CodeMethodNotFound, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, perr := parseRequest([]byte(c.body))
			if perr != nil {
				t.Fatalf("parse: %v", perr)
			}
			e := validate(c.h, r, c.p)
			switch {
			case c.code == 0 && e != nil:
				t.Fatalf("rejected: %d %s", e.Code, e.Message)
			case c.code != 0 && (e == nil || e.Code != c.code):
				t.Fatalf("got %v, want code %d", e, c.code)
			}
			if r.legacy != c.legacy {
				t.Errorf("legacy = %v", r.legacy)
			}
		})
	}
}

func TestParseRequest(t *testing.T) {
	cases := []struct {
		body string
		code int64
		id   string
	}{
		{`{"jsonrpc":"2.0","id":"x","method":"a"}`, 0, `"x"`},
		{`{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}`, wire.CodeInvalidRequest, ``}, // a case variant: refused (wire/strictjson.go)
		{`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`, wire.CodeInvalidRequest, `1`},
		{`{"jsonrpc":"1.0","id":1,"method":"a"}`, wire.CodeInvalidRequest, `1`},
		{`{"jsonrpc":"2.0","id":null,"method":"a"}`, wire.CodeInvalidRequest, ``},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, wire.CodeInvalidRequest, `1`},
		{`{"jsonrpc":"2.0","id":1,"method":"a","params":[1]}`, wire.CodeInvalidParams, `1`},
		{`[]`, wire.CodeInvalidRequest, ``},
		{`"x"`, wire.CodeInvalidRequest, ``},
		{`{`, wire.CodeParseError, ``},
	}
	for _, c := range cases {
		r, e := parseRequest([]byte(c.body))
		if (e == nil) != (c.code == 0) || (e != nil && e.Code != c.code) {
			t.Errorf("%s: got %v, want code %d", c.body, e, c.code)
			continue
		}
		var id string
		if r != nil {
			id = string(r.id)
		}
		if id != c.id {
			t.Errorf("%s: id %q, want %q", c.body, id, c.id)
		}
		if c.code == 0 && r.method != "a" {
			t.Errorf("%s: method %q", c.body, r.method)
		}
	}
}

func TestStamp(t *testing.T) {
	s := &Server{opts: Options{Hints: func(method string, _ []byte) (int64, string) {
		if method == "tools/list" {
			return 60000, "public"
		}
		return 0, "private"
	}}}
	cases := []struct{ method, in, want string }{
		// The TTL is the hint's; an upstream that says private is believed (the scope only narrows).
		{"tools/list", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":5,"cacheScope":"private","resultType":"complete"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":60000,"cacheScope":"private"}}`},
		{"tools/list", `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"ttlMs":5,"cacheScope":"public","resultType":"complete"}}`,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":60000,"cacheScope":"public"}}`},
		{"resources/read", `{"id":1,"result":{"contents":[]}}`,
			`{"id":1,"result":{"contents":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}`},
		{"tools/call", `{"id":1,"result":{"content":[ {"type":"text"} ]}}`,
			`{"id":1,"result":{"content":[ {"type":"text"} ],"resultType":"complete"}}`},
		{"tools/call", `{"id":1,"result":{"resultType":"complete","content":[]}}`, // untouched bytes
			`{"id":1,"result":{"resultType":"complete","content":[]}}`},
		{"resources/read", `{"id":1,"result":{"resultType":"input_required","requestState":"s"}}`, // no hints on interim results
			`{"id":1,"result":{"resultType":"input_required","requestState":"s"}}`},
		{"tools/list", `{"id":1,"error":{"code":-32602,"message":"x"}}`, `{"id":1,"error":{"code":-32602,"message":"x"}}`},
		{"tools/list", `{"id":1,"result":{}}`, `{"id":1,"result":{"resultType":"complete","ttlMs":60000,"cacheScope":"public"}}`},
	}
	for _, c := range cases {
		got := string(s.stamp(&request{method: c.method, spec: methodOf(c.method)}, []byte(c.in)))
		if got != c.want {
			t.Errorf("%s %s:\n got %s\nwant %s", c.method, c.in, got, c.want)
		}
	}
}
