package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions this package speaks.
const (
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
)

// Kind names one cached collection.
type Kind string

// The cached kinds.
const (
	Tools             Kind = "tools"
	Prompts           Kind = "prompts"
	Resources         Kind = "resources"
	ResourceTemplates Kind = "resourceTemplates"
	ResourceContents  Kind = "resourceContents"
)

// Cause says why a key was invalidated.
type Cause string

// Causes of an invalidation.
const (
	// CauseNotification: the server sent list_changed or resources/updated.
	CauseNotification Cause = "notification"
	// CauseRebaseline: a listen stream was opened again (after complete or a drop), or a
	// resource URI was newly subscribed; what was read before may have missed a change.
	CauseRebaseline Cause = "rebaseline"
)

// Change is one coalesced invalidation. Reading Kind (and URI) now returns data read after it.
type Change struct {
	Kind  Kind
	URI   string // ResourceContents only
	Cause Cause
}

// EventType names a listen event.
type EventType string

// Listen events, in the order they can happen.
const (
	EventAcknowledged EventType = "acknowledged" // a listen stream is open; Filter holds what the server honours
	EventNotification EventType = "notification" // a notification arrived (Method, URI)
	EventComplete     EventType = "complete"     // the server ended the stream gracefully (a replica draining)
	EventRelisten     EventType = "relisten"     // a new listen is being opened after complete (Delay: the jitter)
	EventDropped      EventType = "dropped"      // the stream ended without complete (Err, an *AuthorizationEndedError when the token ended); a reconnect follows
	EventReconnect    EventType = "reconnect"    // a reconnect attempt (Attempt, Delay: the backoff waited, Err: why the last failed, an *UnauthorizedError when refused)
	EventRebaseline   EventType = "rebaseline"   // everything was invalidated after a re-listen or reconnect
)

// Event is one thing that happened on the listen stream.
type Event struct {
	Time    time.Time
	Type    EventType
	Method  string // EventNotification
	URI     string // resources/updated
	Filter  *mcp.NotificationSubscriptions
	Err     error
	Attempt int
	Delay   time.Duration
	// AuthorizedUntil (EventAcknowledged) is when the server will end the stream because the
	// caller's token ends, if it says; zero otherwise.
	AuthorizedUntil time.Time
}

// Hooks let callers observe the cache. Hooks run on the client's goroutines: keep them short,
// and do not block in them on reads of the key that changed (start a goroutine instead).
type Hooks struct {
	// OnChange is called once per coalesced invalidation of a key.
	OnChange func(Change)
	// OnEvent is called for every listen event (kubectl mcp watch prints them).
	OnEvent func(Event)
}

// Metrics are optional counters. Every field may be nil.
type Metrics struct {
	CacheHit    func(Kind)
	CacheMiss   func(Kind)
	Fetch       func(kind Kind, d time.Duration, err error)
	Discarded   func(Kind) // a read was not stored: its key was invalidated while it ran
	Invalidated func(Kind, Cause)
	Reconnect   func(attempt int)
}

// Options configure a Client. The zero value works.
type Options struct {
	// HTTPClient carries every request; default http.DefaultClient's transport without a timeout.
	HTTPClient *http.Client
	// ClientInfo is sent as io.modelcontextprotocol/clientInfo; default switchboard-client.
	ClientInfo *mcp.Implementation
	// Credential is the Authorization header value used when the context carries none
	// (WithCredential), and by the listen stream. Token is the other way to give it (not both).
	Credential string
	// Token supplies a bearer token instead of Credential, asked again for every request
	// (StaticToken, TokenFile, or a func of your own): rotated tokens are picked up without a
	// reconnect. Results the server marks private are cached per Token, not per token value.
	Token   TokenSource
	Hooks   Hooks
	Metrics Metrics
	// RelistJitter bounds the random delay before a listen is opened again after complete;
	// default 1s. Negative means none.
	RelistJitter time.Duration
	// MinBackoff and MaxBackoff bound the reconnect backoff after a dropped stream; defaults
	// 100ms and 10s.
	MinBackoff, MaxBackoff time.Duration
	// ProtocolVersion forces a revision (Version20251125 skips 2026-07-28); default: negotiate.
	ProtocolVersion string
	Logger          *slog.Logger
}

