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
