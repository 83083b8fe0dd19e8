// Package guard holds the transport guards a request to the MCP port passes
// before its body is decoded: the Host and Origin checks that protect a
// server on loopback from DNS rebinding (spec §2.5), and the Accept a POST
// must carry.
//
// It knows HTTP only: no MCP message, no method table, no caller. The
// request path (sidecar/path.go) says when each guard runs and with which
// allowed hosts and origins (the Server's options).
package guard

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// AcceptsBoth reports whether the Accept header takes both JSON and an
// event stream (spec §2.1: a POST must accept both).
func AcceptsBoth(h http.Header) bool {
	var j, e bool
	for _, v := range h["Accept"] {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			switch {
			case strings.EqualFold(mt, "application/json"):
				j = true
			case strings.EqualFold(mt, "text/event-stream"):
				e = true
			case mt == "*/*":
				j, e = true, true
			}
		}
	}
	return j && e
}

// Allowed are the Host and Origin values accepted besides loopback.
type Allowed struct {
	// Hosts are Host names (or host:port).
	Hosts []string
	// Origins are Origin values; "*" accepts any.
	Origins []string
	// AnyHost accepts every Host (localhost protection off).
	AnyHost bool
}

// HostOrigin is the DNS-rebinding protection (spec §2.5): a present
// Origin must be allowed (403), and so must the Host.
func HostOrigin(r *http.Request, allowed Allowed) *wire.Error {
	host := r.Host
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	hostOK := false
	switch {
	case isLoopbackName(hostname):
		hostOK = true
	case len(allowed.Hosts) > 0:
		for _, a := range allowed.Hosts {
			if strings.EqualFold(a, hostname) || strings.EqualFold(a, host) {
				hostOK = true
				break
			}
		}
	case allowed.AnyHost:
		hostOK = true
	default:
		// Localhost protection: a request that arrived on a loopback
		// address must name a loopback host.
		hostOK = true
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la != nil {
			if ap, err := netipAddrPort(la.String()); err == nil && ap {
				hostOK = false
			}
		}
	}
	if !hostOK {
		return wire.NewError(http.StatusForbidden, wire.CodeInvalidRequest, "Forbidden: Host "+strconv.Quote(host)+" is not allowed")
	}
	origin := wire.HeaderValue(r.Header, "Origin")
	if origin == "" {
		return nil
	}
	for _, a := range allowed.Origins {
		if a == "*" || strings.EqualFold(a, origin) {
			return nil
		}
	}
	if u, err := url.Parse(origin); err == nil && (u.Scheme == "http" || u.Scheme == "https") && isLoopbackName(u.Hostname()) {
		return nil
	}
	return wire.NewError(http.StatusForbidden, wire.CodeInvalidRequest, "Forbidden: Origin "+strconv.Quote(origin)+" is not allowed")
}

// isLoopbackName reports whether a host name is localhost or a loopback IP.
func isLoopbackName(h string) bool {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// netipAddrPort reports whether an address string is on a loopback IP.
func netipAddrPort(a string) (bool, error) {
	h, _, err := net.SplitHostPort(a)
	if err != nil {
		return false, err
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback(), nil
}