// Info describes where a read's answer came from.
type Info struct {
	// TTL is the server's ttlMs. UntilChanged means a 2025-11-25 server that announces changes:
	// the entry is fresh until it does.
	TTL          time.Duration
	UntilChanged bool
	// Scope is ScopePublic or ScopePrivate ("" on 2025-11-25, which has no scopes: then private).
	Scope CacheScope
	// Cached: served from the cache. Stored: this read was stored in the cache.
	Cached, Stored bool
	// Received is when the answer arrived from the server.
	Received time.Time
}

type credKey struct{}

// WithCredential returns a context whose reads and calls carry Authorization: cred. Private
// results read with it are cached under it only.
func WithCredential(ctx context.Context, cred string) context.Context {
	return context.WithValue(ctx, credKey{}, cred)
}

// credential is the request's credential as the cache knows it: the context's (WithCredential),
// else Options.Credential, else tokenSourceKey when Options.Token is set. It keys private
// entries; authorization turns it into the header value when a request is sent.
func (c *Client) credential(ctx context.Context) string {
	if v, ok := ctx.Value(credKey{}).(string); ok {
		return v
	}
	if c.opts.Token != nil {
		return tokenSourceKey
	}
	return c.opts.Credential
}

// tokenSourceKey stands for "whatever Options.Token returns now" in the cache: a rotated token
// keeps its cache. The NUL byte makes it a value no header (and no WithCredential that would be
// sent) can be.
const tokenSourceKey = "\x00token-source"

// authorization is the Authorization header value of a request made with ctx ("" for none).
func (c *Client) authorization(ctx context.Context) (string, error) {
	cred := c.credential(ctx)
	if cred != tokenSourceKey {
		return cred, nil
	}
	tok, err := c.opts.Token(ctx)
	if err != nil {
		return "", fmt.Errorf("bearer token: %w", err)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("bearer token: %w", err)
	}
	return "Bearer " + tok, nil
}

// Client is one MCP endpoint with a cache that is never stale. Its methods are safe for
// concurrent use.
type Client struct {
	url  string
	opts Options
	log  *slog.Logger

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	done   sync.WaitGroup

	cache *cache

	// mu guards the connection state below.
	mu      sync.Mutex
	version string
	info    *mcp.InitializeResult
	session *mcp.ClientSession // tools/call, prompts/get; on 2025-11-25 everything
	modern  *modernConn        // 2026-07-28 reads and listen

	listenUp atomic.Bool // a listen stream (or 2025 session) is up: changes can be heard

	// streamRefused is the last refusal of a 2025-11-25 GET stream request, which go-sdk
	// reports by its text only; the session's end is reported with it.
	streamRefused atomic.Pointer[UnauthorizedError]

	// Set once while connecting, read-only afterwards.
	listener *listener   // 2026-07-28
	legacy   *legacyConn // 2025-11-25
}

// Connect connects to the MCP endpoint url, opens its listen stream and waits for the
// acknowledgement (so that the first read is a baseline no change can precede unseen). If the
// server answers but refuses the listen (its listen limit, say), Connect returns anyway with
// Listening false and keeps trying with backoff; reads meanwhile live by their TTL, and the
// re-baseline when the listen opens invalidates them.
func Connect(ctx context.Context, url string, opts *Options) (*Client, error) {
	c := &Client{url: url}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Credential != "" && c.opts.Token != nil {
		return nil, errors.New("client: Options.Credential and Options.Token: give one")
	}
	if c.opts.HTTPClient == nil {
		c.opts.HTTPClient = &http.Client{}
	}
	if c.opts.ClientInfo == nil {
		c.opts.ClientInfo = &mcp.Implementation{Name: "switchboard-client", Version: "v1"}
	}
	if c.opts.RelistJitter == 0 {
		c.opts.RelistJitter = time.Second
	}
	if c.opts.MinBackoff <= 0 {
		c.opts.MinBackoff = 100 * time.Millisecond
	}
	if c.opts.MaxBackoff <= 0 {
		c.opts.MaxBackoff = 10 * time.Second
	}
	c.log = c.opts.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.cache = newCache(c)
	c.ctx, c.cancel = context.WithCancel(context.Background())

	var err error
	if c.opts.ProtocolVersion == "" || c.opts.ProtocolVersion == Version20260728 {
		err = c.connectModern(ctx)
		if errors.Is(err, errNotModern) && c.opts.ProtocolVersion == "" {
			c.log.Info("Server does not serve 2026-07-28; falling back", "version", Version20251125, "reason", err)
			err = c.connectLegacy(ctx)
		}
	} else {
		err = c.connectLegacy(ctx)
	}
	if err != nil {
		c.cancel()
		c.done.Wait()
		return nil, err
	}
	c.done.Add(1)
	go func() { defer c.done.Done(); c.cache.refresher(c.ctx) }()
	return c, nil
}

