package hub

import (
	"bufio"
	"bytes"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub/hubtest"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/stream"
)

func TestStreamSet(t *testing.T) {
	ss := newStreamSet()
	var all []*Stream
	for i := range 100 {
		s := &Stream{ID: []byte{byte(i)}}
		all = append(all, s)
		ss.add(s)
	}
	for i := 0; i < 100; i += 3 {
		if !ss.remove(all[i]) {
			t.Fatalf("remove %d", i)
		}
		if ss.remove(all[i]) {
			t.Fatalf("second remove %d succeeded", i)
		}
	}
	got := ss.snapshot()
	if len(got) != ss.len() || len(got) != 66 {
		t.Fatalf("len %d/%d, want 66", len(got), ss.len())
	}
	for i, s := range all {
		if in := slices.Contains(got, s); in != (i%3 != 0) {
			t.Errorf("stream %d membership %v", i, in)
		}
	}
	for i, s := range ss.list {
		if ss.pos[s] != i {
			t.Errorf("pos of %d = %d", i, ss.pos[s])
		}
	}
	var nilSet *streamSet
	if nilSet.len() != 0 || nilSet.snapshot() != nil {
		t.Error("nil set not empty")
	}
}

// A stream acknowledged just before the drain is registered after EndAll took its snapshot; the
// hub then refuses it and the stream writes its own final event. EndAll must not return (and
// the process exit) before that: it waits for every stream being opened.
func TestEndAllWaitsForStreamsBeingOpened(t *testing.T) {
	h := New(Options{})
	h.BeginAttach()
	done := make(chan int)
	go func() { done <- h.EndAll(0) }()
	select {
	case <-done:
		t.Fatal("EndAll returned while a stream was being opened")
	case <-time.After(200 * time.Millisecond):
	}
	if h.Add(&Stream{ID: []byte("1")}) {
		t.Fatal("a stream was registered after EndAll")
	}
	h.EndAttach()
	select {
	case n := <-done:
		if n != 0 {
			t.Fatalf("EndAll ended %d streams, want 0", n)
		}
	case <-time.After(attachWait):
		t.Fatal("EndAll did not return once the stream was opened")
	}
}

// A stream is registered before its acknowledgement goes out: a change published between the
// registration and the attachment of its transport is written right after the
// acknowledgement, not lost (the client may have read the acknowledgement and made the change).
func TestChangeBeforeStartIsDelivered(t *testing.T) {
	h := New(Options{})
	st := &Stream{ID: []byte(`"s"`), Kinds: protocol.KindTools}
	if !h.Reserve() || !h.Add(st) {
		t.Fatal("stream not admitted")
	}
	if n := h.Publish(protocol.KindTools, ""); n != 1 {
		t.Fatalf("published to %d streams, want 1", n)
	}
	w := &hubtest.Recorder{}
	if !st.Start(w) {
		t.Fatal("start refused an open stream")
	}
	if len(w.Events) != 1 || !bytes.Contains(w.Events[0], []byte("notifications/tools/list_changed")) {
		t.Fatalf("written at start: %q", w.Events)
	}
	h.Publish(protocol.KindTools, "")
	if len(w.Events) != 2 {
		t.Fatalf("after start: %d events, want 2", len(w.Events))
	}

	// Closed (the drain) before its transport was attached: start says so, and the caller
	// writes the final event itself.
	late := &Stream{ID: []byte(`"l"`), Kinds: protocol.KindTools}
	if !h.Reserve() || !h.Add(late) {
		t.Fatal("second stream not admitted")
	}
	h.Close(late, []byte("final"))
	if late.Start(&hubtest.Recorder{}) {
		t.Fatal("start accepted a closed stream")
	}
}

// An insider who opens listen streams and stops reading them must not delay everyone else's
// notifications: a fan-out over many stalled streams returns at once, the stream whose client
// reads gets every change, and a stalled stream ends after the write timeout. (net.Pipe: a
// write waits for the peer's read, as a write to a full socket does.)
func TestStalledStreamsDoNotHoldTheFanOut(t *testing.T) {
	h := New(Options{WriteTimeout: 2 * time.Second, Writers: 2, Keepalive: -1})
	open := func(id string) (*Stream, net.Conn) {
		t.Helper()
		st := &Stream{ID: []byte(`"` + id + `"`), Kinds: protocol.KindTools}
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
	for i := range 200 { // more than fanoutInlineMax: the parallel fan-out
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
