package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request limits.
const (
	// DefaultMaxBodyBytes bounds one POSTed JSON-RPC message.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxHeaderBytes bounds request headers (net/http answers 431).
	DefaultMaxHeaderBytes = 64 << 10
	// bodyReadTimeout bounds reading a request body larger than
	// inlineBodyBytes or of unknown length (slow-body clients).
	bodyReadTimeout = 30 * time.Second
	// inlineBodyBytes is the body size read without a deadline of its own.
	inlineBodyBytes = 16 << 10
	// maxResourceSubscriptions bounds the URIs one listen may name.
	maxResourceSubscriptions = 1024
)

// HintFunc decides the cache hints stamped on a cacheable result: the
// method and its raw params in, ttlMs and cacheScope ("public" or
// "private") out. The catalog overlay will supply one per catalog.
type HintFunc func(method string, params []byte) (ttlMs int64, scope string)

// DefaultHints is the conservative policy used until a catalog says
// otherwise: immediately stale, and never shared across authorization
// contexts.
func DefaultHints(string, []byte) (int64, string) { return 0, "private" }

// cacheableMethods carry ttlMs/cacheScope on complete results (spec §5.1).
var cacheableMethods = map[string]bool{
	methodDiscover: true, "tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true,
}

// Options configure a Server.
type Options struct {
	// Upstream is the MCP endpoint of the server container.
	Upstream string
	// AllowedOrigins are the Origin values accepted besides loopback
	// origins; "*" accepts any.
	AllowedOrigins []string
	// AllowedHosts are Host names (or host:port) accepted besides loopback
	// names. When set, every other Host is refused.
	AllowedHosts []string
	// DisableLocalhostProtection stops refusing non-loopback Host headers on
	// connections that arrive on a loopback address.
	DisableLocalhostProtection bool
	// RejectLegacy answers claim-less (pre-2026-07-28) traffic with -32022
	// instead of forwarding it to the upstream untouched.
	RejectLegacy     bool
	MaxBodyBytes     int64 // DefaultMaxBodyBytes when 0
	MaxResponseBytes int   // DefaultMaxResponseBytes when 0
	// Hints stamps cache hints; DefaultHints when nil (the overlay's when
	// Overlay is set).
	Hints HintFunc
	// Overlay is the live catalog; nil keeps the sidecar a transparent
	// proxy. With it the sidecar owns the lists, tools/call routing,
	// resources/read and prompts/get.
	Overlay *Overlay
	Hub     *Hub
	Logger  *slog.Logger
	// upstream is a client shared with the overlay (NewUpstream when nil).
	upstream *Upstream
	Metrics  *Metrics
}

// ownedHandler answers a validated request the sidecar handles itself.
type ownedHandler func(s *Server, w http.ResponseWriter, r *http.Request, req *request)

// Server is the MCP-facing side of the sidecar: it validates every request,
// answers the methods it owns and forwards the rest.
type Server struct {
	opts  Options
	log   *slog.Logger
	m     *Metrics
	up    *Upstream
	hub   *Hub
	owned map[string]ownedHandler

	inflight atomic.Int64 // requests in progress, listen streams aside (for drain)
	draining atomic.Bool
	// abortCtx ends with errDrainBudget when the drain budget is over
	// (AbortInflight). It is the base of every request context (see
	// BaseContext), so every forwarded request still waiting on the upstream
	// is then answered with a JSON-RPC error carrying its id instead of
	// being cut.
	abortCtx context.Context
	abort    context.CancelCauseFunc
	aborted  atomic.Int64 // forwarded requests answered by AbortInflight
	// pol caches the version policy derived from one upstream discover
	// result; it is replaced whenever that result is.
	pol atomic.Pointer[cachedPolicy]
}

type cachedPolicy struct {
	info *upstreamInfo
	p    versionPolicy
}

