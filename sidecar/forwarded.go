package sidecar

import (
	"net"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/credential"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// isForwardingHeader reports the headers that tell a server who its client is. The upstream
// listens behind loopback, and servers commonly trust these from 127.0.0.1 (uvicorn's
// forwarded_allow_ips, say), so a client's own would choose the address the upstream sees.
func isForwardingHeader(canonicalKey string) bool {
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

// isIdentityHeader reports the identity headers (auth.go), in any spelling.
func isIdentityHeader(key string) bool {
	return len(key) >= len(protocol.IdentityHeaderPrefix) && strings.EqualFold(key[:len(protocol.IdentityHeaderPrefix)], protocol.IdentityHeaderPrefix)
}

// setUpstreamHeaders fills out's header (a request to the upstream made for in) in one pass
// over the client's: everything but the hop-by-hop headers, those in's Connection header
// names, the client's forwarding headers and its identity headers; then the sidecar's own.
//
// Forwarding: X-Forwarded-For = the address of the peer whose connection the sidecar
// accepted, X-Forwarded-Host = the Host it asked for, X-Forwarded-Proto = http or https. This
// is what Envoy with use_remote_address and no trusted hops takes as the client, and what
// net/http/httputil's ReverseProxy sends with Rewrite and SetXForwarded; unlike Envoy the
// client's list is dropped, not appended to, since servers differ in which end of it they read.
//
// Identity: the verified caller's (setIdentityHeaders), never the client's.
func setUpstreamHeaders(out, in *http.Request) {
	dst := out.Header
	for k, vs := range in.Header {
		if !isHopHeader(k) && !isForwardingHeader(k) && !isIdentityHeader(k) {
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
	setIdentityHeaders(dst, authn.FromContext(in.Context()))
}

// credentialFor resolves the upstream credential of the caller of r (sidecar/credential) from
// the live catalog and the watched Secret: none when the catalog asks for none, an error (the
// request must not reach the upstream) when the caller has none or its key cannot be read.
// The credential's Set replaces the client's header of its name after setUpstreamHeaders.
func (s *Server) credentialFor(r *http.Request) (credential.Credential, *wire.Error) {
	if s.opts.Overlay == nil {
		return credential.Credential{}, nil
	}
	c, _ := s.opts.Overlay.Catalog()
	if c.Auth == nil || c.Auth.UpstreamCredentials == nil {
		return credential.Credential{}, nil
	}
	return credential.For(c, s.opts.Overlay.Contents(), authn.FromContext(r.Context()))
}
