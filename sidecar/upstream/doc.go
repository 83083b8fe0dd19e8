// Package upstream is the room of the server behind the sidecar. Client
// speaks 2026-07-28 to it whatever it speaks itself: the discover cache and
// readiness, whole-list reads, and by default a transport that finds out
// what the server speaks and translates for a 2025-era one (a pool of
// upstream sessions, the input relay of its server-to-client requests,
// subscriptions/listen served from its GET stream); the stdio bridge
// (sidecar/stdio) is reached the same way. Relay keeps the sidecar's own
// listen stream open on it and publishes what it hears.
//
// It must not know the method table, the catalog or client sessions: what
// it relays goes to a Publisher (the hub, or the overlay), what it counts
// to an Observer.
package upstream
