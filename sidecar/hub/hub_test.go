package hub

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub/hubtest"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
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
