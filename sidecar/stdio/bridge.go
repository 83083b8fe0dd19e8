// Package stdio is the stdio bridge: it runs an MCP server that speaks
// JSON-RPC on stdin/stdout as its child and serves it on a local address as a
// 2025-era Streamable HTTP endpoint, which the sidecar then fronts like any
// other upstream. One child serves every client: request ids and progress
// tokens are rewritten so that concurrent requests never collide, the child
// is initialized once by the bridge, and every client's initialize is
// answered from that. See docs/upstreams.md.
package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-mcp/switchboard/internal/version"
)

// Defaults and limits. Each has a flag in Main where an operator may need
// another value.
const (
	DefaultPath          = "/mcp"
	DefaultMaxLineBytes  = 32 << 20 // one message from the child (the sidecar's --max-response-bytes)
	DefaultMaxStderrLine = 16 << 10
	DefaultMaxBodyBytes  = 4 << 20 // one request from a client (the sidecar's --max-body-bytes)
	// DefaultBodyReadTimeout bounds reading one request body (the sidecar's
	// --body-read-timeout): net/http's deadlines end with the headers.
	DefaultBodyReadTimeout = 30 * time.Second
	DefaultProtocolVersion = "2025-11-25"
	DefaultDrainBudget     = 30 * time.Second
	DefaultStdinGrace      = 5 * time.Second
	DefaultTermGrace       = 5 * time.Second

	// maxInflight caps requests waiting for the child; past it clients get 503.
	maxInflight = 1024
	// maxSessions caps client sessions; past it initialize gets 503.
	maxSessions = 4096
	// sessionQueue is each session's buffer of notifications for its GET
	// stream; a stream that falls this far behind is closed (the client
	// reconnects and re-reads its lists).
	sessionQueue = 256
	// callQueue buffers progress notifications of one call.
	callQueue = 64
	// initTimeout bounds the bridge's initialize handshake with a new child.
	initTimeout = 60 * time.Second
	// readyWait is how long a request waits for a (re)starting child.
	readyWait = 30 * time.Second
	// stdinWriteTimeout fails a write to a child that stopped reading stdin.
	stdinWriteTimeout = 10 * time.Second
	// minBackoff/maxBackoff bound the wait before restarting an exited child;
	// a child that ran at least stableAfter starts again at minBackoff.
	minBackoff  = 100 * time.Millisecond
	maxBackoff  = 30 * time.Second
	stableAfter = 30 * time.Second
	// keepalive is the interval of SSE comments on idle GET streams.
	keepalive = 15 * time.Second
)

// bridgeClientInfo is how the bridge introduces itself to its child.
var bridgeClientInfo = `{"name":"switchboard-stdio-bridge","version":` + strconv.Quote(version.Version) + `}`

// Config configures a Bridge.
type Config struct {
	Listen        string
	Path          string
	Command       []string
	MaxLineBytes  int
	MaxStderrLine int
	MaxBodyBytes  int64
	// BodyReadTimeout bounds reading one request body (DefaultBodyReadTimeout when 0).
	BodyReadTimeout time.Duration
	ProtocolVersion string // asked of the child in the bridge's initialize
	DrainBudget     time.Duration
	StdinGrace      time.Duration
	TermGrace       time.Duration
	Stderr          io.Writer // where the child's stderr goes (os.Stderr)
	Logger          *slog.Logger
}

