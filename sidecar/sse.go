package sidecar

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// errEventTooLarge is returned when one SSE event exceeds the reader's bound.
var errEventTooLarge = errors.New("sse: event exceeds size limit")

// sseEvent is one dispatched Server-Sent Event. data joins its data: lines
// with "\n"; it is only valid until the next call to next.
type sseEvent struct {
	event string
	data  []byte
}

// sseReader reads Server-Sent Events (the WHATWG event-stream format) from an
// upstream response. Every buffer is bounded by max bytes per event. Lines
// end in LF or CRLF; the id and retry fields are ignored (this protocol
// revision has no resumption).
type sseReader struct {
	r    *bufio.Reader
	max  int
	data []byte
	line []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 4096), max: max}
}

// readLine returns the next line without its terminator. The result is valid
// until the next call.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max {
			return nil, errEventTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			s.line = append(s.line, chunk...)
			continue
		}
		if err != nil {
			if err == io.EOF && len(chunk)+len(s.line) > 0 {
				// A final unterminated line is incomplete: the stream was
				// cut in the middle of an event, which is never dispatched.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		var l []byte
		if len(s.line) == 0 {
			l = chunk
		} else {
			s.line = append(s.line, chunk...)
			l = s.line
		}
		l = l[:len(l)-1]
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		return l, nil
	}
}

// next returns the next event that carries data.
func (s *sseReader) next() (sseEvent, error) {
	s.data = s.data[:0]
	var ev sseEvent
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.data = s.data
				return ev, nil
			}
			ev = sseEvent{}
			continue
		}
		if line[0] == ':' {
			continue // comment (keepalive)
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			if len(s.data)+len(value)+1 > s.max {
				return sseEvent{}, errEventTooLarge
			}
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		case "event":
			ev.event = string(value)
		}
	}
}
