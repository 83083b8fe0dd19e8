// Package legacy is the 2025-era client generation (Streamable HTTP
// 2025-11-25, 2025-06-18, 2025-03-26): a client that speaks it is served
// through the same request path and choke point as a 2026-07-28 one, after
// this room turned its request into the modern shape.
//
// It owns the Room, the handle package sidecar holds: the self-contained
// session ids (session.go) and this replica's state of each session (its
// subscriptions, log level and GET streams, charged to the hub's budget);
// the translation into the modern shape and back (translate.go: the _meta
// claim, the Mcp-* headers, the legacy result shape); the Mcp-Param-*
// headers a translated tools/call needs, from the upstream tools'
// x-mcp-header annotations (params.go); and, for a call in flight, the
// client's notifications/cancelled and the relay of an upstream's
// input_required rounds as 2025-era server-to-client requests (input.go).
//
// It must not know the request path, the method table, the catalog or the
// upstream's generation: package sidecar decides which requests reach it
// and answers them; the room reads the upstream only for its tool list
// (sidecar/upstream) and holds streams only through sidecar/hub.
package legacy