func (c *Config) defaults() {
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.MaxLineBytes <= 0 {
		c.MaxLineBytes = DefaultMaxLineBytes
	}
	if c.MaxStderrLine <= 0 {
		c.MaxStderrLine = DefaultMaxStderrLine
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.BodyReadTimeout <= 0 {
		c.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if c.ProtocolVersion == "" {
		c.ProtocolVersion = DefaultProtocolVersion
	}
	if c.DrainBudget <= 0 {
		c.DrainBudget = DefaultDrainBudget
	}
	if c.StdinGrace <= 0 {
		c.StdinGrace = DefaultStdinGrace
	}
	if c.TermGrace <= 0 {
		c.TermGrace = DefaultTermGrace
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
}

// call is one request waiting for the child's answer.
type call struct {
	origID  jsonrpc.ID      // the client's id, restored on the answer
	token   json.RawMessage // the client's progress token, or nil
	session *session        // nil for the bridge's own requests
	// final receives the answer (id restored) exactly once, or is closed
	// without one when the call is abandoned.
	final chan []byte
	// stream receives what goes on the call's SSE answer before the answer:
	// its notifications/progress (token restored) and the child's questions
	// (ask.go); nil when the client takes no SSE. Non-blocking sends: a
	// full queue drops progress (never the answer).
	stream chan []byte
	// asked counts the child's questions on this call still unanswered
	// (guarded by Bridge.mu).
	asked int
}

// Bridge multiplexes HTTP clients onto one stdio child.
type Bridge struct {
	cfg Config
	log *slog.Logger

	// mu guards every field below.
	mu       sync.Mutex
	child    *child          // the running, initialized child; nil while (re)starting
	ready    chan struct{}   // closed when child is set; replaced when it goes
	gen      uint64          // child generation (starts and restarts)
	live     uint64          // generation that takes requests (0: none); childGone clears it
	initRes  json.RawMessage // the child's initialize result
	nextID   int64           // next id towards the child (ids and progress tokens)
	pending  map[int64]*call // by the id the child sees
	sessions map[string]*session
	subs     map[string]int  // resource URI -> sessions subscribed
	asks     map[string]*ask // the child's questions passed to clients, by the bridge's id
	draining bool
	restarts int // child exits survived (for the log and /healthz)
}

// New checks cfg and returns a bridge; Run starts it.
func New(cfg Config) (*Bridge, error) {
	cfg.defaults()
	if len(cfg.Command) == 0 {
		return nil, errors.New("no command: the MCP server to run comes after --")
	}
	if cfg.Listen == "" {
		return nil, errors.New("--listen is required")
	}
	return &Bridge{
		cfg:      cfg,
		log:      cfg.Logger,
		ready:    make(chan struct{}),
		pending:  map[int64]*call{},
		sessions: map[string]*session{},
		subs:     map[string]int{},
		asks:     map[string]*ask{},
	}, nil
}

// errDraining answers requests that arrive while the bridge drains.
var errDraining = errors.New("the stdio bridge is shutting down")

// waitChild returns the current initialized child, waiting for a (re)start
// for at most readyWait.
func (b *Bridge) waitChild(ctx context.Context) (*child, error) {
	t := time.NewTimer(readyWait)
	defer t.Stop()
	for {
		b.mu.Lock()
		c, ready, draining := b.child, b.ready, b.draining
		b.mu.Unlock()
		if draining {
			return nil, errDraining
		}
		if c != nil {
			return c, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			return nil, errors.New("the MCP server process is not running (it is being restarted)")
		}
	}
}

// send registers cl under a fresh id, rewrites msg's id (and its progress
// token, when it has one) to that id and writes it to c. The caller waits on
// cl.final.
func (b *Bridge) send(c *child, req *jsonrpc.Request, cl *call) (int64, error) {
	b.mu.Lock()
	if b.live != c.gen {
		b.mu.Unlock()
		return 0, errors.New("the MCP server process exited")
	}
	if len(b.pending) >= maxInflight {
		b.mu.Unlock()
		return 0, errors.New("too many requests in flight to the MCP server")
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = cl
	b.mu.Unlock()

	out := *req
	out.ID = intID(id)
	if tok := progressToken(req.Params); tok != nil {
		cl.token = tok
		p, err := setMeta(req.Params, "progressToken", json.RawMessage(strconv.FormatInt(id, 10)))
		if err != nil {
			b.forget(id)
			return 0, err
		}
		out.Params = p
	}
	data, err := jsonrpc.EncodeMessage(&out)
	if err == nil {
		err = c.write(data)
	}
	if err != nil {
		b.forget(id)
		return 0, fmt.Errorf("writing to the MCP server: %w", err)
	}
	return id, nil
}

// forget drops a pending call (answered elsewhere, abandoned or failed).
func (b *Bridge) forget(id int64) {
	b.mu.Lock()
	delete(b.pending, id)
	b.mu.Unlock()
}

// cancel tells the child that the client gave up on id.
func (b *Bridge) cancel(c *child, id int64, reason string) {
	b.forget(id)
	params, _ := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: "notifications/cancelled", Params: params})
	if err == nil {
		_ = c.write(data)
	}
}

// roundTrip sends the bridge's own request and waits for the answer's result.
func (b *Bridge) roundTrip(ctx context.Context, c *child, method string, params json.RawMessage) (json.RawMessage, error) {
	cl := &call{origID: intID(0), final: make(chan []byte, 1)}
	id, err := b.send(c, &jsonrpc.Request{ID: intID(0), Method: method, Params: params}, cl)
	if err != nil {
		return nil, err
	}
	select {
	case data, ok := <-cl.final:
		if !ok {
			return nil, errors.New("the MCP server exited before answering")
		}
		msg, err := jsonrpc.DecodeMessage(data)
		if err != nil {
			return nil, err
		}
		resp, ok := msg.(*jsonrpc.Response)
		if !ok {
			return nil, errors.New("not a response")
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-ctx.Done():
		b.cancel(c, id, "timed out")
		return nil, ctx.Err()
	}
}

// notify writes a notification to the child.
func notify(c *child, method string, params json.RawMessage) error {
	data, err := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: params})
	if err != nil {
		return err
	}
	return c.write(data)
}

// readLoop routes every message the child writes until its stdout closes.
func (b *Bridge) readLoop(c *child) {
	lr := newLineReader(c.out, b.cfg.MaxLineBytes)
	for {
		line, n, err := lr.next()
		if errors.Is(err, errLineTooLong) {
			b.tooLong(c, line, n)
			continue
		}
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		msg, derr := jsonrpc.DecodeMessage(line)
		if derr != nil {
			b.log.Warn("MCP server wrote a line that is not JSON-RPC; ignored", "err", derr, "line", clip(line))
			continue
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			b.answer(m)
		case *jsonrpc.Request:
			if m.IsCall() {
				b.serverRequest(c, m)
			} else {
				b.notification(m)
			}
		}
	}
}

// answer hands the child's response to the call that waits for it.
func (b *Bridge) answer(resp *jsonrpc.Response) {
	id, ok := resp.ID.Raw().(int64)
	if !ok {
		b.log.Warn("MCP server answered an id the bridge never sent", "id", resp.ID.Raw())
		return
	}
	b.mu.Lock()
	cl := b.pending[id]
	delete(b.pending, id)
	b.mu.Unlock()
	if cl == nil {
		return // cancelled or abandoned meanwhile
	}
	resp.ID = cl.origID
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		data = errorResponse(cl.origID, jsonrpc.CodeInternalError, "the MCP server's answer could not be encoded: "+err.Error())
	}
	cl.final <- data
}

