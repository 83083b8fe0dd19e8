// Package audit is the sidecar's audit trail: one JSON line per audited request, in a stable,
// documented schema (docs/audit.md), written by a sink that never delays a call.
//
// It owns the record's shape, the redaction of tool arguments, the bounded queue in front of
// the writer, and the Trail: the sinks and the redactor the catalog's Audit names (its file in
// the audit directory, stdout, an OTLP endpoint), swapped live when the Audit changes. It knows
// nothing of HTTP, of MCP methods beyond their names, or of how a decision was made: the
// request path fills a Record and hands it to the Trail's current State (State.Emit).
package audit

import (
	"encoding/json"
	"time"
)

// Schema names the record format; it changes only with an incompatible change to it.
const Schema = "audit.switchboard.dev/v1"

// Record is one audited request.
type Record struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// Time is when the request arrived, UTC.
	Time time.Time `json:"time"`
	// Server is the MCPServer the sidecar fronts.
	Server Server `json:"server"`
	// Pod is the pod that served the request.
	Pod string `json:"pod,omitempty"`
	// Caller is the verified caller; absent when the server does not authenticate callers.
	Caller *Caller `json:"caller,omitempty"`
	// ProtocolVersion is the client's protocol revision (2026-07-28, 2025-11-25, …).
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Method is the JSON-RPC method (tools/call, resources/read, prompts/get, …).
	Method string `json:"method"`
	// Name is the tool or prompt name, or the resource URI, as the client sent it.
	Name string `json:"name,omitempty"`
	// UpstreamName is the same as the upstream server saw it (after a rename); absent when
	// the request never reached the upstream.
	UpstreamName string `json:"upstreamName,omitempty"`
	// CatalogRevision is the catalog revision the decision was taken on.
	CatalogRevision string `json:"catalogRevision,omitempty"`
	// Decision is whether the sidecar let the request through, and why.
	Decision Decision `json:"decision"`
	// Outcome is how the request ended.
	Outcome Outcome `json:"outcome"`
	// DurationMs is from the request's arrival to its answer, in milliseconds.
	DurationMs float64 `json:"durationMs"`
	// RequestID is the JSON-RPC id, as the client sent it.
	RequestID json.RawMessage `json:"requestId,omitempty"`
	// TraceID is the W3C trace id of the request's span, when tracing is on.
	TraceID string `json:"traceId,omitempty"`
	// Arguments are the call's arguments, redacted (Arguments), when the server's audit
	// settings ask for them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsTruncated says Arguments were cut to fit the record's bound.
	ArgumentsTruncated bool `json:"argumentsTruncated,omitempty"`
	// DroppedBefore counts the records the sink dropped (full or slow) since the last one it
	// wrote.
	DroppedBefore uint64 `json:"droppedBefore,omitempty"`
}

// Server names an MCPServer.
type Server struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Caller is a verified caller, as the sidecar's authentication made it.
type Caller struct {
	// Subject is the caller's stable name: system:serviceaccount:<ns>:<name>, or the mapped
	// OIDC username.
	Subject string `json:"subject"`
	// ServiceAccount is <namespace>/<name> for a ServiceAccount token.
	ServiceAccount string   `json:"serviceAccount,omitempty"`
	Groups         []string `json:"groups,omitempty"`
	Issuer         string   `json:"issuer,omitempty"`
}

// Decision is what the choke point decided.
type Decision struct {
	// Allowed is whether the request was let through.
	Allowed bool `json:"allowed"`
	// Reason is one of the Reason* constants.
	Reason string `json:"reason"`
	// Policy names the MCPAccessPolicy (namespace/name) and rule index that granted the
	// request, when one did.
	Policy string `json:"policy,omitempty"`
}

// Decision reasons.
const (
	// ReasonAllowed: the catalog serves the name and the caller may use it (no access policy
	// targets the server, or one grants it).
	ReasonAllowed = "Allowed"
	// ReasonNotGranted: the catalog serves the name, but no access policy grants it to the
	// caller. The client was told the name is unknown.
	ReasonNotGranted = "NotGranted"
	// ReasonUndeclared: the catalog does not serve the name (undeclared or disabled).
	ReasonUndeclared = "Undeclared"
	// ReasonWithheld: the catalog serves the tool, but its upstream definition differs from
	// its pin (toolPinning Enforce).
	ReasonWithheld = "Withheld"
	// ReasonInvalid: the request was malformed and refused before any decision on a name.
	ReasonInvalid = "Invalid"
	// ReasonNoToken: the server authenticates callers and the request had no bearer token
	// (HTTP 401; the body was not read).
	ReasonNoToken = "NoToken"
	// ReasonInvalidToken: the request's bearer token was not valid (expired, another
	// audience, an unknown issuer, a deleted ServiceAccount…; HTTP 401, the body not read).
	ReasonInvalidToken = "InvalidToken"
)

// Outcome is how a request ended.
type Outcome struct {
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// ErrorCode is the JSON-RPC error code, for StatusError.
	ErrorCode int `json:"errorCode,omitempty"`
	// IsError is a tool result's isError (a tool that ran and reported failure).
	IsError bool `json:"isError,omitempty"`
	// InputRequiredRounds counts the input_required results before the final one (a
	// 2025-era client's call, whose input the sidecar relays).
	InputRequiredRounds int `json:"inputRequiredRounds,omitempty"`
	// InputRequired says the result is input_required (a 2026-07-28 client answers it with a
	// new request, which has a record of its own).
	InputRequired bool `json:"inputRequired,omitempty"`
}

// Outcome statuses.
const (
	StatusResult    = "result"
	StatusError     = "error"
	StatusCancelled = "cancelled"
)
