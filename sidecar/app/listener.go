package app

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar"
)

// Connection limits of the MCP port.
const (
	// DefaultExtraConnections is what --max-connections adds, by default, to
	// --max-listen-streams: every listen stream (and 2025-era GET stream) is a connection, and
	// requests need theirs.
	DefaultExtraConnections = 2048
	// refuseWriteTimeout bounds writing the 503 to a connection past the cap (it must not hold
	// the accept loop).
	refuseWriteTimeout = 50 * time.Millisecond
)

// refusedConnection is what a connection past --max-connections gets before it is closed.
const refusedConnection = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " + sidecar.BusyRetryAfter +
	"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

// limitListener caps the connections open on the MCP port at once; past the cap a new
// connection gets a bare 503 and is closed at once (instead of waiting in the accept queue,
// as golang.org/x/net/netutil.LimitListener would make it), so a client behind a Service
// retries and may reach another replica.
type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
	m    *sidecar.Metrics
}

func newLimitListener(ln net.Listener, max int, m *sidecar.Metrics) *limitListener {
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
			l.m.ConnectionRefused()
			_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
			_, _ = c.Write([]byte(refusedConnection))
			_ = c.Close()
			continue
		}
		l.m.ConnectionOpened()
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
		c.l.m.ConnectionClosed()
	})
	return err
}

// SyscallConn exposes the TCP connection's descriptor: stream.Conn.WatchClose watches a
// hijacked stream's client with it instead of a goroutine per stream.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoDescriptor
}

// errNoDescriptor: the connection under a limitedConn has no descriptor of its own.
var errNoDescriptor = errors.New("the connection has no file descriptor")

// CloseWrite keeps net/http's graceful close (it half-closes TCP connections).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