// NewServer returns a Server for o.
func NewServer(o Options) (*Server, error) {
	if _, err := url.Parse(o.Upstream); err != nil || o.Upstream == "" {
		return nil, errors.New("sidecar: invalid upstream URL")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Hints == nil {
		o.Hints = DefaultHints
		if o.Overlay != nil {
			o.Hints = o.Overlay.hints
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.upstream == nil {
		o.upstream = NewUpstream(o.Upstream, o.MaxResponseBytes)
	}
	if o.Hub == nil {
		o.Hub = NewHub(HubOptions{Logger: o.Logger, Metrics: o.Metrics})
	}
	s := &Server{
		opts: o,
		log:  o.Logger,
		m:    o.Metrics,
		up:   o.upstream,
		hub:  o.Hub,
		// The methods the sidecar answers itself. The catalog overlay adds
		// its lists, reads and prompts/get here.
		owned: map[string]ownedHandler{
			methodDiscover: (*Server).serveDiscover,
			methodListen:   (*Server).serveListen,
		},
	}
	s.abortCtx, s.abort = context.WithCancelCause(context.Background())
	if o.Overlay != nil {
		for m := range listSpecs {
			s.owned[m] = (*Server).serveList
		}
		s.owned["tools/call"] = (*Server).serveToolCall
		s.owned["resources/read"] = (*Server).serveRead
		s.owned["prompts/get"] = (*Server).servePromptGet
	}
	return s, nil
}

// AbortInflight ends the wait on the upstream for every forwarded request in
// progress (and any started later): each is answered with a JSON-RPC error
// that carries its id, on its JSON or SSE response. The drain calls it when
// its budget is over, so no client sees a reset.
func (s *Server) AbortInflight() { s.abort(errDrainBudget) }

// errDrainBudget is the cause of the request contexts AbortInflight ends.
var errDrainBudget = errors.New("drain budget over")

// abortedByDrain reports (and counts) a request whose context the drain
// budget ended, rather than its client going away: then the connection's
// own cancellation is the cause, and nobody is left to tell.
func (s *Server) abortedByDrain(r *http.Request) bool {
	if !errors.Is(context.Cause(r.Context()), errDrainBudget) {
		return false
	}
	s.aborted.Add(1)
	return true
}

// endedByDrain answers a request whose upstream call the drain budget ended
// (see AbortInflight) and reports whether it did.
func (s *Server) endedByDrain(w http.ResponseWriter, r *http.Request, req *request) bool {
	if !s.abortedByDrain(r) {
		return false
	}
	s.fail(w, req.id, errDrained())
	return true
}

// BaseContext must be the BaseContext of the http.Server that serves s:
// every request context then derives from the drain's abort context, which
// costs nothing per request (a per-request context joined to it did, on
// the forwarding path).
func (s *Server) BaseContext(net.Listener) context.Context { return s.abortCtx }

// Aborted returns how many requests AbortInflight answered.
func (s *Server) Aborted() int64 { return s.aborted.Load() }

// errDrained is the answer to a forwarded request the drain budget cut short.
func errDrained() *rpcError {
	return newErr(http.StatusServiceUnavailable, codeInternalError,
		"Internal error: the server is shutting down and did not answer within the drain budget; retry")
}

// Upstream returns the upstream client (for the relay and readiness).
func (s *Server) Upstream() *Upstream { return s.up }

// Hub returns the listen hub.
func (s *Server) Hub() *Hub { return s.hub }

// Inflight returns the number of forwarded requests in progress.
func (s *Server) Inflight() int64 { return s.inflight.Load() }

// policy returns the protocol versions the sidecar accepts right now.
func (s *Server) policy() versionPolicy {
	info := s.up.current()
	if c := s.pol.Load(); c != nil && c.info == info {
		return c.p
	}
	p := s.computePolicy(info)
	s.pol.Store(&cachedPolicy{info: info, p: p})
	return p
}

func (s *Server) computePolicy(info *upstreamInfo) versionPolicy {
	p := versionPolicy{forwardLegacy: !s.opts.RejectLegacy}
	if info == nil {
		p.supported = []string{ProtocolVersion}
		return p
	}
	for _, v := range info.versions {
		if v == ProtocolVersion || (p.forwardLegacy && v < ProtocolVersion) {
			p.supported = append(p.supported, v)
		}
	}
	if !slices.Contains(p.supported, ProtocolVersion) {
		// The sidecar serves the modern revision itself whatever the
		// upstream lists; a legacy-only upstream is not supported.
		p.supported = append([]string{ProtocolVersion}, p.supported...)
	}
	return p
}

func (s *Server) fail(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	s.m.countError(e.code)
	writeRPCError(w, id, e)
}

// ServeHTTP serves the MCP endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, nil, newErr(http.StatusMethodNotAllowed, codeInvalidRequest, "Method not allowed: the MCP endpoint accepts POST only"))
		return
	}
	// Read the whole (bounded) body first so that every error below can
	// carry the request id.
	// A small body arrives with its headers (ReadHeaderTimeout covers
	// it); only bodies that may trickle in get their own read deadline,
	// because each deadline change costs timer work on every request.
	var rc *http.ResponseController
	if r.ContentLength < 0 || r.ContentLength > inlineBodyBytes {
		rc = http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if rc != nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			s.fail(w, nil, newErr(http.StatusRequestEntityTooLarge, codeInvalidRequest, "Request body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes"))
			return
		}
		s.fail(w, nil, newErr(http.StatusBadRequest, codeInvalidRequest, "Reading request body: "+err.Error()))
		return
	}
	req, perr := parseRequest(body)
	var id json.RawMessage
	if req != nil {
		id = req.id
	}
	if e := s.checkHostOrigin(r); e != nil {
		s.fail(w, id, e)
		return
	}
	if !mediaTypeIs(headerValue(r.Header, "Content-Type"), "application/json") {
		s.fail(w, id, newErr(http.StatusUnsupportedMediaType, codeInvalidRequest, "Content-Type must be application/json"))
		return
	}
	if perr != nil {
		s.fail(w, id, perr)
		return
	}
	if e := validate(r.Header, req, s.policy()); e != nil {
		s.fail(w, id, e)
		return
	}
	if !req.isNotification() && !req.legacy && !acceptsBoth(r.Header) {
		s.fail(w, id, newErr(http.StatusBadRequest, codeInvalidRequest, "Accept must list both application/json and text/event-stream"))
		return
	}
	h := s.owned[req.method]
	if req.legacy || req.isNotification() {
		h = nil
	}
	if h != nil && req.method == methodListen {
		h(s, w, r, req) // a stream, ended by the drain itself
		return
	}
	// Every other request is in flight until it is answered: the drain
	// waits for it, and at the budget's end it is answered with an error.
	s.inflight.Add(1)
	s.m.inflight.Inc()
	defer func() {
		s.inflight.Add(-1)
		s.m.inflight.Dec()
	}()
	if h != nil {
		h(s, w, r, req)
		return
	}
	s.forward(w, r, req)
}

