package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// encodingJSON is how the sink wrote records before AppendJSON: encoding/json, HTML escaping off.
func encodingJSON(t testing.TB, r *Record) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestAppendJSONIsEncodingJSON(t *testing.T) {
	odd := "a\"b\\c\x00\x1f\b\f\n\r\t<>&\u2028\u2029é\xff\xc3 end"
	for name, r := range map[string]*Record{
		"empty": {},
		"every field": {Schema: Schema, Time: time.Date(2026, 12, 2, 12, 0, 0, 123456789, time.UTC), Server: Server{"team-a", "weather"},
			Pod: "weather-0", Caller: &Caller{Subject: "system:serviceaccount:team-b:agent", ServiceAccount: "team-b/agent",
				Groups: []string{"system:serviceaccounts", "x"}, Issuer: "kubernetes"}, ProtocolVersion: "2026-07-28",
			Method: "tools/call", Name: "get_forecast", UpstreamName: "forecast", CatalogRevision: "abc",
			Decision:   Decision{Allowed: true, Reason: ReasonAllowed, Policy: "agents/tools"},
			Outcome:    Outcome{Status: StatusResult, ErrorCode: -32602, IsError: true, InputRequiredRounds: 2, InputRequired: true},
			DurationMs: 3.861, RequestID: json.RawMessage(`"id-1"`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
			Arguments: json.RawMessage(`{"a":[1,2.5e3,true,null],"s":"<x>\u2028"}`), ArgumentsTruncated: true, DroppedBefore: 7},
		"odd strings":                 {Server: Server{odd, odd}, Pod: odd, Caller: &Caller{Subject: odd, Groups: []string{}}, Method: odd, Name: odd},
		"raw values with white space": {RequestID: json.RawMessage(" 42 "), Arguments: json.RawMessage("{ \"a\" : [ 1 , 2 ] }")},
		"small duration":              {DurationMs: 0.0000005},
		"large duration":              {DurationMs: 1e21},
		"whole duration":              {DurationMs: 12},
	} {
		t.Run(name, func(t *testing.T) {
			want := encodingJSON(t, r)
			if got := string(AppendJSON(nil, r)); got != want {
				t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
			}
		})
	}
}

// Arguments that are not JSON (a Record not filled by a Redactor) still make a JSON line.
func TestAppendJSONBadArguments(t *testing.T) {
	got := AppendJSON(nil, &Record{Method: "tools/call", Arguments: json.RawMessage(`{"a":`)})
	if !json.Valid(bytes.TrimSpace(got)) || !strings.Contains(string(got), `"arguments":"[TRUNCATED]"`) {
		t.Fatalf("got %s", got)
	}
}

func FuzzAppendJSON(f *testing.F) {
	f.Add("tools/call", "get_forecast", `{"a":1}`, 3.861)
	f.Add("\u2028\xff<>", "\x00\"", ` [1, 2] `, 1e-7)
	f.Fuzz(func(t *testing.T, method, name, args string, d float64) {
		r := &Record{Method: method, Name: name, Caller: &Caller{Subject: name, Groups: []string{method}}, DurationMs: d,
			Arguments: json.RawMessage(args)}
		got := AppendJSON(nil, r)
		if !json.Valid(got) {
			t.Fatalf("not JSON: %q", got)
		}
		if d != d || d > 1e300 || d < -1e300 || (args != "" && !json.Valid([]byte(args))) {
			return // encoding/json refuses these; AppendJSON writes a valid line regardless
		}
		if want := encodingJSON(t, r); string(got) != want {
			t.Fatalf("AppendJSON\n got %s\nwant %s", got, want)
		}
	})
}
