package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is the Transport every sidecar uses: it finds out what
// the MCP server container speaks and reaches it accordingly.
//
//   - A 2026-07-28 server (server/discover answers): requests go through
//     untouched.
//   - A 2025-era server (server/discover gets a 4xx, "not initialized",
//     -32601, a non-JSON body, …; initialize works): the transport holds
//     upstream sessions (initialize once, notifications/initialized,
//     Mcp-Session-Id, a new initialize when the upstream answers 404, a small
//     pool) and maps every 2026 request onto one. It answers server/discover
//     from the initialize result, strips the reserved 2026 _meta keys and
//     Mcp-* headers, gives each request an id of its own on the session,
//     turns the upstream's questions during a call (elicitation, sampling,
//     roots) into input_required results and delivers the client's answers
//     (legacy_input.go), and serves subscriptions/listen from the
//     upstream's GET stream (list_changed; resources/updated through
//     reference-counted upstream resources/subscribe).
//
// The generation is found at the first request and again after the upstream
// was unreachable (a restart may bring another server).

// Legacy upstream limits.
const (
	// legacyPoolMax is the most upstream sessions held at once; a new one
	// is opened only while every open one has a request in flight.
	legacyPoolMax = 4
	// legacyClientVersion is the revision asked for in initialize.
	legacyClientVersion = "2025-11-25"
	// legacyListenQueue buffers notifications per emulated listen; a listen
	// that falls this far behind is ended (the relay reconnects and tells
	// every client to re-read).
	legacyListenQueue = 64
	// legacyGetBackoffMax bounds the wait between upstream GET streams.
	legacyGetBackoffMax = 5 * time.Second
)

// metaServerInfo and metaUpstreamVersion are what the synthesized discover
// result carries in _meta: the upstream's serverInfo, and the revision it
// negotiated (for the propagation report and the log).
const (
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaUpstreamVersion = "dev.switchboard/upstreamProtocolVersion"
)

type upstreamGen uint8

const (
	genUnknown upstreamGen = iota
	genModern
	genLegacy
)

// generationTransport is the Transport described above.
type generationTransport struct {
	base     http.RoundTripper
	url      string
	maxBytes int
	log      atomic.Pointer[slog.Logger]
	seq      atomic.Int64

	// detectMu serializes finding out the generation.
	detectMu sync.Mutex

	// mu guards every field below.
	mu       sync.Mutex
	gen      upstreamGen
	initRes  json.RawMessage // the upstream's initialize result (legacy)
	version  string          // the revision it negotiated (legacy)
	sessions []*upSession
	listens  map[*legacyListen]struct{}
	subs     map[string]int       // URI -> open listens that want it
	getCtx   context.Context      // the GET stream loops of the current legacy connection
	stopGet  context.CancelFunc   // ends them
	held     map[string]*heldCall // calls waiting for their client's input, by token
}

// upSession is one upstream session. inflight is guarded by the
// transport's mu; id changes only under mu (re-initialize).
type upSession struct {
	id       string
	inflight int
}

func newGenerationTransport(base http.RoundTripper, url string, maxBytes int) *generationTransport {
	t := &generationTransport{base: base, url: url, maxBytes: maxBytes,
		listens: map[*legacyListen]struct{}{}, subs: map[string]int{}, held: map[string]*heldCall{}}
	t.log.Store(slog.Default())
	return t
}

// Generation describes what the upstream speaks, for the report.
type Generation struct {
	// Legacy is set when the upstream is a 2025-era server.
	Legacy bool
	// protocol.Version is the revision the upstream negotiated (legacy).
	ProtocolVersion string
}

func (t *generationTransport) generation() upstreamGen {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gen
}

// RoundTrip implements http.RoundTripper.
func (t *generationTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	g := t.generation()
	if g == genUnknown {
		var err error
		if g, err = t.detect(req.Context()); err != nil {
			return nil, err
		}
	}
	if g == genModern {
		resp, err := t.base.RoundTrip(req)
		if err != nil && req.Context().Err() == nil {
			t.reset(genModern)
		}
		return resp, err
	}
	return t.legacyRoundTrip(req)
}

// reset forgets the generation (and every legacy session and listen) when
// the upstream was unreachable, so that the next request finds out again.
func (t *generationTransport) reset(was upstreamGen) {
	t.mu.Lock()
	if t.gen != was {
		t.mu.Unlock()
		return
	}
	t.gen = genUnknown
	t.sessions = nil
	stop := t.stopGet
	t.getCtx, t.stopGet = nil, nil
	ls := t.listenList()
	t.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, l := range ls {
		l.end(errors.New("upstream unreachable"))
	}
}

