package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/access"
	"github.com/switchboard-mcp/switchboard/sidecar/audit"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/inflight"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Request limits.
const (
	// DefaultMaxBodyBytes bounds one POSTed JSON-RPC message.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxHeaderBytes bounds request headers (net/http answers 431).
	DefaultMaxHeaderBytes = 64 << 10
)

// HintFunc decides the cache hints stamped on a cacheable result: the
// method and its raw params in, ttlMs and cacheScope ("public" or
// "private") out. With an overlay, the overlay's (the catalog's cache hints) is used.
type HintFunc func(method string, params []byte) (ttlMs int64, scope string)

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
	// RejectLegacy answers claim-less (2025-era) traffic as a modern-only
	// server (400 -32022 naming the supported versions; 405 for GET and
	// DELETE) instead of serving it (sidecar/legacy).
	RejectLegacy bool
	// SessionKey signs 2025-era session ids; every replica of one MCPServer
	// must share it (a random key when empty: sessions then work on this
	// replica only). SessionServer names the server in the ids, and
	// SessionTTL is their lifetime (legacy.DefaultSessionTTL when 0).
	SessionKey    []byte
	SessionServer string
	SessionTTL    time.Duration
	MaxBodyBytes  int64 // DefaultMaxBodyBytes when 0
	// BodyReadTimeout bounds reading one request body (DefaultBodyReadTimeout when 0).
	BodyReadTimeout time.Duration
	// MaxInflightRequests caps the POSTs served at once, listen streams aside; past it a
	// request gets 503 with Retry-After (DefaultMaxInflightRequests when 0).
	MaxInflightRequests int64
	MaxResponseBytes    int // upstream.DefaultMaxResponseBytes when 0
	// Hints stamps cache hints; overlay.DefaultHints when nil (the overlay's when
	// Overlay is set).
	Hints HintFunc
	// Overlay is the live catalog; nil keeps the sidecar a transparent
	// proxy. With it the sidecar owns the lists, tools/call routing,
	// resources/read and prompts/get.
	Overlay *overlay.Overlay
	// Authn verifies callers when the live catalog has Auth (auth.go); nil: never.
	Authn  *authn.Authenticator
	Hub    *hub.Hub
	Logger *slog.Logger
	// Client is the upstream client, shared with the overlay (upstream.New when nil).
	Client  *upstream.Client
	Metrics *Metrics
	// Tracing records a span per MCP request (nil: no traces; sidecar/tracing).
	Tracing *tracing.Tracer
	// InputTimeout bounds the wait for a 2025-era client's answers to one
	// round of an upstream's input requests (legacy.DefaultInputTimeout when 0).
	InputTimeout time.Duration
	// AuditOutput is where audit records go when the catalog's audit names no file (os.Stdout
	// when nil; auditing.go); PodName names this pod in them.
	AuditOutput io.Writer
	PodName     string
	// AuditDir is the directory an audit file must be in (catalog.AuditDir when empty).
	AuditDir string
}

// Server is the MCP-facing side of the sidecar: it validates every request,
// answers the methods it owns and forwards the rest.
type Server struct {
	opts Options
	log  *slog.Logger
	m    *Metrics
	up   *upstream.Client
	hub  *hub.Hub
	tr   *tracing.Tracer // nil when tracing is off
	// gate is what is in flight: the POSTs admitted within opts.MaxInflightRequests, the
	// requests the drain waits for, the draining flag, and the drain budget's abort context,
	// the base of every request context (see BaseContext), so every forwarded request still
	// waiting on the upstream is answered with a JSON-RPC error carrying its id instead of
	// being cut (sidecar/inflight).
	gate *inflight.Gate
	// pol is the protocol versions served.
	pol versionPolicy
	// legacy is the 2025-era client generation: its sessions and their
	// state on this replica, the calls in flight and the input relay, the
	// upstream tools' x-mcp-header annotations (sidecar/legacy).
	legacy *legacy.Room
	// grants memoises callers' grants per catalog revision (authz.go).
	grants access.Cache
	// audit writes the audit trail the catalog asks for (auditing.go).
	audit *audit.Trail
}

