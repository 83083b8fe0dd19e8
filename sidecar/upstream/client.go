package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/version"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Upstream limits.
const (
	// DefaultMaxResponseBytes bounds a JSON response or one SSE event the
	// sidecar reads from the upstream (it must hold them to stamp results).
	DefaultMaxResponseBytes = 32 << 20
	// upstreamMaxIdleConns is the keep-alive pool towards the upstream.
	upstreamMaxIdleConns = 512
	// upstreamDialTimeout bounds connecting to the upstream on localhost.
	upstreamDialTimeout = 5 * time.Second
	// DiscoverTimeout bounds the sidecar's own server/discover calls.
	DiscoverTimeout = 5 * time.Second
	// readyCacheFor is how long a readiness probe result is reused.
	readyCacheFor = time.Second
)

// ClientInfo identifies the sidecar's own requests to the upstream.
var ClientInfo, _ = json.Marshal(map[string]string{"name": "switchboard-sidecar", "version": version.Version})

// Client is the client side towards the MCP server container.
type Client struct {
	url      string
	client   *http.Client
	maxBytes int

	// info is the last server/discover result; swapped atomically.
	info atomic.Pointer[Info]

	// readyMu guards readyAt, readyErr and readyChecking (the readiness
	// probe cache; readyChecking: a check is running).
	readyMu       sync.Mutex
	readyChecking bool
	readyAt       time.Time
	readyErr      error
}

// Info is what the sidecar caches from the upstream's discover result.
type Info struct {
	Versions []string
	Caps     mcp.ServerCapabilities
	CapsRaw  json.RawMessage
	// ServerInfo (raw Implementation object, nil when absent) and
	// Instructions are what a 2025-era initialize result repeats.
	ServerInfo   json.RawMessage
	Instructions string
	// ProtocolVersion is the revision the sidecar speaks with the upstream:
	// the one a 2025-era upstream negotiated, else protocol.Version.
	ProtocolVersion string
}

// Transport is how the sidecar talks to the MCP server container.
// Every request it is given is a 2026-07-28 request (the _meta claim, the
// Mcp-* headers): a client's (modern, or 2025-era after the sidecar's legacy.go
// translated it, already routed through the catalog) or the sidecar's own
// (server/discover, list reads, its subscriptions/listen). It answers as a
// 2026-07-28 server would: JSON, or an SSE stream ending in the response
// (or, for subscriptions/listen, a stream of notifications).
// The default is plain HTTP to a server that speaks 2026-07-28; a server
// that speaks an older revision, or stdio, is reached through a transport
// that translates.
type Transport = http.RoundTripper

// New returns a client for the upstream MCP endpoint at url, over
// HTTP.
func New(url string, maxResponseBytes int) *Client {
	return NewWith(url, maxResponseBytes, nil)
}

