package sidecar

import (
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Subscription limits. Subscriptions are held in memory for as long as their session or stream
// lives, and anyone who reaches the port may open sessions and streams, so every one is bounded:
// per URI, per listen stream, per 2025-era session (sidecar/legacy), and per replica (every
// session's and stream's together, which also bounds the union of URIs the relay sends
// upstream).
const (
	// MaxURIBytes bounds one subscribed resource URI, as the MCPResource CRD bounds spec.uri.
	MaxURIBytes = 2048
	// MaxStreamSubscriptions and MaxStreamSubscriptionBytes bound the URIs one listen names.
	MaxStreamSubscriptions     = 1024
	MaxStreamSubscriptionBytes = 256 << 10
)

// uriError is the answer to a subscription URI over MaxURIBytes.
func uriError(status int) *wire.Error {
	return wire.NewError(status, wire.CodeInvalidParams, "Invalid params: a resource URI exceeds "+strconv.Itoa(MaxURIBytes)+" bytes")
}

// Connection and request limits.
const (
	// DefaultBodyReadTimeout bounds reading one request body (--body-read-timeout): a client
	// that sends headers and then not its body would hold a goroutine and a connection forever.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultMaxInflightRequests caps the POSTs being served at once, listen streams aside
	// (--max-inflight-requests).
	DefaultMaxInflightRequests = 1024
	// BusyRetryAfter is the Retry-After of a 503 past a connection or request cap: long enough
	// for the requests in progress to finish, short enough for a caller's retry loop.
	BusyRetryAfter = "1"
)

// errBusy is the answer past --max-inflight-requests: 503 with Retry-After (RFC 9110 §15.6.4,
// a temporary overload), and -32603, the spec's code for a server-side failure, without an id
// (the body was not read).
func errBusy() *wire.Error {
	return wire.NewError(503, wire.CodeInternalError, "Internal error: too many requests in progress; retry")
}
