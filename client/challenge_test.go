package client_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/client"
)

// Real challenges, from the RFCs and from servers, and the hostile ones: ParseChallenges reads
// quoted strings (with quoted-pairs, commas and escaped backslashes inside), several challenges
// in one field and over several fields, token68, and refuses what is ambiguous or malformed.
func TestParseChallenges(t *testing.T) {
	type ch = client.Challenge
	prm := "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name   string
		fields []string
		want   []ch
		err    string // a substring of the error; "" for none
	}{
		{"MCP authorization spec", []string{`Bearer resource_metadata="` + prm + `"`},
			[]ch{{Scheme: "bearer", Params: map[string]string{"resource_metadata": prm}}}, ""},
		{"RFC 6750 §3 expired token", []string{`Bearer realm="example", error="invalid_token", error_description="The access token expired"`},
			[]ch{{Scheme: "bearer", Params: map[string]string{"realm": "example", "error": "invalid_token", "error_description": "The access token expired"}}}, ""},
		{"RFC 9110 §11.6.1 two challenges, quoted-pair", []string{`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`},
			[]ch{{Scheme: "newauth", Params: map[string]string{"realm": "apps", "type": "1", "title": `Login to "apps"`}},
				{Scheme: "basic", Params: map[string]string{"realm": "simple"}}}, ""},
		{"commas and an escaped backslash inside quotes", []string{`Bearer error_description="a, b=c \\", scope="x y", Basic realm="r"`},
			[]ch{{Scheme: "bearer", Params: map[string]string{"error_description": `a, b=c \`, "scope": "x y"}},
				{Scheme: "basic", Params: map[string]string{"realm": "r"}}}, ""},
		{"token68 then a Bearer challenge", []string{`Negotiate a87421000492aa874209af8bc028==, Bearer error="invalid_token"`},
			[]ch{{Scheme: "negotiate", Token68: "a87421000492aa874209af8bc028=="}, {Scheme: "bearer", Params: map[string]string{"error": "invalid_token"}}}, ""},
		{"bare schemes, empty list elements, case", []string{` , BASIC ,, bEaReR RESOURCE_metadata = "u" ,`},
			[]ch{{Scheme: "basic"}, {Scheme: "bearer", Params: map[string]string{"resource_metadata": "u"}}}, ""},
		{"several fields are one list", []string{`Basic realm="a"`, `Bearer resource_metadata="` + prm + `"`},
			[]ch{{Scheme: "basic", Params: map[string]string{"realm": "a"}}, {Scheme: "bearer", Params: map[string]string{"resource_metadata": prm}}}, ""},
		{"no field", nil, nil, ""},

		{"a repeated parameter is ambiguous", []string{`Bearer resource_metadata="https://good/", resource_metadata="https://evil/"`}, nil, "repeated"},
		{"repeated in another case", []string{`Bearer error="a", ERROR="b"`}, nil, "repeated"},
		{"unterminated quote", []string{`Bearer resource_metadata="https://x`}, nil, "unterminated"},
		{"quote ending in a lone backslash", []string{`Bearer a="x\`}, nil, "quoted-pair"},
		{"control character in a quoted string", []string{"Bearer error_description=\"\x1b[31mred\""}, nil, "control"},
		{"NUL", []string{"Bearer a=\"\x00\""}, nil, "control"},
		{"starts with a quote", []string{`"Bearer"`}, nil, "auth-scheme"},
		{"parameter without a name", []string{`Bearer =x`}, nil, "token68"},
		{"a token68 then a challenge without a scheme", []string{`Bearer a=, b="c"`}, nil, "space"},
		{"garbage after a value", []string{`Bearer a="b" c`}, nil, `","`},
		{"garbage after a token68", []string{`Basic abc== def`}, nil, `","`},
		{"tab before the parameters", []string{"Bearer\ta=b"}, nil, "space"},
		{"too long", []string{"Bearer a=\"" + strings.Repeat("x", 9000) + "\""}, nil, "over"},
		{"too many challenges", []string{strings.Repeat("Basic, ", 17)}, nil, "challenges"},
		{"too many parameters", []string{"Bearer " + manyParams(33)}, nil, "parameters"},
		{"only commas", []string{strings.Repeat(",", 8000)}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := client.ParseChallenges(tc.fields)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q (got %+v)", err, tc.err, got)
			case tc.err != "" && got != nil:
				t.Fatalf("challenges %+v with an error", got)
			case !reflect.DeepEqual(got, tc.want):
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func manyParams(n int) string {
	var ps []string
	for i := range n {
		ps = append(ps, "p"+strings.Repeat("x", i)+"=1")
	}
	return strings.Join(ps, ", ")
}

// FuzzParseChallenges: whatever a server sends, the parser returns (no panic), and what it
// returns is within its bounds and carries no control character.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{
		`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", error="invalid_token"`,
		`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`,
		`Negotiate abc==, Bearer`, `Bearer a="\\", b=c`, `,,,`, `Bearer a="`, "Bearer a=\"\x7f\"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := client.ParseChallenges([]string{s})
		if err != nil {
			return
		}
		if len(cs) > 16 {
			t.Fatalf("%d challenges", len(cs))
		}
		for _, c := range cs {
			if len(c.Params) > 32 {
				t.Fatalf("%d params", len(c.Params))
			}
			for k, v := range c.Params {
				if strings.ContainsFunc(k+v, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
					t.Fatalf("control character in %q=%q", k, v)
				}
			}
		}
	})
}
