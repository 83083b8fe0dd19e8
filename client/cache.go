package client

import (
	"context"
	"sync"
	"time"
)

// key is the unit of invalidation: one list, or one resource's contents.
type key struct {
	kind Kind
	uri  string
}

// slot is one cache entry: a key as one credential sees it. Public entries have cred "".
type slot struct {
	key
	cred string
}

type entry struct {
	val     any
	info    Info
	expires time.Time // zero with info.UntilChanged
}

// flight is one read in progress for a slot; callers asking meanwhile wait for it.
type flight struct {
	gen  uint64
	done chan struct{}
	val  any
	info Info
	err  error
}

// maxInUse bounds the (key, credential) pairs re-read after an invalidation; the oldest is
// forgotten first (it is read again when next asked for).
const maxInUse = 1024

// cache holds every entry. One mutex guards all of its maps; it is never held during a read.
type cache struct {
	c *Client

	mu      sync.Mutex
	gens    map[key]uint64 // bumped by every invalidation of the key
	entries map[slot]*entry
	flights map[slot]*flight
	inUse   map[slot]time.Time // slots read at least once: re-read after an invalidation
	dirty   map[key]Cause      // invalidated, not yet announced (coalescing)
	kick    chan struct{}      // wakes the refresher; capacity 1
}

func newCache(c *Client) *cache {
	return &cache{c: c, gens: map[key]uint64{}, entries: map[slot]*entry{}, flights: map[slot]*flight{},
		inUse: map[slot]time.Time{}, dirty: map[key]Cause{}, kick: make(chan struct{}, 1)}
}

func (ca *cache) metric(f func(Kind), k Kind) {
	if f != nil {
		f(k)
	}
}

// fresh returns the entry a credential may be served, or nil: its own private entry first,
// then the public one. Private entries are only ever stored under their credential.
func (ca *cache) fresh(k key, cred string, now time.Time) *entry {
	for _, s := range []slot{{k, cred}, {k, ""}} {
		e := ca.entries[s]
		if e == nil {
			continue
		}
		if !e.info.UntilChanged && !now.Before(e.expires) {
			delete(ca.entries, s)
			continue
		}
		if e.info.UntilChanged && !ca.c.listenUp.Load() {
			// Fresh until the server announces a change, but nothing can be heard now: suspect.
			delete(ca.entries, s)
			continue
		}
		return e
	}
	return nil
}

func (ca *cache) peek(k key, cred string) (any, Info, bool) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if e := ca.fresh(k, cred, time.Now()); e != nil {
		info := e.info
		info.Cached, info.Stored = true, false
		return e.val, info, true
	}
	return nil, Info{}, false
}

// get serves k from the cache or reads it. At most one read per slot runs at a time. A caller
// joins the read in progress only if no invalidation of k happened since it began; otherwise it
// waits for that read to end and reads anew, so an answer never predates a change its caller
// could have seen.
func (ca *cache) get(ctx context.Context, k key, cred string) (any, Info, error) {
	s := slot{k, cred}
	m := &ca.c.opts.Metrics
	for {
		ca.mu.Lock()
		if e := ca.fresh(k, cred, time.Now()); e != nil {
			ca.mu.Unlock()
			ca.metric(m.CacheHit, k.kind)
			info := e.info
			info.Cached, info.Stored = true, false
			return e.val, info, nil
		}
		f := ca.flights[s]
		if f == nil {
			f = ca.start(s)
			ca.metric(m.CacheMiss, k.kind)
			go ca.run(s, f)
		}
		joined := f.gen == ca.gens[k]
		ca.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, Info{}, ctx.Err()
		}
		if joined {
			return f.val, f.info, f.err
		}
	}
}

// start registers a read of s at the key's current generation. ca.mu is held.
func (ca *cache) start(s slot) *flight {
	f := &flight{gen: ca.gens[s.key], done: make(chan struct{})}
	ca.flights[s] = f
	if _, ok := ca.inUse[s]; !ok && len(ca.inUse) >= maxInUse {
		var oldest slot
		var at time.Time
		for u, t := range ca.inUse {
			if at.IsZero() || t.Before(at) {
				oldest, at = u, t
			}
		}
		delete(ca.inUse, oldest)
	}
	ca.inUse[s] = time.Now()
	if s.kind == ResourceContents {
		ca.c.subscribe(s.uri)
	}
	return f
}

