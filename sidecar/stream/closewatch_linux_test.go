//go:build linux

package stream

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// goneCounter returns a gone func and the channel each of its runs signals.
func goneCounter() (func(), <-chan struct{}) {
	c := make(chan struct{}, 16)
	return func() { c <- struct{}{} }, c
}

// watchedStream is a stream over a real loopback connection whose client is watched: its
// transport, its client, and what its gone signals.
func watchedStream(t *testing.T) (*Conn, net.Conn, <-chan struct{}) {
	t.Helper()
	server, client := tcpPair(t)
	cw := NewConn(server, time.Minute)
	gone, c := goneCounter()
	if !cw.WatchClose(gone) {
		t.Fatal("WatchClose refused a TCP connection on Linux")
	}
	return cw, client, c
}

func waitGone(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: gone did not run", what)
	}
}

// noMoreGone fails if gone runs (again) within a moment: what is checked is that nothing
// calls it, so a pass cannot be a timing accident the other way.
func noMoreGone(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s: gone ran when it should not", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// watched is how many connections the watcher holds.
func (w *closeWatcher) watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.conns)
}

// watchedBack waits until the watcher holds want connections (its set is the process's).
func watchedBack(t *testing.T, want int) {
	t.Helper()
	eventually.Succeeds(t, "the watcher to hold no leaked token", func() error {
		if got := watcher().watched(); got != want {
			return fmt.Errorf("it holds %d connections, want %d", got, want)
		}
		return nil
	})
}

// The one epoll set notices every client that closes its connection, resets it or sends
// anything, once each, and forgets them.
func TestWatchCloseNoticesEveryClient(t *testing.T) {
	base := watcher().watched()
	const n = 60
	type pair struct {
		client net.Conn
		gone   <-chan struct{}
	}
	pairs := make([]pair, n)
	for i := range pairs {
		_, client, c := watchedStream(t)
		pairs[i] = pair{client, c}
	}
	watchedBack(t, base+n)
	for i, p := range pairs {
		switch i % 3 {
		case 0:
			p.client.Close()
		case 1:
			p.client.(*net.TCPConn).CloseWrite() // half-closed: the client has said all it will
		case 2:
			if _, err := p.client.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, p := range pairs {
		waitGone(t, p.gone, fmt.Sprintf("client %d (way %d)", i, i%3))
	}
	time.Sleep(200 * time.Millisecond)
	for i, p := range pairs {
		select {
		case <-p.gone:
			t.Fatalf("client %d: gone ran twice", i)
		default:
		}
	}
	watchedBack(t, base)
}

// End (the hub ending the stream) drops the watch without calling gone, the client still gets
// the final event and the end of the body, and its close afterwards tells no one.
func TestWatchCloseEndIsNotGone(t *testing.T) {
	base := watcher().watched()
	cw, client, c := watchedStream(t)
	cw.End([]byte("final"))
	b, err := io.ReadAll(client)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(appendChunk(nil, []byte("final")), "0\r\n\r\n"...); !bytes.Equal(b, want) {
		t.Fatalf("the client read %q, want %q", b, want)
	}
	client.Close()
	noMoreGone(t, c, "End")
	watchedBack(t, base)
	if !cw.WatchClose(func() { t.Error("gone of an ended stream ran") }) {
		t.Fatal("WatchClose of an ended stream: want true (nothing to watch)")
	}
	watchedBack(t, base)
}

// The set is keyed by token, not by descriptor: a connection opened after another was closed
// (most likely on the same descriptor number) is told about its own client only.
func TestWatchCloseDescriptorReuse(t *testing.T) {
	base := watcher().watched()
	a, clientA, cA := watchedStream(t)
	a.End(nil)
	_, clientB, cB := watchedStream(t)
	clientA.Close()
	noMoreGone(t, cA, "the ended stream's client closing")
	noMoreGone(t, cB, "another stream's client closing")
	clientB.Close()
	waitGone(t, cB, "its own client closing")
	noMoreGone(t, cA, "after the other stream's client closed")
	watchedBack(t, base)
}

// A write that stalls and then fails in the background (the client stopped reading past the
// timeout) closes the connection and tells the watch, as a reader goroutine's failed Read did.
func TestWatchCloseBackgroundFailureIsGone(t *testing.T) {
	base := watcher().watched()
	server, client := tcpPair(t)
	_ = client.(*net.TCPConn).SetReadBuffer(4 << 10)
	_ = server.(*net.TCPConn).SetWriteBuffer(4 << 10)
	cw := NewConn(server, 100*time.Millisecond)
	gone, c := goneCounter()
	if !cw.WatchClose(gone) {
		t.Fatal("WatchClose refused a TCP connection")
	}
	// Far more than both socket buffers: the write stalls, the rest goes to the background,
	// which the client never lets finish.
	if _, err := cw.WriteEvent(bytes.Repeat([]byte("x"), 4<<20), nil); err != nil {
		t.Fatalf("WriteEvent: %v", err)
	}
	waitGone(t, c, "a failed background write")
	noMoreGone(t, c, "a failed background write")
	watchedBack(t, base)
}

// A connection that is not a socket (net.Pipe here) is not watched: the caller reads it.
func TestWatchCloseRefusesWhatIsNotASocket(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	defer server.Close()
	if NewConn(server, time.Minute).WatchClose(func() {}) {
		t.Fatal("WatchClose accepted a net.Pipe")
	}
}
