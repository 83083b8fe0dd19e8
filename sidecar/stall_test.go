package sidecar

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/stream"
)

// An insider who opens listen streams and stops reading them must not delay everyone else's
// notifications: a fan-out over many stalled streams returns at once, the stream whose client
// reads gets every change, and a stalled stream ends after the write timeout. The hub and the
// stream transport the request path hands it (net.Pipe: a write waits for the peer's read, as a
// write to a full socket does).
func TestStalledStreamsDoNotHoldTheFanOut(t *testing.T) {
	h := hub.New(hub.Options{WriteTimeout: 2 * time.Second, Writers: 2, Keepalive: -1})
	open := func(id string) (*hub.Stream, net.Conn) {
		t.Helper()
		st := &hub.Stream{ID: []byte(`"` + id + `"`), Kinds: protocol.KindTools}
		if !h.Reserve() || !h.Add(st) {
			t.Fatalf("stream %s not admitted", id)
		}
		server, client := net.Pipe()
		t.Cleanup(func() { client.Close() })
		if !st.Start(stream.NewConn(server, h.WriteTimeout())) {
			t.Fatalf("stream %s not started", id)
		}
		go h.Watch(st, server)
		return st, client
	}
	for i := range 200 { // more than the hub fans out inline: its parallel writers
		open(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	_, reader := open("reader")
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(reader)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(protocol.NotifToolsListChanged)) {
				lines <- sc.Text()
			}
		}
	}()
	for change := range 3 {
		done := make(chan int)
		go func() { done <- h.Publish(protocol.KindTools, "") }()
		select {
		case n := <-done:
			if n != 201 {
				t.Fatalf("change %d written to %d streams, want 201", change, n)
			}
		case <-time.After(time.Minute):
			t.Fatalf("change %d: the fan-out waited for 200 clients that do not read", change)
		}
		select {
		case <-lines:
		case <-time.After(time.Minute):
			t.Fatalf("change %d did not reach the client that reads", change)
		}
	}
	// The stalled streams end once their backlog could not be written within the timeout.
	deadline := time.Now().Add(time.Minute)
	for h.Len() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open a minute after a 2 s write timeout, want 1 (the reader's)", h.Len())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
