package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/sidecar/access"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/procs"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Hub limits. Each is overridable through Options.
const (
	// DefaultMaxSubscriptions and DefaultMaxSubscriptionBytes bound every subscription a replica
	// holds (--max-subscriptions, --max-subscription-bytes). 10,000 listen streams of ten URIs
	// each fit; the bookkeeping of one subscription is about 100 bytes besides its URI, so the
	// defaults hold at most about 26 MiB.
	DefaultMaxSubscriptions     = 100000
	DefaultMaxSubscriptionBytes = 16 << 20
	// DefaultMaxListenStreams caps concurrent listen streams per sidecar.
	DefaultMaxListenStreams = 10000
	// DefaultKeepalive is the interval between SSE keepalive comments.
	DefaultKeepalive = 15 * time.Second
	// DefaultStreamWriteTimeout bounds how long a listen stream's client may
	// take to read what a stalled write left (sidecar/stream): the stream is
	// closed after it. A fan-out writer never waits for it.
	DefaultStreamWriteTimeout = 5 * time.Second
	// fanoutInlineMax is the target count up to which a fan-out runs on the
	// publishing goroutine alone.
	fanoutInlineMax = 64
	// fanoutBatch is how many streams a fan-out writer claims at a time.
	fanoutBatch = 32
)

// Options configure a Hub.
type Options struct {
	MaxStreams   int           // DefaultMaxListenStreams when 0
	Keepalive    time.Duration // DefaultKeepalive when 0; negative disables
	WriteTimeout time.Duration // DefaultStreamWriteTimeout when 0
	Writers      int           // fan-out goroutines; procs.FanoutWorkers() when 0
	// MaxSubscriptions and MaxSubscriptionBytes bound the subscriptions the replica holds,
	// streams' and 2025-era sessions' together (DefaultMaxSubscriptions and
	// DefaultMaxSubscriptionBytes when 0).
	MaxSubscriptions     int
	MaxSubscriptionBytes int64
	Logger               *slog.Logger
	// Observer counts what the hub does (the sidecar's metrics; nil: nothing is counted).
	Observer Observer
	// Tracer records a span per fan-out (nil: no traces).
	Tracer Tracer
}

// Observer is told what the hub does; the sidecar's metrics implement it.
type Observer interface {
	// StreamOpened and StreamClosed bracket each registered stream.
	StreamOpened()
	StreamClosed()
	// StreamExpired: a stream ended because its caller's token expired.
	StreamExpired()
	// Sent: one published change of method went to n streams in d.
	Sent(method string, n int, d time.Duration)
	// Subscriptions is what the replica holds after a change: n URIs of b bytes.
	Subscriptions(n int, b int64)
}

type nopObserver struct{}

func (nopObserver) StreamOpened()                   {}
func (nopObserver) StreamClosed()                   {}
func (nopObserver) StreamExpired()                  {}
func (nopObserver) Sent(string, int, time.Duration) {}
func (nopObserver) Subscriptions(int, int64)        {}

// Tracer starts the span of one fan-out (nil when not sampled); the
// sidecar's tracing implements it.
type Tracer interface {
	StartFanout(method, uri string) trace.Span
}

// attrStreams is the fan-out span's count of streams written.
var attrStreams = attribute.Key("switchboard.listen.streams")

func (h *Hub) startFanout(method, uri string) trace.Span {
	if h.opts.Tracer == nil {
		return nil
	}
	return h.opts.Tracer.StartFanout(method, uri)
}

