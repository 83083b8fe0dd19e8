// Package sidecar is the Switchboard MCP sidecar: the Streamable HTTP front
// of one MCP server container, serving protocol revision 2026-07-28 and the
// 2025-era revisions, with the live catalog enforced for every client.
//
// # The rooms
//
// The sidecar is a pipeline of rooms, one package each. Imports point one
// way, down this list: a room may import the rooms below it, never one
// above (test/layering enforces it from docs/architecture.md).
//
//   - sidecar (this package): the request path and the Server that holds
//     the rooms' handles. path.go reads top to bottom as one request's walk:
//     transport guards → decode → client generation → caller identity →
//     the method table's decision at the one choke point (dispatch) →
//     catalog → upstream → stamping → response. methods.go is the one
//     table of every MCP method; the catalog-owned methods, discover,
//     listen and the 2025-era client adapter are served here.
//   - sidecar/app: the process: flags turned into Options, listeners, the
//     admin port, drain, metrics registry, tracing set-up, GC tuning.
//   - sidecar/upstream: the server behind the sidecar, always spoken to in
//     2026-07-28: the discover cache and readiness, and the transports that
//     translate for a 2025-era HTTP server (session pool, input relay, its
//     GET stream) or a stdio child; the relay of its listen stream.
//   - sidecar/hub: the open listen streams: fan-out, keepalive, expiry,
//     subscriptions accounting and the drain's EndAll. Knows no HTTP
//     routing and no catalog.
//   - sidecar/rules: the catalog's pure rules: merging the upstream's lists
//     with the declared catalog, overrides, pinning, routing tool calls,
//     rendering prompts, pages and cursors. No I/O.
//   - sidecar/wire: the leaf: JSON-RPC errors and codes, the exact-key
//     scanner and the strict-JSON checks, the SSE reader, header helpers.
//     No MCP method semantics.
//
// Beside the rooms: access, a caller's grant under the catalog's access
// policies (pure); authn, the verified caller; stdio, the stdio bridge
// (`sidecar stdio`); procs, how many OS threads run Go code (one for
// requests, more for large fan-outs and queueing load), used by the sidecar
// and the bridge. docs/sidecar.md has the behaviour.
package sidecar
