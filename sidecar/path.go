package sidecar

// This file is the request path: one POST's walk through the sidecar, top to
// bottom. Each step says where its concern lives; a request visits each once.
//
//  1. Caller identity (auth.go, package authn): with the catalog's auth, a
//     caller without a valid token is refused before anything is read.
//  2. Transport guards (this file): POST only (a 2025-era session's GET and
//     DELETE branch off to legacyserve.go), the in-flight cap (sidecar/inflight),
//     the bounded body (readBody), Host and Origin (sidecar/guard),
//     Content-Type.
//  3. Decode (validate.go, on sidecar/decode's envelope and header checks
//     and sidecar/wire's exact-key scanner and strict JSON checks):
//     parseRequest, then validate (headers, _meta claim, version), then
//     Accept (sidecar/guard). A subscriptions/listen leaves the path here
//     for its stream (listen.go, sidecar/hub, on a transport of
//     sidecar/stream).
//  4. Client generation (legacyserve.go, on the room sidecar/legacy): a
//     2025-era request gets its session checked, the methods only the
//     sidecar answers for 2025-era clients, and is turned into the modern
//     shape; then it rejoins the path at dispatch. Notifications of every
//     generation stop at serveNotification (notify.go).
//  5. The choke point (dispatch, below): the method table (methods.go)
//     says who answers: the sidecar, the catalog, or the upstream.
//  6. Catalog (catalogserve.go, authz.go, sidecar/overlay, sidecar/rules): what
//     the caller may use (package access) and the catalog's rules decide:
//     answered from the catalog, refused as unknown, or renamed and sent on.
//  7. Upstream (forward.go, and the client in sidecar/upstream; a 2025-era
//     session's call through forwardLegacy, legacyserve.go): the request goes
//     to the MCP server, always in 2026-07-28 (a 2025-era or stdio server
//     through the transports that translate), with the headers of
//     sidecar/headers, the caller's upstream credential (sidecar/credential)
//     and the span's trace context (sidecar/tracing).
//  8. Stamping and response (forward.go stamp, legacyserve.go finish): cache hints
//     and resultType on the modern shape, or the 2025-era shape back.

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/guard"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/procs"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// ServeHTTP serves the MCP endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	procs.Active()
	// 1. Caller identity.
	// With the catalog's auth, nothing below runs for a caller without a valid token: no
	// body is read, no slot taken (auth.go).
	if auth := s.currentAuth(); auth != nil {
		var ok bool
		if r, ok = s.authenticate(w, r, auth); !ok {
			return
		}
	}
	// 2. Transport guards.
	if r.Method != http.MethodPost {
		if s.pol.serveLegacy && (r.Method == http.MethodGet || r.Method == http.MethodDelete) && len(r.Header[legacy.HeaderSessionID]) > 0 {
			// A 2025-era session's notification stream, or its end. (Without
			// a session there is nothing to stream or end: 405, as before.)
			if e := s.checkHostOrigin(r); e != nil {
				s.fail(w, nil, e)
				return
			}
			// No body to read: the connection's backstop read deadline (App) must not end
			// the stream.
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
			if r.Method == http.MethodGet {
				s.serveLegacyGet(w, r)
			} else {
				s.serveLegacyDelete(w, r)
			}
			return
		}
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, nil, wire.NewError(http.StatusMethodNotAllowed, wire.CodeInvalidRequest, "Method not allowed: the MCP endpoint accepts POST only"))
		return
	}
	// Past the in-flight cap the request is refused before its body is read.
	if !s.gate.Admit() {
		s.m.RequestsRefused.Inc()
		w.Header().Set("Retry-After", BusyRetryAfter)
		s.fail(w, nil, errBusy())
		return
	}
	admitted := true
	defer func() {
		if admitted {
			s.gate.Release()
		}
	}()
	// Read the whole (bounded) body first so that every error below can
	// carry the request id.
	body, err := s.readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			s.fail(w, nil, wire.NewError(http.StatusRequestEntityTooLarge, wire.CodeInvalidRequest, "Request body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes"))
		case errors.As(err, &ne) && ne.Timeout():
			// The connection cannot be read any more; net/http closes it after this answer.
			s.m.BodyReadTimeouts.Inc()
			s.fail(w, nil, wire.NewError(http.StatusRequestTimeout, wire.CodeInvalidRequest, "Request body not received within "+s.opts.BodyReadTimeout.String()))
		default:
			s.fail(w, nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Reading request body: "+err.Error()))
		}
		return
	}
	// 3. Decode.
	req, perr := parseRequest(body)
	var id json.RawMessage
	if req != nil {
		id = req.id
	}
	if e := s.checkHostOrigin(r); e != nil {
		s.fail(w, id, e)
		return
	}
	if !wire.MediaTypeIs(wire.HeaderValue(r.Header, "Content-Type"), "application/json") {
		s.fail(w, id, wire.NewError(http.StatusUnsupportedMediaType, wire.CodeInvalidRequest, "Content-Type must be application/json"))
		return
	}
	if perr != nil {
		if req != nil && req.response && s.pol.serveLegacy {
			// A 2025-era client answering a request the sidecar sent it.
			s.serveClientResponse(w, r, req)
			return
		}
		s.fail(w, id, perr)
		return
	}
	if e := validate(r.Header, req, s.policy()); e != nil {
		s.fail(w, id, e)
		return
	}
	if !req.isNotification() && !req.legacy && !guard.AcceptsBoth(r.Header) {
		s.fail(w, id, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest, "Accept must list both application/json and text/event-stream"))
		return
	}
	if req.method == protocol.MethodListen && !req.legacy && !req.isNotification() {
		// A stream, ended by the drain itself; streams have their own cap.
		s.gate.Release()
		admitted = false
		s.serveListen(w, r, req)
		return
	}
	// The audit record, if any, is written when the request is answered (auditing.go).
	if aw := s.startAudit(w, r, req); aw != nil {
		w = aw
		defer aw.finish()
	}
	if s.tr != nil {
		var tw *tracing.RequestWriter
		if w, tw = s.startSpan(w, r, req); tw != nil {
			defer tw.Finish()
		}
	}
	// Every other request is in flight until it is answered: the drain
	// waits for it, and at the budget's end it is answered with an error.
	s.gate.Begin()
	s.m.Inflight.Inc()
	defer func() {
		s.gate.End()
		s.m.Inflight.Dec()
	}()
	// 4. Client generation: a 2025-era request comes back to dispatch
	// through serveLegacy.
	if req.legacy {
		s.serveLegacy(w, r, req)
		return
	}
	if req.isNotification() {
		s.serveNotification(w, r, req)
		return
	}
	// 5. The choke point.
	s.dispatch(w, r, req)
}

