// Package stream is the transports of the streams the sidecar holds open
// (a subscriptions/listen, a 2025-era session's GET): the hub's FrameWriter
// over a hijacked HTTP/1.1 connection with chunked framing (Conn), or over a
// handler kept parked (Parked: HTTP/2, or a wrapped ResponseWriter). Every
// write has a deadline. On Linux one epoll set tells when the clients of
// hijacked connections go away (Conn.WatchClose), so an idle stream keeps no
// goroutine. It knows no MCP, no routing and no hub state: the request path
// opens the stream and hands the transport to sidecar/hub.
package stream

import (
	"errors"
	"net"
	"net/http"
	"os"
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

// stallWait is how long a write to a hijacked stream may wait for room in its socket before the
// stream counts as stalled: what is left of the event is then written in the background (within
// the stream's timeout), and the writer goes on to the next stream.
const stallWait = time.Millisecond

// maxBacklog bounds the bytes a stalled stream holds for its client (the event being written
// and those after it, framed); an event past it ends the stream.
const maxBacklog = 8 << 10

// errBacklogFull is a stalled stream's answer to an event past maxBacklog; the connection is
// closed.
var errBacklogFull = errors.New("stream: the client stopped reading and its backlog is full")

// Conn writes a hijacked HTTP/1.1 response with chunked framing. A write never waits for a
// client that stopped reading more than stallWait: it is left to one goroutine of that stream,
// which writes what the client did not take and the events that follow (at most maxBacklog
// bytes), all within the timeout, or closes the connection. So one stalled client cannot hold
// a fan-out for the others, and a client that falls behind for a moment loses nothing.
//
// WriteEvent and End are called by one goroutine at a time (the hub's stream lock, and End
// once no write follows).
type Conn struct {
	c       net.Conn
	timeout time.Duration
	slow    *backlog // nil until a write stalled

	// life guards closed, token and gone: whether the connection is closed, and its
	// registration with the process's closeWatcher (WatchClose).
	life   sync.Mutex
	closed bool
	token  uint64 // nonzero while watched
	gone   func()
}

// backlog is what a stalled stream still has to write, and its background writer's state.
type backlog struct {
	mu       sync.Mutex
	buf      []byte        // framed bytes not yet written
	flushing bool          // a background writer runs (done is open)
	err      error         // the connection failed: it is closed
	done     chan struct{} // closed when the background writer returns
}

// NewConn is the transport of a stream on the hijacked connection c.
func NewConn(c net.Conn, timeout time.Duration) *Conn { return &Conn{c: c, timeout: timeout} }

// WatchClose arranges for gone to run once, in a goroutine of its own, when the client closes
// or resets the connection or sends anything, or when a write in the background fails and
// closes it; not when End closes it. It reports false when this platform or connection does not
// allow it (not Linux, not a socket): the caller then reads the connection in a goroutine of
// its own (hub.Watch), which notices all of that too.
func (cw *Conn) WatchClose(gone func()) bool {
	w := watcher()
	if w == nil {
		return false
	}
	cw.life.Lock()
	defer cw.life.Unlock()
	if cw.closed {
		return true // already ended: nothing to watch
	}
	tok, ok := w.watch(cw)
	if !ok {
		return false
	}
	cw.token, cw.gone = tok, gone
	return true
}

// clientGone is the closeWatcher's event for token tok: the client went away.
func (cw *Conn) clientGone(tok uint64) {
	cw.life.Lock()
	if cw.token != tok {
		cw.life.Unlock()
		return
	}
	gone := cw.gone
	cw.token, cw.gone = 0, nil
	cw.life.Unlock()
	go gone()
}

// close closes the connection, first dropping its watch, and returns the watch's gone (nil if
// it was not watched).
func (cw *Conn) close() func() {
	cw.life.Lock()
	cw.closed = true
	tok, gone := cw.token, cw.gone
	cw.token, cw.gone = 0, nil
	cw.life.Unlock()
	if tok != 0 {
		watcher().forget(tok)
	}
	_ = cw.c.Close()
	return gone
}

// fail closes the connection after a failed write in the background, and tells a watch: a
// reader goroutine would have failed its Read, and the hub ends the stream either way.
func (cw *Conn) fail() {
	if gone := cw.close(); gone != nil {
		go gone()
	}
}

// WriteEvent writes ev as one chunk (scratch is the buffer it may reuse, returned), or queues
// it behind a stalled write.
func (cw *Conn) WriteEvent(ev []byte, scratch []byte) ([]byte, error) {
	scratch = appendChunk(scratch[:0], ev)
	if queued, err := cw.behindStall(scratch, true); queued != nil || err != nil {
		return scratch, err
	}
	if err := cw.c.SetWriteDeadline(time.Now().Add(stallWait)); err != nil {
		return scratch, err
	}
	n, err := cw.c.Write(scratch)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		cw.background(scratch[n:])
		return scratch, nil
	}
	return scratch, err
}

