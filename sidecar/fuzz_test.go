package sidecar

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

const fuzzMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// FuzzRequest drives the request parser, the validator and the result
// stamper with arbitrary bodies and header values. No input may panic; a
// valid JSON response must stay valid JSON after stamping; an accepted
// request must have a method and, unless it is a notification, a usable id.
func FuzzRequest(f *testing.F) {
	seeds := []struct{ body, pv, method, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + fuzzMeta + `}}`, "2026-07-28", "tools/list", ""},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{` + fuzzMeta + `,"name":"x"}}`, "2026-07-28", "tools/call", "x"},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{` + fuzzMeta + `,"uri":"t://ü"}}`, "2026-07-28", "resources/read", "=?base64?dDovL8O8?="},
		{`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{` + fuzzMeta + `,"notifications":{"toolsListChanged":true}}}`, "2026-07-28", "subscriptions/listen", ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", "", ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"x","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0"}}}`, "v999.0.0", "tools/list", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.model\u0063ontextprotocol/protocolVersion":"2026-07-28"}}}`, " 2026-07-28 ", "tools/list", ""},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"a"}`, "", "", ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}`, "", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.pv, s.method, s.name)
	}
	policies := []versionPolicy{
		{supported: []string{"2026-07-28", "2025-11-25"}, serveLegacy: true},
		{supported: []string{"2026-07-28"}},
	}
	srv := &Server{opts: Options{Hints: overlay.DefaultHints}}
	f.Fuzz(func(t *testing.T, body []byte, pv, method, name string) {
		h := http.Header{}
		h.Set(protocol.HeaderProtocolVersion, pv)
		h.Set(protocol.HeaderMethod, method)
		h.Set(protocol.HeaderName, name)
		h.Set("Mcp-Param-X", name)
		req, perr := parseRequest(body)
		if perr == nil {
			for _, p := range policies {
				r := *req
				if e := validate(h, &r, p); e == nil {
					if r.method == "" {
						t.Fatalf("accepted a request without a method: %q", body)
					}
					if r.id != nil && !wire.ValidID(r.id) {
						t.Fatalf("accepted a request with id %q", r.id)
					}
				} else if e.Status < 400 || e.Status > 499 {
					t.Fatalf("validation error with status %d", e.Status)
				}
			}
		} else {
			if perr.Status != http.StatusBadRequest {
				t.Fatalf("parse error with status %d", perr.Status)
			}
			if !json.Valid(wire.ErrorBody(func() json.RawMessage {
				if req != nil {
					return req.id
				}
				return nil
			}(), perr)) {
				t.Fatalf("error body is not JSON for %q", body)
			}
		}
		// Stamping treats body as an upstream response to each method.
		for _, m := range []string{"tools/list", "tools/call", "server/discover"} {
			out := srv.stamp(&request{method: m, spec: methodOf(m)}, body)
			if json.Valid(body) && !json.Valid(out) {
				t.Fatalf("stamping turned valid JSON into invalid JSON:\nin:  %q\nout: %q", body, out)
			}
		}
		_ = wire.EachMember(body, func(m wire.Member) bool {
			if m.Start < 0 || m.End > len(body) || m.Start > m.End {
				t.Fatalf("member span out of range")
			}
			return true
		})
	})
}

// FuzzLegacy drives the 2025-era paths: a claim-less request the policy
// serves is turned into the modern shape, which must parse and validate as a
// 2026-07-28 request of the same method and id, keep params members the
// client sent, and mirror the name member in Mcp-Name; every upstream answer
// turned back into the legacy shape stays valid JSON; session ids that were
// not minted never verify.
func FuzzLegacy(f *testing.F) {
	for _, s := range []struct{ body, pv, sid string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25", ""},
		{`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"café","arguments":{"a":1},"_meta":{"progressToken":7}}}`, "2025-06-18", "s1.e30.AAAA"},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"t://ü"}}`, "", ""},
		{`{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"p","_meta":[]}}`, "2025-03-26", ""},
		{`{"jsonrpc":"2.0","id":4,"result":{"resultType":"input_required","inputRequests":{}}}`, "", ""},
		{`{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","ttlMs":5,"cacheScope":"public","tools":[]}}`, "", ""},
	} {
		f.Add([]byte(s.body), s.pv, s.sid)
	}
	srv, err := NewServer(Options{Upstream: "http://127.0.0.1:1/mcp"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, pv, sid string) {
		if _, err := srv.legacy.Open(sid); err == nil {
			t.Fatalf("a session id that was never minted verified: %q", sid)
		}
		if out := legacy.Result(json.RawMessage(`1`), body); json.Valid(body) && !json.Valid(out) {
			t.Fatalf("legacyResult turned valid JSON into invalid JSON:\nin:  %q\nout: %q", body, out)
		} else if json.Valid(body) && !bytes.Contains(out, []byte(`"code":-32603`)) {
			// Only resultType, ttlMs and cacheScope leave the result.
			var in, got map[string]any
			if json.Unmarshal(body, &in) == nil && json.Unmarshal(out, &got) == nil {
				if res, ok := in["result"].(map[string]any); ok {
					delete(res, "resultType")
					delete(res, "ttlMs")
					delete(res, "cacheScope")
				}
				if !reflect.DeepEqual(in, got) {
					t.Fatalf("legacyResult changed more than the modern members:\nin:  %q\nout: %q", body, out)
				}
			}
		}
		req, perr := parseRequest(body)
		if perr != nil {
			return
		}
		h := http.Header{}
		if pv != "" {
			h.Set(protocol.HeaderProtocolVersion, pv)
		}
		if validate(h, req, srv.pol) != nil || !req.legacy || req.isNotification() {
			return
		}
		r := &http.Request{Header: h}
		if e := toModern(r, req, json.RawMessage(`{"roots":{}}`), "info"); e != nil {
			return
		}
		m, perr := parseRequest(req.body)
		if perr != nil {
			t.Fatalf("the modern form does not parse (%v): %q", perr.Message, req.body)
		}
		if m.method != req.method || string(m.id) != string(req.id) || !m.hasVersion || m.metaVersion != protocol.Version {
			t.Fatalf("the modern form changed the envelope: %q -> %q", body, req.body)
		}
		if nm := m.nameMember(); nm != "" {
			if v, ok := paramString(m, nm); ok {
				got, ok := wire.DecodeHeaderValue(h.Get(protocol.HeaderName))
				if !ok || got != v {
					t.Fatalf("Mcp-Name %q does not mirror params.%s %q", h.Get(protocol.HeaderName), nm, v)
				}
			}
		}
		if e := validate(h, m, srv.pol); e != nil && e.Code != wire.CodeHeaderMismatch && e.Code != wire.CodeInvalidParams && e.Code != wire.CodeMethodNotFound {
			t.Fatalf("the modern form fails validation with %d %s: %q", e.Code, e.Message, req.body)
		}
		// An input round's retry (sidecar/legacy): still one request, with
		// the answers and the state in params and a new id; the answer to
		// it goes back under the client's id.
		if e := retryWithInput(req, json.RawMessage(`{"k":{"action":"accept"}}`), json.RawMessage(`"st"`), 1); e != nil {
			t.Fatalf("retry of %q: %s", req.body, e.Message)
		}
		rt, perr := parseRequest(req.body)
		if perr != nil {
			t.Fatalf("the retry does not parse (%v): %q", perr.Message, req.body)
		}
		ir, _, _ := wire.Field(rt.params, "inputResponses")
		st, _, _ := wire.Field(rt.params, "requestState")
		if rt.method != req.method || string(rt.id) != string(req.upstreamID) || string(ir) != `{"k":{"action":"accept"}}` || string(st) != `"st"` {
			t.Fatalf("the retry lost its shape: %q", req.body)
		}
		back := legacy.WithClientID(req.id, req.upstreamID, []byte(`{"jsonrpc":"2.0","id":`+string(req.upstreamID)+`,"result":{}}`))
		if id, _, _ := wire.Field(back, "id"); string(id) != string(req.id) {
			t.Fatalf("the retry's answer did not get the client's id back: %q", back)
		}
	})
}
