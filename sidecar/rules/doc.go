// Package rules is the catalog's pure rules: how the upstream's lists and
// the declared catalog merge into the lists a client sees (overrides,
// renames, disabled and hidden entries, pinning's withheld tools), where a
// tools/call is routed, how a prompt is rendered, how pages and cursors
// are cut, and what the sidecar adds to the upstream's capabilities
// (MergedCapabilities). EmptyCatalog is what is served before the first
// revision.
//
// It owns no state and does no I/O: it must not know the live overlay, the
// upstream, streams or HTTP. It imports internal/catalog, sidecar/protocol
// and sidecar/wire only.
package rules
