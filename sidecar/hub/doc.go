// Package hub is the stream room: it owns every open listen stream (a
// 2026-07-28 subscriptions/listen, or a 2025-era session's GET stream), the
// indexes by change kind, resource URI and caller, the fan-out of a change
// to the streams that asked for it, keepalive, expiry at the end of a
// caller's authorization, the replica's subscription budget, the drain's
// EndAll, and the events that open and end a stream (its acknowledgement,
// its complete result, the 2025-era retry hint).
//
// It must not know HTTP routing, the method table, the catalog or the
// upstream: a stream's transport is a FrameWriter the caller attaches, what
// it counts goes to an Observer, and its spans start through a Tracer.
package hub
