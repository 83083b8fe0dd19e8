package sidecar

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCheckHostOrigin(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8090}
	pod := &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8090}
	cases := []struct {
		name   string
		opts   Options
		local  net.Addr
		host   string
		origin string
		ok     bool
	}{
		{"loopback host on loopback", Options{}, loop, "127.0.0.1:8090", "", true},
		{"localhost name", Options{}, loop, "localhost:8090", "", true},
		{"IPv6 loopback", Options{}, loop, "[::1]:8090", "", true},
		{"foreign host on loopback (DNS rebinding)", Options{}, loop, "evil.example.com", "", false},
		{"foreign host on loopback, protection off", Options{DisableLocalhostProtection: true}, loop, "evil.example.com", "", true},
		{"service name on the pod address", Options{}, pod, "mcp.ns.svc:8090", "", true},
		{"allowed hosts refuse others", Options{AllowedHosts: []string{"mcp.ns.svc"}}, pod, "other.ns.svc:8090", "", false},
		{"allowed host by name", Options{AllowedHosts: []string{"mcp.ns.svc"}}, pod, "mcp.ns.svc:8090", "", true},
		{"allowed host by host:port", Options{AllowedHosts: []string{"mcp.ns.svc:8090"}}, pod, "mcp.ns.svc:8090", "", true},
		{"foreign origin", Options{}, loop, "127.0.0.1:8090", "http://evil.example.com", false},
		{"null origin", Options{}, loop, "127.0.0.1:8090", "null", false},
		{"loopback origin", Options{}, loop, "127.0.0.1:8090", "http://localhost:3000", true},
		{"allowed origin", Options{AllowedOrigins: []string{"https://app.example.com"}}, pod, "mcp", "https://app.example.com", true},
		{"wildcard origin", Options{AllowedOrigins: []string{"*"}}, pod, "mcp", "https://x.example", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{opts: c.opts}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, c.local))
			e := s.checkHostOrigin(r)
			if (e == nil) != c.ok {
				t.Fatalf("got %v, want ok=%v", e, c.ok)
			}
			if e != nil && e.Status != http.StatusForbidden {
				t.Errorf("status %d", e.Status)
			}
		})
	}
}