// Hub owns every open subscriptions/listen stream and fans changes out to
// the streams whose filter asks for them. Any source of changes calls
// Publish: the upstream relay and the catalog overlay.
type Hub struct {
	opts Options
	log  *slog.Logger
	m    Observer

	// mu guards the fields below. It is never held while a stream's own
	// mutex is taken, nor during network writes.
	mu       sync.Mutex
	admitted int // reserved + registered streams
	// attaching counts requests between the start of the sidecar's attachStream and the
	// stream's registration (or its final event): EndAll waits for them, so
	// that a stream acknowledged just before the drain still gets its
	// complete result before the process exits.
	attaching int
	all       *streamSet
	byKind    map[protocol.Kind]*streamSet
	byURI     map[string]*streamSet
	// callers groups the registered streams by caller (access.Key; "" for streams without a
	// verified caller), so that a change is weighed once per caller, not once per stream.
	callers map[string]*callerGroup
	closing bool
	// subCount and subBytes are the subscriptions the replica holds (streams' and 2025-era
	// sessions'), within opts.MaxSubscriptions and opts.MaxSubscriptionBytes.
	subCount int
	subBytes int64

	// toolsGen counts the tools changes published (sidecar/legacy's params.go keeps
	// the upstream's tool annotations until it moves).
	toolsGen atomic.Uint64

	// uriChanged is signalled (non-blocking, capacity 1) whenever the union
	// of subscribed URIs changes.
	uriChanged chan struct{}
}

// WriteTimeout bounds one write to one stream (Options.WriteTimeout).
func (h *Hub) WriteTimeout() time.Duration { return h.opts.WriteTimeout }

// ToolsGeneration counts the tools changes published so far.
func (h *Hub) ToolsGeneration() uint64 { return h.toolsGen.Load() }

// New returns an empty hub.
func New(o Options) *Hub {
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxListenStreams
	}
	if o.Keepalive == 0 {
		o.Keepalive = DefaultKeepalive
	}
	if o.MaxSubscriptions == 0 {
		o.MaxSubscriptions = DefaultMaxSubscriptions
	}
	if o.MaxSubscriptionBytes == 0 {
		o.MaxSubscriptionBytes = DefaultMaxSubscriptionBytes
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultStreamWriteTimeout
	}
	if o.Writers <= 0 {
		o.Writers = procs.FanoutWorkers()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	h := &Hub{
		opts:       o,
		log:        o.Logger,
		m:          o.Observer,
		all:        newStreamSet(),
		byKind:     map[protocol.Kind]*streamSet{},
		byURI:      map[string]*streamSet{},
		callers:    map[string]*callerGroup{},
		uriChanged: make(chan struct{}, 1),
	}
	for _, k := range protocol.ListKinds {
		h.byKind[k] = newStreamSet()
	}
	return h
}

// streamSet is a set of streams kept in a slice, mostly in registration
// order (removal swaps the last one in), so that a fan-out walks memory that
// was allocated together and a snapshot is one copy. Guarded by Hub.mu.
type streamSet struct {
	list []*Stream
	pos  map[*Stream]int
}

func newStreamSet() *streamSet { return &streamSet{pos: map[*Stream]int{}} }

func (ss *streamSet) add(s *Stream) {
	ss.pos[s] = len(ss.list)
	ss.list = append(ss.list, s)
}

func (ss *streamSet) remove(s *Stream) bool {
	i, ok := ss.pos[s]
	if !ok {
		return false
	}
	last := ss.list[len(ss.list)-1]
	ss.list[i] = last
	ss.pos[last] = i
	ss.list[len(ss.list)-1] = nil
	ss.list = ss.list[:len(ss.list)-1]
	delete(ss.pos, s)
	if cap(ss.list) > 64 && len(ss.list) < cap(ss.list)/4 {
		ss.list = append([]*Stream(nil), ss.list...)
	}
	return true
}

func (ss *streamSet) len() int {
	if ss == nil {
		return 0
	}
	return len(ss.list)
}

// snapshot copies the members (nil-safe).
func (ss *streamSet) snapshot() []*Stream {
	if ss == nil {
		return nil
	}
	return append([]*Stream(nil), ss.list...)
}

