package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// legacyListen is one subscriptions/listen served from a legacy upstream's
// notifications. Its queue is written by dispatch (non-blocking) and read by
// the goroutine that writes the listen's response body.
type legacyListen struct {
	id        []byte // the listen request's id: every frame's subscriptionId
	kinds     protocol.Kind
	uris      map[string]bool
	queue     chan []byte
	endOnce   sync.Once
	ended     chan struct{}
	endReason error
}

func (l *legacyListen) end(err error) {
	l.endOnce.Do(func() {
		l.endReason = err
		close(l.ended)
	})
}

// listenList returns the open listens (mu held).
func (t *generationTransport) listenList() []*legacyListen {
	out := make([]*legacyListen, 0, len(t.listens))
	for l := range t.listens {
		out = append(out, l)
	}
	return out
}

// legacyListen serves the relay's subscriptions/listen: the acknowledgement
// (the filter narrowed to what the upstream can deliver), then the
// upstream's notifications that the filter asks for, each tagged with the
// listen's id.
func (t *generationTransport) legacyListen(req *http.Request, body []byte) (*http.Response, error) {
	id, _, _ := wire.Field(body, "id")
	var p struct {
		Params struct {
			Notifications struct {
				Tools     bool     `json:"toolsListChanged"`
				Prompts   bool     `json:"promptsListChanged"`
				Resources bool     `json:"resourcesListChanged"`
				URIs      []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	t.mu.Lock()
	var caps struct {
		Capabilities struct {
			Tools     *struct{ ListChanged bool } `json:"tools"`
			Prompts   *struct{ ListChanged bool } `json:"prompts"`
			Resources *struct {
				ListChanged bool `json:"listChanged"`
				Subscribe   bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(t.initRes, &caps)
	t.mu.Unlock()
	n := p.Params.Notifications
	c := caps.Capabilities
	l := &legacyListen{id: bytes.Clone(id), uris: map[string]bool{}, queue: make(chan []byte, legacyListenQueue), ended: make(chan struct{})}
	ack := map[string]any{}
	if n.Tools && c.Tools != nil && c.Tools.ListChanged {
		l.kinds |= protocol.KindTools
		ack["toolsListChanged"] = true
	}
	if n.Prompts && c.Prompts != nil && c.Prompts.ListChanged {
		l.kinds |= protocol.KindPrompts
		ack["promptsListChanged"] = true
	}
	if n.Resources && c.Resources != nil && c.Resources.ListChanged {
		l.kinds |= protocol.KindResources
		ack["resourcesListChanged"] = true
	}
	var added []string
	if len(n.URIs) > 0 && c.Resources != nil && c.Resources.Subscribe {
		for _, u := range n.URIs {
			l.uris[u] = true
		}
		ack["resourceSubscriptions"] = n.URIs
	}
	t.mu.Lock()
	if t.gen != genLegacy {
		t.mu.Unlock()
		return nil, errors.New("upstream generation changed")
	}
	t.listens[l] = struct{}{}
	for u := range l.uris {
		if t.subs[u]++; t.subs[u] == 1 {
			added = append(added, u)
		}
	}
	t.mu.Unlock()
	// The upstream subscriptions come before the acknowledgement, so that
	// no update after it is missed.
	for _, u := range added {
		t.upstreamSubscription(req.Context(), "resources/subscribe", u)
	}
	ackJSON, _ := json.Marshal(ack)
	pr, pw := io.Pipe()
	go func() {
		defer t.closeListen(l)
		var out []byte
		write := func(method string, params []byte) bool {
			out = append(out[:0], `event: message`+"\n"+`data: {"jsonrpc":"2.0","method":"`...)
			out = append(out, method...)
			out = append(out, `","params":{"_meta":{"`+protocol.MetaSubscriptionID+`":`...)
			out = append(out, l.id...)
			out = append(out, '}')
			if len(params) > 0 {
				out = append(out, ',')
				out = append(out, params...)
			}
			out = append(out, "}}\n\n"...)
			_, err := pw.Write(out)
			return err == nil
		}
		if !write(protocol.NotifAcknowledged, append([]byte(`"notifications":`), ackJSON...)) {
			return
		}
		for {
			select {
			case msg := <-l.queue:
				method := notificationMethod(msg)
				var extra []byte
				if method == protocol.NotifResourcesUpdated {
					if p, ok, _ := wire.Field(msg, "params"); ok {
						if u, ok, _ := wire.Field(p, "uri"); ok {
							extra = append([]byte(`"uri":`), u...)
						}
					}
				}
				if !write(method, extra) {
					return
				}
			case <-l.ended:
				pw.CloseWithError(l.endReason)
				return
			case <-req.Context().Done():
				pw.CloseWithError(req.Context().Err())
				return
			}
		}
	}()
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// closeListen forgets a listen and drops the upstream subscriptions nobody
// else wants.
func (t *generationTransport) closeListen(l *legacyListen) {
	l.end(errors.New("listen closed"))
	t.mu.Lock()
	delete(t.listens, l)
	var removed []string
	for u := range l.uris {
		if t.subs[u]--; t.subs[u] <= 0 {
			delete(t.subs, u)
			removed = append(removed, u)
		}
	}
	legacy := t.gen == genLegacy
	t.mu.Unlock()
	if !legacy {
		return
	}
	for _, u := range removed {
		ctx, cancel := context.WithTimeout(context.Background(), DiscoverTimeout)
		t.upstreamSubscription(ctx, "resources/unsubscribe", u)
		cancel()
	}
}

// upstreamSubscription sends resources/subscribe or unsubscribe for uri on
// the primary session (the one whose GET stream the transport reads).
func (t *generationTransport) upstreamSubscription(ctx context.Context, method, uri string) {
	t.mu.Lock()
	if len(t.sessions) == 0 {
		t.mu.Unlock()
		return
	}
	sid, version := t.sessions[0].id, t.version
	t.mu.Unlock()
	u, _ := json.Marshal(uri)
	body := []byte(`{"jsonrpc":"2.0","id":"switchboard-sub-` + strconv.FormatInt(t.seq.Add(1), 10) + `","method":"` + method + `","params":{"uri":` + string(u) + `}}`)
	req, err := t.legacyRequest(ctx, body, sid, version)
	if err != nil {
		return
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.log.Load().Warn("Upstream "+method+" failed", "uri", uri, "err", err)
		return
	}
	msg, _ := t.readMessage(resp)
	resp.Body.Close()
	if _, ok, _ := wire.Field(msg, "result"); !ok {
		t.log.Load().Warn("Upstream "+method+" refused", "uri", uri, "answer", wire.Truncate(msg, 160))
	}
}

// dispatch hands a change notification from the upstream to the listens
// that asked for it, and reports whether msg was one (change notifications
// are not request-scoped, so they never go on a call's stream).
func (t *generationTransport) dispatch(method string, msg []byte) bool {
	var kind protocol.Kind
	uri := ""
	switch method {
	case protocol.NotifToolsListChanged:
		kind = protocol.KindTools
	case protocol.NotifPromptsListChanged:
		kind = protocol.KindPrompts
	case protocol.NotifResourcesListChanged:
		kind = protocol.KindResources
	case protocol.NotifResourcesUpdated:
		kind = protocol.KindResourceUpdated
		if p, ok, _ := wire.Field(msg, "params"); ok {
			if u, ok, _ := wire.Field(p, "uri"); ok {
				uri, _ = wire.StringValue(u)
			}
		}
	default:
		return false
	}
	t.mu.Lock()
	ls := t.listenList()
	t.mu.Unlock()
	for _, l := range ls {
		if (kind == protocol.KindResourceUpdated && !l.uris[uri]) || (kind != protocol.KindResourceUpdated && l.kinds&kind == 0) {
			continue
		}
		select {
		case l.queue <- bytes.Clone(msg):
		default:
			l.end(errors.New("listen fell behind the upstream's notifications"))
		}
	}
	return true
}

// getLoop keeps session s's GET stream open while the upstream is the
// legacy one this loop was started for (every pooled session has one: a
// server may notify only the session that caused a change; one that
// broadcasts is heard once per pooled session, at most legacyPoolMax times).
// When a stream drops, every listen ends, so that the relay opens a new one
// and tells every client to re-read (changes made meanwhile were not seen).
func (t *generationTransport) getLoop(ctx context.Context, s *upSession, primary bool) {
	backoff := relayBackoffFloor
	for ctx.Err() == nil {
		began := time.Now()
		status, err := t.getStream(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if status == http.StatusMethodNotAllowed {
			if primary {
				t.log.Load().Info("The 2025-era upstream offers no GET stream; only notifications sent with responses reach listens")
			}
			return
		}
		t.mu.Lock()
		ls := t.listenList()
		t.mu.Unlock()
		for _, l := range ls {
			l.end(errors.New("upstream notification stream ended"))
		}
		if time.Since(began) > relayStableAfter {
			backoff = relayBackoffFloor
		}
		t.log.Load().Debug("Upstream GET stream ended", "status", status, "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, legacyGetBackoffMax)
	}
}

// getStream reads one GET stream of session s until it ends.
func (t *generationTransport) getStream(ctx context.Context, s *upSession) (int, error) {
	t.mu.Lock()
	sid, version := s.id, t.version
	t.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	req.Header.Set(protocol.HeaderProtocolVersion, version)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		return resp.StatusCode, t.reinit(ctx, s, sid)
	}
	if resp.StatusCode != http.StatusOK || !wire.IsEventStream(resp.Header) {
		return resp.StatusCode, errors.New("upstream GET stream refused")
	}
	rd := wire.NewSSEReader(resp.Body, t.maxBytes)
	for {
		ev, err := rd.Next()
		if err != nil {
			return resp.StatusCode, err
		}
		m, hasMethod, _ := wire.Field(ev.Data, "method")
		if !hasMethod {
			continue
		}
		method, _ := wire.StringValue(m)
		if _, hasID, _ := wire.Field(ev.Data, "id"); hasID {
			t.answerServerRequest(s, ev.Data, method)
			continue
		}
		t.dispatch(method, ev.Data)
	}
}
