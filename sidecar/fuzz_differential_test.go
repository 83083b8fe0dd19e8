package sidecar

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// FuzzParserDifferential (security review F2): whenever parseRequest accepts
// a body, Go's encoding/json (case-insensitive names, the last duplicate
// wins) and an exact-name, last-duplicate-wins decode (JSON.parse's rules)
// read the same id, method, tool name, URI and protocol version claim from
// it as the sidecar did; and whenever boundArgsErr accepts the arguments,
// both read the same bound argument values as the sidecar's header would
// carry. The sidecar forwards the body unchanged, so this is what any
// upstream gets.
func FuzzParserDifferential(f *testing.F) {
	m := fuzzMeta
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","arguments":{"region":"eu","nested":{"kind":"x"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","Name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","\u004eame":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"\u006eame":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","Method":"tools/call","params":{` + m + `,"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","\u004dETHOD":"b"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a"},"paramſ":{"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a"},"param\u017f":{"name":"b"}}`,
		`{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":{` + m + `,"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{` + m + `,"uri":"a","URI":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{` + m + `,"uri":"a","urı":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","IO.modelcontextprotocol/protocolVersion":"x"},"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","arguments":{"region":"eu","Region":"us"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","arguments":{"nested":{"kind":"x","\u212Aind":"y"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a","arguments":{"region":"eu","\u0072egion":"us"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"a` + "\xff" + `"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + m + `,"name":"\ud800"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","nAME":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"Result":{}}`,
	} {
		f.Add([]byte(s))
	}
	bindings := []legacy.Binding{{Path: []string{"region"}, Header: "Mcp-Param-Region"}, {Path: []string{"nested", "kind"}, Header: "Mcp-Param-protocol.Kind"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, perr := parseRequest(body)
		if perr != nil {
			return
		}
		var meta []byte
		if r.meta != nil {
			meta = r.meta
		}
		sc := view{id: r.id, method: mustField(body, "method"), name: mustField(r.params, "name"), uri: mustField(r.params, "uri"),
			version: mustField(meta, mcp.MetaKeyProtocolVersion)}
		for _, d := range []struct {
			name string
			view func([]byte) (view, bool)
		}{{"encoding/json", goView}, {"exact keys, last wins", exactView}} {
			got, ok := d.view(body)
			if !ok {
				t.Fatalf("%s cannot read a body the sidecar accepted: %q", d.name, body)
			}
			if !bytes.Equal(got.id, sc.id) || !bytes.Equal(got.method, sc.method) || !bytes.Equal(got.name, sc.name) ||
				!bytes.Equal(got.uri, sc.uri) || !bytes.Equal(got.version, sc.version) {
				t.Fatalf("%s reads id=%s method=%s name=%s uri=%s version=%s; the sidecar read id=%s method=%s name=%s uri=%s version=%s\nbody: %q",
					d.name, got.id, got.method, got.name, got.uri, got.version, sc.id, sc.method, sc.name, sc.uri, sc.version, body)
			}
		}
		// Arguments bound to headers (sidecar/legacy).
		args, ok, _ := wire.Field(r.params, "arguments")
		if !ok || !wire.IsObject(args) || legacy.BoundArgsErr(args, bindings) != nil {
			return
		}
		scRegion := mustField(args, "region")
		scKind := mustField(mustField(args, "nested"), "kind")
		var g struct {
			Region json.RawMessage `json:"region"`
			Nested struct {
				Kind json.RawMessage `json:"kind"`
			} `json:"nested"`
		}
		if mustField(args, "nested") != nil && !wire.IsObject(mustField(args, "nested")) {
			return // not an object: no bound value under it for anyone
		}
		_ = json.Unmarshal(args, &g)
		eRegion := lastExact(args, "region")
		eKind := lastExact(lastExact(args, "nested"), "kind")
		if !bytes.Equal(g.Region, scRegion) || !bytes.Equal(g.Nested.Kind, scKind) || !bytes.Equal(eRegion, scRegion) || !bytes.Equal(eKind, scKind) {
			t.Fatalf("bound arguments: encoding/json region=%s kind=%s, exact region=%s kind=%s; the sidecar region=%s kind=%s\nbody: %q",
				g.Region, g.Nested.Kind, eRegion, eKind, scRegion, scKind, body)
		}
	})
}

// view is what a decoder reads from a request: raw values (nil: absent).
type view struct{ id, method, name, uri, version []byte }

// mustField is field's value when given exactly once (nil otherwise).
func mustField(obj []byte, name string) []byte {
	if obj == nil || !wire.IsObject(obj) {
		return nil
	}
	v, ok, _ := wire.Field(obj, name)
	if !ok {
		return nil
	}
	return v
}

// goView decodes as a Go upstream written with encoding/json does (as
// mark3labs/mcp-go does): into structs, names matched case-insensitively,
// the last duplicate winning. Values are kept raw, so that a member of a
// type the structs do not expect (which such an upstream refuses) does not
// hide the others.
func goView(body []byte) (view, bool) {
	var g struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &g); err != nil {
		return view{}, false
	}
	v := view{id: g.ID, method: g.Method}
	if wire.IsObject(g.Params) {
		var p struct {
			Name json.RawMessage `json:"name"`
			URI  json.RawMessage `json:"uri"`
			Meta json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(g.Params, &p); err != nil {
			return view{}, false
		}
		v.name, v.uri = p.Name, p.URI
		if wire.IsObject(p.Meta) {
			var m struct {
				Version json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
			}
			if err := json.Unmarshal(p.Meta, &m); err != nil {
				return view{}, false
			}
			v.version = m.Version
		}
	}
	return v, true
}

// exactView decodes with JSON.parse's rules: exact names, the last
// duplicate winning.
func exactView(body []byte) (view, bool) {
	if !json.Valid(body) {
		return view{}, false
	}
	params := lastExact(body, "params")
	return view{id: lastExact(body, "id"), method: lastExact(body, "method"), name: lastExact(params, "name"),
		uri: lastExact(params, "uri"), version: lastExact(lastExact(params, "_meta"), mcp.MetaKeyProtocolVersion)}, true
}

// lastExact returns the raw value of the last member of obj named exactly
// name (after unescaping), read token by token with json.Decoder; nil when
// obj is not an object or has no such member.
func lastExact(obj []byte, name string) []byte {
	if obj == nil || !wire.IsObject(obj) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var last []byte
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil
		}
		if k, _ := tok.(string); k == name {
			last = raw
		}
	}
	return last
}
