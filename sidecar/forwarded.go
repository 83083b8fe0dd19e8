package sidecar

import (
	"net/http"
	"net/http/httputil"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
)

// forwardingHeaders tell a server who its client is. The upstream listens
// behind loopback, and servers commonly trust these from 127.0.0.1
// (uvicorn's forwarded_allow_ips, say), so a client's own would choose the
// address the upstream sees.
var forwardingHeaders = [...]string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// setForwarded replaces the client's forwarding headers on out (a request
// to the upstream made for in) with the sidecar's own: X-Forwarded-For = the
// address of the peer whose connection the sidecar accepted,
// X-Forwarded-Host = the Host it asked for, X-Forwarded-Proto = http or
// https. This is what Envoy with use_remote_address and no trusted hops
// takes as the client, and what net/http/httputil's ReverseProxy sends with
// Rewrite and SetXForwarded; unlike Envoy the client's list is dropped, not
// appended to, since servers differ in which end of it they read.
//
// It also replaces the client's identity headers (auth.go) with the verified caller's.
func setForwarded(out, in *http.Request) {
	for _, k := range forwardingHeaders {
		out.Header.Del(k)
	}
	(&httputil.ProxyRequest{In: in, Out: out}).SetXForwarded()
	setIdentityHeaders(out.Header, authn.FromContext(in.Context()))
}