// run performs the read of f and stores its answer unless the key was invalidated meanwhile.
func (ca *cache) run(s slot, f *flight) {
	m := &ca.c.opts.Metrics
	ctx, cancel := context.WithTimeout(ca.c.ctx, readTimeout)
	defer cancel()
	began := time.Now()
	f.val, f.info, f.err = ca.c.fetch(ctx, s.key, s.cred)
	if m.Fetch != nil {
		m.Fetch(s.kind, time.Since(began), f.err)
	}
	ca.mu.Lock()
	if f.err == nil {
		switch {
		case ca.gens[s.key] != f.gen:
			// The generation guard: this answer may predate a change; give it to the callers
			// who asked before the change, never to the cache.
			defer ca.metric(m.Discarded, s.kind)
		case f.info.UntilChanged || f.info.TTL > 0:
			e := &entry{val: f.val, info: f.info}
			if !f.info.UntilChanged {
				e.expires = f.info.Received.Add(f.info.TTL)
			}
			at := s
			if f.info.Scope == ScopePublic {
				at.cred = ""
			}
			ca.entries[at] = e
			f.info.Stored = true
		}
	}
	delete(ca.flights, s)
	close(f.done)
	ca.mu.Unlock()
}

// readTimeout bounds one read (every page of a list).
const readTimeout = 60 * time.Second

// invalidate drops k's entries and bumps its generation; the refresher announces the change
// and reads k again for whoever uses it. Duplicates before the refresher runs are coalesced.
func (ca *cache) invalidate(k key, cause Cause) {
	ca.mu.Lock()
	ca.gens[k]++
	for s := range ca.entries {
		if s.key == k {
			delete(ca.entries, s)
		}
	}
	if prev, ok := ca.dirty[k]; !ok || prev == CauseNotification {
		ca.dirty[k] = cause
	}
	ca.mu.Unlock()
	if f := ca.c.opts.Metrics.Invalidated; f != nil {
		f(k.kind, cause)
	}
	select {
	case ca.kick <- struct{}{}:
	default:
	}
}

// invalidateAll is the re-baseline: every key known or in use is invalidated.
func (ca *cache) invalidateAll(cause Cause) {
	ca.mu.Lock()
	keys := map[key]bool{{kind: Tools}: true, {kind: Prompts}: true, {kind: Resources}: true, {kind: ResourceTemplates}: true}
	for k := range ca.gens {
		keys[k] = true
	}
	for s := range ca.inUse {
		keys[s.key] = true
	}
	ca.mu.Unlock()
	for k := range keys {
		ca.invalidate(k, cause)
	}
}

// invalidateKind invalidates every key of a kind (list_changed for resources also covers the
// templates list).
func (ca *cache) invalidateKind(kinds ...Kind) {
	for _, k := range kinds {
		ca.invalidate(key{kind: k}, CauseNotification)
	}
}

// refresher announces coalesced changes and reads again what is in use, one goroutine per
// slot (the flights keep it to one read per slot).
func (ca *cache) refresher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ca.kick:
		}
		for _, s := range ca.announce() {
			go func() { _, _, _ = ca.get(ctx, s.key, s.cred) }()
		}
	}
}

// announce takes the invalidations gathered since the last call (one per key however many
// arrived), calls OnChange for each and returns the slots in use to read again.
func (ca *cache) announce() []slot {
	ca.mu.Lock()
	dirty := ca.dirty
	ca.dirty = map[key]Cause{}
	var again []slot
	for s := range ca.inUse {
		if _, ok := dirty[s.key]; ok {
			again = append(again, s)
		}
	}
	ca.mu.Unlock()
	for k, cause := range dirty {
		if h := ca.c.opts.Hooks.OnChange; h != nil {
			h(Change{Kind: k.kind, URI: k.uri, Cause: cause})
		}
	}
	return again
}

// subscribedURIs returns the resource URIs in use, for the listen filter.
func (ca *cache) subscribedURIs() []string {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	seen := map[string]bool{}
	var uris []string
	for s := range ca.inUse {
		if s.kind == ResourceContents && !seen[s.uri] {
			seen[s.uri] = true
			uris = append(uris, s.uri)
		}
	}
	return uris
}