// readBody reads a request body whole, bounded in size and in time: net/http's deadlines end
// with the headers (ReadHeaderTimeout), so a client that announces a body and never sends it
// would hold this goroutine and its connection for good. The deadline covers the body only
// and is cleared after it: the same connection may carry a long-lived stream or a long call
// next (http.Server.ReadTimeout would stay in force and end those).
//
// After a failed read the deadline stays and the connection closes after the answer: net/http
// would otherwise try to read the rest of the body before answering, with no deadline.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

// dispatch is the choke point: every request of every protocol generation
// that reaches the MCP server's features passes here, a 2025-era one after
// serveLegacy turned it into the modern shape. The method table says who
// answers: the sidecar, the catalog (when one is served), or the upstream.
// Notifications never get here: serveNotification answers them.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, req *request) {
	spec := req.spec
	owner := ownUpstream
	if spec != nil && spec.serve != nil {
		owner = spec.owner
	}
	switch {
	case owner == ownSidecar, owner == ownCatalog && s.opts.Overlay != nil:
		// 6. Catalog (and the sidecar's own methods); a served tools/call
		// goes on to forward from there.
		spec.serve(s, w, r, req)
	default:
		// 7. and 8. Upstream, stamping and response.
		s.forward(w, r, req)
	}
}

// checkHostOrigin is the DNS-rebinding protection (spec §2.5; sidecar/guard)
// under the Server's allowed hosts and origins.
func (s *Server) checkHostOrigin(r *http.Request) *wire.Error {
	return guard.HostOrigin(r, guard.Allowed{Hosts: s.opts.AllowedHosts, Origins: s.opts.AllowedOrigins,
		AnyHost: s.opts.DisableLocalhostProtection})
}