func acceptsBoth(h http.Header) bool {
	var j, e bool
	for _, v := range h["Accept"] {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			switch {
			case strings.EqualFold(mt, "application/json"):
				j = true
			case strings.EqualFold(mt, "text/event-stream"):
				e = true
			case mt == "*/*":
				j, e = true, true
			}
		}
	}
	return j && e
}

// checkHostOrigin is the DNS-rebinding protection (spec §2.5): a present
// Origin must be allowed (403), and so must the Host.
func (s *Server) checkHostOrigin(r *http.Request) *rpcError {
	host := r.Host
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	hostOK := false
	switch {
	case isLoopbackName(hostname):
		hostOK = true
	case len(s.opts.AllowedHosts) > 0:
		for _, a := range s.opts.AllowedHosts {
			if strings.EqualFold(a, hostname) || strings.EqualFold(a, host) {
				hostOK = true
				break
			}
		}
	case s.opts.DisableLocalhostProtection:
		hostOK = true
	default:
		// Localhost protection: a request that arrived on a loopback
		// address must name a loopback host.
		hostOK = true
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if ap, err := netipAddrPort(la.String()); err == nil && ap {
				hostOK = false
			}
		}
	}
	if !hostOK {
		return newErr(http.StatusForbidden, codeInvalidRequest, "Forbidden: Host "+strconv.Quote(host)+" is not allowed")
	}
	origin := headerValue(r.Header, "Origin")
	if origin == "" {
		return nil
	}
	for _, a := range s.opts.AllowedOrigins {
		if a == "*" || strings.EqualFold(a, origin) {
			return nil
		}
	}
	if u, err := url.Parse(origin); err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackName(u.Hostname()) {
		return nil
	}
	return newErr(http.StatusForbidden, codeInvalidRequest, "Forbidden: Origin "+strconv.Quote(origin)+" is not allowed")
}

