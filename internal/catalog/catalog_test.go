package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

func sample() *Catalog {
	hint := CacheHint{TTLMs: 0, CacheScope: ScopePrivate}
	return &Catalog{
		SchemaVersion: SchemaVersion,
		Server: Server{Namespace: "ns", Name: "srv", ToolPolicy: ToolPolicyAll, Caching: CacheDefaults{
			Discover: hint, Tools: hint, Prompts: hint, Resources: hint, ResourceTemplates: hint, ResourceRead: hint}},
		Tools: []Tool{
			{Name: "zeta", Description: "z", InputSchema: json.RawMessage(`{"type":"object","properties":{"b":{"type":"number","maximum":10000000000000000001},"a":{}}}`)},
			{Name: "alpha", UpstreamName: "a", Disabled: true},
		},
		Resources: []Resource{
			{URI: "docs://b", Name: "b", Source: Source{Secret: &KeyRef{Name: "s", Key: "k"}}},
			{URI: "docs://a", Name: "a", Source: Source{Inline: &Inline{Text: "<hello & bye>"}}},
		},
		Prompts: []Prompt{{Name: "p", Messages: []PromptMessage{{Role: "user", Text: "hi {{x}}"}}, Arguments: []PromptArgument{{Name: "x"}}}},
	}
}

func TestEncodeIsCanonical(t *testing.T) {
	a, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	// The same catalog with lists in another order and schema keys in another order.
	s := sample()
	s.Tools[0], s.Tools[1] = s.Tools[1], s.Tools[0]
	s.Tools[1].InputSchema = json.RawMessage(`{ "properties": {"a":{}, "b":{"maximum":10000000000000000001,"type":"number"}}, "type":"object"}`)
	s.Resources[0], s.Resources[1] = s.Resources[1], s.Resources[0]
	b, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Fatalf("encodings differ:\n%s\n%s", a, b)
	}
	if Revision(a) != Revision(b) || len(Revision(a)) != 32 {
		t.Fatalf("revision %q", Revision(a))
	}
	for _, want := range []string{`"tools":[{"name":"alpha"`, `10000000000000000001`, `<hello & bye>`, `"schemaVersion":1`} {
		if !strings.Contains(string(a), want) {
			t.Errorf("encoding lacks %s: %s", want, a)
		}
	}
	// The input is not reordered in place.
	if sample().Tools[0].Name != "zeta" {
		t.Fatal("sample changed")
	}
	c := sample()
	c.Tools[0].Description = "changed"
	d, _ := Encode(c)
	if Revision(d) == Revision(a) {
		t.Fatal("a description change must change the revision")
	}
	empty, _ := Encode(&Catalog{SchemaVersion: 1})
	if !strings.Contains(string(empty), `"tools":[],"resources":[],"prompts":[]`) {
		t.Fatalf("empty lists must encode as []: %s", empty)
	}
}

func TestDecodeRoundTripAndStrictness(t *testing.T) {
	enc, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Encode(c)
	if string(again) != string(enc) {
		t.Fatalf("round trip changed the document:\n%s\n%s", enc, again)
	}
	for name, tc := range map[string]struct{ doc, wantErr string }{
		"not json":        {`{`, "not JSON"},
		"no version":      {`{"server":{}}`, "no schemaVersion"},
		"future version":  {`{"schemaVersion":2}`, "schemaVersion 2 is not supported"},
		"unknown field":   {strings.Replace(string(enc), `"server":`, `"extra":1,"server":`, 1), "unknown field"},
		"trailing data":   {string(enc) + `{}`, "not JSON"},
		"invalid content": {strings.Replace(string(enc), `"toolPolicy":"All"`, `"toolPolicy":"Some"`, 1), "toolPolicy"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate  func(*Catalog)
		wantErr string
	}{
		"valid":             {func(*Catalog) {}, ""},
		"duplicate tool":    {func(c *Catalog) { c.Tools[1].Name = "zeta" }, `tool "zeta" appears twice`},
		"schema not object": {func(c *Catalog) { c.Tools[0].InputSchema = json.RawMessage(`[]`) }, "inputSchema is not a JSON object"},
		"two sources":       {func(c *Catalog) { c.Resources[0].Source.Upstream = true }, "exactly one source"},
		"no source":         {func(c *Catalog) { c.Resources[0].Source = Source{} }, "exactly one source"},
		"uri and template":  {func(c *Catalog) { c.Resources[0].URITemplate = "x://{a}" }, "exactly one of uri and uriTemplate"},
		"template inline":   {func(c *Catalog) { c.Resources[1].URI = ""; c.Resources[1].URITemplate = "x://{a}" }, "only be served by the upstream"},
		"bad scope":         {func(c *Catalog) { c.Server.Caching.Tools.CacheScope = "Public" }, "server.caching.tools"},
		"bad role":          {func(c *Catalog) { c.Prompts[0].Messages[0].Role = "system" }, "role"},
		"duplicate prompt":  {func(c *Catalog) { c.Prompts = append(c.Prompts, c.Prompts[0]) }, `prompt "p" appears twice`},
		"enforced pin": {func(c *Catalog) {
			c.Server.ToolPinning = ToolPinningEnforce
			c.Tools[0].UpstreamDigest = DigestPrefix + strings.Repeat("ab", 32)
		}, ""},
		"unknown pinning": {func(c *Catalog) { c.Server.ToolPinning = "Warn" }, `server.toolPinning "Warn" is not Enforce`},
		"bad pin":         {func(c *Catalog) { c.Tools[0].UpstreamDigest = "sha256:ABC" }, `upstreamDigest "sha256:ABC" is not sha256:<64`},
	} {
		t.Run(name, func(t *testing.T) {
			c := sample()
			tc.mutate(c)
			err := Validate(c)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestReport(t *testing.T) {
	r := Report{Revision: "a", RejectedRevision: "b", Reason: "bad"}
	if r.String() != `{"revision":"a","rejectedRevision":"b","reason":"bad"}` {
		t.Fatal(r.String())
	}
	got, err := ParseReport(r.String())
	if err != nil || !got.Equal(r) {
		t.Fatal(got, err)
	}
	m := Report{Revision: "a", ToolsChecked: true, MissingTools: []string{"ghost"}, MissingToolCount: 1}
	if m.String() != `{"revision":"a","rejectedRevision":"","reason":"","toolsChecked":true,"missingTools":["ghost"],"missingToolCount":1}` {
		t.Fatal(m.String())
	}
	if got, err := ParseReport(m.String()); err != nil || !got.Equal(m) || got.Equal(r) {
		t.Fatal(got, err)
	}
	p := m
	p.ToolDigests = map[string]string{"weather": "sha256:aa"}
	p.WithheldTools, p.WithheldToolCount = []string{"echo"}, 1
	if got, err := ParseReport(p.String()); err != nil || !got.Equal(p) || got.Equal(m) {
		t.Fatal(got, err)
	}
	q := p
	q.ToolDigests = map[string]string{"weather": "sha256:bb"}
	if q.Equal(p) {
		t.Fatal("reports with other digests are equal")
	}
}
