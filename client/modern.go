package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of the 2026-07-28 reader.
const (
	maxMessageBytes = 32 << 20 // one JSON answer or SSE event
	maxPages        = 10000    // pages of one list
	ackTimeout      = 15 * time.Second
)

// errNotModern means the server answered server/discover in a way only a pre-2026-07-28 server
// does (no modern JSON-RPC body, or no 2026-07-28 among its versions).
var errNotModern = errors.New("server does not serve 2026-07-28")

// modernConn makes the 2026-07-28 requests this package owns: server/discover, the four lists,
// resources/read and subscriptions/listen. Each request is one POST with the per-request _meta
// and the MCP headers; the answer is JSON or an SSE stream whose last message is the answer.
type modernConn struct {
	c      *Client
	hc     *http.Client
	nextID atomic.Int64
}

// rpcError is a JSON-RPC error answered by the server.
type rpcError = jsonrpc.Error

// HTTPError is a non-2xx answer without a JSON-RPC body.
type HTTPError struct {
	Status int
	Body   string
}

// Error says the status and the start of the body.
func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

func (m *modernConn) request(ctx context.Context, id int64, method, name string, params map[string]any) (*http.Request, error) {
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    Version20260728,
		"io.modelcontextprotocol/clientCapabilities": capabilities,
		"io.modelcontextprotocol/clientInfo":         m.c.opts.ClientInfo,
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("MCP-Protocol-Version", Version20260728)
	h.Set("Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", headerValue(name))
	}
	return req, nil // Authorization: credTransport adds it
}

// headerValue encodes a value that is not safe ASCII as =?base64?…?= (2026-07-28 §2.2).
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 0x20 || b > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// message is one JSON-RPC message as read from the wire.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// call sends one request and returns its result.
func (m *modernConn) call(ctx context.Context, method, name string, params map[string]any) (json.RawMessage, error) {
	id := m.nextID.Add(1)
	// The request ends with ctx until the answer is read; what follows the answer on a stream
	// is read after it (finishBody), whatever becomes of ctx.
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	req, err := m.request(rctx, id, method, name, params)
	if err != nil {
		stop()
		cancel(nil)
		return nil, err
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		stop()
		cancel(nil)
		return nil, err
	}
	want := strconv.FormatInt(id, 10)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := newSSEReader(resp.Body)
		for {
			data, err := rd.next()
			if err != nil {
				stop()
				_ = resp.Body.Close()
				cancel(nil)
				return nil, fmt.Errorf("%s: stream ended before the answer: %w", method, err)
			}
			var msg message
			if json.Unmarshal(data, &msg) != nil || string(msg.ID) != want {
				continue // progress and other request-scoped notifications
			}
			stop()
			go finishBody(resp.Body, cancel)
			return msg.result()
		}
	}
	defer func() {
		stop()
		_ = resp.Body.Close()
		cancel(nil)
	}()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes))
	if err != nil {
		return nil, err
	}
	var msg message
	if json.Unmarshal(b, &msg) == nil && (msg.Error != nil || msg.Result != nil) {
		return msg.result()
	}
	return nil, &HTTPError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b[:min(len(b), 512)]))}
}

// finishBody reads the rest of a stream whose answer has been read, then closes it and ends
// its request. A server ends the stream right after the answer, but often in a write of its
// own (it flushes the event; the end follows when its handler returns): a body closed before
// its end makes Go's transport discard the connection, and the next request opens a new one.
// A stream that goes on is cut after finishWait or finishMax bytes.
func finishBody(body io.ReadCloser, cancel context.CancelCauseFunc) {
	t := time.AfterFunc(finishWait, func() { cancel(nil) })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, finishMax))
	t.Stop()
	_ = body.Close()
	cancel(nil)
}

// finishWait and finishMax bound finishBody.
const (
	finishWait = 100 * time.Millisecond
	finishMax  = 64 << 10
)

func (msg *message) result() (json.RawMessage, error) {
	if msg.Error != nil {
		return nil, msg.Error
	}
	return msg.Result, nil
}