// Stream is one client listen stream.
type Stream struct {
	ID    []byte // the listen request's JSON-RPC id, raw (type preserved)
	Kinds protocol.Kind
	URIs  []string // guarded by Hub.mu once the stream is registered
	// Legacy marks a 2025-era GET stream: notifications without a
	// subscription id, and a retry hint instead of a complete result at
	// the end.
	Legacy bool
	// subN and subB are the subscriptions of URIs taken from the replica's budget (guarded by
	// Hub.mu); Uncharge gives them back.
	subN int
	subB int64
	// OnClose runs once when the stream ends (nil: nothing to do).
	OnClose func(*Stream)
	// Caller is the verified caller that opened the stream (nil with authentication off)
	// until add files the stream under its caller group, which keeps one Identity per caller
	// (the stream then drops its own: an idle stream holds no copy of it). Guarded by Hub.mu
	// once the stream is registered, as group is.
	Caller *authn.Identity
	group  *callerGroup
	// Expires is when the caller's authorization ends (zero: never): nothing is written to
	// the stream from then on, and expiry ends it (expireAt).
	Expires time.Time
	// timer ends the stream at Expires (guarded by mu).
	timer *time.Timer

	// mu guards w, pending and closed, and serialises frames on the wire.
	mu     sync.Mutex
	w      FrameWriter
	closed bool
	// pending holds what was published to the stream after it was
	// registered and before its transport was attached (start): the stream
	// is registered before its first event goes out, so that a change made
	// after the client read that event is never missed.
	pending [][]byte
}

// maxPending bounds the events a stream keeps until start.
const maxPending = 64

// Start attaches the stream's transport once its first event went out and
// writes what was published meanwhile. It reports false when the stream was
// closed meanwhile (the drain): the caller then ends the transport with the
// final event itself.
func (s *Stream) Start(w FrameWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.expired() {
		s.pending = nil // never written after expiry; the expiry timer ends the stream
	}
	var scratch []byte
	for _, ev := range s.pending {
		var err error
		if scratch, err = w.WriteEvent(ev, scratch); err != nil {
			break // the watcher or the next send notices the broken transport
		}
	}
	s.pending = nil
	s.w = w
	return true
}

// expired reports whether the caller's authorization has ended (no clock read for streams
// without an expiry).
func (s *Stream) expired() bool {
	return !s.Expires.IsZero() && !time.Now().Before(s.Expires)
}

// FrameWriter puts whole SSE events on one stream's transport.
type FrameWriter interface {
	// WriteEvent sends one event; scratch is a reusable buffer owned by the
	// calling goroutine, returned (possibly grown).
	WriteEvent(ev []byte, scratch []byte) ([]byte, error)
	// End sends final (if not nil), terminates the response and releases
	// the transport.
	End(final []byte)
}

// Reserve admits one more stream, or reports that the cap is reached or the
// hub is draining.
func (h *Hub) Reserve() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing || h.admitted >= h.opts.MaxStreams {
		return false
	}
	h.admitted++
	return true
}

// BeginAttach and EndAttach bracket the opening of a stream (the sidecar's attachStream).
func (h *Hub) BeginAttach() {
	h.mu.Lock()
	h.attaching++
	h.mu.Unlock()
}

// EndAttach ends what BeginAttach began.
func (h *Hub) EndAttach() {
	h.mu.Lock()
	h.attaching--
	h.mu.Unlock()
}

// attachWait bounds how long EndAll waits for streams being opened.
const attachWait = 5 * time.Second

