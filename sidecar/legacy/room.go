package legacy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Subscription bounds of one 2025-era session on one replica.
const (
	// MaxSessionSubscriptions and MaxSessionSubscriptionBytes bound the URIs one 2025-era
	// session subscribes to on one replica.
	MaxSessionSubscriptions     = 1024
	MaxSessionSubscriptionBytes = 256 << 10
)

// Observer is told of what the room refuses (the sidecar's Metrics).
type Observer interface {
	// SubscriptionRefused: a subscription was refused by a bound (hub.Refused*).
	SubscriptionRefused(reason string)
}

// Options configure a Room.
type Options struct {
	// Key signs session ids (NewSessionKey when empty); Server names the
	// server in them; TTL is their lifetime (DefaultSessionTTL when 0).
	Key    []byte
	Server string
	TTL    time.Duration
	// InputTimeout bounds the wait for a client's answers to one round of
	// an upstream's input requests (DefaultInputTimeout when 0).
	InputTimeout time.Duration
	// Hub holds the sessions' GET streams and the replica's subscription
	// budget; Upstream is read for the tools' x-mcp-header annotations.
	Hub      *hub.Hub
	Upstream *upstream.Client
	Observer Observer
}

// Room is the handle of the 2025-era client generation: it owns the
// sessions (their ids, and this replica's state of them: subscriptions, log
// level, GET streams), the calls in flight that a client may cancel or
// answer input for, and the upstream tools' header annotations. Its state
// is guarded inside: sessionStates.mu, clientCalls.mu, paramTools.mu.
type Room struct {
	sessions     *sessionCodec
	states       *sessionStates
	calls        *clientCalls
	params       *paramTools
	hub          *hub.Hub
	up           *upstream.Client
	obs          Observer
	inputTimeout time.Duration
	// eventPrefix and eventSeq make SSE event ids unique across replicas.
	eventPrefix string
	eventSeq    atomic.Int64
}

// New returns the room for o.
func New(o Options) *Room {
	key := o.Key
	if len(key) == 0 {
		key = NewSessionKey()
	}
	if o.InputTimeout <= 0 {
		o.InputTimeout = DefaultInputTimeout
	}
	rm := &Room{
		sessions:     newSessionCodec(key, o.Server, o.TTL),
		states:       newSessionStates(o.Hub.GiveSubscriptions),
		calls:        newClientCalls(),
		params:       &paramTools{},
		hub:          o.Hub,
		up:           o.Upstream,
		obs:          o.Observer,
		inputTimeout: o.InputTimeout,
		eventPrefix:  strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
	}
	rm.params.fetcher = rm.readParamTools
	return rm
}

// Mint returns a new session id for an initialize that negotiated version,
// bound to binding (CallerBinding of the verified caller).
func (rm *Room) Mint(version string, caps json.RawMessage, binding string) (string, error) {
	return rm.sessions.mint(version, caps, binding)
}

// Open verifies a session id: signed with this room's key, for this server,
// not expired.
func (rm *Room) Open(id string) (*Session, error) { return rm.sessions.open(id) }

// SessionOf returns the verified session of a 2025-era request: nil
// without the header; an error answered with 404 (spec: the client then
// initializes again) when the id is not one of ours, has expired, or is
// bound to another caller than the request's, and 400 when the header is
// repeated.
func (rm *Room) SessionOf(r *http.Request) (*Session, *wire.Error) {
	vs := r.Header[HeaderSessionID]
	switch len(vs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Bad Request: Mcp-Session-Id header given more than once")
	}
	sess, err := rm.sessions.open(vs[0])
	if err == nil && !sess.boundTo(CallerBinding(authn.FromContext(r.Context()))) {
		// Another caller's session: as if this server had never issued it.
		err = errSessionInvalid
	}
	if err == nil && rm.states.isEnded(sess.key) {
		err = errSessionEnded
	}
	if err != nil {
		return nil, wire.NewError(http.StatusNotFound, wire.CodeInvalidRequest, "Session not found: "+err.Error()+"; initialize a new session")
	}
	return sess, nil
}

// Level returns the log level sess set on this replica ("" when none).
func (rm *Room) Level(sess *Session) string { return rm.states.level(sess.key) }

// SetLevel keeps the log level of sess on this replica.
func (rm *Room) SetLevel(sess *Session, level string) {
	rm.states.mu.Lock()
	if st := rm.states.getLocked(sess); st != nil {
		st.level = level
	}
	rm.states.mu.Unlock()
}

// Subscribe adds uri to the subscriptions of sess on this replica and to
// every GET stream it has open here (subscribe), or takes it away. Past the
// session's bounds or the replica's the subscribe is refused and what the
// session holds stays.
func (rm *Room) Subscribe(sess *Session, uri string, subscribe bool) *wire.Error {
	var e *wire.Error
	rm.states.mu.Lock()
	if st := rm.states.getLocked(sess); st == nil {
		e = wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: subscription limit reached")
	} else if subscribe {
		e = rm.subscribeLocked(st, uri)
	} else if st.uris[uri] {
		cost := hub.SubscriptionBytes(uri)
		delete(st.uris, uri)
		st.bytes -= cost
		rm.hub.GiveSubscriptions(1, cost)
		for _, x := range st.streams {
			rm.hub.Unsubscribe(x, uri)
		}
	}
	rm.states.mu.Unlock()
	return e
}

