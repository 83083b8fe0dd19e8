// Package sidecar is the Switchboard MCP sidecar: the Streamable HTTP front
// of one MCP server container, serving protocol revision 2026-07-28 and the
// 2025-era revisions, with the live catalog enforced for every client.
//
// # The rooms
//
// The sidecar is a pipeline of rooms, one package each. Imports point one
// way, down this list: a room may import the rooms below it, never one
// above (docs/architecture.md has the rules; TestImportsFollowTheMap
// enforces them).
//
//   - sidecar/app: the process, above the request path: the command line's
//     Config, listeners and the connection cap, the admin port (health,
//     readiness, metrics, /drain), the drain and its recovery, tracing
//     set-up, the catalog's sources (ConfigMap or file, the ConfigMaps and
//     Secrets resources read, the propagation report), `sidecar drain` and
//     the GC floor. It builds the Server and drives it through its exported
//     handle; nothing below imports it.
//   - sidecar (this package): the request path, the Server that holds the
//     rooms' handles, the method table, and what serves each method at the
//     path's end (the catalog's methods, forwarding, the 2025-era methods,
//     discover and listen), with the caller's identity, grant, audit record,
//     upstream credential, metrics and traces on the way. Knows nothing of
//     the process (flags, listeners, the admin port, the catalog's sources).
//   - sidecar/overlay: the live catalog: the last good revision, its merge
//     with the upstream's four lists (overlay.Lists, which the method table
//     points at), the diff of every change into the notifications each
//     caller could observe, the propagation report, the catalog's cache
//     hints, the digests tool pinning checks. No I/O of its own (the
//     upstream's lists through sidecar/upstream's client, ConfigMap and
//     Secret content through a ContentSource); knows no HTTP routing, no
//     method table, no client generation. What it counts goes to an
//     overlay.Observer (Metrics).
//   - sidecar/legacy: the 2025-era client generation, behind its Room
//     handle: session ids and this replica's state of each session
//     (subscriptions, log level, GET streams), the translation into the
//     modern shape and back, the Mcp-Param-* headers of translated calls,
//     cancellation and the input relay. Knows no request routing, no method
//     table and no catalog.
//   - sidecar/headers: which headers cross the hop to the upstream and
//     back: the hop-by-hop headers, the client's headers the upstream gets,
//     the sidecar's own forwarding and identity headers in place of any the
//     client sent. Knows no MCP and no routing.
//   - sidecar/credential: the caller's upstream credential: the catalog's
//     mapping of the verified caller to a key of a watched Secret, the
//     header the upstream gets it in, the 403 that names what to fix when
//     the caller has none. Knows no request routing and no method table.
//   - sidecar/upstream: the server behind the sidecar, always spoken to in
//     2026-07-28: the discover cache and readiness, the transports that
//     translate for a 2025-era server (session pool, input relay, its GET
//     stream), and the relay of the sidecar's listen stream on it.
//   - sidecar/hub: the open listen streams: fan-out, keepalive, expiry, the
//     replica's subscription budget, the drain's EndAll, and the events that
//     open and end a stream. Knows no HTTP
//     routing and no catalog: a stream's transport is a hub.FrameWriter,
//     what it counts goes to a hub.Observer (Metrics), its spans start
//     through a hub.Tracer (Tracing).
//   - sidecar/rules: the catalog's pure rules: merging the upstream's lists
//     with the declared catalog, overrides, pinning, routing tool calls,
//     rendering prompts, pages and cursors. No I/O.
//   - sidecar/decode: one message's checks before the method table: the
//     JSON-RPC envelope, the params member rule, Mcp-Method, Mcp-Name,
//     Mcp-Param-* and the version header against the body. Knows no method
//     table (the Mcp-Name member is given), no client generation, no
//     routing; the version policy stays with the request path.
//   - sidecar/guard: the transport guards before a body is decoded: Host
//     and Origin against DNS rebinding, a POST's Accept. HTTP only.
//   - sidecar/protocol: the names the rooms share (revision, Mcp-* and
//     X-Switchboard-* headers, method and notification names, change kinds).
//   - sidecar/wire: the leaf: JSON-RPC errors and codes, the exact-key
//     scanner and the strict-JSON checks, the SSE reader, header helpers.
//     No MCP method semantics.
//
// Beside them: metrics, the Prometheus series in their own registry (what
// the request path counts, the Observer of hub, overlay, legacy and
// upstream, the process's connections, report and drain; no HTTP routing,
// no method table: sidecar.NewMetrics gives it the method label's values);
// access, a caller's grant under the catalog's access policies
// (pure); authn, the verified caller; audit, the audit record, argument
// redaction, a sink that never delays a call and the Trail (the sinks the
// catalog's Audit names, swapped live); tracing, the tracer (OTLP
// set-up, sampling, trace context in and out, the fan-out's and the drain's
// spans, a request's span to its end (RequestWriter); the hub's Tracer); inflight, what the replica
// is serving (the in-flight cap's admitted POSTs, the requests a drain waits
// for, the draining flag, the drain budget's abort context); stream, the
// transports of the streams the sidecar holds open (a hijacked HTTP/1.1
// connection, chunked, or a parked handler; the hub's FrameWriter); stdio, the
// stdio bridge (`sidecar stdio`); procs, how many OS threads run Go code
// (one for requests, more for large fan-outs and queueing load).
// hub/hubtest, overlay/overlaytest and rules/rulestest hold what the tests
// of two rooms share.
//
// # Files of package sidecar, by concern
//
// docs/sidecar.md has the behaviour.
//
//   - path.go: the request path, top to bottom: caller identity, the
//     transport guards (body bounds, Host/Origin, Content-Type), decoding,
//     the client generation, and the choke point, Server.dispatch, that
//     every request of every generation passes. Its header lists where each
//     step lives.
//   - methods.go: the one table describing every MCP method (owner, era,
//     cacheable, name member, change kind, list, handlers), and the
//     metrics' method label values it gives sidecar/metrics (NewMetrics).
//   - validate.go: the request type, parseRequest (sidecar/decode reads
//     the envelope), and validate: the version policy and the order of the
//     header and _meta checks.
//   - auth.go, authz.go: who the caller is (package authn) and what it may
//     use (package access decides); refusals look like unknown names.
//   - auditing.go: the audit trail the catalog asks for: one record per
//     audited request, filled by the steps on the way and written when its
//     handler returns (to package audit's Trail).
//   - legacyserve.go: where the path meets sidecar/legacy: the methods the
//     sidecar answers for 2025-era clients, their GET streams and DELETE,
//     the translation before the choke point, a session's call through the
//     input rounds.
//   - catalogserve.go: the methods the catalog owns (lists, tools/call
//     routing, resources/read, prompts/get, completion/complete), answered
//     from sidecar/overlay's live catalog.
//   - discover.go, listen.go, notify.go: server/discover and the merged
//     capabilities (sidecar/rules); subscriptions/listen and a stream's
//     opening on its transport (sidecar/stream); the notifications clients
//     send.
//   - forward.go: forwarding to the upstream (through sidecar/upstream),
//     relaying SSE, stamping; the upstream request's headers come from
//     sidecar/headers, the caller's upstream credential from
//     sidecar/credential.
//   - server.go, tracing.go, limits.go: the Server (the rooms'
//     handles; the drain's exported handle on sidecar/inflight),
//     a request's span started with its attributes (sidecar/tracing
//     carries it to its end), request limits.
package sidecar
