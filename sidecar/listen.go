package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/stream"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// serveListen opens a subscriptions/listen stream owned by the sidecar.
func (s *Server) serveListen(w http.ResponseWriter, r *http.Request, req *request) {
	raw, ok, _ := wire.Field(req.params, "notifications")
	if !ok || !wire.IsObject(raw) {
		s.fail(w, req.id, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: subscriptions/listen requires params.notifications"))
		return
	}
	var want mcp.NotificationSubscriptions
	if err := json.Unmarshal(raw, &want); err != nil {
		s.fail(w, req.id, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: notifications: "+err.Error()))
		return
	}
	if e, reason := checkStreamURIs(want.ResourceSubscriptions); e != nil {
		s.m.SubscriptionRefused(reason)
		s.fail(w, req.id, e)
		return
	}
	caller := authn.FromContext(r.Context())
	if len(want.ResourceSubscriptions) > 0 {
		g := s.requestGrant(r)
		var denied []string
		for _, u := range want.ResourceSubscriptions {
			if !g.Resource(u) {
				denied = append(denied, u)
			}
		}
		if denied != nil {
			e := errSubscriptionDenied(denied)
			s.denyListen(r, req, denied[0], e)
			s.fail(w, req.id, e)
			return
		}
	}
	info := s.up.Current()
	if info == nil {
		ctx, cancel := context.WithTimeout(r.Context(), upstream.DiscoverTimeout)
		var err error
		info, err = s.up.Discover(ctx)
		cancel()
		if err != nil {
			s.fail(w, req.id, wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError, "Internal error: upstream unavailable"))
			return
		}
	}
	caps := s.effectiveCaps(info)
	var agreed mcp.NotificationSubscriptions
	var kinds protocol.Kind
	if want.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged {
		agreed.ToolsListChanged, kinds = true, kinds|protocol.KindTools
	}
	if want.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged {
		agreed.PromptsListChanged, kinds = true, kinds|protocol.KindPrompts
	}
	if want.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged {
		agreed.ResourcesListChanged, kinds = true, kinds|protocol.KindResources
	}
	var uris []string
	if len(want.ResourceSubscriptions) > 0 && caps.Resources != nil && caps.Resources.Subscribe {
		agreed.ResourceSubscriptions = want.ResourceSubscriptions
		uris = slices.Compact(slices.Sorted(slices.Values(want.ResourceSubscriptions)))
	}
	agreedJSON, _ := json.Marshal(agreed)
	st := &hub.Stream{ID: bytes.Clone(req.id), Kinds: kinds, URIs: uris, Caller: caller}
	if caller != nil {
		st.Expires = caller.Expiry
	}
	if !s.hub.Charge(st) {
		s.m.SubscriptionRefused(hub.RefusedReplica)
		s.fail(w, req.id, hub.ErrSubscriptionLimit(http.StatusServiceUnavailable))
		return
	}
	st.OnClose = s.hub.Uncharge
	// A listen that honours nothing, or arrives while draining, gets its
	// acknowledgement and then its complete result at once.
	if !s.attachStream(w, r, st, hub.AckEvent(st, agreedJSON), kinds == 0 && len(uris) == 0, func() {
		s.fail(w, req.id, hub.ErrSubscriptionLimit(http.StatusServiceUnavailable))
	}) {
		s.hub.Uncharge(st) // never registered, or already closed
	}
}

// checkStreamURIs bounds the URIs of one listen: their count, each one's length and their
// bytes together. The filter is the request's params, so a listen over a bound is Invalid
// params; it returns the reason label too.
func checkStreamURIs(uris []string) (*wire.Error, string) {
	if len(uris) > MaxStreamSubscriptions {
		return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: too many resourceSubscriptions (max "+strconv.Itoa(MaxStreamSubscriptions)+")"), hub.RefusedStream
	}
	var b int64
	for _, u := range uris {
		if len(u) > MaxURIBytes {
			return uriError(http.StatusBadRequest), hub.RefusedURI
		}
		b += hub.SubscriptionBytes(u)
	}
	if b > MaxStreamSubscriptionBytes {
		return wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: resourceSubscriptions exceed "+strconv.Itoa(MaxStreamSubscriptionBytes)+" bytes"), hub.RefusedStream
	}
	return nil, ""
}

// attachStream answers a request that opens a stream the hub owns (a
// subscriptions/listen, or a 2025-era GET): first goes out at once, then
// the stream is registered for fan-out until the client goes away or the
// drain ends it. A stream that opens while draining, or endNow, gets first
// and its final event at once. full answers when the stream cap is reached.
func (s *Server) attachStream(w http.ResponseWriter, r *http.Request, st *hub.Stream, first []byte, endNow bool, full func()) (registered bool) {
	s.hub.BeginAttach()
	attaching := true
	defer func() {
		if attaching {
			s.hub.EndAttach()
		}
	}()
	draining := s.gate.Draining()
	if !draining && !s.hub.Reserve() {
		if s.hub.Closing() {
			draining = true
		} else {
			full()
			return false
		}
	}
	endNow = endNow || draining
	final := hub.FinalEvent(st)

	if hj, ok := w.(http.Hijacker); ok && r.ProtoMajor == 1 {
		conn, brw, err := hj.Hijack()
		if err != nil {
			if !draining {
				s.hub.Release()
			}
			s.log.Warn("Hijacking a stream connection failed", "err", err)
			return false
		}
		_ = conn.SetDeadline(time.Time{})
		// Anything the client pipelined after its request is discarded.
		_ = brw
		timeout := s.hub.WriteTimeout()
		cw := stream.NewConn(conn, timeout)
		head := stream.Head(first)
		// Registered before the first event goes out (what is published
		// until start waits in the stream): a change made after the client
		// read its acknowledgement reaches it.
		added, end := s.register(st, endNow, draining)
		_ = conn.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := conn.Write(head); err != nil {
			_ = conn.Close()
			if added {
				s.hub.Close(st, nil)
			}
			return false
		}
		if end || !st.Start(cw) {
			cw.End(final) // not registered, or closed by the drain meanwhile
			return false
		}
		s.hub.ExpireAt(st)
		// One epoll set watches every stream's client; where it cannot, a goroutine reads.
		if !cw.WatchClose(func() { s.hub.Close(st, nil) }) {
			go s.hub.Watch(st, conn)
		}
		return true
	}

	// Fallback (HTTP/2 or a wrapped writer): keep the handler parked.
	h := w.Header()
	stream.SetHeaders(h)
	w.WriteHeader(http.StatusOK)
	rw := stream.NewParked(w, s.hub.WriteTimeout())
	added, end := s.register(st, endNow, draining)
	if _, err := rw.WriteEvent(first, nil); err != nil {
		if added {
			s.hub.Close(st, nil)
		}
		return false
	}
	if end || !st.Start(rw) {
		rw.End(final)
		return false
	}
	s.hub.ExpireAt(st)
	attaching = false
	s.hub.EndAttach() // registered: EndAll ends it from here on
	select {
	case <-rw.Done():
	case <-r.Context().Done():
		s.hub.Close(st, nil)
	}
	return true
}

// register adds a stream that is not to end at once to the hub, before its first event goes
// out. It reports whether it was added and whether the stream is to end at once (it is, when the
// hub refused it: the drain began since reserve). A stream admitted by reserve (not draining)
// and not added gives its place back.
func (s *Server) register(st *hub.Stream, endNow, draining bool) (added, end bool) {
	added = !endNow && s.hub.Add(st)
	if !added && !draining {
		s.hub.Release()
	}
	return added, endNow || !added
}
