// Package sidecar is the Switchboard MCP sidecar: the Streamable HTTP front
// of one MCP server container, serving protocol revision 2026-07-28 and the
// 2025-era revisions, with the live catalog enforced for every client.
//
// Files by concern (docs/sidecar.md has the behaviour):
//
//   - methods.go: the one table describing every MCP method (owner, era,
//     cacheable, name member, change kind, list, handlers).
//   - transport.go: the HTTP endpoint and its guards (body bounds,
//     Host/Origin, Content-Type, Accept) and the choke point,
//     Server.dispatch, that every request of every generation passes.
//   - validate.go, rpc.go, jsonscan.go: the envelope parser, the header and
//     _meta checks, JSON-RPC errors, the exact-key scanner.
//   - legacy.go: 2025-era clients: the session methods the sidecar answers
//     and the translation into the modern shape before the choke point.
//   - forward.go: forwarding to the upstream, relaying SSE, stamping.
//   - discover.go: server/discover and the merged capabilities.
//   - listen.go: subscriptions/listen and the listen-stream transport
//     (hijacked HTTP/1.1 chunked writer, HTTP/2 fallback).
//   - hub.go: the open streams, fan-out, keepalive and EndAll (drain).
//   - catalogserve.go: the methods the catalog owns (lists, tools/call
//     routing, resources/read, prompts/get, completion/complete) and hints.
//   - authz.go: what the caller may use (package access decides from the
//     catalog's Access and the verified caller) and the refusals, which
//     look like unknown names.
//   - overlay.go, merge.go: the live catalog, its diff and its pure rules.
//   - sources.go: where catalogs and resource contents come from (ConfigMap
//     or file, watched ConfigMaps/Secrets) and the propagation report.
//   - upstream.go, relay.go, sse.go: the client towards the MCP server
//     (discover cache, readiness), its listen stream, the SSE reader.
//   - server.go, app.go, metrics.go, gcfloor.go: the Server, the process
//     (listeners, admin port, drain), metrics, GC tuning.
//
// Subpackages: access, a caller's grant under the catalog's access policies
// (pure); authn, the verified caller; stdio, the stdio bridge (`sidecar stdio`); procs, how many
// OS threads run Go code (one for requests, more for large fan-outs and
// queueing load), used by the sidecar and the bridge.
package sidecar