// waitAttached waits until no stream is being opened (each then got its
// final event, or was never acknowledged), at most attachWait.
func (h *Hub) waitAttached() {
	deadline := time.Now().Add(attachWait)
	for {
		h.mu.Lock()
		n := h.attaching
		h.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Release gives back a Reserve whose stream was never added.
func (h *Hub) Release() {
	h.mu.Lock()
	h.admitted--
	h.mu.Unlock()
}

// Add registers an admitted stream. It returns false when the hub started
// closing after the stream was admitted.
func (h *Hub) Add(s *Stream) bool {
	// A stream another request can see before it is registered (a 2025-era
	// session's, which a DELETE may end) may already be closed. Lock order:
	// the stream's mutex, then the hub's.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return false
	}
	h.all.add(s)
	key := access.Key(s.Caller)
	g := h.callers[key]
	if g == nil {
		g = &callerGroup{id: s.Caller}
		h.callers[key] = g
		g.key = key
	}
	g.n++
	s.group, s.Caller = g, nil
	for _, k := range protocol.ListKinds {
		if s.Kinds&k != 0 {
			h.byKind[k].add(s)
		}
	}
	newURI := false
	for _, u := range s.URIs {
		set := h.byURI[u]
		if set == nil {
			set = newStreamSet()
			h.byURI[u] = set
			newURI = true
		}
		set.add(s)
	}
	h.mu.Unlock()
	h.m.StreamOpened()
	if newURI {
		h.signalURIs()
	}
	return true
}

// Remove unregisters a stream; it is idempotent.
func (h *Hub) Remove(s *Stream) {
	h.mu.Lock()
	if !h.all.remove(s) {
		h.mu.Unlock()
		return
	}
	h.admitted--
	if g := s.group; g != nil {
		if g.n--; g.n == 0 {
			delete(h.callers, g.key)
		}
	}
	for _, k := range protocol.ListKinds {
		h.byKind[k].remove(s)
	}
	goneURI := false
	for _, u := range s.URIs {
		if set := h.byURI[u]; set != nil {
			set.remove(s)
			if set.len() == 0 {
				delete(h.byURI, u)
				goneURI = true
			}
		}
	}
	h.mu.Unlock()
	h.m.StreamClosed()
	if goneURI {
		h.signalURIs()
	}
}

func (h *Hub) signalURIs() {
	select {
	case h.uriChanged <- struct{}{}:
	default:
	}
}

// URIsChanged is signalled whenever the set returned by URIs changes.
func (h *Hub) URIsChanged() <-chan struct{} { return h.uriChanged }

// URIs returns the sorted union of resource URIs the open streams subscribe to.
func (h *Hub) URIs() []string {
	h.mu.Lock()
	out := make([]string, 0, len(h.byURI))
	for u := range h.byURI {
		out = append(out, u)
	}
	h.mu.Unlock()
	slices.Sort(out)
	return out
}

// Len returns the number of registered streams.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.all.len()
}

// Close ends one stream, writing final first when it is not nil. It reports
// whether this call ended the stream (false if it was already closed), so a
// stream gets at most one final frame and nothing after it.
func (h *Hub) Close(s *Stream, final []byte) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	w := s.w
	s.mu.Unlock()
	// Nothing is written to a closed stream: its end is written without the lock, so a send
	// that finds the stream closed does not wait for a client that stopped reading.
	if w != nil {
		w.End(final)
	}
	h.Remove(s)
	if s.OnClose != nil {
		s.OnClose(s)
	}
	return true
}

// Send writes one event to one stream and closes the stream on failure.
func (h *Hub) Send(s *Stream, ev []byte, scratch []byte) ([]byte, bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return scratch, false
	}
	if s.expired() {
		// Nothing after the authorization ends, even if the timer has not fired yet.
		s.mu.Unlock()
		if h.Close(s, expiredEvent(s)) {
			h.m.StreamExpired()
		}
		return scratch, false
	}
	if s.w == nil { // registered, not started yet: kept for start
		if len(s.pending) < maxPending {
			s.pending = append(s.pending, bytes.Clone(ev))
		}
		s.mu.Unlock()
		return scratch, true
	}
	scratch, err := s.w.WriteEvent(ev, scratch)
	s.mu.Unlock()
	if err != nil {
		h.log.Debug("Closing listen stream after a failed write", "subscriptionId", string(s.ID), "err", err)
		h.Close(s, nil)
		return scratch, false
	}
	return scratch, true
}

// Publish fans one change out to exactly the streams whose filter asks for
// it: list kinds to streams that set the matching flag, protocol.KindResourceUpdated
// to streams subscribed to uri. It returns once every write has been
// attempted, with the number of streams written. It does not look at callers:
// the catalog overlay, which knows what each caller may see, publishes with
// PublishViews and PublishUpdate.
func (h *Hub) Publish(k protocol.Kind, uri string) int {
	if k.Method() == "" {
		return 0
	}
	if k == protocol.KindTools {
		h.toolsGen.Add(1)
	}
	start := time.Now()
	h.mu.Lock()
	var set *streamSet
	if k == protocol.KindResourceUpdated {
		set = h.byURI[uri]
	} else {
		set = h.byKind[k]
	}
	targets := set.snapshot()
	h.mu.Unlock()
	return h.publishTargets(k, uri, targets, start)
}

