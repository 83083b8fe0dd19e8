package client

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzClientSSEReader feeds the client's SSE reader, which faces arbitrary servers, two events
// written as a server writes them (each line of the data a `data:` line, then a blank line)
// and then arbitrary bytes: it must return exactly the two events' data, then never panic and
// never return an event over maxMessageBytes. `make fuzz` runs it.
func FuzzClientSSEReader(f *testing.F) {
	f.Add("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", "two\nlines", []byte("data: x\n\n"))
	f.Add("", " leading space", []byte("event: message\ndata:no space\r\n\r\n"))
	f.Add("a", "b", []byte(": comment\nid: 7\nretry: 10\n\ndata"))
	f.Fuzz(func(t *testing.T, a, b string, rest []byte) {
		// The reader splits lines on LF and strips one CR before it, as net/http servers write.
		a, b = strings.ReplaceAll(a, "\r", ""), strings.ReplaceAll(b, "\r", "")
		var in bytes.Buffer
		for _, ev := range []string{a, b} {
			for _, line := range strings.Split(ev, "\n") {
				in.WriteString("data: " + line + "\n")
			}
			in.WriteString("\n")
		}
		in.Write(rest)
		r := newSSEReader(&in)
		for i, want := range []string{a, b} {
			got, err := r.next()
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
			if string(got) != want {
				t.Fatalf("event %d = %q, want %q", i, got, want)
			}
		}
		for {
			got, err := r.next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "over") {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(got) > maxMessageBytes {
				t.Fatalf("an event of %d bytes, over the %d bound", len(got), maxMessageBytes)
			}
		}
	})
}