// cacheHints is the part of a cacheable result the cache reads.
type cacheHints struct {
	ResultType string `json:"resultType"`
	TTLMs      *int64 `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
	NextCursor string `json:"nextCursor"`
}

func (h cacheHints) info(received time.Time) Info {
	var ttl time.Duration
	if h.TTLMs != nil && *h.TTLMs > 0 {
		ttl = time.Duration(*h.TTLMs) * time.Millisecond
	}
	scope := ScopePrivate // the safe reading of a missing scope
	if CacheScope(h.CacheScope) == ScopePublic {
		scope = ScopePublic
	}
	return Info{TTL: ttl, Scope: scope, Received: received}
}

// read reads one resource's contents.
func (m *modernConn) read(ctx context.Context, uri string) ([]*mcp.ResourceContents, Info, error) {
	raw, err := m.call(ctx, "resources/read", uri, map[string]any{"uri": uri})
	received := time.Now()
	if err != nil {
		return nil, Info{}, err
	}
	var h cacheHints
	_ = json.Unmarshal(raw, &h)
	res, err := decode[mcp.ReadResourceResult](raw)
	if err != nil {
		return nil, Info{}, err
	}
	info := h.info(received)
	if h.ResultType != "" && h.ResultType != "complete" {
		info.TTL = 0 // input_required: never cached
	}
	return res.Contents, info, nil
}

// listModern reads every page of a list, each decoded straight into []T. The list's TTL is the
// shortest page's, its scope private if any page is.
func listModern[T any](ctx context.Context, m *modernConn, spec listSpec[T]) ([]T, Info, error) {
	var all []T
	var info Info
	cursor := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, Info{}, fmt.Errorf("%s: more than %d pages", spec.method, maxPages)
		}
		params := map[string]any{}
		if page > 0 {
			params["cursor"] = cursor
		}
		raw, err := m.call(ctx, spec.method, "", params)
		received := time.Now()
		if err != nil {
			return nil, Info{}, err
		}
		var h cacheHints
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, Info{}, fmt.Errorf("%s: %w", spec.method, err)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil {
			return nil, Info{}, fmt.Errorf("%s: %w", spec.method, err)
		}
		if b := body[spec.member]; len(b) > 0 && string(b) != "null" {
			var these []T
			if err := json.Unmarshal(b, &these); err != nil {
				return nil, Info{}, fmt.Errorf("%s: %w", spec.method, err)
			}
			all = append(all, these...)
		}
		pi := h.info(received)
		if page == 0 {
			info = pi
		} else {
			info.TTL = min(info.TTL, pi.TTL)
			if pi.Scope == ScopePrivate {
				info.Scope = ScopePrivate
			}
		}
		if h.NextCursor == "" {
			break
		}
		cursor = h.NextCursor
	}
	return all, info, nil
}

// discover calls server/discover and says whether the server serves 2026-07-28.
func (m *modernConn) discover(ctx context.Context) (*mcp.InitializeResult, error) {
	raw, err := m.call(ctx, "server/discover", "", nil)
	if err != nil {
		// How a client tells the eras apart (2026-07-28 §7.3): a modern server answers with a
		// modern JSON-RPC error; a 4xx with any other body comes from an older server.
		var werr *rpcError
		var herr *HTTPError
		switch {
		case errors.As(err, &werr) && werr.Code == mcp.CodeUnsupportedProtocolVersion:
			var data mcp.UnsupportedProtocolVersionData
			if json.Unmarshal(werr.Data, &data) == nil && slices.Contains(data.Supported, Version20260728) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errNotModern, err)
		case errors.As(err, &werr) && (werr.Code == mcp.CodeHeaderMismatch || werr.Code == mcp.CodeMissingRequiredClientCapabilities):
			return nil, err
		case errors.As(err, &werr):
			return nil, fmt.Errorf("%w: %w", errNotModern, err)
		case errors.As(err, &herr) && herr.Status >= 400 && herr.Status < 500:
			return nil, fmt.Errorf("%w: %w", errNotModern, err)
		}
		return nil, err
	}
	res, err := decode[mcp.DiscoverResult](raw)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(res.SupportedVersions, Version20260728) {
		return nil, fmt.Errorf("%w: it serves %v", errNotModern, res.SupportedVersions)
	}
	ir := &mcp.InitializeResult{ProtocolVersion: Version20260728, Capabilities: res.Capabilities, Instructions: res.Instructions}
	if raw, ok := res.Meta[mcp.MetaKeyServerInfo]; ok {
		if b, err := json.Marshal(raw); err == nil {
			_ = json.Unmarshal(b, &ir.ServerInfo)
		}
	}
	if ir.Capabilities == nil {
		ir.Capabilities = &mcp.ServerCapabilities{}
	}
	return ir, nil
}

func (c *Client) connectModern(ctx context.Context) error {
	m := &modernConn{c: c, hc: c.httpClient()}
	ir, err := m.discover(ctx)
	if err != nil {
		return err
	}
	// tools/call and prompts/get go through go-sdk's session (it handles multi-round-trip
	// results); it opens no listen of its own because it has no list-changed handlers.
	cl := mcp.NewClient(c.opts.ClientInfo, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	s, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: c.httpClient(), DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: Version20260728})
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	c.mu.Lock()
	c.version, c.info, c.modern, c.session = Version20260728, ir, m, s
	c.mu.Unlock()
	l := &listener{c: c, m: m, resub: make(chan struct{}, 1)}
	c.listener = l
	st, err := l.open(ctx, ir.Capabilities)
	if err != nil {
		if ctx.Err() != nil {
			_ = s.Close()
			return fmt.Errorf("opening the listen stream: %w", err)
		}
		// The server serves but will not hold a listen now (e.g. its listen limit): serve reads
		// by their TTL and keep trying with backoff; the re-baseline on success covers the gap.
		c.log.Warn("Listen refused; retrying with backoff", "err", err)
		c.dropped(err)
		c.done.Add(1)
		go func() { defer c.done.Done(); l.run(l.reconnect(err)) }()
		return nil
	}
	c.done.Add(1)
	go func() { defer c.done.Done(); l.run(st) }()
	return nil
}

// listener owns the listen streams of a 2026-07-28 connection: one goroutine (run) decides
// when to open, switch and reopen them.
type listener struct {
	c     *Client
	m     *modernConn
	resub chan struct{} // a resource URI came into use; capacity 1
}

// stream is one open listen stream; its reader goroutine sends frames to events.
type stream struct {
	cancel context.CancelFunc
	events chan frame
	uris   []string
	caps   *mcp.ServerCapabilities
}

// frame is one message from a listen stream, or its end (err set, msg nil).
type frame struct {
	msg *message
	err error
}

// subscribe asks for updates of a resource URI that came into use (ca.mu is held: never block).
func (c *Client) subscribe(uri string) {
	if l := c.listener; l != nil {
		select {
		case l.resub <- struct{}{}:
		default:
		}
		return
	}
	if c.legacy != nil {
		c.legacy.subscribe(uri)
	}
}

// open sends subscriptions/listen for everything the server can announce plus the resource
// URIs in use, and returns once the acknowledgement arrived.
func (l *listener) open(ctx context.Context, caps *mcp.ServerCapabilities) (*stream, error) {
	filter := &mcp.NotificationSubscriptions{}
	if caps.Tools != nil && caps.Tools.ListChanged {
		filter.ToolsListChanged = true
	}
	if caps.Prompts != nil && caps.Prompts.ListChanged {
		filter.PromptsListChanged = true
	}
	if caps.Resources != nil && caps.Resources.ListChanged {
		filter.ResourcesListChanged = true
	}
	var uris []string
	if caps.Resources != nil && caps.Resources.Subscribe {
		uris = l.c.cache.subscribedURIs()
		slices.Sort(uris)
		filter.ResourceSubscriptions = uris
	}
	if !filter.ToolsListChanged && !filter.PromptsListChanged && !filter.ResourcesListChanged && len(uris) == 0 {
		// The server announces nothing: a listen would end at once, again and again. Entries
		// then live by their ttlMs alone.
		return &stream{cancel: func() {}, events: make(chan frame), uris: uris, caps: caps}, nil
	}
	sctx, cancel := context.WithCancel(l.c.ctx)
	id := l.m.nextID.Add(1)
	req, err := l.m.request(sctx, id, "subscriptions/listen", "", map[string]any{"notifications": filter})
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := l.m.hc.Do(req) //nolint:bodyclose // closed on every error path here, else by the stream reader
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		cancel()
		var msg message
		if json.Unmarshal(b, &msg) == nil && msg.Error != nil {
			return nil, msg.Error
		}
		return nil, &HTTPError{Status: resp.StatusCode, Body: strings.TrimSpace(string(b))}
	}
	st := &stream{cancel: cancel, events: make(chan frame, 64), uris: uris, caps: caps}
	rd := newSSEReader(resp.Body)
	// The acknowledgement must come first; wait for it (bounded) before anything is read.
	ackc := make(chan error, 2)
	timer := time.AfterFunc(ackTimeout, func() { ackc <- errors.New("no acknowledgement"); cancel() })
	go func() {
		defer func() { _ = resp.Body.Close() }()
		acked := false
		for {
			data, err := rd.next()
			if err != nil {
				if !acked {
					ackc <- fmt.Errorf("listen ended before its acknowledgement: %w", err)
					return
				}
				select {
				case st.events <- frame{err: err}:
				case <-sctx.Done():
				}
				return
			}
			var msg message
			if json.Unmarshal(data, &msg) != nil {
				continue
			}
			if !acked {
				if msg.Method != "notifications/subscriptions/acknowledged" {
					ackc <- fmt.Errorf("first listen message is %q, not the acknowledgement", msg.Method)
					return
				}
				acked = true
				timer.Stop()
				var ack mcp.SubscriptionsAcknowledgedParams
				_ = json.Unmarshal(msg.Params, &ack)
				l.c.emit(Event{Type: EventAcknowledged, Filter: &ack.Notifications, AuthorizedUntil: authorizedUntil(msg.Params)})
				ackc <- nil
				continue
			}
			select {
			case st.events <- frame{msg: &msg}:
			case <-sctx.Done():
				return
			}
		}
	}()
	select {
	case err := <-ackc:
		if err != nil {
			cancel()
			return nil, err
		}
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	l.c.listenUp.Store(true)
	return st, nil
}

// run reads the current stream until Close: notifications invalidate; complete re-listens at
// once (with jitter); a drop reconnects with backoff (discovering again); after either,
// everything is invalidated (re-baseline). A new resource URI in use switches to a new stream
// that includes it: the new one is acknowledged before the old one is closed, so nothing falls
// between them.
func (l *listener) run(st *stream) {
	c := l.c
	defer func() {
		if st != nil {
			st.cancel()
		}
	}()
	for st != nil {
		select {
		case <-c.ctx.Done():
			return
		case <-l.resub:
			uris := c.cache.subscribedURIs()
			slices.Sort(uris)
			if st.caps.Resources == nil || !st.caps.Resources.Subscribe || slices.Equal(uris, st.uris) {
				continue
			}
			next, err := l.open(c.ctx, st.caps)
			if err != nil {
				c.log.Warn("Re-subscribing failed; reconnecting", "err", err)
				st.cancel()
				st = l.reconnect(err)
				continue
			}
			old := st
			st = next
			old.cancel()
			// The URIs new to this stream were read, if at all, before it could announce their
			// updates: read them again.
			for _, u := range uris {
				if !slices.Contains(old.uris, u) {
					c.cache.invalidate(key{kind: ResourceContents, uri: u}, CauseRebaseline)
				}
			}
		case f := <-st.events:
			if f.err != nil {
				st.cancel()
				c.dropped(f.err)
				st = l.reconnect(f.err)
				continue
			}
			msg := f.msg
			switch {
			case msg.Method != "":
				l.notification(msg)
			case msg.Result != nil || msg.Error != nil:
				st.cancel()
				var rt struct {
					ResultType string `json:"resultType"`
				}
				_ = json.Unmarshal(msg.Result, &rt)
				if msg.Error != nil || rt.ResultType != "complete" {
					err := fmt.Errorf("listen ended with %s", bytes.TrimSpace(append(append([]byte{}, msg.Result...), errBytes(msg.Error)...)))
					if ae := authorizationEnded(msg.Error); ae != nil {
						// The token ended (or was revoked): reconnecting asks the token
						// source again, which is how a rotated token listens on.
						err = ae
					}
					c.dropped(err)
					st = l.reconnect(err)
					continue
				}
				c.emit(Event{Type: EventComplete})
				st = l.relisten(st.caps)
			}
		}
	}
}

// authorizedUntil reads the acknowledgement's authorizedUntil (an RFC 3339 time: when the
// server will end the stream because the caller's authorization ends); zero when absent.
func authorizedUntil(params json.RawMessage) time.Time {
	var p struct {
		AuthorizedUntil string `json:"authorizedUntil"`
	}
	if json.Unmarshal(params, &p) != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, p.AuthorizedUntil)
	if err != nil {
		return time.Time{}
	}
	return t
}

func errBytes(e *rpcError) []byte {
	if e == nil {
		return nil
	}
	b, _ := json.Marshal(e)
	return b
}

func (l *listener) notification(msg *message) {
	c := l.c
	var p struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(msg.Params, &p)
	// The cache is invalidated before the event is emitted: whoever sees the event reads anew.
	defer c.emit(Event{Type: EventNotification, Method: msg.Method, URI: p.URI})
	switch msg.Method {
	case "notifications/tools/list_changed":
		c.cache.invalidateKind(Tools)
	case "notifications/prompts/list_changed":
		c.cache.invalidateKind(Prompts)
	case "notifications/resources/list_changed":
		c.cache.invalidateKind(Resources, ResourceTemplates)
	case "notifications/resources/updated":
		c.cache.invalidate(key{kind: ResourceContents, uri: p.URI}, CauseNotification)
	}
}

// relisten opens a new listen after complete, after a random delay within RelistJitter (so the
// clients of a draining replica do not all arrive at once), then re-baselines. If that fails
// it falls back to reconnecting with backoff.
func (l *listener) relisten(caps *mcp.ServerCapabilities) *stream {
	c := l.c
	c.listenUp.Store(false)
	var d time.Duration
	if c.opts.RelistJitter > 0 {
		d = rand.N(c.opts.RelistJitter)
	}
	c.emit(Event{Type: EventRelisten, Delay: d})
	if !sleep(c.ctx, d) {
		return nil
	}
	st, err := l.open(c.ctx, caps)
	if err != nil {
		c.dropped(err)
		return l.reconnect(err)
	}
	c.rebaseline()
	return st
}

// reconnect discovers the server again and reopens the listen, backing off exponentially
// (with jitter) between attempts, until it succeeds or the client is closed; then re-baselines.
func (l *listener) reconnect(cause error) *stream {
	c := l.c
	c.listenUp.Store(false)
	backoff := c.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		d := backoff/2 + rand.N(backoff/2+1)
		c.emit(Event{Type: EventReconnect, Attempt: attempt, Delay: d, Err: cause})
		if f := c.opts.Metrics.Reconnect; f != nil {
			f(attempt)
		}
		if !sleep(c.ctx, d) {
			return nil
		}
		backoff = min(2*backoff, c.opts.MaxBackoff)
		ctx, cancel := context.WithTimeout(c.ctx, ackTimeout)
		ir, err := l.m.discover(ctx)
		var st *stream
		if err == nil {
			st, err = l.open(ctx, ir.Capabilities)
		}
		cancel()
		if err != nil {
			cause = err
			continue
		}
		c.mu.Lock()
		c.info = ir
		c.mu.Unlock()
		c.rebaseline()
		return st
	}
}

// rebaseline invalidates everything (then says so: whoever sees the event reads anew).
func (c *Client) rebaseline() {
	c.cache.invalidateAll(CauseRebaseline)
	c.emit(Event{Type: EventRebaseline})
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sseReader returns the data of each event of a text/event-stream (data lines joined by
// newlines), bounded by maxMessageBytes.
type sseReader struct{ rd *bufio.Reader }

func newSSEReader(r io.Reader) *sseReader { return &sseReader{rd: bufio.NewReaderSize(r, 64<<10)} }

func (s *sseReader) next() ([]byte, error) {
	var data []byte
	has := false
	for {
		line, err := s.readLine()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if has {
				return data, nil
			}
			continue
		}
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			d = bytes.TrimPrefix(d, []byte(" "))
			if has {
				data = append(data, '\n')
			}
			data = append(data, d...)
			has = true
			if len(data) > maxMessageBytes {
				return nil, fmt.Errorf("SSE event over %d bytes", maxMessageBytes)
			}
		}
	}
}

func (s *sseReader) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := s.rd.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxMessageBytes {
			return nil, fmt.Errorf("SSE line over %d bytes", maxMessageBytes)
		}
		if !isPrefix {
			return line, nil
		}
	}
}
