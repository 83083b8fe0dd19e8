package hub

import "github.com/switchboard-mcp/switchboard/sidecar/wire"

// ErrSubscriptionLimit is the answer when the replica holds all the subscriptions it may: the
// answer past --max-listen-streams (and the TypeScript SDK's past its listen cap).
func ErrSubscriptionLimit(status int) *wire.Error {
	return wire.NewError(status, wire.CodeInternalError, "Internal error: Subscription limit reached")
}

// Reasons a subscription is refused, by the hub or by the rooms whose bounds
// share its budget (the reason label of subscriptions_refused_total).
const (
	RefusedURI     = "uri"     // a URI over MaxURIBytes
	RefusedStream  = "stream"  // a listen over MaxStreamSubscriptions(Bytes)
	RefusedSession = "session" // a session over MaxSessionSubscriptions(Bytes)
	RefusedReplica = "replica" // the replica's --max-subscriptions / --max-subscription-bytes
)
