package main

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// The scan reader counts every notification however the bytes are cut into reads: a marker
// split between two reads, two markers in one read, a marker at a read's very end.
func TestScannerFindsEveryMarkerAcrossReads(t *testing.T) {
	event := "6b\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{}}\n\n\r\n"
	ack := "event: message\ndata: {\"method\":\"notifications/subscriptions/acknowledged\"}\n\n"
	stream := ack + strings.Repeat(event, 5) + ": keepalive\n\n" + strings.Repeat(event, 4)
	for _, tc := range []struct {
		name string
		r    func() io.Reader
		buf  int
	}{
		{"one read", func() io.Reader { return strings.NewReader(stream) }, 4096},
		{"a byte per read", func() io.Reader { return iotest.OneByteReader(strings.NewReader(stream)) }, 4096},
		{"half the buffer per read", func() io.Reader { return iotest.HalfReader(strings.NewReader(stream)) }, 4096},
		{"a buffer smaller than an event", func() io.Reader { return strings.NewReader(stream) }, 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &scanner{r: tc.r(), buf: make([]byte, tc.buf)}
			if _, err := sc.next(ackMarker); err != nil {
				t.Fatalf("no acknowledgement: %v", err)
			}
			n := 0
			for {
				if _, err := sc.next(changeMarker); err != nil {
					break
				}
				n++
			}
			if n != 9 {
				t.Fatalf("counted %d notifications, want 9", n)
			}
		})
	}
}
