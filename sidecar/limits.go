package sidecar

import (
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Subscription limits. Subscriptions are held in memory for as long as their session or stream
// lives, and anyone who reaches the port may open sessions and streams, so every one is bounded:
// per URI, per listen stream, per 2025-era session (sidecar/legacy), and per replica (every
// session's and stream's together, which also bounds the union of URIs the relay sends
// upstream).
const (
	// MaxURIBytes bounds one subscribed resource URI, as the MCPResource CRD bounds spec.uri.
	MaxURIBytes = 2048
	// MaxStreamSubscriptions and MaxStreamSubscriptionBytes bound the URIs one listen names.
	MaxStreamSubscriptions     = 1024
	MaxStreamSubscriptionBytes = 256 << 10
)

// uriError is the answer to a subscription URI over MaxURIBytes.
func uriError(status int) *wire.Error {
	return wire.NewError(status, wire.CodeInvalidParams, "Invalid params: a resource URI exceeds "+strconv.Itoa(MaxURIBytes)+" bytes")
}

// Connection and request limits.
const (
	// DefaultBodyReadTimeout bounds reading one request body (--body-read-timeout): a client
	// that sends headers and then not its body would hold a goroutine and a connection forever.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultExtraConnections is what --max-connections adds, by default, to
	// --max-listen-streams: every listen stream (and 2025-era GET stream) is a connection, and
	// requests need theirs.
	DefaultExtraConnections = 2048
	// DefaultMaxInflightRequests caps the POSTs being served at once, listen streams aside
	// (--max-inflight-requests).
	DefaultMaxInflightRequests = 1024
	// busyRetryAfter is the Retry-After of a 503 past a connection or request cap: long enough
	// for the requests in progress to finish, short enough for a caller's retry loop.
	busyRetryAfter = "1"
	// refuseWriteTimeout bounds writing the 503 to a connection past the cap (it must not hold
	// the accept loop).
	refuseWriteTimeout = 50 * time.Millisecond
)

// errBusy is the answer past --max-inflight-requests: 503 with Retry-After (RFC 9110 §15.6.4,
// a temporary overload), and -32603, the spec's code for a server-side failure, without an id
// (the body was not read).
func errBusy() *wire.Error {
	return wire.NewError(503, wire.CodeInternalError, "Internal error: too many requests in progress; retry")
}

// refusedConnection is what a connection past --max-connections gets before it is closed.
const refusedConnection = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + busyRetryAfter +
	"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// limitListener caps the connections open on the MCP port at once; past the cap a new
// connection gets a bare 503 and is closed at once (instead of waiting in the accept queue,
// as golang.org/x/net/netutil.LimitListener would make it), so a client behind a Service
// retries and may reach another replica.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	m    *Metrics
}

func newLimitListener(ln net.Listener, max int, m *Metrics) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), m: m}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.m.connectionsRefused.Inc()
			_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
			_, _ = c.Write([]byte(refusedConnection))
			_ = c.Close()
			continue
		}
		l.m.connections.Inc()
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// limitedConn gives its place back when closed (by net/http, or by the hub for a hijacked
// stream).
type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.connections.Dec()
	})
	return err
}

// CloseWrite keeps net/http's graceful close (it half-closes TCP connections).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