// publishTargets writes one change to targets, traced when tracing is on.
func (h *Hub) publishTargets(k protocol.Kind, uri string, targets []*Stream, start time.Time) int {
	if len(targets) == 0 {
		return 0
	}
	method := k.Method()
	if span := h.startFanout(method, uri); span != nil {
		n := h.publish(k, method, uri, targets, start)
		span.SetAttributes(attrStreams.Int(n))
		span.End()
		return n
	}
	return h.publish(k, method, uri, targets, start)
}

// callerGroup is the registered streams of one caller (access.Key): a change is weighed once
// per caller. Guarded by Hub.mu.
type callerGroup struct {
	key string
	id  *authn.Identity // nil: streams without a verified caller
	n   int             // streams in the group
}

// PublishViews publishes the list changes of one catalog computation caller by caller: changed
// says which lists changed in the view of one caller (nil: a stream nobody authenticated), and
// is called once per caller with open streams, never per stream; tools is whether the tools
// list itself changed (sidecar/legacy's params.go re-reads the upstream's annotations then). A caller
// whose view did not change gets nothing. It returns the streams written.
func (h *Hub) PublishViews(tools bool, changed func(*authn.Identity) protocol.Kind) int {
	if tools {
		h.toolsGen.Add(1)
	}
	start := time.Now()
	h.mu.Lock()
	groups := make([]*callerGroup, 0, len(h.callers))
	for _, g := range h.callers {
		groups = append(groups, g)
	}
	h.mu.Unlock()
	kinds := make(map[*callerGroup]protocol.Kind, len(groups))
	var any protocol.Kind
	for _, g := range groups {
		if k := changed(g.id); k != 0 {
			kinds[g] = k
			any |= k
		}
	}
	n := 0
	for _, k := range protocol.ListKinds {
		if any&k == 0 {
			continue
		}
		h.mu.Lock()
		set := h.byKind[k]
		targets := make([]*Stream, 0, set.len())
		for _, s := range set.list {
			if kinds[s.group]&k != 0 {
				targets = append(targets, s)
			}
		}
		h.mu.Unlock()
		n += h.publishTargets(k, "", targets, start)
	}
	return n
}

// PublishUpdate publishes notifications/resources/updated for uri to the streams subscribed to
// it whose caller may read it now (allowed, called once per caller).
func (h *Hub) PublishUpdate(uri string, allowed func(*authn.Identity) bool) int {
	start := time.Now()
	h.mu.Lock()
	set := h.byURI[uri]
	if set.len() == 0 {
		h.mu.Unlock()
		return 0
	}
	decided := map[*callerGroup]bool{}
	targets := make([]*Stream, 0, set.len())
	for _, s := range set.list {
		ok, seen := decided[s.group]
		if !seen {
			ok = allowed(s.group.id)
			decided[s.group] = ok
		}
		if ok {
			targets = append(targets, s)
		}
	}
	h.mu.Unlock()
	return h.publishTargets(protocol.KindResourceUpdated, uri, targets, start)
}

