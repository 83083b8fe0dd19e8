package sidecar

import (
	"slices"
	"testing"
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