// NewServer returns a Server for o.
func NewServer(o Options) (*Server, error) {
	if _, err := url.Parse(o.Upstream); err != nil || o.Upstream == "" {
		return nil, errors.New("sidecar: invalid upstream URL")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.MaxInflightRequests <= 0 {
		o.MaxInflightRequests = DefaultMaxInflightRequests
	}
	if o.Hints == nil {
		o.Hints = overlay.DefaultHints
		if o.Overlay != nil {
			o.Hints = o.Overlay.Hints
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Client == nil {
		o.Client = upstream.New(o.Upstream, o.MaxResponseBytes)
	}
	if o.Hub == nil {
		o.Hub = hub.New(hub.Options{Logger: o.Logger, Observer: o.Metrics})
	}
	s := &Server{
		opts: o,
		log:  o.Logger,
		m:    o.Metrics,
		up:   o.Client,
		hub:  o.Hub,
		tr:   o.Tracing,
		gate: inflight.New(o.MaxInflightRequests),
	}
	// Read at scrape time: the hot path only moves the counter it checks anyway.
	o.Metrics.Admitted(func() float64 { return float64(s.gate.Admitted()) })
	s.pol = newPolicy(!o.RejectLegacy)
	s.legacy = legacy.New(legacy.Options{Key: o.SessionKey, Server: o.SessionServer, TTL: o.SessionTTL,
		InputTimeout: o.InputTimeout, Hub: s.hub, Upstream: s.up, Observer: s.m})
	s.audit = audit.NewTrail(audit.TrailOptions{Out: o.AuditOutput, Pod: o.PodName, Dir: o.AuditDir, Log: o.Logger,
		OnDrop: o.Metrics.AuditDropped.Inc})
	return s, nil
}

// AbortInflight ends the wait on the upstream for every forwarded request in
// progress (and any started later): each is answered with a JSON-RPC error
// that carries its id, on its JSON or SSE response. The drain calls it when
// its budget is over, so no client sees a reset.
func (s *Server) AbortInflight() { s.gate.Abort() }

// ResetAbort gives connections accepted from now on a fresh abort context (a drained replica
// that recovers); connections accepted during the drain were told Connection: close.
func (s *Server) ResetAbort() { s.gate.ResetAbort() }

// abortedByDrain reports (and counts) a request whose context the drain
// budget ended, rather than its client going away: then the connection's
// own cancellation is the cause, and nobody is left to tell.
func (s *Server) abortedByDrain(r *http.Request) bool { return s.gate.AbortedByDrain(r.Context()) }

// endedByDrain answers a request whose upstream call the drain budget ended
// (see AbortInflight) and reports whether it did.
func (s *Server) endedByDrain(w http.ResponseWriter, r *http.Request, req *request) bool {
	if !s.abortedByDrain(r) {
		return false
	}
	s.failReq(w, req, errDrained())
	return true
}

// BaseContext must be the BaseContext of the http.Server that serves s:
// every request context then derives from the drain's abort context, which
// costs nothing per request (a per-request context joined to it did, on
// the forwarding path).
func (s *Server) BaseContext(net.Listener) context.Context { return s.gate.Context() }

// ConnContext is BaseContext per connection, for an http.Server whose replica may recover from
// a drain (App): each connection's requests derive from the abort context current when it was
// accepted. It keeps the http.Server in the context as net/http would.
func (s *Server) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(s.BaseContext(nil), http.ServerContextKey, ctx.Value(http.ServerContextKey))
}

// Aborted returns how many requests AbortInflight answered.
func (s *Server) Aborted() int64 { return s.gate.Aborted() }

// errDrained is the answer to a forwarded request the drain budget cut short.
func errDrained() *wire.Error {
	return wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError,
		"Internal error: the server is shutting down and did not answer within the drain budget; retry")
}

// Upstream returns the upstream client (for the relay and readiness).
func (s *Server) Upstream() *upstream.Client { return s.up }

// Hub returns the listen hub.
func (s *Server) Hub() *hub.Hub { return s.hub }

// SetDraining says whether the replica is draining: every response then asks its client to
// close the connection, and a listen is answered with its complete result at once.
func (s *Server) SetDraining(on bool) { s.gate.SetDraining(on) }

// Draining reports whether the replica is draining.
func (s *Server) Draining() bool { return s.gate.Draining() }

// CloseAudit flushes and closes the audit trail's file sink, if the catalog named one; the
// process calls it last, once no request is served any more.
func (s *Server) CloseAudit() { s.audit.Close() }

// Inflight returns the number of forwarded requests in progress.
func (s *Server) Inflight() int64 { return s.gate.Inflight() }

// policy returns the protocol versions the sidecar accepts.
func (s *Server) policy() versionPolicy { return s.pol }

func newPolicy(serveLegacy bool) versionPolicy {
	p := versionPolicy{serveLegacy: serveLegacy, supported: []string{protocol.Version}}
	if serveLegacy {
		p.supported = append(p.supported, legacy.Versions...)
	}
	return p
}

func (s *Server) fail(w http.ResponseWriter, id json.RawMessage, e *wire.Error) {
	s.m.CountError(e.Code)
	noteError(w, e)
	wire.WriteError(w, id, e)
}