// publish writes the notification of one change to targets.
func (h *Hub) publish(k protocol.Kind, method, uri string, targets []*Stream, start time.Time) int {
	var suffix []byte
	if k == protocol.KindResourceUpdated {
		u, _ := json.Marshal(uri)
		suffix = append(append([]byte(`},"uri":`), u...), `}}`...)
	} else {
		suffix = []byte(`}}}`)
	}
	prefix := []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"` + method + `","params":{"_meta":{"` + protocol.MetaSubscriptionID + `":`)
	// A 2025-era stream gets the notification without a subscription id.
	var legacyEv []byte
	if k == protocol.KindResourceUpdated {
		u, _ := json.Marshal(uri)
		legacyEv = append(append([]byte(`event: message`+"\n"+`data: {"jsonrpc":"2.0","method":"`+method+`","params":{"uri":`), u...), "}}\n\n"...)
	} else {
		legacyEv = []byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"` + method + `"}` + "\n\n")
	}
	n := h.fanout(targets, func(s *Stream, buf []byte) []byte {
		if s.Legacy {
			return append(buf[:0], legacyEv...)
		}
		buf = append(buf[:0], prefix...)
		buf = append(buf, s.ID...)
		buf = append(buf, suffix...)
		return append(buf, '\n', '\n')
	})
	h.m.Sent(method, n, time.Since(start))
	return n
}

// fanout writes the event render(s) to every target with up to
// opts.Writers goroutines and returns the number of successful writes.
func (h *Hub) fanout(targets []*Stream, render func(*Stream, []byte) []byte) int {
	var sent atomic.Int64
	work := func(next *atomic.Int64) {
		var ev, scratch []byte
		n := int64(0)
		for {
			lo := int(next.Add(fanoutBatch)) - fanoutBatch
			if lo >= len(targets) {
				break
			}
			hi := min(lo+fanoutBatch, len(targets))
			for _, s := range targets[lo:hi] {
				ev = render(s, ev)
				var ok bool
				if scratch, ok = h.Send(s, ev, scratch); ok {
					n++
				}
			}
		}
		sent.Add(n)
	}
	var next atomic.Int64
	writers := min(h.opts.Writers, (len(targets)+fanoutBatch-1)/fanoutBatch)
	if len(targets) <= fanoutInlineMax || writers <= 1 {
		work(&next)
		return int(sent.Load())
	}
	defer procs.Widen(len(targets))()
	var wg sync.WaitGroup
	for range writers - 1 {
		wg.Go(func() { work(&next) })
	}
	work(&next)
	wg.Wait()
	return int(sent.Load())
}

var keepaliveEvent = []byte(": keepalive\n\n")

// Run sends keepalive comments on every stream until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	if h.opts.Keepalive < 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(h.opts.Keepalive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.mu.Lock()
			targets := h.all.snapshot()
			h.mu.Unlock()
			h.fanout(targets, func(*Stream, []byte) []byte { return keepaliveEvent })
		}
	}
}

// AckEvent renders a listen stream's first event, notifications/subscriptions/acknowledged,
// with agreed, the notifications it honours (JSON). With a caller whose authorization ends
// (s.Expires not zero), it carries authorizedUntil (RFC 3339): the stream ends then (the MCP
// draft "Authorization lifetime for subscription streams").
func AckEvent(s *Stream, agreed []byte) []byte {
	b := make([]byte, 0, 240+len(s.ID)+len(agreed))
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\""+protocol.NotifAcknowledged+"\",\"params\":{\"_meta\":{\""+protocol.MetaSubscriptionID+"\":"...)
	b = append(b, s.ID...)
	b = append(b, `},"notifications":`...)
	b = append(b, agreed...)
	if !s.Expires.IsZero() {
		b = append(b, `,"authorizedUntil":"`...)
		b = s.Expires.UTC().AppendFormat(b, time.RFC3339)
		b = append(b, '"')
	}
	return append(b, "}}\n\n"...)
}

// completeEvent renders the listen request's final result, which tells the
// client the stream ended on purpose (spec: graceful closure).
func completeEvent(id []byte) []byte {
	b := make([]byte, 0, 160+2*len(id))
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...)
	b = append(b, id...)
	b = append(b, `,"result":{"resultType":"complete","_meta":{"`+protocol.MetaSubscriptionID+`":`...)
	b = append(b, id...)
	return append(b, "}}}\n\n"...)
}

// FinalEvent is what ends a stream on purpose: a listen stream's complete
// result, or for a 2025-era GET stream the retry hint (the client
// reconnects after it, through the Service, to a replica that stays, where
// its session still works).
func FinalEvent(s *Stream) []byte {
	if s.Legacy {
		return LegacyRetryEvent
	}
	return completeEvent(s.ID)
}

