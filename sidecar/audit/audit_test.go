package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRedactorArguments(t *testing.T) {
	const jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl"
	for _, tc := range []struct {
		name          string
		mode          Mode
		paths         []string
		max           int
		in            string
		want          string
		wantTruncated bool
	}{
		{name: "off keeps nothing", mode: ModeOff, in: `{"a":1}`, want: ``},
		{name: "full keeps everything as sent", mode: ModeFull, in: ` {"b" : "x", "a":[1,2.50,true,null],"c":{"password":"hunter2"}} `,
			want: `{"b":"x","a":[1,2.50,true,null],"c":{"password":"hunter2"}}`},
		{name: "full applies the paths", mode: ModeFull, paths: []string{"c.password", "$.items.*.secret"},
			in:   `{"c":{"password":"hunter2","user":"bob"},"items":[{"secret":"s1","n":1},{"n":2}],"password":"top"}`,
			want: `{"c":{"password":"[REDACTED]","user":"bob"},"items":[{"secret":"[REDACTED]","n":1},{"n":2}],"password":"top"}`},
		{name: "a path to an array redacts it whole", mode: ModeFull, paths: []string{"list"},
			in: `{"list":[1,2,3],"keep":[1]}`, want: `{"list":"[REDACTED]","keep":[1]}`},
		{name: "a wildcard element path", mode: ModeFull, paths: []string{"list.*"},
			in: `{"list":["a","b"]}`, want: `{"list":["[REDACTED]","[REDACTED]"]}`},
		{name: "redacted masks secret-looking keys but keeps their numbers", mode: ModeRedacted,
			in:   `{"Password":"hunter2","apiKey":"k","auth":{"access_token":"t"},"max_tokens":100,"tokens":{"n":1},"city":"Paris"}`,
			want: `{"Password":"[REDACTED]","apiKey":"[REDACTED]","auth":{"access_token":"[REDACTED]"},"max_tokens":100,"tokens":"[REDACTED]","city":"Paris"}`},
		{name: "redacted masks secret-looking values under any key", mode: ModeRedacted,
			in:   `{"h":"Bearer abcdefghijkl","j":"` + jwt + `","aws":"AKIAIOSFODNN7EXAMPLE","gh":"ghp_0123456789abcdefghij","pem":"-----BEGIN PRIVATE KEY-----\nMII","rand":"Q2hhbmdlTWU3N1pYcXdlcnR5VUlPUA9z","hex":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b","uuid":"123e4567-e89b-12d3-a456-426614174000","text":"The quick brown fox jumps over the lazy dog"}`,
			want: `{"h":"[REDACTED]","j":"[REDACTED]","aws":"[REDACTED]","gh":"[REDACTED]","pem":"[REDACTED]","rand":"[REDACTED]","hex":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b","uuid":"123e4567-e89b-12d3-a456-426614174000","text":"The quick brown fox jumps over the lazy dog"}`},
		{name: "full does not guess", mode: ModeFull, in: `{"h":"Bearer abcdefghijkl","password":"p"}`, want: `{"h":"Bearer abcdefghijkl","password":"p"}`},
		{name: "a long string is cut", mode: ModeFull, max: 20, in: `{"s":"` + strings.Repeat("é", 40) + `"}`,
			want: `{"s":"` + strings.Repeat("é", 7) + `[TRUNCATED]"}`, wantTruncated: true},
		{name: "members past the bound become one marker", mode: ModeFull, max: 16, in: `{"a":"0123456789","b":1,"c":2}`,
			want: `{"a":"0123456789","[TRUNCATED]":null}`, wantTruncated: true},
		{name: "elements past the bound become one marker", mode: ModeFull, max: 8, in: `[1,2,3,4,5,6,7,8,9,10]`,
			want: `[1,2,3,4,"[TRUNCATED]"]`, wantTruncated: true},
		{name: "deep nesting is cut at the depth bound", mode: ModeFull, in: strings.Repeat(`[`, 20) + strings.Repeat(`]`, 20),
			want: strings.Repeat(`[`, MaxArgumentDepth) + `"[TRUNCATED]"` + strings.Repeat(`]`, MaxArgumentDepth), wantTruncated: true},
		{name: "escapes survive as sent", mode: ModeFull, in: `{"k\"ey":"<a>\u0000"}`, want: `{"k\"ey":"<a>\u0000"}`},
		{name: "an escaped key is matched unescaped", mode: ModeRedacted, paths: []string{"city"}, in: `{"\u0063ity":"Paris","pass\u0077ord":"p"}`, want: `{"\u0063ity":"[REDACTED]","pass\u0077ord":"[REDACTED]"}`},
		{name: "an escaped secret value is seen decoded", mode: ModeRedacted, in: `{"h":"Bearer \u0061bcdefghijkl","t":"line\none","e":"\ud83d\ude00 ok"}`,
			want: `{"h":"[REDACTED]","t":"line\none","e":"\ud83d\ude00 ok"}`},
		{name: "a path through arrays and objects", mode: ModeFull, paths: []string{"a.*.b.*", "x"},
			in:   `{"a":[{"b":[1,{"c":2}],"k":3},{"b":{"m":4}}],"x":{"y":1},"z":[1]}`,
			want: `{"a":[{"b":["[REDACTED]","[REDACTED]"],"k":3},{"b":{"m":"[REDACTED]"}}],"x":"[REDACTED]","z":[1]}`},
		{name: "a named segment does not match an element", mode: ModeFull, paths: []string{"a.0"},
			in: `{"a":["x"]}`, want: `{"a":["x"]}`},
		{name: "depth at the bound is kept", mode: ModeFull, in: strings.Repeat(`[`, MaxArgumentDepth) + strings.Repeat(`]`, MaxArgumentDepth),
			want: strings.Repeat(`[`, MaxArgumentDepth) + strings.Repeat(`]`, MaxArgumentDepth)},
		{name: "a cut string keeps its escapes valid", mode: ModeFull, max: 12, in: `{"s":"a\"b\\c<d>` + strings.Repeat("x", 20) + `"}`,
			want: `{"s":"a\"b\\c<d[TRUNCATED]"}`, wantTruncated: true},
		{name: "a trailing comma", mode: ModeFull, in: `{"a":1,}`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "a bad literal", mode: ModeFull, in: `[tru]`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "a bad escape", mode: ModeFull, in: `["\x"]`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "a control character in a string", mode: ModeFull, in: "[\"a\tb\"]", want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "invalid past the cut", mode: ModeFull, max: 4, in: `[1,2,3,4,5,x]`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "invalid past the depth bound", mode: ModeFull, in: strings.Repeat(`[`, 20) + `x` + strings.Repeat(`]`, 20), want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "trailing garbage", mode: ModeFull, in: `{"a":1} x`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "a bad number", mode: ModeFull, in: `{"a":01}`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "an unterminated string", mode: ModeFull, in: `{"a":"x`, want: `"[TRUNCATED]"`, wantTruncated: true},
		{name: "unparsable arguments", mode: ModeFull, in: `{"a":`, want: `"[TRUNCATED]"`, wantTruncated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRedactor(tc.mode, tc.paths, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			got, truncated := r.Arguments(json.RawMessage(tc.in))
			if string(got) != tc.want || truncated != tc.wantTruncated {
				t.Fatalf("Arguments(%s)\n got %s (truncated %v)\nwant %s (truncated %v)", tc.in, got, truncated, tc.want, tc.wantTruncated)
			}
			if got != nil && !json.Valid(got) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

func TestNewRedactorRefuses(t *testing.T) {
	for _, tc := range []struct {
		mode  Mode
		paths []string
		want  string
	}{
		{mode: "Everything", want: `audit arguments mode "Everything": want Off, Redacted or Full`},
		{mode: ModeFull, paths: []string{"a..b"}, want: `audit redaction path "a..b"`},
		{mode: ModeFull, paths: []string{""}, want: `audit redaction path ""`},
		{mode: ModeFull, paths: []string{strings.Repeat("a.", 16) + "a"}, want: "at most 16"},
		{mode: ModeFull, paths: slices.Repeat([]string{"a"}, MaxRedactPaths+1), want: "at most 64"},
	} {
		if _, err := NewRedactor(tc.mode, tc.paths, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRedactor(%q, %q) = %v, want an error containing %q", tc.mode, tc.paths, err, tc.want)
		}
	}
}

// Arguments of any size stay within the bound (plus the closing brackets and one marker per
// level), whatever their shape.
func TestArgumentsAreBounded(t *testing.T) {
	r, _ := NewRedactor(ModeFull, nil, 1024)
	var b strings.Builder
	b.WriteString(`{"list":[`)
	for i := range 20000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"k":"` + strings.Repeat("v", 50) + `"}`)
	}
	b.WriteString(`]}`)
	got, truncated := r.Arguments(json.RawMessage(b.String()))
	if !truncated || len(got) > 1024+200 || !json.Valid(got) {
		t.Fatalf("%d bytes, truncated %v, valid %v", len(got), truncated, json.Valid(got))
	}
}

func readRecords(t *testing.T, b []byte) []Record {
	t.Helper()
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestSinkWritesJSONLines(t *testing.T) {
	var buf bytes.Buffer
	s := NewSink(&buf, 0, nil)
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s.Emit(&Record{Time: at, Server: Server{"team-a", "weather"}, Method: "tools/call", Name: "get_forecast",
		Decision: Decision{Allowed: true, Reason: ReasonAllowed}, Outcome: Outcome{Status: StatusResult},
		RequestID: json.RawMessage(`7`), Arguments: json.RawMessage(`{"city":"<Paris>"}`)})
	s.Emit(&Record{Time: at, Server: Server{"team-a", "weather"}, Method: "tools/call", Name: "delete_all",
		Caller:   &Caller{Subject: "system:serviceaccount:team-b:agent", ServiceAccount: "team-b/agent", Issuer: "kubernetes"},
		Decision: Decision{Reason: ReasonNotGranted}, Outcome: Outcome{Status: StatusError, ErrorCode: -32602}})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := `{"schema":"audit.switchboard.dev/v1","time":"2026-12-02T12:00:00Z","server":{"namespace":"team-a","name":"weather"},"method":"tools/call","name":"get_forecast","decision":{"allowed":true,"reason":"Allowed"},"outcome":{"status":"result"},"durationMs":0,"requestId":7,"arguments":{"city":"<Paris>"}}
{"schema":"audit.switchboard.dev/v1","time":"2026-12-02T12:00:00Z","server":{"namespace":"team-a","name":"weather"},"caller":{"subject":"system:serviceaccount:team-b:agent","serviceAccount":"team-b/agent","issuer":"kubernetes"},"method":"tools/call","name":"delete_all","decision":{"allowed":false,"reason":"NotGranted"},"outcome":{"status":"error","errorCode":-32602},"durationMs":0}
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// A writer that does not return (a full pipe, a stuck disk) never delays Emit: records past
// the queue are dropped, counted, and the next record written says how many.
func TestFullSinkDropsAndSaysSo(t *testing.T) {
	pr, pw := io.Pipe()
	var drops int
	var mu sync.Mutex
	s := NewSink(pw, 4, func() { mu.Lock(); drops++; mu.Unlock() })
	start := time.Now()
	for i := range 1000 {
		s.Emit(&Record{Method: "tools/call", Name: "n" + string(rune('a'+i%26))})
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 Emits into a stuck writer took %v", d)
	}
	// The writer buffers what it can before it blocks in Write; the rest beyond the queue of 4
	// is dropped.
	mu.Lock()
	dropped := drops
	mu.Unlock()
	if dropped == 0 {
		t.Fatal("nothing dropped by a stuck writer with a queue of 4")
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&out, pr); close(done) }()
	// A record after the writer is unstuck carries the count of what was lost.
	waitFor(t, func() bool { return len(s.q) == 0 })
	s.Emit(&Record{Method: "tools/call", Name: "after"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	<-done
	recs := readRecords(t, out.Bytes())
	if len(recs) != 1000-dropped+1 {
		t.Fatalf("%d records written, want %d", len(recs), 1000-dropped+1)
	}
	var reported uint64
	for _, r := range recs {
		reported += r.DroppedBefore
	}
	if last := recs[len(recs)-1]; last.Name != "after" || reported != uint64(dropped) {
		t.Fatalf("last record %q, drops reported %d, want \"after\" and %d", last.Name, reported, dropped)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 10 s")
}

// Emit racing Close neither panics nor loses count: every record is written or dropped.
func TestEmitRacingClose(t *testing.T) {
	var buf bytes.Buffer
	s := NewSink(&buf, 8, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				s.Emit(&Record{Method: "tools/call"})
			}
		})
	}
	time.Sleep(time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	written := uint64(len(readRecords(t, buf.Bytes())))
	var reported uint64
	for _, r := range readRecords(t, buf.Bytes()) {
		reported += r.DroppedBefore
	}
	if written+reported+s.Dropped() != 800 {
		t.Fatalf("written %d + dropped %d (reported %d, pending %d) != 800", written, reported+s.Dropped(), reported, s.Dropped())
	}
}

// Whatever the arguments, a record's are valid JSON; in Full mode with no paths and no cut,
// they are the client's, value for value.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"password":"p","x":[1,{"token":"t"}]}`, `[1,"two",null]`, `"s"`, `{"k\"":"\u00e9"}`, `{`, `{"a":1,}`} {
		f.Add(s, uint16(64))
	}
	f.Fuzz(func(t *testing.T, in string, max uint16) {
		for _, mode := range []Mode{ModeRedacted, ModeFull} {
			r, _ := NewRedactor(mode, []string{"a.*.b"}, int(max))
			got, _ := r.Arguments(json.RawMessage(in))
			if (in != "" || got != nil) && !json.Valid(got) { // no arguments: none kept
				t.Fatalf("%s Arguments(%q) = %q: not JSON", mode, in, got)
			}
		}
		r, _ := NewRedactor(ModeFull, nil, 1<<20)
		got, truncated := r.Arguments(json.RawMessage(in))
		if in != "" && !json.Valid([]byte(in)) {
			if string(got) != quotedTruncated || !truncated {
				t.Fatalf("Full Arguments(%q) = %q, %v: want the marker for what is not JSON", in, got, truncated)
			}
			return
		}
		if truncated {
			return
		}
		var want, have any
		_ = json.Unmarshal([]byte(in), &want)
		_ = json.Unmarshal(got, &have)
		if !reflect.DeepEqual(want, have) {
			t.Fatalf("Full Arguments(%q) = %q", in, got)
		}
	})
}
