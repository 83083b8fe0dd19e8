package client

import (
	"slices"
	"testing"
	"time"
)

// A burst of invalidations of one key before the refresher runs is one change and one re-read;
// a rebaseline cause wins over a notification (it says more: everything may have changed).
func TestInvalidationsCoalesce(t *testing.T) {
	var changes []Change
	c := &Client{opts: Options{Hooks: Hooks{OnChange: func(ch Change) { changes = append(changes, ch) }}}}
	ca := newCache(c)
	tools, readme := key{kind: Tools}, key{kind: ResourceContents, uri: "docs://readme"}
	ca.inUse[slot{tools, "Bearer a"}] = time.Now()
	ca.inUse[slot{tools, ""}] = time.Now()
	for range 5 {
		ca.invalidate(tools, CauseNotification)
	}
	ca.invalidate(readme, CauseNotification)
	ca.invalidate(readme, CauseRebaseline)
	ca.invalidate(readme, CauseNotification)

	again := ca.announce()
	slices.SortFunc(changes, func(a, b Change) int { return len(a.URI) - len(b.URI) })
	want := []Change{{Kind: Tools, Cause: CauseNotification}, {Kind: ResourceContents, URI: "docs://readme", Cause: CauseRebaseline}}
	if !slices.Equal(changes, want) {
		t.Fatalf("changes %+v, want %+v", changes, want)
	}
	if len(again) != 2 {
		t.Fatalf("re-reads %v, want the two tools slots in use", again)
	}
	if ca.gens[tools] != 5 || ca.gens[readme] != 3 {
		t.Fatalf("generations %v: every invalidation must bump its key (the guard depends on it)", ca.gens)
	}
	if changes = nil; len(ca.announce()) != 0 || changes != nil {
		t.Fatal("a second announce without invalidations announced something")
	}
}
