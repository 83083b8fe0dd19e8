// Package stream is the transports of the streams the sidecar holds open
// (a subscriptions/listen, a 2025-era session's GET): the hub's FrameWriter
// over a hijacked HTTP/1.1 connection with chunked framing (Conn), or over a
// handler kept parked (Parked: HTTP/2, or a wrapped ResponseWriter). Every
// write has a deadline. It knows no MCP, no routing and no hub state: the
// request path opens the stream and hands the transport to sidecar/hub.
package stream

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// responseHead is the response head of a hijacked stream.
const responseHead = "HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/event-stream\r\n" +
	"Cache-Control: no-cache, no-transform\r\n" +
	"X-Accel-Buffering: no\r\n" +
	"Connection: close\r\n" +
	"Transfer-Encoding: chunked\r\n\r\n"

// Head is what a hijacked stream's connection gets first: the response head and first, the
// stream's first event, as its first chunk.
func Head(first []byte) []byte {
	return append([]byte(responseHead), appendChunk(nil, first)...)
}

// SetHeaders sets the response headers of a stream served by a parked handler.
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
}

// Conn writes a hijacked HTTP/1.1 response with chunked framing, each write within timeout.
type Conn struct {
	c       net.Conn
	timeout time.Duration
}

// NewConn is the transport of a stream on the hijacked connection c.
func NewConn(c net.Conn, timeout time.Duration) *Conn { return &Conn{c: c, timeout: timeout} }

// WriteEvent writes ev as one chunk (scratch is the buffer it may reuse, returned).
func (cw *Conn) WriteEvent(ev []byte, scratch []byte) ([]byte, error) {
	scratch = appendChunk(scratch[:0], ev)
	if err := cw.c.SetWriteDeadline(time.Now().Add(cw.timeout)); err != nil {
		return scratch, err
	}
	_, err := cw.c.Write(scratch)
	return scratch, err
}

// End writes final, if any, ends the chunked body and closes the connection.
func (cw *Conn) End(final []byte) {
	var buf []byte
	if final != nil {
		buf = appendChunk(buf, final)
	}
	buf = append(buf, "0\r\n\r\n"...)
	_ = cw.c.SetWriteDeadline(time.Now().Add(cw.timeout))
	_, _ = cw.c.Write(buf)
	_ = cw.c.Close()
}

// appendChunk appends ev as one HTTP/1.1 chunk.
func appendChunk(b, ev []byte) []byte {
	b = strconv.AppendInt(b, int64(len(ev)), 16)
	b = append(b, '\r', '\n')
	b = append(b, ev...)
	return append(b, '\r', '\n')
}

// Parked is the transport of a stream whose connection cannot be hijacked
// (HTTP/2): the handler stays parked until Done is closed.
type Parked struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	done    chan struct{}
	once    sync.Once
}

// NewParked is the transport of a stream on w, whose headers (SetHeaders) are written.
func NewParked(w http.ResponseWriter, timeout time.Duration) *Parked {
	return &Parked{w: w, rc: http.NewResponseController(w), timeout: timeout, done: make(chan struct{})}
}

// Done is closed when the stream ended: the handler may return.
func (rw *Parked) Done() <-chan struct{} { return rw.done }

// WriteEvent writes ev and flushes it.
func (rw *Parked) WriteEvent(ev []byte, scratch []byte) ([]byte, error) {
	_ = rw.rc.SetWriteDeadline(time.Now().Add(rw.timeout))
	if _, err := rw.w.Write(ev); err != nil {
		return scratch, err
	}
	return scratch, rw.rc.Flush()
}

// End writes final, if any, once, and releases the handler.
func (rw *Parked) End(final []byte) {
	rw.once.Do(func() {
		if final != nil {
			_, _ = rw.WriteEvent(final, nil)
		}
		close(rw.done)
	})
}
