package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Relay backoff and timing.
const (
	relayBackoffFloor   = 100 * time.Millisecond
	relayBackoffCeiling = 10 * time.Second
	// relayStableAfter resets the backoff once a stream has lived this long.
	relayStableAfter = 30 * time.Second
	// relayIdleRecheck is how often the relay re-reads discover while the
	// upstream advertises nothing to listen for.
	relayIdleRecheck = 30 * time.Second
	// relayResubscribeDelay batches URI-set changes before re-subscribing.
	relayResubscribeDelay = 20 * time.Millisecond
	// relayEventBuffer is the queue between the upstream streams' readers and
	// the relay loop.
	relayEventBuffer = 64
	// relayOverlap is how long a replaced upstream listen stays open, and read, after its
	// successor is acknowledged: the upstream may have sent a change on it, not on the
	// successor (registered after the change), that is still on its way.
	relayOverlap = time.Second
)

// Relay holds the sidecar's own listen stream to the upstream and publishes
// every change it reports into the hub. It is one goroutine (Run); the
// upstream stream readers feed it through channels.
type Relay struct {
	up  *Client
	hub *hub.Hub
	// pub receives the changes: the hub itself, or the catalog overlay
	// (which diffs them against the catalog first).
	pub Publisher
	log *slog.Logger
	m   Observer
	seq atomic.Int64
	// settled is set once the relay first has its upstream listen
	// acknowledged, knows the upstream has nothing to listen for, or failed
	// its first attempt (the next success then invalidates every client).
	// Until then a change could be missed silently, so readiness waits.
	settled atomic.Bool
}

// Settled reports whether the relay has covered the upstream's changes at
// least once (see Relay.settled).
func (rl *Relay) Settled() bool { return rl.settled.Load() }

// NewRelay returns a relay from up into hub.
func NewRelay(up *Client, h *hub.Hub, log *slog.Logger, m Observer) *Relay {
	return &Relay{up: up, hub: h, pub: h, log: log, m: m}
}

// Observer is told whether the relay's upstream listen is connected; the
// sidecar's metrics implement it.
type Observer interface {
	RelayConnected(bool)
}

// Publisher is where changes go: Hub.Publish, or Overlay.Publish.
type Publisher interface {
	Publish(k protocol.Kind, uri string) int
}

// SetPublisher routes the relay's changes to p instead of the hub (call
// before Run).
func (rl *Relay) SetPublisher(p Publisher) { rl.pub = p }

// upEvent is one notification from the upstream listen stream.
type upEvent struct {
	kind protocol.Kind
	uri  string
}

// upListen is one open upstream listen stream.
type upListen struct {
	uris   []string
	done   chan error // receives once when the stream ends
	cancel context.CancelFunc
}

// Run keeps an upstream listen stream open until ctx ends, reconnecting
// with jittered exponential backoff.
func (rl *Relay) Run(ctx context.Context) {
	backoff := relayBackoffFloor
	dropped := false
	for ctx.Err() == nil {
		began := time.Now()
		err := rl.session(ctx, dropped)
		// Even a failed first attempt settles: the session that succeeds
		// later is a reconnect, and tells every client to re-read.
		rl.settled.Store(true)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNothingToListen) {
			dropped = false
			continue
		}
		dropped = true
		rl.m.RelayConnected(false)
		if time.Since(began) > relayStableAfter {
			backoff = relayBackoffFloor
		}
		rl.log.Info("Upstream listen stream ended; reconnecting", "err", err, "backoff", backoff)
		wait := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, relayBackoffCeiling)
	}
}

var errNothingToListen = errors.New("upstream advertises nothing to listen for")

// filterFor returns what to ask the upstream for, given its capabilities
// and the URIs clients subscribe to.
func filterFor(info *Info, uris []string) (protocol.Kind, []string) {
	var k protocol.Kind
	c := info.Caps
	if c.Tools != nil && c.Tools.ListChanged {
		k |= protocol.KindTools
	}
	if c.Prompts != nil && c.Prompts.ListChanged {
		k |= protocol.KindPrompts
	}
	if c.Resources != nil && c.Resources.ListChanged {
		k |= protocol.KindResources
	}
	if c.Resources == nil || !c.Resources.Subscribe {
		uris = nil
	}
	return k, uris
}

