package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// ErrEventTooLarge is returned when one SSE event exceeds the reader's bound.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// SSEEvent is one dispatched Server-Sent Event. Data joins its data: lines
// with "\n"; it is only valid until the next call to Next.
type SSEEvent struct {
	Event string
	Data  []byte
}

// SSEReader reads Server-Sent Events (the WHATWG event-stream format) from an
// upstream response. Every buffer is bounded by max bytes per event. Lines
// end in LF or CRLF; the id and retry fields are ignored (this protocol
// revision has no resumption).
type SSEReader struct {
	r    *bufio.Reader
	max  int
	data []byte
	line []byte
}

// NewSSEReader reads events from r, at most max bytes each.
func NewSSEReader(r io.Reader, max int) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 4096), max: max}
}

// readLine returns the next line without its terminator. The result is valid
// until the next call.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max {
			return nil, ErrEventTooLarge
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

// Next returns the next event that carries data.
func (s *SSEReader) Next() (SSEEvent, error) {
	s.data = s.data[:0]
	var ev SSEEvent
	hasData := false
	for {
		line, err := s.readLine()
		if err != nil {
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = s.data
				return ev, nil
			}
			ev = SSEEvent{}
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
				return SSEEvent{}, ErrEventTooLarge
			}
			if hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			hasData = true
		case "event":
			ev.Event = string(value)
		}
	}
}

// sseReaders recycles the readers of calls' SSE answers (a 4 KiB buffer
// each), which a legacy upstream sends for every call.
var sseReaders = sync.Pool{New: func() any { return &SSEReader{r: bufio.NewReaderSize(nil, 4096)} }}

// sseReaderKeep is the largest event buffer kept in a recycled reader.
const sseReaderKeep = 64 << 10

// NewPooledSSEReader is NewSSEReader from a pool; Recycle returns it.
func NewPooledSSEReader(r io.Reader, max int) *SSEReader {
	s := sseReaders.Get().(*SSEReader)
	s.r.Reset(r)
	s.max = max
	return s
}

// Recycle returns a reader of NewPooledSSEReader; s is not used after.
func (s *SSEReader) Recycle() {
	s.r.Reset(nil)
	if cap(s.data) > sseReaderKeep || cap(s.line) > sseReaderKeep {
		return
	}
	s.data, s.line = s.data[:0], s.line[:0]
	sseReaders.Put(s)
}
