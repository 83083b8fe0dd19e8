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
)

// serveDiscover answers server/discover: the upstream's versions and
// capabilities, plus what the sidecar provides itself, with cache hints.
func (s *Server) serveDiscover(w http.ResponseWriter, r *http.Request, req *request) {
	ureq, err := http.NewRequestWithContext(r.Context(), http.MethodPost, s.up.url, bytes.NewReader(req.body))
	if err != nil {
		s.fail(w, req.id, newErr(http.StatusInternalServerError, codeInternalError, "Internal error: "+err.Error()))
		return
	}
	copyHeaders(ureq.Header, r.Header)
	start := time.Now()
	status, msg, err := s.up.roundTrip(ureq)
	s.m.observeUpstream(methodDiscover, time.Since(start))
	if err != nil {
		if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
			return
		}
		s.log.Warn("Upstream server/discover failed", "err", err)
		s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream unavailable"))
		return
	}
	rs, re, ok := span(msg, "result")
	if !ok || !isObject(msg[rs:re]) {
		// An error from the upstream goes back as it came.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(status)
		_, _ = w.Write(msg)
		return
	}
	res := msg[rs:re]
	info, err := s.up.store(res)
	if err != nil {
		s.log.Warn("Upstream server/discover result unusable", "err", err)
		s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream discover result unusable"))
		return
	}
	caps, err := mergedCapabilities(info.capsRaw, s.opts.Overlay != nil)
	if err != nil {
		s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream capabilities unusable"))
		return
	}
	versions, _ := json.Marshal(s.policy().supported)
	ttl, scope := s.opts.Hints(methodDiscover, req.params)
	if scope != "public" {
		scope = "private"
	}
	nres, err := setMembers(res, []kv{
		{key: "resultType", val: []byte(`"complete"`)},
		{key: "supportedVersions", val: versions},
		{key: "capabilities", val: caps},
		{key: "ttlMs", val: strconv.AppendInt(nil, max(ttl, 0), 10)},
		{key: "cacheScope", val: []byte(`"` + scope + `"`)},
	}, nil)
	if err != nil {
		s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream discover result unusable"))
		return
	}
	out := make([]byte, 0, len(msg)+len(nres))
	out = append(append(append(out, msg[:rs]...), nres...), msg[re:]...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// mergedCapabilities adds what the sidecar provides to the upstream's
// capabilities: listChanged for every list the upstream serves (the sidecar
// relays the upstream's changes and will emit the catalog's), and resource
// subscriptions when the upstream serves resources. It never adds a
// capability for a list the upstream does not serve, so the advertised
// capabilities keep matching the handlers. With a catalog overlay the
// sidecar serves all three lists itself (declared prompts and resources need
// no upstream support), so all of them are advertised.
func mergedCapabilities(raw json.RawMessage, overlay bool) (json.RawMessage, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(raw, &caps); err != nil {
		return nil, err
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	if overlay {
		for _, name := range []string{"tools", "prompts", "resources"} {
			if c, ok := caps[name]; !ok || !isObject(c) {
				caps[name] = json.RawMessage(`{}`)
			}
		}
	} else if len(caps) == 0 {
		return json.RawMessage(`{}`), nil
	}
	for name, extra := range map[string][]string{
		"tools": {"listChanged"}, "prompts": {"listChanged"}, "resources": {"listChanged", "subscribe"},
	} {
		c, ok := caps[name]
		if !ok || !isObject(c) {
			continue
		}
		var sets []kv
		for _, k := range extra {
			sets = append(sets, kv{key: k, val: []byte("true")})
		}
		nc, err := setMembers(c, sets, nil)
		if err != nil {
			return nil, err
		}
		caps[name] = nc
	}
	return json.Marshal(caps)
}

// effectiveCaps is the capability view used to narrow listen filters.
func (s *Server) effectiveCaps(info *upstreamInfo) mcp.ServerCapabilities {
	var c mcp.ServerCapabilities
	merged, err := mergedCapabilities(info.capsRaw, s.opts.Overlay != nil)
	if err == nil {
		_ = json.Unmarshal(merged, &c)
	}
	return c
}

// serveListen opens a subscriptions/listen stream owned by the sidecar.
func (s *Server) serveListen(w http.ResponseWriter, r *http.Request, req *request) {
	raw, ok, _ := field(req.params, "notifications")
	if !ok || !isObject(raw) {
		s.fail(w, req.id, newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: subscriptions/listen requires params.notifications"))
		return
	}
	var want mcp.NotificationSubscriptions
	if err := json.Unmarshal(raw, &want); err != nil {
		s.fail(w, req.id, newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: notifications: "+err.Error()))
		return
	}
	if len(want.ResourceSubscriptions) > maxResourceSubscriptions {
		s.fail(w, req.id, newErr(http.StatusBadRequest, codeInvalidParams, "Invalid params: too many resourceSubscriptions (max "+strconv.Itoa(maxResourceSubscriptions)+")"))
		return
	}
	info := s.up.current()
	if info == nil {
		ctx, cancel := context.WithTimeout(r.Context(), discoverTimeout)
		var err error
		info, err = s.up.Discover(ctx)
		cancel()
		if err != nil {
			s.fail(w, req.id, newErr(http.StatusServiceUnavailable, codeInternalError, "Internal error: upstream unavailable"))
			return
		}
	}
	caps := s.effectiveCaps(info)
	var agreed mcp.NotificationSubscriptions
	var kinds Kind
	if want.ToolsListChanged && caps.Tools != nil && caps.Tools.ListChanged {
		agreed.ToolsListChanged, kinds = true, kinds|KindTools
	}
	if want.PromptsListChanged && caps.Prompts != nil && caps.Prompts.ListChanged {
		agreed.PromptsListChanged, kinds = true, kinds|KindPrompts
	}
	if want.ResourcesListChanged && caps.Resources != nil && caps.Resources.ListChanged {
		agreed.ResourcesListChanged, kinds = true, kinds|KindResources
	}
	var uris []string
	if len(want.ResourceSubscriptions) > 0 && caps.Resources != nil && caps.Resources.Subscribe {
		agreed.ResourceSubscriptions = want.ResourceSubscriptions
		uris = slices.Compact(slices.Sorted(slices.Values(want.ResourceSubscriptions)))
	}
	draining := s.draining.Load()
	if !draining && !s.hub.reserve() {
		if s.hub.Closing() {
			draining = true
		} else {
			s.fail(w, req.id, newErr(http.StatusServiceUnavailable, codeInternalError, "Internal error: Subscription limit reached"))
			return
		}
	}
	agreedJSON, _ := json.Marshal(agreed)
	st := &stream{id: bytes.Clone(req.id), kinds: kinds, uris: uris}
	ack := ackEvent(st.id, agreedJSON)
	// A listen that honours nothing, or arrives while draining, gets its
	// acknowledgement and then its complete result at once.
	endNow := draining || (kinds == 0 && len(uris) == 0)

	if hj, ok := w.(http.Hijacker); ok && r.ProtoMajor == 1 {
		conn, brw, err := hj.Hijack()
		if err != nil {
			if !draining {
				s.hub.release()
			}
			s.log.Warn("Hijacking a listen connection failed", "err", err)
			return
		}
		_ = conn.SetDeadline(time.Time{})
		// Anything the client pipelined after its request is discarded.
		_ = brw
		cw := &connWriter{c: conn, timeout: s.hub.opts.WriteTimeout}
		head := append([]byte(listenResponseHead), appendChunk(nil, ack)...)
		_ = conn.SetWriteDeadline(time.Now().Add(cw.timeout))
		if _, err := conn.Write(head); err != nil {
			_ = conn.Close()
			if !draining {
				s.hub.release()
			}
			return
		}
		st.w = cw
		if endNow {
			cw.end(completeEvent(st.id))
			if !draining {
				s.hub.release()
			}
			return
		}
		if !s.hub.add(st) {
			cw.end(completeEvent(st.id))
			s.hub.release()
			return
		}
		go s.hub.watch(st, conn)
		return
	}

	// Fallback (HTTP/2 or a wrapped writer): keep the handler parked.
	h := w.Header()
	setListenHeaders(h)
	w.WriteHeader(http.StatusOK)
	rw := &rwWriter{w: w, rc: http.NewResponseController(w), timeout: s.hub.opts.WriteTimeout, done: make(chan struct{})}
	st.w = rw
	if _, err := rw.write(ack, nil); err != nil {
		if !draining {
			s.hub.release()
		}
		return
	}
	if endNow {
		rw.end(completeEvent(st.id))
		if !draining {
			s.hub.release()
		}
		return
	}
	if !s.hub.add(st) {
		rw.end(completeEvent(st.id))
		s.hub.release()
		return
	}
	select {
	case <-rw.done:
	case <-r.Context().Done():
		s.hub.close(st, nil)
	}
}

// listenResponseHead is the response head of a hijacked listen stream.
const listenResponseHead = "HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/event-stream\r\n" +
	"Cache-Control: no-cache, no-transform\r\n" +
	"X-Accel-Buffering: no\r\n" +
	"Connection: close\r\n" +
	"Transfer-Encoding: chunked\r\n\r\n"

func setListenHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
}

// ackEvent renders notifications/subscriptions/acknowledged.
func ackEvent(id, agreed []byte) []byte {
	b := make([]byte, 0, 200+len(id)+len(agreed))
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\""+notifAcknowledged+"\",\"params\":{\"_meta\":{\""+metaSubscriptionID+"\":"...)
	b = append(b, id...)
	b = append(b, `},"notifications":`...)
	b = append(b, agreed...)
	return append(b, "}}\n\n"...)
}