// reasonTokenExpiry is AuthorizationEnded's data.reason when the caller's token expired.
const reasonTokenExpiry = "token_expiry"

// expiredEvent is what ends a stream when its caller's token expires: for a listen stream the
// listen request's AuthorizationEnded error; a 2025-era GET stream just ends (it has no request
// to answer; the client's next request needs a fresh token).
func expiredEvent(s *Stream) []byte {
	if s.Legacy {
		return nil
	}
	b := make([]byte, 0, 200+len(s.ID))
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"...)
	b = append(b, s.ID...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, wire.CodeAuthorizationEnded, 10)
	b = append(b, `,"message":"Authorization ended: the access token expired","data":{"reason":"`+reasonTokenExpiry+`"}}}`+"\n\n"...)
	return b
}

// ExpireAt arms the stream's expiry once its transport is attached: at expires it is ended with
// expiredEvent (immediately when that is past).
func (h *Hub) ExpireAt(s *Stream) {
	if s.Expires.IsZero() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.timer = time.AfterFunc(time.Until(s.Expires), func() {
		if h.Close(s, expiredEvent(s)) {
			h.m.StreamExpired()
		}
	})
}

// LegacyRetryEvent tells a 2025-era client to reconnect after 1 s when the
// sidecar ends its stream.
var LegacyRetryEvent = []byte("retry: 1000\n\n")

// Subscribe adds uri to a stream's subscriptions (2025-era
// resources/subscribe). A stream not registered yet gets it when add
// registers it. It reports false, changing nothing, when the replica's
// subscription budget has no room for it.
func (h *Hub) Subscribe(s *Stream, uri string) bool {
	h.mu.Lock()
	if slices.Contains(s.URIs, uri) {
		h.mu.Unlock()
		return true
	}
	cost := SubscriptionBytes(uri)
	if !h.takeLocked(1, cost) {
		h.mu.Unlock()
		return false
	}
	s.subN++
	s.subB += cost
	s.URIs = append(s.URIs, uri)
	if _, ok := h.all.pos[s]; !ok {
		h.mu.Unlock()
		return true
	}
	set := h.byURI[uri]
	newURI := set == nil
	if newURI {
		set = newStreamSet()
		h.byURI[uri] = set
	}
	set.add(s)
	h.mu.Unlock()
	if newURI {
		h.signalURIs()
	}
	return true
}

// Unsubscribe removes uri from a stream's subscriptions.
func (h *Hub) Unsubscribe(s *Stream, uri string) {
	h.mu.Lock()
	i := slices.Index(s.URIs, uri)
	if i < 0 {
		h.mu.Unlock()
		return
	}
	s.URIs = slices.Delete(s.URIs, i, i+1)
	if s.subN > 0 {
		cost := SubscriptionBytes(uri)
		s.subN--
		s.subB -= cost
		h.giveLocked(1, cost)
	}
	if _, ok := h.all.pos[s]; !ok {
		h.mu.Unlock()
		return
	}
	gone := false
	if set := h.byURI[uri]; set != nil {
		set.remove(s)
		if set.len() == 0 {
			delete(h.byURI, uri)
			gone = true
		}
	}
	h.mu.Unlock()
	if gone {
		h.signalURIs()
	}
}

