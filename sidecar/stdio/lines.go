package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// errLineTooLong reports a line longer than the reader's limit. The line has
// been consumed up to its newline; lineReader.next returned its first bytes.
var errLineTooLong = errors.New("line exceeds the limit")

const (
	// readChunk is the buffer the child's pipes are read through.
	readChunk = 64 << 10
	// keepPrefix is how much of an over-long line is kept to find out whose
	// answer it was (its "id" member) or to show it in the log.
	keepPrefix = 4 << 10
	// shrinkAbove: after a line that grew the buffer past this, the buffer
	// is dropped so that one large message does not pin memory for good.
	shrinkAbove = 1 << 20
)

// lineReader reads newline-delimited messages, each at most max bytes. A
// longer line is skipped up to its newline without being held in memory.
// Not safe for concurrent use: one goroutine reads each pipe.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readChunk), max: max}
}

// next returns the next line without its line terminator. The slice is valid
// until the next call. For a line over the limit it returns the line's first
// keepPrefix bytes, the line's full length and errLineTooLong. At the end of
// the stream it returns io.EOF (a last unterminated line is returned first).
func (l *lineReader) next() (line []byte, n int64, err error) {
	if cap(l.buf) > shrinkAbove {
		l.buf = nil
	}
	l.buf = l.buf[:0]
	tooLong := false
	for {
		chunk, rerr := l.r.ReadSlice('\n')
		n += int64(len(chunk))
		if !tooLong {
			if len(l.buf)+len(chunk) > l.max+1 { // +1: the newline itself
				tooLong = true
				room := keepPrefix - len(l.buf)
				if room > 0 {
					l.buf = append(l.buf, chunk[:min(room, len(chunk))]...)
				}
				l.buf = l.buf[:min(len(l.buf), keepPrefix)]
			} else {
				l.buf = append(l.buf, chunk...)
			}
		}
		switch {
		case rerr == nil:
			if tooLong {
				return bytes.TrimRight(l.buf, "\r\n"), n - 1, errLineTooLong
			}
			return bytes.TrimRight(l.buf, "\r\n"), n, nil
		case errors.Is(rerr, bufio.ErrBufferFull):
			continue
		default: // io.EOF or a read error
			if tooLong {
				return l.buf, n, errLineTooLong
			}
			if len(l.buf) > 0 {
				return bytes.TrimRight(l.buf, "\r\n"), n, nil
			}
			return nil, n, rerr
		}
	}
}

// prefixShape is what the first bytes of an over-long JSON-RPC message say
// about it: its id (when it came before the bulk) and whether it is a request
// or notification (method) or a response (result or error).
type prefixShape struct {
	id         json.RawMessage
	hasMethod  bool
	isResponse bool
}

// shapeOf reads the top-level members of a truncated JSON object in order
// until the truncation, so that the id of a response whose result is too
// large is known when the id came first (as every SDK writes it).
func shapeOf(prefix []byte) prefixShape {
	var s prefixShape
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return s
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return s
		}
		key, _ := t.(string)
		switch key {
		case "method":
			s.hasMethod = true
		case "result", "error":
			s.isResponse = true
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return s
		}
		if key == "id" {
			s.id = v
		}
	}
	return s
}
