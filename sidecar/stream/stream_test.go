package stream

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// returnsWithin runs f and fails the test if it has not returned after d (a bound far above
// stallWait: what is checked is that f does not wait for the client, not how fast it is).
func returnsWithin(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s waited for a client that does not read", what)
	}
}

// A client that stopped reading (net.Pipe: every write waits for a read) does not hold the
// writer: the event and those after it wait in the stream's backlog and reach the client, in
// order and whole, once it reads again.
func TestStalledClientDoesNotHoldTheWriter(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	cw := NewConn(server, time.Minute)
	events := [][]byte{[]byte("event: message\ndata: {\"n\":1}\n\n"), []byte("event: message\ndata: {\"n\":2}\n\n"), []byte(": keepalive\n\n")}
	for _, ev := range events {
		returnsWithin(t, 10*time.Second, "WriteEvent", func() {
			if _, err := cw.WriteEvent(ev, nil); err != nil {
				t.Errorf("WriteEvent: %v", err)
			}
		})
	}
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); got <- b }()
	returnsWithin(t, 10*time.Second, "End", func() { cw.End([]byte("final")) })
	var want []byte
	for _, ev := range events {
		want = appendChunk(want, ev)
	}
	want = append(appendChunk(want, []byte("final")), "0\r\n\r\n"...)
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("the client read\n%q\nwant\n%q", b, want)
	}
}

// A client that does not read within the timeout loses its connection, and the stream's next
// write says so; the writer never waited for it.
func TestStalledClientIsClosedAfterTheTimeout(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	cw := NewConn(server, 100*time.Millisecond)
	returnsWithin(t, 10*time.Second, "WriteEvent", func() {
		if _, err := cw.WriteEvent([]byte("data: 1\n\n"), nil); err != nil {
			t.Errorf("WriteEvent: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := cw.WriteEvent([]byte("data: 2\n\n"), nil)
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream still takes events 10 s after a 100 ms timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := client.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the client's read after the timeout: %v, want EOF (closed)", err)
	}
	returnsWithin(t, 10*time.Second, "End", func() { cw.End(nil) })
}

// A stalled stream holds at most maxBacklog bytes: the event past it is refused, and the
// connection is closed.
func TestStalledBacklogIsBounded(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	cw := NewConn(server, time.Minute)
	ev := bytes.Repeat([]byte("x"), 200)
	var queued int
	var err error
	returnsWithin(t, 10*time.Second, "WriteEvent", func() {
		for queued = 0; queued < 2*maxBacklog/len(ev); queued++ {
			if _, err = cw.WriteEvent(ev, nil); err != nil {
				break
			}
		}
	})
	if !errors.Is(err, errBacklogFull) {
		t.Fatalf("after %d events of %d bytes: %v, want errBacklogFull", queued, len(ev), err)
	}
	if max := maxBacklog/len(ev) + 1; queued > max {
		t.Fatalf("%d events queued, more than the %d maxBacklog holds", queued, max)
	}
	if _, err := client.Read(make([]byte, 1)); err == nil {
		// The first event's first bytes may still be read; the connection ends right after.
		if _, err := io.ReadAll(client); err != nil {
			t.Fatalf("reading the closed stream: %v", err)
		}
	}
	if _, err := cw.WriteEvent(ev, nil); err == nil {
		t.Fatal("a full stream took another event")
	}
	returnsWithin(t, 10*time.Second, "End", func() { cw.End(nil) })
}

// A client that reads over TCP gets every event, in order, and the end.
func TestReadingClientGetsEveryEvent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	cw := NewConn(server, time.Minute)
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(client); got <- b }()
	var want []byte
	for i := range 100 {
		ev := []byte("data: " + string(rune('a'+i%26)) + "\n\n")
		if _, err := cw.WriteEvent(ev, nil); err != nil {
			t.Fatal(err)
		}
		want = appendChunk(want, ev)
	}
	cw.End(nil)
	if b := <-got; !bytes.Equal(b, append(want, "0\r\n\r\n"...)) {
		t.Fatalf("the client read %d bytes, want %d", len(b), len(want)+5)
	}
}

// tcpPair is a real loopback connection: the server's end, as a hijacked stream has it, and the
// client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	return server, client
}

// fillUntil writes 4 KiB events to cw until done says so, failing the test after 20,000 (80 MiB,
// far more than loopback socket buffers hold) or if the writes wait for the client.
func fillUntil(t *testing.T, cw *Conn, done func(error) bool) {
	t.Helper()
	ev := append(bytes.Repeat([]byte("x"), 4<<10), "\n\n"...)
	returnsWithin(t, 30*time.Second, "WriteEvent on a full socket", func() {
		for range 20000 {
			if _, err := cw.WriteEvent(ev, nil); done(err) {
				return
			}
		}
		t.Error("20,000 events went into a socket whose client does not read")
	})
}

// Over a real socket whose client stopped reading, writes do not wait for it: once the kernel's
// buffers are full, the backlog fills, and the event past it ends the stream.
func TestStalledSocketDoesNotHoldTheWriter(t *testing.T) {
	server, _ := tcpPair(t)
	cw := NewConn(server, time.Minute)
	var last error
	fillUntil(t, cw, func(err error) bool { last = err; return err != nil })
	if !errors.Is(last, errBacklogFull) {
		t.Fatalf("the last write: %v, want %v", last, errBacklogFull)
	}
}

// A stream that caught up with its backlog over a real socket takes events long after its
// timeout: the backlog's deadline does not outlive it.
func TestStreamWritesPastItsTimeoutOnceCaughtUp(t *testing.T) {
	const timeout = time.Second
	server, client := tcpPair(t)
	cw := NewConn(server, timeout)
	fillUntil(t, cw, func(err error) bool {
		if err != nil {
			t.Fatalf("filling the socket: %v", err)
		}
		return cw.slow != nil // a write left a backlog
	})
	read := make(chan int64)
	go func() { n, _ := io.Copy(io.Discard, client); read <- n }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cw.slow.mu.Lock()
		flushing, err := cw.slow.flushing, cw.slow.err
		cw.slow.mu.Unlock()
		if err != nil {
			t.Fatalf("the backlog was not written: %v", err)
		}
		if !flushing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the backlog was not written in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(timeout + 200*time.Millisecond)
	if _, err := cw.WriteEvent([]byte("data: after the backlog\n\n"), nil); err != nil {
		t.Fatalf("a write after the backlog's timeout: %v", err)
	}
	cw.End(nil)
	if n := <-read; n == 0 {
		t.Fatal("the client read nothing")
	}
}