// Charge takes the subscriptions of a new stream's URIs from the replica's budget, before the
// stream is attached; false means no room (nothing taken). Whoever charges a stream
// uncharges it when it ends.
func (h *Hub) Charge(s *Stream) bool {
	if len(s.URIs) == 0 {
		return true
	}
	var b int64
	for _, u := range s.URIs {
		b += SubscriptionBytes(u)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.takeLocked(len(s.URIs), b) {
		return false
	}
	s.subN, s.subB = len(s.URIs), b
	return true
}

// Uncharge gives a stream's subscriptions back to the budget; it is idempotent.
func (h *Hub) Uncharge(s *Stream) {
	h.mu.Lock()
	h.giveLocked(s.subN, s.subB)
	s.subN, s.subB = 0, 0
	h.mu.Unlock()
}

// TakeSubscriptions takes n subscriptions of b bytes (a 2025-era session's) from the
// replica's budget, or reports that there is no room.
func (h *Hub) TakeSubscriptions(n int, b int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.takeLocked(n, b)
}

// GiveSubscriptions returns what takeSubscriptions took.
func (h *Hub) GiveSubscriptions(n int, b int64) {
	h.mu.Lock()
	h.giveLocked(n, b)
	h.mu.Unlock()
}

func (h *Hub) takeLocked(n int, b int64) bool {
	if n == 0 {
		return true
	}
	if h.subCount+n > h.opts.MaxSubscriptions || h.subBytes+b > h.opts.MaxSubscriptionBytes {
		return false
	}
	h.subCount += n
	h.subBytes += b
	h.m.Subscriptions(h.subCount, h.subBytes)
	return true
}

func (h *Hub) giveLocked(n int, b int64) {
	if n == 0 {
		return
	}
	h.subCount -= n
	h.subBytes -= b
	h.m.Subscriptions(h.subCount, h.subBytes)
}

// endAllWriters bounds the goroutines EndAll writes complete results with,
// so that a few clients whose sockets are full (each write may wait up to
// WriteTimeout) do not hold back the schedule for everyone else.
const endAllWriters = 64

// EndAll stops admitting streams and ends every open stream with its
// `complete` result. Stream i of n is ended at start + jitter·i/n (an even
// spread, so reconnects arrive at a steady n/jitter per second instead of in
// one burst); the schedule is absolute, so it does not drift with the cost
// of each write. It returns the number of streams it ended once every one
// has been written and closed. It is the drain seam.
func (h *Hub) EndAll(jitter time.Duration) int {
	h.mu.Lock()
	h.closing = true
	targets := h.all.snapshot()
	h.mu.Unlock()
	// Streams being opened now are refused registration (closing) and end
	// themselves with their final event; the drain must not return first.
	defer h.waitAttached()
	n := len(targets)
	if n == 0 {
		return 0
	}
	defer procs.Widen(n)()
	start := time.Now()
	var next, ended atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= n {
				return
			}
			if jitter > 0 {
				if d := time.Until(start.Add(jitter * time.Duration(i) / time.Duration(n))); d > 0 {
					time.Sleep(d)
				}
			}
			if h.Close(targets[i], FinalEvent(targets[i])) {
				ended.Add(1)
			}
		}
	}
	var wg sync.WaitGroup
	for range min(endAllWriters, n) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return int(ended.Load())
}

// Reopen admits streams again after EndAll (a drained replica that recovers).
func (h *Hub) Reopen() {
	h.mu.Lock()
	h.closing = false
	h.mu.Unlock()
}

// Closing reports whether EndAll has been called.
func (h *Hub) Closing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closing
}

// SubscriptionBytes is what one subscribed URI costs: its length as a JSON string, quotes
// included. The relay sends the union of the URIs upstream as JSON (without HTML escaping), so
// the per-replica bound on these bytes bounds that body too.
func SubscriptionBytes(uri string) int64 {
	n := int64(len(uri)) + 2
	for i := 0; i < len(uri); {
		r, w := utf8.DecodeRuneInString(uri[i:])
		switch {
		case r == '"' || r == '\\':
			n++
		case r < 0x20:
			n += 5 // \u00XX
		case r == '\u2028' || r == '\u2029':
			n += 3 // \u2028
		case r == utf8.RuneError && w == 1:
			n += 5 // \ufffd
		}
		i += w
	}
	return n
}

// Watch blocks until the client closes a hijacked connection (or sends
// anything: after its one request the client has nothing more to say), then
// ends the stream. It is the stream's only goroutine where the transport
// cannot watch the connection itself (stream.Conn.WatchClose: on Linux, one
// epoll set for every stream and no goroutine per stream).
func (h *Hub) Watch(s *Stream, c net.Conn) {
	var b [1]byte
	_ = c.SetReadDeadline(time.Time{})
	for {
		if _, err := c.Read(b[:]); err != nil {
			h.Close(s, nil)
			return
		}
	}
}