// fail answers a pending call with an error (it stays answered once).
func (b *Bridge) fail(id int64, code int64, text string) {
	b.mu.Lock()
	cl := b.pending[id]
	delete(b.pending, id)
	b.mu.Unlock()
	if cl != nil {
		cl.final <- errorResponse(cl.origID, code, text)
	}
}

// tooLong handles a message over --max-line-bytes: when its id came before
// the bulk, that request gets an error and the bridge goes on; a response
// whose id cannot be found makes the bridge restart the child, so that the
// request it belonged to gets an error instead of waiting forever.
func (b *Bridge) tooLong(c *child, prefix []byte, n int64) {
	s := shapeOf(prefix)
	text := fmt.Sprintf("the MCP server wrote a message of %d bytes, over the stdio bridge's limit of %d bytes (--max-line-bytes)", n, b.cfg.MaxLineBytes)
	if s.id != nil && !s.hasMethod {
		var id int64
		if json.Unmarshal(s.id, &id) == nil {
			b.log.Warn("MCP server answer over the line limit; the request gets an error", "bytes", n, "limit", b.cfg.MaxLineBytes, "id", id)
			b.fail(id, jsonrpc.CodeInternalError, text)
			return
		}
	}
	if s.hasMethod && !s.isResponse {
		b.log.Warn("MCP server message over the line limit dropped", "bytes", n, "limit", b.cfg.MaxLineBytes, "start", clip(prefix))
		return
	}
	b.log.Error("MCP server answer over the line limit without a readable id; restarting the MCP server so that no request waits forever", "bytes", n, "limit", b.cfg.MaxLineBytes)
	c.signal(syscall.SIGKILL)
}

