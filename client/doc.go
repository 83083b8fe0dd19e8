// Package client is an MCP client for agents whose cache of a server's tools, prompts, resources,
// resource templates and resource contents is never stale.
//
// One [Client] talks to one MCP endpoint (a Switchboard sidecar, or any MCP server). It speaks
// protocol revision 2026-07-28 and falls back to 2025-11-25 (with its GET stream) when the server
// is older. Reads go through a cache that follows the protocol's own rules:
//
//   - A listen stream (subscriptions/listen) is opened at once; its acknowledgement comes first,
//     and only then is anything read (the baseline), so no change can fall between the two.
//   - A result is fresh for its ttlMs; ttlMs 0 (or absent) is never served from the cache.
//   - Results with cacheScope "private" are kept per credential (the Authorization header value
//     the read used, see [WithCredential]) and never served to another credential.
//   - notifications/*/list_changed and notifications/resources/updated invalidate their key at
//     once. A burst of invalidations of one key becomes one change, and at most one read per key
//     and credential runs at a time (callers asking meanwhile share it).
//   - The generation guard: every invalidation of a key bumps its generation, and a read that
//     began before an invalidation is returned to its caller but never stored. This closes the
//     race in go-sdk v1.8.0's own cache, which stores a list read after a list_changed that
//     arrived while the read was in flight and then serves the old list until its TTL runs out.
//   - A listen that ends with its graceful {"resultType":"complete"} result (a replica draining)
//     is opened again at once, after a random delay within Options.RelistJitter, so that behind
//     a Service the clients of a draining replica spread over the others. A stream that drops is
//     reopened with exponential backoff. After either, the client re-baselines: everything is
//     invalidated, because changes made meanwhile were not seen, and what is in use is read
//     again.
//
// Servers that authenticate their callers (the MCP authorization spec) get a bearer token on
// every request: [Options].Token takes a [TokenSource] ([StaticToken], [TokenFile] for a
// projected ServiceAccount token that rotates, or a func). A 401 is an [*UnauthorizedError]
// naming the server's resource metadata URL. A listen stream the server ends because the token
// ended is an EventDropped whose Err is an [*AuthorizationEndedError]; the reconnect asks the
// token source again.
//
// Callers observe this through [Hooks]: OnChange after an invalidation (an agent re-assembles its
// context there), OnEvent for every listen event (acknowledgement, notification, complete,
// re-listen, drop, reconnect), and [Metrics] for counters.
//
// What the package takes from github.com/modelcontextprotocol/go-sdk: the protocol types (tools,
// prompts, resources, capabilities), the version negotiation and legacy (2025-11-25) session with
// its GET stream, and tools/call and prompts/get (with their multi-round-trip handling). What it
// owns: the cacheable reads at 2026-07-28 and the listen stream, because go-sdk v1.8.0's client
// caches those reads racily, ignores cacheScope, opens its listen without waiting for the
// acknowledgement and neither notices its complete result nor reconnects.
package client
