package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzSSEReader feeds arbitrary streams to the SSE reader. It must end
// (no input makes it loop without consuming), never return an event larger
// than its bound, and read back what the sidecar itself writes.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"a\":1}\n\n"), 64)
	f.Add([]byte(": keepalive\n\ndata: x\r\ndata: y\r\n\r\n"), 16)
	f.Add([]byte("data:"+strings.Repeat("z", 100)+"\n\n"), 32)
	f.Add([]byte("data\n\nevent:\nid: 3\nretry: 5\ndata: q\n"), 8)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 1 << 10
		}
		rd := NewSSEReader(bytes.NewReader(in), max)
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatalf("more events than input bytes")
			}
			ev, err := rd.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrEventTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
			if len(ev.Data) > max {
				t.Fatalf("event of %d bytes over bound %d", len(ev.Data), max)
			}
		}
		// Round trip: a single-line payload written as the sidecar writes it
		// comes back unchanged.
		payload := bytes.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, in)
		// Every line of the frame must fit the reader's bound.
		if len(payload) == 0 || len("data: ")+len(payload)+1 > max || len("event: message")+1 > max {
			return
		}
		var b bytes.Buffer
		b.WriteString("event: message\ndata: ")
		b.Write(payload)
		b.WriteString("\n\n")
		ev, err := NewSSEReader(&b, max).Next()
		if err != nil {
			t.Fatalf("reading back our own frame: %v", err)
		}
		if !bytes.Equal(ev.Data, payload) {
			t.Fatalf("round trip: got %q want %q", ev.Data, payload)
		}
	})
}