// notification routes a notification from the child: progress to the call
// it belongs to, resources/updated to the sessions subscribed to that URI,
// everything else to every session's GET stream.
func (b *Bridge) notification(n *jsonrpc.Request) {
	switch n.Method {
	case "notifications/progress":
		var p struct {
			Token json.RawMessage `json:"progressToken"`
		}
		_ = json.Unmarshal(n.Params, &p)
		id, err := strconv.ParseInt(string(p.Token), 10, 64)
		if err != nil {
			return
		}
		b.mu.Lock()
		cl := b.pending[id]
		b.mu.Unlock()
		if cl == nil || cl.stream == nil {
			return
		}
		params, err := setMember(n.Params, "progressToken", cl.token)
		if err != nil {
			return
		}
		data, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: n.Method, Params: params})
		select {
		case cl.stream <- data:
		default:
		}
		return
	case "notifications/cancelled":
		// The child gave up on one of the bridge's requests to it: nothing to
		// route, the bridge answers them itself.
		return
	}
	data, err := jsonrpc.EncodeMessage(n)
	if err != nil {
		return
	}
	var uri string
	if n.Method == "notifications/resources/updated" {
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(n.Params, &p)
		uri = p.URI
	}
	b.mu.Lock()
	targets := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		if uri == "" || s.subs[uri] {
			targets = append(targets, s)
		}
	}
	b.mu.Unlock()
	for _, s := range targets {
		s.push(data)
	}
}

// broadcast sends a notification without params to every session.
func (b *Bridge) broadcast(method string) {
	b.notification(&jsonrpc.Request{Method: method, Params: json.RawMessage(`{}`)})
}

func errorResponse(id jsonrpc.ID, code int64, text string) []byte {
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: code, Message: text}})
	return data
}

// progressToken returns params._meta.progressToken, or nil.
func progressToken(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"progressToken"`)) {
		return nil
	}
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.Meta.Token) == 0 || string(p.Meta.Token) == "null" {
		return nil
	}
	return p.Meta.Token
}

// setMeta sets params._meta[key] = val, keeping every other member.
func setMeta(params json.RawMessage, key string, val json.RawMessage) (json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	meta, err := setMember(p["_meta"], key, val)
	if err != nil {
		return nil, err
	}
	p["_meta"] = meta
	return json.Marshal(p)
}

// setMember sets obj[key] = val on a JSON object (null or absent = {}).
func setMember(obj json.RawMessage, key string, val json.RawMessage) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(obj) > 0 && string(obj) != "null" {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, err
		}
	}
	m[key] = val
	return json.Marshal(m)
}

// clip shortens a line for the log.
func clip(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// intID is the id the child sees for the bridge's n-th request.
func intID(n int64) jsonrpc.ID {
	id, _ := jsonrpc.MakeID(float64(n))
	return id
}