func isLoopbackName(h string) bool {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// netipAddrPort reports whether an address string is on a loopback IP.
func netipAddrPort(a string) (bool, error) {
	h, _, err := net.SplitHostPort(a)
	if err != nil {
		return false, err
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback(), nil
}

// isHopHeader reports the headers that are not forwarded in either
// direction (RFC 9110 §7.6.1), nor are Host (the upstream's own is used),
// Content-Length (recomputed) and Accept-Encoding (the localhost hop is
// never compressed). Keys arrive canonical from net/http's parsers.
func isHopHeader(canonicalKey string) bool {
	switch canonicalKey {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding", "Host":
		return true
	}
	return false
}

// copyHeaders copies src into dst without the hop-by-hop headers and those
// that src's Connection header names.
func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if !isHopHeader(k) {
			dst[k] = vs
		}
	}
	for _, f := range src["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
}

// forward sends a request the sidecar does not own to the upstream and
// streams the answer back, stamping results on the way. While draining,
// every response asks the client to close its connection, so that clients
// reconnect (through the Service) to a replica that is staying.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, req *request) {
	// The upstream call ends when the client goes away or when the drain
	// budget is over (AbortInflight), whichever comes first: both end the
	// request context (BaseContext).
	ureq, err := http.NewRequestWithContext(r.Context(), http.MethodPost, s.up.url, bytes.NewReader(req.body))
	if err != nil {
		s.fail(w, req.id, newErr(http.StatusInternalServerError, codeInternalError, "Internal error: "+err.Error()))
		return
	}
	copyHeaders(ureq.Header, r.Header)
	start := time.Now()
	resp, err := s.up.client.Do(ureq)
	s.m.observeUpstream(req.method, time.Since(start))
	if err != nil {
		if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
			return // answered for the drain, or the client went away
		}
		s.log.Warn("Upstream request failed", "method", req.method, "err", err)
		s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream unavailable"))
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	if s.draining.Load() {
		w.Header().Set("Connection", "close")
	}
	switch {
	case isEventStream(resp.Header):
		s.relayEvents(w, r, resp, req)
	case isJSON(resp.Header) && !req.legacy && !req.isNotification():
		buf := respBufs.Get().(*bytes.Buffer)
		defer putRespBuf(buf)
		buf.Reset()
		_, err := buf.ReadFrom(io.LimitReader(resp.Body, int64(s.up.maxBytes)+1))
		if err != nil || buf.Len() > s.up.maxBytes {
			w.Header().Del("Content-Type")
			if s.endedByDrain(w, r, req) {
				return
			}
			s.log.Warn("Reading upstream response failed", "method", req.method, "err", err, "bytes", buf.Len())
			s.fail(w, req.id, newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream response unreadable or too large"))
			return
		}
		b := s.stamp(req, buf.Bytes())
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	default:
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, int64(s.up.maxBytes)))
	}
}

// respBufs recycles the buffers JSON responses are read into.
var respBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// respBufKeep is the largest buffer returned to respBufs.
const respBufKeep = 64 << 10