// detect asks server/discover; on a legacy answer it initializes.
func (t *generationTransport) detect(ctx context.Context) (upstreamGen, error) {
	t.detectMu.Lock()
	defer t.detectMu.Unlock()
	if g := t.generation(); g != genUnknown {
		return g, nil
	}
	dctx, cancel := context.WithTimeout(ctx, DiscoverTimeout)
	defer cancel()
	req, err := ModernRequest(dctx, t.url, "switchboard-generation", protocol.MethodDiscover, "")
	if err != nil {
		return genUnknown, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return genUnknown, err
	}
	body, rerr := t.readMessage(resp)
	resp.Body.Close()
	if rerr == nil && resp.StatusCode == http.StatusOK {
		if res, ok, _ := wire.Field(body, "result"); ok && wire.IsObject(res) {
			if _, ok, _ := wire.Field(res, "supportedVersions"); ok {
				t.mu.Lock()
				t.gen = genModern
				t.mu.Unlock()
				t.log.Load().Info("Upstream speaks 2026-07-28 (server/discover answered)")
				return genModern, nil
			}
		}
	}
	discoverAnswer := fmt.Sprintf("HTTP %d %s", resp.StatusCode, wire.Truncate(body, 160))
	s := &upSession{}
	res, version, err := t.initialize(dctx, s)
	if err != nil {
		return genUnknown, fmt.Errorf("upstream speaks neither 2026-07-28 (server/discover: %s) nor a 2025 revision (initialize: %w)", discoverAnswer, err)
	}
	getCtx, stopGet := context.WithCancel(context.Background())
	t.mu.Lock()
	t.gen, t.initRes, t.version = genLegacy, res, version
	t.sessions = []*upSession{s}
	t.getCtx, t.stopGet = getCtx, stopGet
	t.mu.Unlock()
	var info struct {
		ServerInfo json.RawMessage `json:"serverInfo"`
	}
	_ = json.Unmarshal(res, &info)
	t.log.Load().Info("Upstream speaks a 2025 revision; serving it to 2026-07-28 clients through upstream sessions",
		"protocolVersion", version, "serverInfo", string(info.ServerInfo), "discoverAnswer", discoverAnswer)
	go t.getLoop(getCtx, s, true)
	return genLegacy, nil
}

