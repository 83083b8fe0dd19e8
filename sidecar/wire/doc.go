// Package wire is the sidecar's leaf room: the bytes of the protocol, with
// no MCP method semantics. It owns JSON-RPC error responses and their codes,
// the exact-key scanner over JSON objects (read and splice members without
// re-encoding the rest), the strict-JSON checks that refuse a body two
// decoders could read differently, the bounded Server-Sent Events reader,
// and the few header helpers the transport and the upstream client share.
//
// It must not know the method table, the catalog, sessions, streams or the
// upstream: it imports nothing of the module.
package wire