// session runs one upstream stream (and its replacements when the URI set
// changes) until it drops.
func (rl *Relay) session(ctx context.Context, reconnect bool) error {
	info, err := rl.up.Discover(ctx)
	if err != nil {
		return err
	}
	kinds, uris := filterFor(info, rl.hub.URIs())
	if kinds == 0 && len(uris) == 0 {
		rl.settled.Store(true)
		// Wait for a client URI (if the upstream takes subscriptions) or
		// for the upstream's capabilities to change.
		select {
		case <-ctx.Done():
		case <-rl.hub.URIsChanged():
		case <-time.After(relayIdleRecheck):
		}
		return errNothingToListen
	}
	// Every stream of this session, the current one and those replaced but still read for
	// relayOverlap, reports into events; all end with the session.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan upEvent, relayEventBuffer)
	cur, err := rl.open(ctx, kinds, uris, events)
	if err != nil {
		return err
	}
	rl.settled.Store(true)
	rl.m.RelayConnected(true)
	rl.log.Info("Upstream listen stream established", "kinds", kinds, "uris", len(uris), "reconnect", reconnect)
	if reconnect {
		// Changes made while the stream was down were not seen: tell every
		// interested client to re-read.
		rl.invalidate(kinds, uris)
	}
	var pending chan *upListen
	var resub <-chan time.Time
	var replaced *upListen // the stream cur replaced, read until relayOverlap ends
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-events:
			rl.pub.Publish(ev.kind, ev.uri)
		case err := <-cur.done:
			return err
		case <-rl.hub.URIsChanged():
			if resub == nil {
				resub = time.After(relayResubscribeDelay)
			}
		case <-resub:
			resub = nil
			_, want := filterFor(info, rl.hub.URIs())
			if slices.Equal(want, cur.uris) || pending != nil {
				if pending != nil {
					// Try again once the pending stream settles.
					resub = time.After(relayResubscribeDelay)
				}
				continue
			}
			pending = make(chan *upListen, 1)
			go func(ch chan *upListen) {
				next, err := rl.open(ctx, kinds, want, events)
				if err != nil {
					rl.log.Warn("Re-subscribing upstream listen failed", "err", err)
					next = nil
				}
				ch <- next
			}(pending)
		case next := <-pending:
			pending = nil
			if next == nil {
				resub = time.After(relayBackoffFloor)
				continue
			}
			// The new stream is acknowledged: switch, and keep reading the old one a while.
			// Both were open meanwhile, and a change the upstream sent on the old one before
			// it registered the new one arrives within relayOverlap (a change may then be
			// published twice; never missed).
			// One replaced stream at a time: a client that keeps changing its URIs holds at
			// most three upstream listens open (this one, the current one and the next).
			if replaced != nil {
				replaced.cancel()
			}
			replaced, cur = cur, next
			time.AfterFunc(relayOverlap, replaced.cancel)
		}
	}
}

// open starts an upstream listen, whose changes its reader sends to events, and returns
// once it is acknowledged.
func (rl *Relay) open(ctx context.Context, kinds protocol.Kind, uris []string, events chan<- upEvent) (*upListen, error) {
	filter := map[string]any{}
	if kinds&protocol.KindTools != 0 {
		filter["toolsListChanged"] = true
	}
	if kinds&protocol.KindPrompts != 0 {
		filter["promptsListChanged"] = true
	}
	if kinds&protocol.KindResources != 0 {
		filter["resourcesListChanged"] = true
	}
	if len(uris) > 0 {
		filter["resourceSubscriptions"] = uris
	}
	// Without HTML escaping, the URIs' encoded size is what the hub's subscription budget
	// counts (subscriptionBytes), so this body is bounded by --max-subscription-bytes.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(filter)
	fb := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sctx, cancel := context.WithCancel(ctx)
	id := "switchboard-relay-" + strconv.FormatInt(rl.seq.Add(1), 10)
	req, err := ModernRequest(sctx, rl.up.url, id, protocol.MethodListen, `,"notifications":`+string(fb))
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := rl.up.client.Do(req) //nolint:bodyclose // the stream's reader owns and closes the body
	if err != nil {
		cancel()
		return nil, err
	}
	if !wire.IsEventStream(resp.Header) {
		msg, _ := rl.up.ReadResponse(resp)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("upstream listen answered HTTP %d: %s", resp.StatusCode, wire.Truncate(msg, 200))
	}
	rd := wire.NewSSEReader(resp.Body, rl.up.maxBytes)
	// The first message must be the acknowledgement.
	ev, err := rd.Next()
	if err != nil || notificationMethod(ev.Data) != protocol.NotifAcknowledged {
		resp.Body.Close()
		cancel()
		if err == nil {
			err = fmt.Errorf("upstream listen did not start with an acknowledgement: %s", wire.Truncate(ev.Data, 200))
		}
		return nil, err
	}
	l := &upListen{uris: uris, done: make(chan error, 1), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				l.done <- err
				return
			}
			if wire.IsResponse(ev.Data) {
				// The upstream ended the subscription (its complete result).
				l.done <- errors.New("upstream completed the listen")
				return
			}
			var e upEvent
			switch notificationMethod(ev.Data) {
			case protocol.NotifToolsListChanged:
				e.kind = protocol.KindTools
			case protocol.NotifPromptsListChanged:
				e.kind = protocol.KindPrompts
			case protocol.NotifResourcesListChanged:
				e.kind = protocol.KindResources
			case protocol.NotifResourcesUpdated:
				e.kind = protocol.KindResourceUpdated
				var p struct {
					Params struct {
						URI string `json:"uri"`
					} `json:"params"`
				}
				if json.Unmarshal(ev.Data, &p) != nil || p.Params.URI == "" {
					continue
				}
				e.uri = p.Params.URI
			default:
				continue
			}
			select {
			case events <- e:
			case <-sctx.Done():
				l.done <- sctx.Err()
				return
			}
		}
	}()
	return l, nil
}

// invalidate publishes every change kind the relay covers.
func (rl *Relay) invalidate(kinds protocol.Kind, uris []string) {
	for _, k := range protocol.ListKinds {
		if kinds&k != 0 {
			rl.pub.Publish(k, "")
		}
	}
	for _, u := range uris {
		rl.pub.Publish(protocol.KindResourceUpdated, u)
	}
}

func notificationMethod(msg []byte) string {
	raw, ok, _ := wire.Field(msg, "method")
	if !ok {
		return ""
	}
	m, _ := wire.StringValue(raw)
	return m
}