// Close ends the listen stream and the sessions.
func (c *Client) Close() error {
	c.cancel()
	c.done.Wait()
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}

// ProtocolVersion is the revision in use: Version20260728 or Version20251125.
func (c *Client) ProtocolVersion() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Listening reports whether a listen stream (2026-07-28) or session with its GET stream
// (2025-11-25) is up; while it is not, changes cannot be heard and a re-baseline follows.
func (c *Client) Listening() bool { return c.listenUp.Load() }

// dropped records that changes can no longer be heard, then says so.
func (c *Client) dropped(err error) {
	c.listenUp.Store(false)
	c.emit(Event{Type: EventDropped, Err: err})
}

// ServerInfo returns the server's identity, capabilities and instructions.
func (c *Client) ServerInfo() *mcp.InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// ListTools returns every tool (all pages).
func (c *Client) ListTools(ctx context.Context) ([]*mcp.Tool, Info, error) {
	return get[[]*mcp.Tool](ctx, c, key{kind: Tools})
}

// ListPrompts returns every prompt (all pages).
func (c *Client) ListPrompts(ctx context.Context) ([]*mcp.Prompt, Info, error) {
	return get[[]*mcp.Prompt](ctx, c, key{kind: Prompts})
}

// ListResources returns every resource (all pages).
func (c *Client) ListResources(ctx context.Context) ([]*mcp.Resource, Info, error) {
	return get[[]*mcp.Resource](ctx, c, key{kind: Resources})
}

// ListResourceTemplates returns every resource template (all pages).
func (c *Client) ListResourceTemplates(ctx context.Context) ([]*mcp.ResourceTemplate, Info, error) {
	return get[[]*mcp.ResourceTemplate](ctx, c, key{kind: ResourceTemplates})
}

// ReadResource returns the contents of uri. The first read of a URI subscribes to its updates
// (the listen stream is re-opened with it, then the URI is read again as a baseline).
func (c *Client) ReadResource(ctx context.Context, uri string) ([]*mcp.ResourceContents, Info, error) {
	return get[[]*mcp.ResourceContents](ctx, c, key{kind: ResourceContents, uri: uri})
}

// get serves k through the cache under the context's credential. T is the type fetch stores
// for k's kind (KindValue documents it); the one assertion on the cache's values is here.
func get[T any](ctx context.Context, c *Client, k key) (T, Info, error) {
	v, info, err := c.cache.get(ctx, k, c.credential(ctx))
	if err != nil {
		var zero T
		return zero, info, err
	}
	return v.(T), info, nil
}

// Cached returns what the cache holds for kind (and uri) under the context's credential
// without reading from the server: ok is false when nothing fresh is there. v's type is the
// kind's list or contents type: []*mcp.Tool for Tools, []*mcp.Prompt for Prompts,
// []*mcp.Resource for Resources, []*mcp.ResourceTemplate for ResourceTemplates and
// []*mcp.ResourceContents for ResourceContents.
func (c *Client) Cached(ctx context.Context, kind Kind, uri string) (v any, info Info, ok bool) {
	return c.cache.peek(key{kind: kind, uri: uri}, c.credential(ctx))
}

