package sidecar

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard/sidecar/metrics"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// This file describes every MCP method the sidecar knows, once. Validation
// (Mcp-Name, removed methods), the choke point (who answers), stamping
// (cacheable) and the metrics' method label all read this one table; the
// merged lists' entries point at the overlay's description of them
// (overlay.Lists), and the catalog's cache hints are the overlay's.

// owner says who answers a method.
type owner uint8

const (
	// ownUpstream: forwarded to the MCP server as it came (modern) or
	// translated (legacy), and stamped on the way back.
	ownUpstream owner = iota
	// ownSidecar: answered by the sidecar itself, with or without a
	// catalog (discover, listen, the legacy session methods).
	ownSidecar
	// ownCatalog: passes the catalog (served, refused, renamed or
	// forwarded by its rules) whenever a catalog is served; forwarded
	// otherwise.
	ownCatalog
)

// era says which protocol generations have a method.
type era uint8

const (
	eraAll    era = iota // in every revision
	eraModern            // 2026-07-28 only
	eraLegacy            // 2025-era only: removed in 2026-07-28 (404 -32601 for a modern request)
)

// handler answers a validated request.
type handler func(s *Server, w http.ResponseWriter, r *http.Request, req *request)

// methodSpec describes one MCP method.
type methodSpec struct {
	owner owner
	era   era
	// cacheable results carry ttlMs/cacheScope when complete (spec §5.1).
	cacheable bool
	// nameMember is the params member Mcp-Name mirrors ("" for none).
	nameMember string
	// list is set for the four merged lists.
	list *overlay.List
	// serve answers the method when the sidecar owns it (ownSidecar), or
	// applies the catalog (ownCatalog, only when a catalog is served).
	serve handler
	// legacyServe answers the method for a 2025-era session (nil: the
	// method goes through serve or to the upstream like a modern one).
	legacyServe handler
	// inputRequired: a 2026 server may answer input_required (SEP-2322:
	// tools/call, prompts/get and resources/read only).
	inputRequired bool
	// notification marks the notifications a client may send (2026-07-28:
	// notifications/cancelled only; 2025-era, eraLegacy: also initialized,
	// progress, roots/list_changed, tasks/status). Every other message
	// without an id is refused (serveNotification).
	notification bool
	// methodValue is the Mcp-Method header value of the method (shared,
	// read-only; set in init).
	methodValue []string
}

// methods is the table. It is filled in init (its handlers refer back to
// it through the Server).
var methods map[string]*methodSpec

func init() {
	methods = map[string]*methodSpec{
		protocol.MethodDiscover: {owner: ownSidecar, era: eraModern, cacheable: true, serve: (*Server).serveDiscover},
		protocol.MethodListen:   {owner: ownSidecar, era: eraModern, serve: (*Server).serveListen},

		"tools/list":               {owner: ownCatalog, cacheable: true, list: overlay.ListOf("tools/list"), serve: (*Server).serveList},
		"prompts/list":             {owner: ownCatalog, cacheable: true, list: overlay.ListOf("prompts/list"), serve: (*Server).serveList},
		"resources/list":           {owner: ownCatalog, cacheable: true, list: overlay.ListOf("resources/list"), serve: (*Server).serveList},
		"resources/templates/list": {owner: ownCatalog, cacheable: true, list: overlay.ListOf("resources/templates/list"), serve: (*Server).serveList},
		"resources/read":           {owner: ownCatalog, cacheable: true, nameMember: "uri", inputRequired: true, serve: (*Server).serveRead},
		"tools/call":               {owner: ownCatalog, nameMember: "name", inputRequired: true, serve: (*Server).serveToolCall},
		"prompts/get":              {owner: ownCatalog, nameMember: "name", inputRequired: true, serve: (*Server).servePromptGet},
		"completion/complete":      {owner: ownCatalog, serve: (*Server).serveComplete},

		// Removed in 2026-07-28; a 2025-era session has them from the
		// sidecar (legacyserve.go, sidecar/legacy).
		"initialize":            {owner: ownSidecar, era: eraLegacy, legacyServe: (*Server).serveInitialize},
		"ping":                  {owner: ownSidecar, era: eraLegacy, legacyServe: (*Server).serveEmpty},
		"logging/setLevel":      {owner: ownSidecar, era: eraLegacy, legacyServe: (*Server).serveSetLevel},
		"resources/subscribe":   {owner: ownSidecar, era: eraLegacy, legacyServe: (*Server).serveSubscribe},
		"resources/unsubscribe": {owner: ownSidecar, era: eraLegacy, legacyServe: (*Server).serveSubscribe},
		// The notifications clients send. None is forwarded
		// (serveNotification): a 2025-era client's notifications/cancelled
		// ends the named call of its own session (sidecar/legacy); a
		// 2026-07-28 client cancels by closing its request's stream.
		"notifications/cancelled":          {owner: ownSidecar, notification: true, legacyServe: (*Server).serveCancelled},
		"notifications/initialized":        {owner: ownSidecar, era: eraLegacy, notification: true},
		"notifications/progress":           {owner: ownSidecar, era: eraLegacy, notification: true},
		"notifications/roots/list_changed": {owner: ownSidecar, era: eraLegacy, notification: true},
		"notifications/tasks/status":       {owner: ownSidecar, era: eraLegacy, notification: true},
	}
}

func init() {
	for name, spec := range methods {
		spec.methodValue = []string{name}
	}
}

// methodOf returns the spec of a method (nil when the sidecar does not
// know it: such requests are forwarded).
func methodOf(name string) *methodSpec { return methods[name] }

// Metrics are the sidecar's Prometheus series (sidecar/metrics).
type Metrics = metrics.Metrics

// NewMetrics registers the sidecar's series in a new registry, the upstream
// duration's method label bounded to the table's methods of 2026-07-28
// (plus "other").
func NewMetrics() *Metrics {
	var labels []string
	for name, spec := range methods {
		if spec.era != eraLegacy {
			labels = append(labels, name)
		}
	}
	return metrics.New(labels)
}
