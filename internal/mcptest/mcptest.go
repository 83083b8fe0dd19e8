// Package mcptest is a small raw MCP 2026-07-28 client over Streamable HTTP for end-to-end tests
// and benchmarks: single requests, and subscriptions/listen streams read frame by frame, so a test
// sees exactly the notifications a client would (no SDK in between that could merge or drop them).
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// ProtocolVersion is the revision the client speaks.
const ProtocolVersion = "2026-07-28"

var seq atomic.Int64

// Client talks to one MCP endpoint.
type Client struct {
	URL  string
	HTTP *http.Client
	// Token, when set, is sent as "Authorization: Bearer <Token>" on every request.
	Token string
}

// New returns a client for url with its own connection pool.
func New(url string) *Client {
	return &Client{URL: url, HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}}}
}

// NewRequest builds the POST of one JSON-RPC request of method with params, as every call of c
// sends it: the 2026-07-28 _meta and headers, and the bearer token when c has one.
func (c *Client) NewRequest(ctx context.Context, method string, params map[string]any) (*http.Request, error) {
	if params == nil {
		params = map[string]any{}
	}
	p := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    ProtocolVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "mcptest", "version": "0"},
	}}
	for k, v := range params {
		p[k] = v
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "r" + strconv.FormatInt(seq.Add(1), 10), "method": method, "params": p})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for _, k := range []string{"name", "uri"} {
		if v, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	return req, nil
}

// Response is one JSON-RPC response.
type Response struct {
	Status int
	Result json.RawMessage
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
}

// Call sends one request and returns its response (from a JSON or an SSE answer).
func (c *Client) Call(ctx context.Context, method string, params map[string]any) (*Response, error) {
	req, err := c.NewRequest(ctx, method, params)
	if err != nil {
		return nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var msg []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := wire.NewSSEReader(resp.Body, maxEvent)
		for {
			data, err := nextData(rd)
			if err != nil {
				return nil, err
			}
			if bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`)) {
				msg = data
				break
			}
		}
	} else if msg, err = io.ReadAll(resp.Body); err != nil {
		return nil, err
	}
	out := &Response{Status: resp.StatusCode}
	if err := json.Unmarshal(msg, out); err != nil {
		return nil, fmt.Errorf("HTTP %d: %s: %w", resp.StatusCode, msg, err)
	}
	return out, nil
}

// maxEvent bounds one SSE event a test reads.
const maxEvent = 16 << 20

// nextData returns the data of the next SSE event that carries data (sidecar/wire's reader, the
// one the sidecar uses and make fuzz fuzzes); it is valid until the next call.
func nextData(rd *wire.SSEReader) ([]byte, error) {
	ev, err := rd.Next()
	return ev.Data, err
}

// Notification is one message received on a listen stream.
type Notification struct {
	Method string
	URI    string
	At     time.Time
}

// Stream is an open subscriptions/listen stream.
type Stream struct {
	C      <-chan Notification // closed when the stream ends
	cancel context.CancelFunc
	// ended says why C closed (read once C is closed): the read error, or the message that
	// ended the stream (its complete result, or one that is not a notification).
	ended string
}

// Ended says why the stream ended; call it once C is closed ("" for a stream NewStream made).
func (s *Stream) Ended() string { return s.ended }

// Close ends the stream.
func (s *Stream) Close() { s.cancel() }

// NewStream wraps notifications read elsewhere (e.g. a 2025-era GET stream) as a Stream that
// cancel ends.
func NewStream(c <-chan Notification, cancel context.CancelFunc) *Stream {
	return &Stream{C: c, cancel: cancel}
}

// OpenListen sends a subscriptions/listen with the given filter (e.g. {"toolsListChanged":
// true}) and returns its 200 response, whose body the caller reads and closes, and the cancel
// that ends the stream. Listen reads the body as SSE; a caller that reads it its own way (bytes,
// frames) opens it here.
func (c *Client) OpenListen(ctx context.Context, filter map[string]any) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.NewRequest(ctx, "subscriptions/listen", map[string]any{"notifications": filter})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, nil, fmt.Errorf("listen: HTTP %d: %s", resp.StatusCode, b)
	}
	return resp, cancel, nil
}

// Listen opens a listen stream with the given filter (e.g. {"toolsListChanged": true}) and
// returns once it is acknowledged.
func (c *Client) Listen(ctx context.Context, filter map[string]any) (*Stream, error) {
	resp, cancel, err := c.OpenListen(ctx, filter) //nolint:bodyclose // the stream's reader goroutine closes it
	if err != nil {
		return nil, err
	}
	rd := wire.NewSSEReader(resp.Body, maxEvent)
	ack, err := nextData(rd)
	if err != nil || !bytes.Contains(ack, []byte("notifications/subscriptions/acknowledged")) {
		resp.Body.Close()
		cancel()
		return nil, errors.Join(fmt.Errorf("listen: no acknowledgement: %s", ack), err)
	}
	ch := make(chan Notification, 64)
	st := &Stream{C: ch, cancel: cancel}
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		for {
			data, err := nextData(rd)
			if err != nil {
				st.ended = "read: " + err.Error()
				return
			}
			var m struct {
				Method string `json:"method"`
				Params struct {
					URI string `json:"uri"`
				} `json:"params"`
			}
			if json.Unmarshal(data, &m) != nil || m.Method == "" {
				st.ended = "message: " + string(data) // the complete result ends the stream
				return
			}
			select {
			case ch <- Notification{Method: m.Method, URI: m.Params.URI, At: time.Now()}:
			case <-ctx.Done():
				st.ended = "closed"
				return
			}
		}
	}()
	return st, nil
}

// Collect returns what arrives on s within d.
func (s *Stream) Collect(d time.Duration) []Notification {
	var out []Notification
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case n, ok := <-s.C:
			if !ok {
				return out
			}
			out = append(out, n)
		case <-t.C:
			return out
		}
	}
}
