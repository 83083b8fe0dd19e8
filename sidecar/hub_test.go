package sidecar

import (
	"slices"
	"testing"
	"time"
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
