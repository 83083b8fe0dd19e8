// Package headers is which headers cross the sidecar's hop to the upstream and back: the
// hop-by-hop headers neither direction carries (Copy), the client's headers a request to the
// upstream gets, and the sidecar's own forwarding (X-Forwarded-*) and identity
// (X-Switchboard-*) headers, which replace any the client sent (ForUpstream). It knows no MCP
// and no routing; the caller's upstream credential is set after it (sidecar/credential).
package headers

import (
	"net"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// IsHop reports the headers that are not forwarded in either
// direction (RFC 9110 §7.6.1), nor are Host (the upstream's own is used),
// Content-Length (recomputed) and Accept-Encoding (the localhost hop is
// never compressed). Keys arrive canonical from net/http's parsers.
func IsHop(canonicalKey string) bool {
	switch canonicalKey {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding", "Host":
		return true
	}
	return false
}

// Copy copies src into dst without the hop-by-hop headers and those
// that src's Connection header names.
func Copy(dst, src http.Header) {
	for k, vs := range src {
		if !IsHop(k) {
			dst[k] = vs
		}
	}
	for _, f := range src["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
}

// isForwarding reports the headers that tell a server who its client is. The upstream
// listens behind loopback, and servers commonly trust these from 127.0.0.1 (uvicorn's
// forwarded_allow_ips, say), so a client's own would choose the address the upstream sees.
func isForwarding(canonicalKey string) bool {
	switch canonicalKey {
	case "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip":
		return true
	}
	return false
}

// The X-Forwarded-Proto values, shared by every request: header values are only read or
// replaced on the way to the upstream, never written in place (and a full slice is copied,
// not extended, by append).
var (
	protoHTTP  = []string{"http"}
	protoHTTPS = []string{"https"}
)

// isIdentity reports the identity headers, in any spelling.
func isIdentity(key string) bool {
	return len(key) >= len(protocol.IdentityHeaderPrefix) && strings.EqualFold(key[:len(protocol.IdentityHeaderPrefix)], protocol.IdentityHeaderPrefix)
}

// ForUpstream fills out's header (a request to the upstream made for in) in one pass
// over the client's: everything but the hop-by-hop headers, those in's Connection header
// names, the client's forwarding headers and its identity headers; then the sidecar's own.
//
// Forwarding: X-Forwarded-For = the address of the peer whose connection the sidecar
// accepted, X-Forwarded-Host = the Host it asked for, X-Forwarded-Proto = http or https. This
// is what Envoy with use_remote_address and no trusted hops takes as the client, and what
// net/http/httputil's ReverseProxy sends with Rewrite and SetXForwarded; unlike Envoy the
// client's list is dropped, not appended to, since servers differ in which end of it they read.
//
// Identity: the verified caller's (setIdentity), never the client's.
func ForUpstream(out, in *http.Request) {
	dst := out.Header
	for k, vs := range in.Header {
		if !IsHop(k) && !isForwarding(k) && !isIdentity(k) {
			dst[k] = vs
		}
	}
	for _, f := range in.Header["Connection"] {
		for name := range strings.SplitSeq(f, ",") {
			dst.Del(strings.TrimSpace(name))
		}
	}
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		dst["X-Forwarded-For"] = []string{ip}
	}
	dst["X-Forwarded-Host"] = []string{in.Host}
	if in.TLS != nil {
		dst["X-Forwarded-Proto"] = protoHTTPS
	} else {
		dst["X-Forwarded-Proto"] = protoHTTP
	}
	setIdentity(dst, authn.FromContext(in.Context()))
}

// setIdentity sets the caller's identity headers on h (a request to the upstream, with the
// client's identity headers left out: ForUpstream) when the caller is known.
func setIdentity(h http.Header, id *authn.Identity) {
	if id == nil {
		return
	}
	h[protocol.HeaderSubject] = []string{id.Subject}
	if len(id.Groups) > 0 {
		h[protocol.HeaderGroups] = id.Groups
	}
	if id.ServiceAccount != "" {
		h[protocol.HeaderServiceAccount] = []string{id.ServiceAccount}
	}
	if id.SPIFFE != "" {
		h[protocol.HeaderSPIFFE] = []string{id.SPIFFE}
	}
	h[protocol.HeaderIssuer] = []string{id.Issuer}
}
