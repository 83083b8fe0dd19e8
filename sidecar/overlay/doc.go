// Package overlay is the live catalog: the last good catalog revision, its
// merge with the upstream's four lists, the diff of every change (a new
// revision, changed ConfigMap or Secret content, an upstream notification)
// into exactly the notifications a caller could observe, the propagation
// report, the cache hints the catalog sets, and the observed digests that
// tool pinning checks.
//
// It owns no I/O of its own: the upstream's lists are read through
// sidecar/upstream's client, referenced ConfigMaps and Secrets through a
// ContentSource, and changes go out through a Publisher (the hub). Its
// rules are sidecar/rules'; what a caller may see is sidecar/access'.
//
// It must not know HTTP routing, the method table, the request path or the
// client generations: the sidecar asks it for the catalog, hints, content
// and digests, and the process (sidecar/app) feeds it revisions and runs it.
package overlay