// NewWith returns a client for the upstream MCP endpoint at url
// that sends every request through rt (plain HTTP when nil).
func NewWith(url string, maxResponseBytes int, rt Transport) *Client {
	if maxResponseBytes <= 0 {
		maxResponseBytes = DefaultMaxResponseBytes
	}
	tr := &http.Transport{
		Proxy:               nil, // localhost: never through a proxy
		DialContext:         (&net.Dialer{Timeout: upstreamDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        upstreamMaxIdleConns,
		MaxIdleConnsPerHost: upstreamMaxIdleConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // a localhost hop; and bodies must stay readable
		ForceAttemptHTTP2:   false,
	}
	if rt == nil {
		// Find out what the upstream speaks; 2025-era servers are served
		// through upstream sessions (legacy.go).
		rt = newGenerationTransport(tr, url, maxResponseBytes)
	}
	return &Client{
		url:      url,
		maxBytes: maxResponseBytes,
		client: &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// URL is the upstream's MCP endpoint.
func (u *Client) URL() string { return u.url }

// Do sends one request through the client's transport; redirects are not
// followed.
func (u *Client) Do(req *http.Request) (*http.Response, error) { return u.client.Do(req) }

// MaxBytes bounds a JSON response or one SSE event read from the upstream.
func (u *Client) MaxBytes() int { return u.maxBytes }

// SetLogger sets where the upstream transport logs what it finds out.
func (u *Client) SetLogger(l *slog.Logger) {
	if gt, ok := u.client.Transport.(*generationTransport); ok && l != nil {
		gt.log.Store(l)
	}
}

// Report describes the upstream for the propagation report, from the last
// discover result (nil before the first).
func (u *Client) Report() *catalog.UpstreamReport {
	if u == nil {
		return nil
	}
	info := u.Current()
	if info == nil {
		return nil
	}
	r := &catalog.UpstreamReport{ProtocolVersion: info.ProtocolVersion}
	var si struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(info.ServerInfo, &si) == nil {
		r.ServerName, r.ServerVersion = si.Name, si.Version
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(info.CapsRaw, &caps) == nil {
		for k := range caps {
			r.Capabilities = append(r.Capabilities, k)
		}
		slices.Sort(r.Capabilities)
	}
	return r
}

// Current returns the cached discover result, or nil.
func (u *Client) Current() *Info { return u.info.Load() }

// Store parses and caches a discover result object. Only the sidecar's own discover (Discover,
// sent without any client's headers) is stored: what the upstream tells one client may be meant
// for that client alone, and the cache feeds every client's initialize, lists and listens.
func (u *Client) Store(result []byte) (*Info, error) {
	info, err := ParseDiscover(result)
	if err != nil {
		return nil, err
	}
	u.info.Store(info)
	return info, nil
}

// ParseDiscover parses a discover result object.
func ParseDiscover(result []byte) (*Info, error) {
	var d struct {
		SupportedVersions []string        `json:"supportedVersions"`
		Capabilities      json.RawMessage `json:"capabilities"`
		Instructions      string          `json:"instructions"`
		Meta              struct {
			ServerInfo      json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
			UpstreamVersion string          `json:"dev.switchboard/upstreamProtocolVersion"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(result, &d); err != nil {
		return nil, fmt.Errorf("decoding discover result: %w", err)
	}
	info := &Info{Versions: d.SupportedVersions, CapsRaw: d.Capabilities,
		ServerInfo: d.Meta.ServerInfo, Instructions: d.Instructions, ProtocolVersion: d.Meta.UpstreamVersion}
	if info.ProtocolVersion == "" {
		info.ProtocolVersion = protocol.Version
	}
	if !wire.IsObject(info.ServerInfo) {
		info.ServerInfo = nil
	}
	if len(d.Capabilities) > 0 {
		if err := json.Unmarshal(d.Capabilities, &info.Caps); err != nil {
			return nil, fmt.Errorf("decoding capabilities: %w", err)
		}
	}
	return info, nil
}

// ModernRequest builds a 2026-07-28 request the sidecar sends on its own
// behalf.
func ModernRequest(ctx context.Context, url string, id, method string, extra string) (*http.Request, error) {
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"_meta":{"` +
		mcp.MetaKeyProtocolVersion + `":"` + protocol.Version + `","` + mcp.MetaKeyClientCapabilities + `":{},"` +
		mcp.MetaKeyClientInfo + `":` + string(ClientInfo) + `}` + extra + `}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(protocol.HeaderProtocolVersion, protocol.Version)
	req.Header.Set(protocol.HeaderMethod, method)
	return req, nil
}

// Discover asks the upstream for server/discover and caches the result.
func (u *Client) Discover(ctx context.Context) (*Info, error) {
	ctx, cancel := context.WithTimeout(ctx, DiscoverTimeout)
	defer cancel()
	req, err := ModernRequest(ctx, u.url, "switchboard-discover", protocol.MethodDiscover, "")
	if err != nil {
		return nil, err
	}
	_, msg, err := u.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	res, ok, _ := wire.Field(msg, "result")
	if !ok || !wire.IsObject(res) {
		return nil, fmt.Errorf("upstream server/discover failed: %s", wire.Truncate(msg, 200))
	}
	return u.Store(res)
}

// Ready reports whether the upstream answers server/discover, reusing a
// result younger than readyCacheFor. The check runs on its own deadline
// (DiscoverTimeout), not the prober's: a probe timing out while the upstream
// is slow to answer (a loaded node) says nothing about the upstream, and
// caching that cancellation as its failure made a serving replica unready
// for readyCacheFor — during a rollout, with the other replica draining, the
// Service then had no ready endpoint and new connections were refused. While
// a check runs, other probes get the last result instead of queueing behind
// it.
func (u *Client) Ready(ctx context.Context) error {
	u.readyMu.Lock()
	if !u.readyAt.IsZero() && (u.readyChecking || time.Since(u.readyAt) < readyCacheFor) {
		err := u.readyErr
		u.readyMu.Unlock()
		return err
	}
	u.readyChecking = true
	u.readyMu.Unlock()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DiscoverTimeout)
	_, err := u.Discover(dctx)
	cancel()
	u.readyMu.Lock()
	u.readyAt, u.readyErr, u.readyChecking = time.Now(), err, false
	u.readyMu.Unlock()
	return err
}

// RoundTrip sends req and returns the HTTP status and the first JSON-RPC
// response message, from a JSON or an SSE answer.
func (u *Client) RoundTrip(req *http.Request) (int, []byte, error) {
	resp, err := u.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	msg, err := u.ReadResponse(resp)
	return resp.StatusCode, msg, err
}

// ReadResponse reads the JSON-RPC response from an upstream HTTP response.
func (u *Client) ReadResponse(resp *http.Response) ([]byte, error) {
	b, err := ReadMessage(resp, u.maxBytes)
	if err != nil || wire.IsEventStream(resp.Header) {
		return b, err
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("upstream answered HTTP %d with a non-JSON body: %s", resp.StatusCode, wire.Truncate(b, 200))
	}
	return b, nil
}

// ReadMessage reads the JSON-RPC response an upstream HTTP response carries: the first
// response event of an SSE body, or a JSON body, at most maxBytes either way.
func ReadMessage(resp *http.Response, maxBytes int) ([]byte, error) {
	if wire.IsEventStream(resp.Header) {
		rd := wire.NewSSEReader(resp.Body, maxBytes)
		for {
			ev, err := rd.Next()
			if err != nil {
				return nil, fmt.Errorf("reading upstream event stream: %w", err)
			}
			if wire.IsResponse(ev.Data) {
				return bytes.Clone(ev.Data), nil
			}
		}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBytes)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxBytes {
		return nil, errors.New("upstream response exceeds size limit")
	}
	return b, nil
}
