package legacy

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

func TestParamHeaderValue(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"eu-west-1"`, "eu-west-1", true},
		{`"a b"`, "a b", true},
		{`" lead"`, "=?base64?IGxlYWQ=?=", true},
		{`"trail\t"`, "=?base64?dHJhaWwJ?=", true},
		{`"Zürich"`, "=?base64?WsO8cmljaA==?=", true},
		{`"=?base64?eA==?="`, "=?base64?PT9iYXNlNjQ/ZUE9PT89?=", true},
		{`""`, "", true},
		{`true`, "true", true},
		{`false`, "false", true},
		{`42`, "42", true},
		{`-7`, "-7", true},
		{`1.0`, "1", true},
		{`1e3`, "1000", true},
		{`1.5`, "", false},
		{`9007199254740992`, "", false},
		{`null`, "", false},
		{`{"a":1}`, "", false},
		{`[1]`, "", false},
	} {
		got, ok := paramHeaderValue([]byte(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("paramHeaderValue(%s) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

func TestSchemaBindings(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"again":{"type":"string","x-mcp-header":"region"},
		"count":{"type":"integer","x-mcp-header":"Count"},
		"ratio":{"type":"number","x-mcp-header":"Ratio"},
		"bad":{"type":"string","x-mcp-header":"Bad Name"},
		"empty":{"type":"string","x-mcp-header":""},
		"nested":{"type":"object","properties":{"flag":{"type":"boolean","x-mcp-header":"Flag"}}}}}`)
	got := map[string]string{}
	for _, b := range schemaBindings(schema, nil, nil, 0) {
		got[b.Header] = strings.Join(b.Path, ".")
	}
	// region and again name the same header: whichever comes first is kept.
	if len(got) != 3 || got["Mcp-Param-Count"] != "count" || got["Mcp-Param-Flag"] != "nested.flag" ||
		(got["Mcp-Param-Region"] != "region" && got["Mcp-Param-Region"] != "again") {
		t.Fatalf("bindings = %v", got)
	}
}

// TestBoundArgsErr: members on the path of a header-bound property must be
// given once and exactly; other arguments are the upstream's alone.
func TestBoundArgsErr(t *testing.T) {
	bindings := []Binding{{Path: []string{"region"}, Header: "Mcp-Param-Region"}, {Path: []string{"spec", "kind"}, Header: "Mcp-Param-protocol.Kind"}}
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
		e := BoundArgsErr([]byte(c.args), bindings)
		if (e == nil) != c.ok || (e != nil && (e.Code != wire.CodeInvalidParams || e.Status != http.StatusBadRequest)) {
			t.Errorf("%s: got %v, want ok=%v", c.args, e, c.ok)
		}
	}
}
