package legacy

import (
	"encoding/json"
	"strings"
	"testing"
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
		got[b.header] = strings.Join(b.path, ".")
	}
	// region and again name the same header: whichever comes first is kept.
	if len(got) != 3 || got["Mcp-Param-Count"] != "count" || got["Mcp-Param-Flag"] != "nested.flag" ||
		(got["Mcp-Param-Region"] != "region" && got["Mcp-Param-Region"] != "again") {
		t.Fatalf("bindings = %v", got)
	}
}
