package sidecar

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

func TestStreamSet(t *testing.T) {
	ss := newStreamSet()
	var all []*stream
	for i := range 100 {
		s := &stream{id: []byte{byte(i)}}
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
	h := NewHub(HubOptions{})
	h.beginAttach()
	done := make(chan int)
	go func() { done <- h.EndAll(0) }()
	select {
	case <-done:
		t.Fatal("EndAll returned while a stream was being opened")
	case <-time.After(200 * time.Millisecond):
	}
	if h.add(&stream{id: []byte("1")}) {
		t.Fatal("a stream was registered after EndAll")
	}
	h.endAttach()
	select {
	case n := <-done:
		if n != 0 {
			t.Fatalf("EndAll ended %d streams, want 0", n)
		}
	case <-time.After(attachWait):
		t.Fatal("EndAll did not return once the stream was opened")
	}
}

// recordingWriter keeps what a stream writes (the transport of a unit test).
type recordingWriter struct {
	events [][]byte
	ended  bool
	final  []byte
}

func (w *recordingWriter) write(ev []byte, scratch []byte) ([]byte, error) {
	w.events = append(w.events, bytes.Clone(ev))
	return scratch, nil
}

func (w *recordingWriter) end(final []byte) { w.ended, w.final = true, bytes.Clone(final) }

// A stream is registered before its acknowledgement goes out: a change published between the
// registration and the attachment of its transport is written right after the
// acknowledgement, not lost (the client may have read the acknowledgement and made the change).
func TestChangeBeforeStartIsDelivered(t *testing.T) {
	h := NewHub(HubOptions{})
	st := &stream{id: []byte(`"s"`), kinds: protocol.KindTools}
	if !h.reserve() || !h.add(st) {
		t.Fatal("stream not admitted")
	}
	if n := h.Publish(protocol.KindTools, ""); n != 1 {
		t.Fatalf("published to %d streams, want 1", n)
	}
	w := &recordingWriter{}
	if !st.start(w) {
		t.Fatal("start refused an open stream")
	}
	if len(w.events) != 1 || !bytes.Contains(w.events[0], []byte("notifications/tools/list_changed")) {
		t.Fatalf("written at start: %q", w.events)
	}
	h.Publish(protocol.KindTools, "")
	if len(w.events) != 2 {
		t.Fatalf("after start: %d events, want 2", len(w.events))
	}

	// Closed (the drain) before its transport was attached: start says so, and the caller
	// writes the final event itself.
	late := &stream{id: []byte(`"l"`), kinds: protocol.KindTools}
	if !h.reserve() || !h.add(late) {
		t.Fatal("second stream not admitted")
	}
	h.close(late, []byte("final"))
	if late.start(&recordingWriter{}) {
		t.Fatal("start accepted a closed stream")
	}
}
