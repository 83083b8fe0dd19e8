package sidecar

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// serveNotification is the choke point for notifications (messages without
// an id) of every protocol generation; nothing a client sends as one is
// forwarded. The upstream sessions of a 2025-era server and the stdio
// bridge's child are shared by every client and number their requests in
// sequence, so a forwarded notifications/cancelled could name another
// client's call, and a forwarded notification could run anything the
// upstream does for it, past the catalog and the listen limits. What a
// client may cancel, the sidecar cancels itself: a 2025-era client's
// notifications/cancelled ends the named call of its own session
// (serveCancelled), and a 2026-07-28 client closes its request's stream
// (spec §2.7; over HTTP no other cancellation is defined, and a stateless
// notification names an id the sidecar cannot tie to the client that sent
// it). Either ends the call's upstream request, and a 2025-era upstream is
// sent notifications/cancelled with the sidecar's own id for that call
// (sidecar/upstream/legacy.go).
//
// A notification the client may send in its revision (the method table's
// notification flag) gets 202 with no body; any other gets 400 with a
// JSON-RPC error without an id (Streamable HTTP: a notification the server
// does not accept gets an HTTP error status; go-sdk answers the same two
// cases with 400), never an upstream's body.
func (s *Server) serveNotification(w http.ResponseWriter, r *http.Request, req *request) {
	spec := req.spec
	switch {
	case spec == nil:
		s.fail(w, nil, wire.NewError(http.StatusBadRequest, wire.CodeMethodNotFound,
			"Method not found: "+req.method+" is not a notification a client sends"))
	case !spec.notification: // a request method (go-sdk: "missing id")
		s.fail(w, nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidRequest,
			"Invalid Request: "+req.method+" is a request and needs an id"))
	case !req.legacy && spec.era == eraLegacy:
		s.fail(w, nil, wire.NewError(http.StatusBadRequest, wire.CodeMethodNotFound,
			"Method not found: "+req.method+" is not part of protocol revision "+protocol.Version))
	case req.legacy && spec.legacyServe != nil:
		spec.legacyServe(s, w, r, req)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}