func putRespBuf(b *bytes.Buffer) {
	if b.Cap() <= respBufKeep {
		respBufs.Put(b)
	}
}

// relayEvents streams an upstream SSE response to the client event by
// event, stamping the final result. Each message goes out as one data: line.
// When the upstream stream ends before the final response (the drain budget
// ran out, or the upstream went away), a request that expects an answer gets
// a JSON-RPC error event with its id, so the client is answered, not cut.
func (s *Server) relayEvents(w http.ResponseWriter, r *http.Request, resp *http.Response, req *request) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	rd := newSSEReader(resp.Body, s.up.maxBytes)
	var out []byte
	answered := false
	for {
		ev, err := rd.next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				s.log.Debug("Upstream event stream ended", "method", req.method, "err", err)
			}
			if answered || req.legacy || req.isNotification() {
				return
			}
			var e *rpcError
			switch {
			case s.abortedByDrain(r):
				e = errDrained()
			case r.Context().Err() != nil:
				return // the client went away
			default:
				e = newErr(http.StatusBadGateway, codeInternalError, "Internal error: upstream ended the stream without answering")
			}
			s.m.countError(e.code)
			out = append(append(append(out[:0], "event: message\ndata: "...), errorBody(req.id, e)...), '\n', '\n')
			_, _ = w.Write(out)
			_ = rc.Flush()
			return
		}
		data := ev.data
		if bytes.IndexByte(data, '\n') >= 0 {
			var c bytes.Buffer
			if json.Compact(&c, data) != nil {
				continue // not a JSON message; nothing a client could use
			}
			data = c.Bytes()
		}
		if !req.legacy && isResponse(data) {
			data = s.stamp(req, data)
			answered = true
		}
		name := ev.event
		if name == "" {
			name = "message"
		}
		out = append(out[:0], "event: "...)
		out = append(out, name...)
		out = append(out, "\ndata: "...)
		out = append(out, data...)
		out = append(out, '\n', '\n')
		if _, err := w.Write(out); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// stamp makes a response leaving the sidecar carry resultType on its result
// and, for cacheable complete results, the cache hints. Everything else
// stays the bytes the upstream sent.
func (s *Server) stamp(req *request, msg []byte) []byte {
	rs, re, ok := span(msg, "result")
	if !ok || !isObject(msg[rs:re]) {
		return msg
	}
	res := msg[rs:re]
	rt, hasRT, _ := field(res, "resultType")
	rtv, _ := stringValue(rt)
	cacheable := cacheableMethods[req.method] && (!hasRT || rtv == resultComplete)
	if hasRT && !cacheable {
		return msg
	}
	sets := make([]kv, 0, 3)
	sets = append(sets, kv{key: "resultType", val: []byte(`"complete"`), keepExisting: true})
	if cacheable {
		ttl, scope := s.opts.Hints(req.method, req.params)
		if ttl < 0 {
			ttl = 0
		}
		// An upstream that says its answer depends on the caller is
		// believed: the scope only ever narrows.
		if up, ok, _ := field(res, "cacheScope"); scope != "public" || (ok && string(up) == `"private"`) {
			scope = "private"
		}
		sets = append(sets,
			kv{key: "ttlMs", val: strconv.AppendInt(nil, ttl, 10)},
			kv{key: "cacheScope", val: []byte(`"` + scope + `"`)})
	}
	nres, err := setMembers(res, sets, nil)
	if err != nil {
		return msg
	}
	out := make([]byte, 0, len(msg)+len(nres)-len(res))
	out = append(out, msg[:rs]...)
	out = append(out, nres...)
	return append(out, msg[re:]...)
}

// span returns the offsets of the value of the top-level member name.
func span(obj []byte, name string) (start, end int, ok bool) {
	_ = eachMember(obj, func(m member) bool {
		if keyIs(m.key, name) {
			start, end, ok = m.start, m.end, true
			return false
		}
		return true
	})
	return
}