// CallTool calls a tool. args is anything that marshals to a JSON object (nil: {}).
func (c *Client) CallTool(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	s, err := c.sessionFor()
	if err != nil {
		return nil, err
	}
	return s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// GetPrompt renders a prompt.
func (c *Client) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	s, err := c.sessionFor()
	if err != nil {
		return nil, err
	}
	return s.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
}

func (c *Client) sessionFor() (*mcp.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil, errors.New("client: not connected (reconnecting)")
	}
	return c.session, nil
}

// fetch reads one key from the server, whichever revision is in use. What it returns for each
// kind is the type get asserts.
func (c *Client) fetch(ctx context.Context, k key, cred string) (any, Info, error) {
	ctx = WithCredential(ctx, cred)
	c.mu.Lock()
	m, s := c.modern, c.session
	c.mu.Unlock()
	if m == nil && s == nil {
		return nil, Info{}, errors.New("client: not connected (reconnecting)")
	}
	switch k.kind {
	case Tools:
		return fetchList(ctx, m, s, toolsList)
	case Prompts:
		return fetchList(ctx, m, s, promptsList)
	case Resources:
		return fetchList(ctx, m, s, resourcesList)
	case ResourceTemplates:
		return fetchList(ctx, m, s, templatesList)
	}
	if m != nil {
		return m.read(ctx, k.uri)
	}
	return c.readLegacy(ctx, s, k.uri)
}

// fetchList reads a whole list at 2026-07-28 when m is set, else through the 2025-11-25
// session s.
func fetchList[T any](ctx context.Context, m *modernConn, s *mcp.ClientSession, spec listSpec[T]) ([]T, Info, error) {
	if m != nil {
		return listModern(ctx, m, spec)
	}
	return listLegacy(ctx, s, spec)
}

func (c *Client) emit(e Event) {
	e.Time = time.Now()
	if h := c.opts.Hooks.OnEvent; h != nil {
		h(e)
	}
}

// credTransport is where every request of every revision (2026-07-28 POSTs and listen, the
// 2025-11-25 session's POST, GET stream and DELETE, tools/call) gets its Authorization: from the
// request's context (WithCredential) or the default (Options.Credential, Options.Token), on
// requests to the endpoint's own scheme and host only. http.Client follows redirects through
// this transport, copying the headers of the original request, which has none: the credential is
// added to a clone here, so a redirect to another host (even a subdomain, to which net/http would
// forward an Authorization it saw) never gets it.
//
// A 401 of the endpoint (or a 403 with a Bearer challenge) becomes an *UnauthorizedError here,
// the one place that sees every response: go-sdk's session reports a failed request by its
// status text only, while it wraps a transport error with %w.
type credTransport struct {
	c    *Client
	base http.RoundTripper
	to   *url.URL // the endpoint; nil if its URL does not parse (then nothing is added)
}

func (t credTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.to == nil || r.URL.Scheme != t.to.Scheme || r.URL.Host != t.to.Host {
		return t.base.RoundTrip(r)
	}
	if r.Header.Get("Authorization") == "" {
		cred, err := t.c.authorization(r.Context())
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close() // RoundTrip closes the body, even on errors
			}
			return nil, err
		}
		if cred != "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", cred)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if r.Method == http.MethodGet && resp.StatusCode/100 == 2 {
		t.c.streamRefused.Store(nil)
	}
	if ue := unauthorized(resp); ue != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorTextBytes)) // keep the connection
		_ = resp.Body.Close()
		if r.Method == http.MethodGet {
			t.c.streamRefused.Store(ue) // the 2025-11-25 GET stream: go-sdk reports its failure as text
		}
		return nil, ue
	}
	return resp, nil
}

func (c *Client) httpClient() *http.Client {
	base := c.opts.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := *c.opts.HTTPClient
	to, err := url.Parse(c.url)
	if err != nil {
		to = nil
	}
	hc.Transport = credTransport{c: c, base: base, to: to}
	return &hc
}

// capabilities: this client declares none (no sampling, elicitation or roots).
var capabilities = json.RawMessage(`{}`)

func decode[T any](raw json.RawMessage) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, fmt.Errorf("decoding result: %w", err)
	}
	return v, nil
}