// behindStall queues framed bytes behind a stalled write whose background writer still runs:
// queued is then closed once they are written. err is the stream's failure (a full backlog, a
// failed write): nothing more is written. Neither: the stream is not stalled, write at once.
// bounded: framed counts against maxBacklog, and past it the stream fails (the end does not
// count: it is the last).
func (cw *Conn) behindStall(framed []byte, bounded bool) (queued <-chan struct{}, err error) {
	b := cw.slow
	if b == nil {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.flushing || b.err != nil:
		return nil, b.err
	case bounded && len(b.buf)+len(framed) > maxBacklog:
		b.err, b.buf = errBacklogFull, nil
		cw.close() // the background write fails at once; the caller's error ends the stream
		return nil, b.err
	}
	b.buf = append(b.buf, framed...)
	return b.done, nil
}

// background starts the stalled stream's writer with rest, the part of an event not written.
func (cw *Conn) background(rest []byte) {
	if cw.slow == nil {
		cw.slow = &backlog{}
	}
	b := cw.slow
	b.mu.Lock()
	b.buf = append(b.buf[:0], rest...)
	b.flushing = true
	b.done = make(chan struct{})
	b.mu.Unlock()
	go cw.flush(b)
}

// flush writes the backlog, and what is queued meanwhile, within the timeout from the stall on.
// It writes from the front of b.buf while WriteEvent appends behind it, so b.buf holds every
// byte not yet written and maxBacklog bounds them all.
func (cw *Conn) flush(b *backlog) {
	defer close(b.done)
	_ = cw.c.SetWriteDeadline(time.Now().Add(cw.timeout))
	for {
		b.mu.Lock()
		if b.err != nil || len(b.buf) == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		out := b.buf
		b.mu.Unlock()
		_, err := cw.c.Write(out)
		b.mu.Lock()
		if err == nil && b.err == nil {
			b.buf = b.buf[:copy(b.buf, b.buf[len(out):])]
			b.mu.Unlock()
			continue
		}
		if b.err == nil {
			b.err = err
		}
		b.flushing, b.buf = false, nil
		b.mu.Unlock()
		cw.fail() // the hub's watcher ends the stream
		return
	}
}

// End writes final, if any, ends the chunked body and closes the connection. Behind a stalled
// write it waits for the backlog to be written first (within the timeout of the stall).
func (cw *Conn) End(final []byte) {
	var buf []byte
	if final != nil {
		buf = appendChunk(buf, final)
	}
	buf = append(buf, "0\r\n\r\n"...)
	if queued, err := cw.behindStall(buf, false); queued != nil || err != nil {
		if queued != nil {
			<-queued
		}
		cw.close()
		return
	}
	_ = cw.c.SetWriteDeadline(time.Now().Add(cw.timeout))
	_, _ = cw.c.Write(buf)
	cw.close()
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
