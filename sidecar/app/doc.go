// Package app is the sidecar's process room: what turns flags into a
// running sidecar. It owns the command line's Config and its defaults, the
// MCP listener and its connection cap, the admin port (health, readiness,
// metrics, /drain, /drain/wait, /drain/status), the graceful drain and the
// recovery of a replica that was drained but not terminated, the tracing
// set-up, the catalog's sources (the ConfigMap or file, the ConfigMaps and
// Secrets behind resources, the propagation report, the TokenReview
// client), the `sidecar drain` command and the GC floor.
//
// It sits above the request path: it builds a sidecar.Server and drives it
// through its exported handle (ServeHTTP, Draining, AbortInflight,
// Inflight). It must not know how a request is served; nothing in the
// sidecar imports it, only cmd/sidecar and the benchmarks.
package app