// subscribeLocked adds uri to a session's subscriptions and to its open GET streams, each
// taking its share of the replica's budget, or none of them (rm.states.mu held; the hub's
// mutex is taken inside it, never the other way round).
func (rm *Room) subscribeLocked(st *sessionState, uri string) *wire.Error {
	if st.uris[uri] {
		return nil
	}
	cost := hub.SubscriptionBytes(uri)
	if len(st.uris) >= MaxSessionSubscriptions || st.bytes+cost > MaxSessionSubscriptionBytes {
		rm.obs.SubscriptionRefused(hub.RefusedSession)
		return wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: subscription limit reached for this session (max "+
			strconv.Itoa(MaxSessionSubscriptions)+" URIs, "+strconv.Itoa(MaxSessionSubscriptionBytes)+" bytes)")
	}
	// Expired sessions' subscriptions are given back only when room is needed.
	if !rm.hub.TakeSubscriptions(1, cost) && (!rm.states.purgeLocked(st) || !rm.hub.TakeSubscriptions(1, cost)) {
		rm.obs.SubscriptionRefused(hub.RefusedReplica)
		return hub.ErrSubscriptionLimit(http.StatusOK)
	}
	for i, x := range st.streams {
		if !rm.hub.Subscribe(x, uri) {
			for _, y := range st.streams[:i] {
				rm.hub.Unsubscribe(y, uri)
			}
			rm.hub.GiveSubscriptions(1, cost)
			rm.obs.SubscriptionRefused(hub.RefusedReplica)
			return hub.ErrSubscriptionLimit(http.StatusOK)
		}
	}
	if st.uris == nil {
		st.uris = map[string]bool{}
	}
	st.uris[uri] = true
	st.bytes += cost
	return nil
}

// OpenStream gives st, a GET stream of sess about to be attached, the
// session's subscriptions on this replica and charges them to the replica's
// budget. forget must run once the stream is over (it is st.OnClose); after
// it no subscribe reaches the stream, so its subscriptions are given back
// for good.
func (rm *Room) OpenStream(sess *Session, st *hub.Stream) (forget func(*hub.Stream), refuse *wire.Error) {
	// The stream holds its own copy of the session's subscriptions (in the hub's indexes), so it
	// takes its share of the replica's budget: a session's URIs times its streams is bounded.
	rm.states.mu.Lock()
	state := rm.states.getLocked(sess)
	if state == nil {
		refuse = wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError, "Internal error: session limit reached")
	} else {
		for u := range state.uris {
			st.URIs = append(st.URIs, u)
		}
		slices.Sort(st.URIs)
		if rm.hub.Charge(st) {
			state.streams = append(state.streams, st)
		} else {
			rm.obs.SubscriptionRefused(hub.RefusedReplica)
			refuse = hub.ErrSubscriptionLimit(http.StatusServiceUnavailable)
		}
	}
	rm.states.mu.Unlock()
	if refuse != nil {
		return nil, refuse
	}
	forget = func(x *hub.Stream) {
		rm.states.mu.Lock()
		if i := slices.Index(state.streams, x); i >= 0 {
			state.streams = slices.Delete(state.streams, i, i+1)
		}
		rm.states.mu.Unlock()
		rm.hub.Uncharge(x)
	}
	st.OnClose = forget
	return forget, nil
}

// FirstEvents is what a GET stream of sess starts with: a 2025-11-25
// session gets a priming event (an id, empty data); a reconnect is told
// that every list of kinds may have changed, since what happened while it
// was away is not kept.
func (rm *Room) FirstEvents(sess *Session, reconnect bool, kinds protocol.Kind) []byte {
	var first []byte
	if sess.version >= "2025-11-25" {
		first = append(append(first, "id: "...), rm.nextEventID()...)
		first = append(first, "\ndata: \n\n"...)
	}
	if reconnect {
		for _, k := range protocol.ListKinds {
			if kinds&k != 0 {
				first = append(first, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\""+k.Method()+"\"}\n\n"...)
			}
		}
	}
	if len(first) == 0 {
		first = []byte(": stream open\n\n")
	}
	return first
}

// nextEventID returns a new SSE event id, unique across replicas.
func (rm *Room) nextEventID() string {
	return rm.eventPrefix + strconv.FormatInt(rm.eventSeq.Add(1), 36)
}

// End ends sess on this replica: its GET streams here end and its local
// state is dropped. (The id stays valid on replicas that never saw the
// DELETE until it expires: no state is shared.)
func (rm *Room) End(sess *Session) {
	rm.states.mu.Lock()
	state := rm.states.dropLocked(sess.key)
	rm.states.endLocked(sess)
	var streams []*hub.Stream
	if state != nil {
		streams = slices.Clone(state.streams)
	}
	rm.states.mu.Unlock()
	for _, x := range streams {
		rm.hub.Close(x, nil)
	}
}

// Track makes a call of sess (its client's id) cancellable by
// notifications/cancelled: the returned context ends when the client
// cancels it (cause ErrCancelledByClient). done must be called when the
// call ends.
func (rm *Room) Track(parent context.Context, sess *Session, id json.RawMessage) (ctx context.Context, done func()) {
	return rm.calls.track(parent, sess, id)
}

// Cancel ends the call of sess whose id the client wrote as rawID; false
// when none is in flight here.
func (rm *Room) Cancel(sess *Session, rawID []byte) bool {
	return rm.calls.cancel(callKey{sess.key, string(rawID)})
}

// Answer hands a client's response (id, msg) to the call of sess waiting
// for it. A late answer to a request this replica sent (the call timed out
// or was cancelled) is taken too, and dropped; false for anything else (a
// request another replica sent, an id the sidecar never used).
func (rm *Room) Answer(sess *Session, id json.RawMessage, msg []byte) bool {
	return rm.calls.deliver(callKey{sess.key, string(id)}, msg) ||
		bytes.HasPrefix(id, []byte(`"`+inputIDPrefix+rm.eventPrefix))
}
