// Package overlaytest holds what the tests of the overlay and of the
// request path share: a recording Publisher and a map ContentSource.
package overlaytest

import (
	"slices"
	"sync"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// Recorder is an upstream.Publisher that remembers what it was told.
type Recorder struct {
	mu  sync.Mutex
	got []string
}

// Publish records "method uri".
func (r *Recorder) Publish(k protocol.Kind, uri string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, k.Method()+" "+uri)
	return 1
}

// Take returns what was published since the last Take, sorted.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.got
	r.got = nil
	slices.Sort(g)
	return g
}

// Contents is an overlay.ContentSource over "name/key" entries.
type Contents map[string]string

// Content returns the entry name/key.
func (m Contents) Content(_ bool, name, key string) ([]byte, bool) {
	v, ok := m[name+"/"+key]
	return []byte(v), ok
}

// SetRefs does nothing.
func (Contents) SetRefs(_, _ []string) {}

// Synced reports the entries listed: they are, from the start.
func (Contents) Synced() bool { return true }