// initialize opens (or re-opens) session s: initialize, then
// notifications/initialized. It returns the result and the negotiated revision.
func (t *generationTransport) initialize(ctx context.Context, s *upSession) (json.RawMessage, string, error) {
	body := `{"jsonrpc":"2.0","id":"switchboard-init-` + strconv.FormatInt(t.seq.Add(1), 10) +
		`","method":"initialize","params":{"protocolVersion":"` + legacyClientVersion +
		`","capabilities":` + legacyClientCapabilities + `,"clientInfo":` + string(ClientInfo) + `}}`
	req, err := t.legacyRequest(ctx, []byte(body), "", "")
	if err != nil {
		return nil, "", err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	msg, err := t.readMessage(resp)
	resp.Body.Close()
	if err != nil {
		return nil, "", err
	}
	res, ok, _ := wire.Field(msg, "result")
	if resp.StatusCode != http.StatusOK || !ok || !wire.IsObject(res) {
		return nil, "", fmt.Errorf("HTTP %d %s", resp.StatusCode, wire.Truncate(msg, 160))
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(res, &r) != nil || r.ProtocolVersion == "" {
		return nil, "", fmt.Errorf("initialize result without protocolVersion: %s", wire.Truncate(res, 160))
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	req, err = t.legacyRequest(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), sid, r.ProtocolVersion)
	if err != nil {
		return nil, "", err
	}
	resp, err = t.base.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	t.mu.Lock()
	s.id = sid
	t.mu.Unlock()
	return bytes.Clone(res), r.ProtocolVersion, nil
}

// legacyClientCapabilities are what the sidecar declares in initialize:
// the upstream may ask for elicitation and sampling during a call (they
// become the 2026 client's input_required). Not roots: a server may ask for
// them outside any call, where no client can answer.
const legacyClientCapabilities = `{"elicitation":{"form":{},"url":{}},"sampling":{}}`

// legacyRequest builds a POST to the upstream in the 2025 shape.
func (t *generationTransport) legacyRequest(ctx context.Context, body []byte, sid, version string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set(protocol.HeaderProtocolVersion, version)
	}
	return req, nil
}

// readMessage reads a JSON body, or the first response of an SSE body.
func (t *generationTransport) readMessage(resp *http.Response) ([]byte, error) {
	return ReadMessage(resp, t.maxBytes)
}

// legacyRoundTrip serves one 2026 request from a legacy upstream.
func (t *generationTransport) legacyRoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	var err error
	if n := req.ContentLength; n > 0 && n <= int64(t.maxBytes) {
		body = make([]byte, n)
		_, err = io.ReadFull(req.Body, body)
	} else {
		body, err = io.ReadAll(req.Body)
	}
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	// Route by what the upstream will read, the body, never by a header
	// alone. A message without an id is not sent on a session every
	// client shares: clients' notifications stop at the choke point
	// (Server.serveNotification), and one that comes here anyway is
	// answered as accepted and dropped.
	var method string
	hasID, hasMethod := false, false
	_ = wire.EachMember(body, func(m wire.Member) bool {
		switch {
		case wire.KeyIs(m.Key, "id"):
			hasID = true
		case wire.KeyIs(m.Key, "method"):
			method, _ = wire.StringValue(body[m.Start:m.End])
			hasMethod = true
		}
		return !hasID || !hasMethod // both found (usually before params): done
	})
	if !hasID {
		return &http.Response{StatusCode: http.StatusAccepted, Status: "202 Accepted", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	switch method {
	case protocol.MethodDiscover:
		return t.legacyDiscover(req, body)
	case protocol.MethodListen:
		return t.legacyListen(req, body)
	}
	return t.legacyCall(req, body, method)
}

// jsonResponse is a synthesized upstream answer.
func jsonResponse(req *http.Request, status int, body []byte) *http.Response {
	return &http.Response{
		StatusCode:    status,
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// legacyDiscover answers server/discover from the initialize result, after
// a ping on the upstream session (readiness follows reachability).
func (t *generationTransport) legacyDiscover(req *http.Request, body []byte) (*http.Response, error) {
	ping := []byte(`{"jsonrpc":"2.0","id":"switchboard-ping","method":"ping"}`)
	resp, err := t.legacyCall(req, ping, "ping")
	if err != nil {
		return nil, err
	}
	msg, err := t.readMessage(resp)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if _, ok, _ := wire.Field(msg, "result"); !ok {
		return nil, fmt.Errorf("upstream ping failed: HTTP %d %s", resp.StatusCode, wire.Truncate(msg, 160))
	}
	t.mu.Lock()
	res, version := t.initRes, t.version
	t.mu.Unlock()
	var ir struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Instructions string          `json:"instructions"`
	}
	_ = json.Unmarshal(res, &ir)
	if !wire.IsObject(ir.Capabilities) {
		ir.Capabilities = json.RawMessage(`{}`)
	}
	meta := map[string]any{metaUpstreamVersion: version}
	if wire.IsObject(ir.ServerInfo) {
		meta[metaServerInfo] = ir.ServerInfo
	}
	out := map[string]any{"supportedVersions": []string{protocol.Version}, "capabilities": ir.Capabilities, "_meta": meta}
	if ir.Instructions != "" {
		out["instructions"] = ir.Instructions
	}
	rb, _ := json.Marshal(out)
	id, _, _ := wire.Field(body, "id")
	if len(id) == 0 {
		id = wire.NullID
	}
	msg = append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":`...), rb...)
	return jsonResponse(req, http.StatusOK, append(msg, '}')), nil
}

// pick returns the session for the next request: the least busy one, or a
// new one while every open one is busy and the pool has room.
func (t *generationTransport) pick(ctx context.Context) (*upSession, error) {
	t.mu.Lock()
	if t.gen != genLegacy {
		t.mu.Unlock()
		return nil, errors.New("upstream generation changed")
	}
	var best *upSession
	for _, s := range t.sessions {
		if best == nil || s.inflight < best.inflight {
			best = s
		}
	}
	grow := best == nil || (best.inflight > 0 && len(t.sessions) < legacyPoolMax)
	if !grow {
		best.inflight++
		t.mu.Unlock()
		return best, nil
	}
	t.mu.Unlock()
	s := &upSession{}
	if _, _, err := t.initialize(ctx, s); err != nil {
		if best == nil {
			return nil, err
		}
		t.log.Load().Warn("Opening another upstream session failed; sharing the open ones", "err", err)
		t.mu.Lock()
		best.inflight++
		t.mu.Unlock()
		return best, nil
	}
	t.mu.Lock()
	if len(t.sessions) < legacyPoolMax && t.gen == genLegacy {
		t.sessions = append(t.sessions, s)
		// Every pooled session's GET stream is read: a server may send a
		// change notification only on the session that caused it.
		go t.getLoop(t.getCtx, s, false)
	}
	s.inflight++
	t.mu.Unlock()
	return s, nil
}

func (t *generationTransport) done(s *upSession) {
	t.mu.Lock()
	s.inflight--
	t.mu.Unlock()
}

// reinit re-opens a session the upstream no longer knows (404), once per
// stale id however many requests saw it.
func (t *generationTransport) reinit(ctx context.Context, s *upSession, staleID string) error {
	t.mu.Lock()
	cur := s.id
	t.mu.Unlock()
	if cur != staleID {
		return nil // another request re-opened it meanwhile
	}
	t.log.Load().Info("Upstream dropped its session; initializing again", "session", staleID)
	_, _, err := t.initialize(ctx, s)
	return err
}

// toLegacy rewrites a 2026 request body for a 2025 server: a request id of
// the transport's own (several clients may use the same id on one upstream
// session), and no reserved io.modelcontextprotocol/* _meta keys (an empty
// _meta stays, as {}). Both are spliced in one copy; the rest of the body is
// kept byte for byte.
func toLegacy(body []byte, newID string) ([]byte, error) {
	var sp [2]splice
	n := 0
	if newID != "" {
		if s, e, ok := wire.Span(body, "id"); ok {
			sp[n] = splice{s, e, []byte(`"` + newID + `"`)}
			n++
		}
	}
	if ps, pe, ok := wire.Span(body, "params"); ok && wire.IsObject(body[ps:pe]) {
		if ms, me, ok := wire.Span(body[ps:pe], "_meta"); ok && wire.IsObject(body[ps+ms:ps+me]) &&
			bytes.Contains(body[ps+ms:ps+me], []byte(reservedMetaPrefix)) {
			nmeta, _, err := dropReserved(body[ps+ms : ps+me])
			if err != nil {
				return nil, err
			}
			sp[n] = splice{ps + ms, ps + me, nmeta}
			n++
		}
	}
	if n == 0 {
		return body, nil
	}
	return spliced(body, sp[:n]), nil
}

// splice replaces body[start:end] with val.
type splice struct {
	start, end int
	val        []byte
}

// spliced returns a copy of b with the splices (disjoint) applied.
func spliced(b []byte, sp []splice) []byte {
	if len(sp) == 2 && sp[1].start < sp[0].start {
		sp[0], sp[1] = sp[1], sp[0]
	}
	size := len(b)
	for _, x := range sp {
		size += len(x.val) - (x.end - x.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, x := range sp {
		out = append(out, b[at:x.start]...)
		out = append(out, x.val...)
		at = x.end
	}
	return append(out, b[at:]...)
}

// withID returns a copy of msg whose top-level id is id (msg itself when it
// has none: a response always has one).
func withID(msg, id []byte) []byte {
	s, e, ok := wire.Span(msg, "id")
	if !ok {
		return bytes.Clone(msg)
	}
	return spliced(msg, []splice{{s, e, id}})
}

// legacyForwardHeaders are the client headers a legacy upstream gets (the
// X-Forwarded-* ones as sidecar/headers made them: the sidecar's, not the client's).
var legacyForwardHeaders = []string{"Authorization", "Traceparent", "Tracestate", "Baggage",
	"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
	// The verified caller, as sidecar/headers made them.
	protocol.HeaderSubject, protocol.HeaderGroups, protocol.HeaderServiceAccount, protocol.HeaderSPIFFE, protocol.HeaderIssuer}

// credentialHeaderKey is the context key of WithCredentialHeader.
type credentialHeaderKey struct{}

// WithCredentialHeader names the header carrying the caller's upstream credential (the
// room sidecar/credential), which a legacy upstream gets with legacyForwardHeaders.
func WithCredentialHeader(ctx context.Context, canonicalName string) context.Context {
	return context.WithValue(ctx, credentialHeaderKey{}, canonicalName)
}

// reservedMetaPrefix is the _meta key prefix of the 2026 request envelope.
const reservedMetaPrefix = "io.modelcontextprotocol/"

// dropReserved removes the reserved keys from a _meta object.
func dropReserved(meta []byte) ([]byte, bool, error) {
	out := make([]byte, 0, len(meta))
	out = append(out, '{')
	n := 0
	err := wire.EachMember(meta, func(m wire.Member) bool {
		k, _ := wire.StringValue(m.Key)
		if strings.HasPrefix(k, reservedMetaPrefix) {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, m.Key...)
		out = append(out, ':')
		out = append(out, meta[m.Start:m.End]...)
		return true
	})
	return append(out, '}'), n == 0, err
}

// legacyCall sends one request or notification on an upstream session and
// returns its answer in the shape the sidecar expects.
func (t *generationTransport) legacyCall(req *http.Request, body []byte, method string) (*http.Response, error) {
	ctx := req.Context()
	origID, hasID, _ := wire.Field(body, "id")
	newID := ""
	var in callInput
	if hasID {
		newID = "sb-" + strconv.FormatInt(t.seq.Add(1), 10)
		if in.allowed = mayNeedInput(method); in.allowed {
			in.body = body
			// With the catalog's auth the token is gone by now (the sidecar's auth.go): the verified
			// subject binds the held call instead.
			in.authHeader = wire.HeaderValue(req.Header, "Authorization") + "\x00" + wire.HeaderValue(req.Header, protocol.HeaderSubject)
			if bytes.Contains(body, []byte(`"requestState"`)) || bytes.Contains(body, []byte(`"inputResponses"`)) {
				nb, token, answers, err := retryInput(body)
				if err != nil {
					return jsonResponse(req, http.StatusBadRequest, wire.ErrorBody(origID, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: "+err.Error()))), nil
				}
				body, in.answers = nb, answers
				in.given = maps.Clone(answers)
				if h := t.takeHeld(token, authDigest(in.authHeader)); h != nil {
					if in.answers == nil {
						in.answers = map[string]json.RawMessage{}
					}
					return t.resume(req, token, h, in, origID)
				}
			}
		}
	}
	lbody, err := toLegacy(body, newID)
	if err != nil {
		return nil, err
	}
	s, err := t.pick(ctx)
	if err != nil {
		return nil, err
	}
	// A request's upstream request has a context of its own, ended with
	// the client's request until stop: a call held for the client's input
	// outlives the client's request, and so does the read of its stream's
	// end after the response (finish). A notification's answer is read by
	// the caller, under the client's request.
	uctx, cancel := ctx, context.CancelFunc(func() {})
	stop := func() bool { return true }
	abandon := cancel
	if hasID {
		uctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		// The client gave the call up (closed its stream, or its 2025-era
		// notifications/cancelled ended it): closing the upstream request
		// is no cancellation in 2025, so the upstream is also told, with
		// the id only this call has on the session.
		abandon = func() {
			t.cancelUpstream(s, newID)
			cancel()
		}
		stop = context.AfterFunc(ctx, abandon)
	}
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		sid, version := s.id, t.version
		t.mu.Unlock()
		ureq, err := t.legacyRequest(uctx, lbody, sid, version)
		if err != nil {
			stop()
			cancel()
			t.done(s)
			return nil, err
		}
		// Only what the upstream may need from the client: its credentials
		// and trace context (not Origin, Host or the Mcp-* headers, which
		// a 2025 server would check against its own rules).
		for _, k := range legacyForwardHeaders {
			if vs := req.Header[k]; len(vs) > 0 {
				ureq.Header[k] = vs
			}
		}
		if k, _ := ctx.Value(credentialHeaderKey{}).(string); k != "" && len(req.Header[k]) > 0 {
			ureq.Header[k] = req.Header[k]
		}
		resp, err = t.base.RoundTrip(ureq)
		if err != nil {
			stop()
			cancel()
			t.done(s)
			if ctx.Err() == nil {
				t.reset(genLegacy)
			}
			return nil, err
		}
		if resp.StatusCode == http.StatusNotFound && sid != "" && attempt == 0 {
			resp.Body.Close()
			if err := t.reinit(ctx, s, sid); err != nil {
				stop()
				cancel()
				t.done(s)
				return nil, fmt.Errorf("re-initializing the upstream session: %w", err)
			}
			continue
		}
		break
	}
	resp.Header.Del("Mcp-Session-Id")
	if !hasID {
		stop()
		cancel()
		t.done(s)
		return resp, nil
	}
	if wire.IsEventStream(resp.Header) && resp.StatusCode == http.StatusOK {
		c := &upCall{s: s, rd: wire.NewPooledSSEReader(resp.Body, t.maxBytes), body: resp.Body, cancel: cancel, abandon: abandon, stop: stop, in: in}
		return t.serveCallStream(req, c, origID)
	}
	defer func() {
		stop()
		cancel()
		t.done(s)
	}()
	msg, err := io.ReadAll(io.LimitReader(resp.Body, int64(t.maxBytes)+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(msg) > t.maxBytes {
		return nil, errors.New("upstream response exceeds size limit")
	}
	if !wire.IsObject(msg) && resp.StatusCode >= 400 {
		// A transport-level refusal in plain text (go-sdk answers an unknown
		// method with 400 "JSON RPC not handled: … unsupported"): a 2026
		// client needs a JSON-RPC error with its id.
		return jsonResponse(req, legacyTextStatus(resp.StatusCode, msg), legacyTextError(origID, resp.StatusCode, msg)), nil
	}
	if wire.IsObject(msg) {
		msg = withID(msg, origID)
	}
	msg, resp.StatusCode = legacyAnswer(msg, resp.StatusCode)
	resp.Body = io.NopCloser(bytes.NewReader(msg))
	resp.ContentLength = int64(len(msg))
	resp.Header.Set("Content-Length", strconv.Itoa(len(msg)))
	return resp, nil
}

// cancelUpstream sends notifications/cancelled for the request id (one of
// the transport's own) on session s. A 2025-era server ignores it when the
// request has finished meanwhile.
func (t *generationTransport) cancelUpstream(s *upSession, id string) {
	t.mu.Lock()
	sid, version := s.id, t.version
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), DiscoverTimeout)
	defer cancel()
	req, err := t.legacyRequest(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"`+id+`","reason":"the client cancelled the request"}}`), sid, version)
	if err != nil {
		return
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
}

// What nextForward found.
const (
	fwdResponse = iota
	fwdNotification
	fwdInput
)

// nextForward reads a call's SSE answer up to the next message for the
// client: the response (id restored), a progress or log notification, or a
// question the client must answer (input_required). On the way it answers
// the upstream's other server-to-client requests, the questions the client
// answered already, and hands change notifications to the listens (they are
// not request-scoped).
func (t *generationTransport) nextForward(c *upCall, origID []byte) (msg []byte, kind int, err error) {
	for {
		ev, err := c.rd.Next()
		if err != nil {
			return nil, 0, err
		}
		data := ev.Data
		if len(bytes.TrimSpace(data)) == 0 {
			continue // a 2025-11-25 priming event
		}
		m, hasMethod, _ := wire.Field(data, "method")
		_, hasID, _ := wire.Field(data, "id")
		switch {
		case hasMethod && hasID:
			method, _ := wire.StringValue(m)
			if _, asks := inputCapability[method]; asks && c.in.allowed {
				params, _, _ := wire.Field(data, "params")
				key := inputKey(method, params)
				if answer, ok := c.in.answers[key]; ok {
					// Answered in an earlier round (a call run again).
					delete(c.in.answers, key)
					id, _, _ := wire.Field(data, "id")
					reply := append(append(append([]byte(`{"jsonrpc":"2.0","id":`), id...), `,"result":`...), answer...)
					if err := t.replyUpstream(context.Background(), c.s, append(reply, '}')); err != nil {
						return nil, 0, fmt.Errorf("answering the upstream's %s: %w", method, err)
					}
					continue
				}
				return bytes.Clone(data), fwdInput, nil
			}
			t.answerServerRequest(c.s, data, method)
		case hasMethod:
			method, _ := wire.StringValue(m)
			if !t.dispatch(method, data) {
				return bytes.Clone(data), fwdNotification, nil
			}
		default:
			return withID(data, origID), fwdResponse, nil
		}
	}
}

// relayCallStream copies the rest of a call's SSE answer, first being the
// message nextForward already read. A question for the client ends the
// stream with the input_required result, the call held.
func (t *generationTransport) relayCallStream(c *upCall, first []byte, pw *io.PipeWriter, origID []byte) {
	var out []byte
	data := first
	for {
		out = append(out[:0], "event: message\ndata: "...)
		out = append(out, data...)
		out = append(out, '\n', '\n')
		if _, err := pw.Write(out); err != nil {
			t.release(c)
			return // the sidecar stopped reading (client gone)
		}
		var kind int
		var err error
		data, kind, err = t.nextForward(c, origID)
		switch {
		case err != nil:
			if errors.Is(err, io.EOF) {
				err = nil
			}
			t.release(c)
			pw.CloseWithError(err)
			return
		case kind == fwdResponse:
			// The last message: written by the next turn, then EOF.
		case kind == fwdInput:
			b, _ := t.askClient(c, data, origID)
			out = append(append(append(out[:0], "event: message\ndata: "...), b...), '\n', '\n')
			_, _ = pw.Write(out)
			pw.Close()
			return
		}
	}
}

// legacyTextMethodNotFound tells whether a plain-text refusal is about the
// method: HTTP 404, or the words SDKs use for an unhandled method.
func legacyTextMethodNotFound(status int, text []byte) bool {
	t := strings.ToLower(string(text))
	return status == http.StatusNotFound || strings.Contains(t, "unsupported") ||
		strings.Contains(t, "method not found") || strings.Contains(t, "unknown method") || strings.Contains(t, "not handled")
}

func legacyTextStatus(status int, text []byte) int {
	if legacyTextMethodNotFound(status, text) {
		return http.StatusNotFound
	}
	return status
}

// legacyTextError is the JSON-RPC error for a plain-text refusal.
func legacyTextError(id []byte, status int, text []byte) []byte {
	code := int64(wire.CodeInvalidRequest)
	msg := "Invalid Request"
	if legacyTextMethodNotFound(status, text) {
		code, msg = wire.CodeMethodNotFound, "Method not found"
	}
	return wire.ErrorBody(id, wire.NewError(status, code, msg+": the 2025-era upstream answered HTTP "+strconv.Itoa(status)+": "+strings.TrimSpace(wire.Truncate(text, 200))))
}

// legacyAnswer gives an answer the HTTP status a 2026-07-28 server would:
// 404 for -32601 (spec §2.4), which a 2025 server sends with 200. An error
// without a valid code whose message says the method is not handled (go-sdk
// before 1.5 over stdio answers unknown methods with code 0) becomes -32601.
func legacyAnswer(msg []byte, status int) ([]byte, int) {
	e, ok, _ := wire.Field(msg, "error")
	if !ok || status != http.StatusOK {
		return msg, status
	}
	c, _, _ := wire.Field(e, "code")
	switch string(c) {
	case strconv.Itoa(wire.CodeMethodNotFound):
		return msg, http.StatusNotFound
	case "0", "":
		m, _, _ := wire.Field(e, "message")
		if text, _ := wire.StringValue(m); legacyTextMethodNotFound(0, []byte(text)) {
			ne, err := wire.SetMembers(e, []wire.KV{{Key: "code", Val: []byte(strconv.Itoa(wire.CodeMethodNotFound))}}, nil)
			if err == nil {
				if nm, err := wire.SetMembers(msg, []wire.KV{{Key: "error", Val: ne}}, nil); err == nil {
					return nm, http.StatusNotFound
				}
			}
		}
	}
	return msg, status
}

// answerServerRequest answers a request the legacy upstream makes of its
// client where no 2026-07-28 client can be asked: outside a call (its GET
// stream), during a request that may not answer input_required (only
// tools/call, prompts/get and resources/read may), or a method that has no
// input_required form. ping works.
func (t *generationTransport) answerServerRequest(s *upSession, msg []byte, method string) {
	id, _, _ := wire.Field(msg, "id")
	var answer []byte
	if method == "ping" {
		answer = []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`)
	} else {
		answer = wire.ErrorBody(id, wire.NewError(http.StatusOK, wire.CodeMethodNotFound, method+
			" is not available here: this 2025-era MCP server is served to 2026-07-28 clients through the Switchboard sidecar, which passes server-to-client requests (sampling, elicitation, roots) to them only during tools/call, prompts/get and resources/read (as input_required)"))
		t.log.Load().Info("Refused a server-to-client request from the 2025-era upstream", "method", method)
	}
	t.mu.Lock()
	sid, version := s.id, t.version
	t.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), DiscoverTimeout)
		defer cancel()
		req, err := t.legacyRequest(ctx, answer, sid, version)
		if err != nil {
			return
		}
		resp, err := t.base.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
		}
	}()
}
