package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// legacyConn is a 2025-11-25 connection: a go-sdk session (initialize, session id, the GET
// stream on which the server pushes list_changed and resources/updated without opt-in, and
// resources/subscribe). 2025 results carry no ttlMs or cacheScope, so an entry is cached only
// while the server promised to announce its change: a list when its listChanged capability is
// set, a resource's contents once resources/subscribe for its URI succeeded. Entries are kept
// per credential (there is no public scope in 2025-11-25).
type legacyConn struct {
	c    *Client
	subs chan string // URIs to subscribe to on the current session

	mu         sync.Mutex
	subscribed map[string]bool // on the current session
}

// legacyStreamRetries is how often go-sdk resumes a dropped GET stream (with Last-Event-ID)
// before the session counts as lost (its default is 5, about 13 s of backoff). After that this
// package reconnects and re-baselines; meanwhile entries cached until changed are not served.
const legacyStreamRetries = 2

func (c *Client) connectLegacy(ctx context.Context) error {
	lc := &legacyConn{c: c, subs: make(chan string, maxInUse), subscribed: map[string]bool{}}
	c.legacy = lc
	s, err := lc.dial(ctx)
	if err != nil {
		return err
	}
	c.done.Add(1)
	go func() { defer c.done.Done(); lc.run(s) }()
	return nil
}

func (lc *legacyConn) dial(ctx context.Context) (*mcp.ClientSession, error) {
	c := lc.c
	// The cache is invalidated before the event is emitted: whoever sees the event reads anew.
	notified := func(method, uri string, kinds ...Kind) {
		if uri != "" {
			c.cache.invalidate(key{kind: ResourceContents, uri: uri}, CauseNotification)
		} else {
			c.cache.invalidateKind(kinds...)
		}
		c.emit(Event{Type: EventNotification, Method: method, URI: uri})
	}
	cl := mcp.NewClient(c.opts.ClientInfo, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			notified("notifications/tools/list_changed", "", Tools)
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			notified("notifications/prompts/list_changed", "", Prompts)
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			notified("notifications/resources/list_changed", "", Resources, ResourceTemplates)
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params != nil {
				notified("notifications/resources/updated", r.Params.URI)
			}
		},
	})
	s, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.url, HTTPClient: c.httpClient(), MaxRetries: legacyStreamRetries},
		&mcp.ClientSessionOptions{ProtocolVersion: Version20251125})
	if err != nil {
		return nil, fmt.Errorf("connecting at %s: %w", Version20251125, err)
	}
	ir := s.InitializeResult()
	if ir.Capabilities == nil {
		ir.Capabilities = &mcp.ServerCapabilities{}
	}
	lc.mu.Lock()
	lc.subscribed = map[string]bool{}
	lc.mu.Unlock()
	c.mu.Lock()
	c.version, c.info, c.session = ir.ProtocolVersion, ir, s
	c.mu.Unlock()
	c.listenUp.Store(true)
	c.emit(Event{Type: EventAcknowledged})
	for _, u := range c.cache.subscribedURIs() {
		lc.subscribe(u)
	}
	return s, nil
}

// subscribe queues a URI for resources/subscribe (never blocks: called under the cache lock).
func (lc *legacyConn) subscribe(uri string) {
	lc.mu.Lock()
	done := lc.subscribed[uri]
	lc.mu.Unlock()
	if done {
		return
	}
	select {
	case lc.subs <- uri:
	default: // full: the URI is subscribed after the next reconnect
	}
}

func (lc *legacyConn) isSubscribed(uri string) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.subscribed[uri]
}

// run subscribes queued URIs and waits for the session to end; then it reconnects with backoff
// and re-baselines.
func (lc *legacyConn) run(s *mcp.ClientSession) {
	c := lc.c
	for {
		ended := make(chan error, 1)
		go func() { ended <- s.Wait() }()
	serve:
		for {
			select {
			case <-c.ctx.Done():
				_ = s.Close()
				return
			case uri := <-lc.subs:
				caps := s.InitializeResult().Capabilities
				if caps.Resources == nil || !caps.Resources.Subscribe || lc.isSubscribed(uri) {
					continue
				}
				ctx, cancel := context.WithTimeout(c.ctx, ackTimeout)
				err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
				cancel()
				if err != nil {
					c.log.Warn("resources/subscribe failed", "uri", uri, "err", err)
					continue
				}
				lc.mu.Lock()
				lc.subscribed[uri] = true
				lc.mu.Unlock()
				// A read that began before the subscription may have missed an update.
				c.cache.invalidate(key{kind: ResourceContents, uri: uri}, CauseRebaseline)
			case err := <-ended:
				if err == nil {
					err = errors.New("session ended")
				}
				if ue := c.streamRefused.Swap(nil); ue != nil {
					err = fmt.Errorf("%w (%w)", ue, err) // the GET stream was refused its token
				}
				c.dropped(err)
				break serve
			}
		}
		c.mu.Lock()
		c.session = nil
		c.mu.Unlock()
		backoff := c.opts.MinBackoff
		var cause error
		for attempt := 1; ; attempt++ {
			d := backoff/2 + rand.N(backoff/2+1)
			c.emit(Event{Type: EventReconnect, Attempt: attempt, Delay: d, Err: cause})
			if f := c.opts.Metrics.Reconnect; f != nil {
				f(attempt)
			}
			if !sleep(c.ctx, d) {
				return
			}
			backoff = min(2*backoff, c.opts.MaxBackoff)
			ctx, cancel := context.WithTimeout(c.ctx, ackTimeout)
			next, err := lc.dial(ctx)
			cancel()
			if err == nil {
				s = next
				break
			}
			cause = err
		}
		c.rebaseline()
	}
}

// listLegacy reads every page of a list through the 2025-11-25 session; the entry is fresh until
// the server announces a change, when it announces changes of that kind.
func listLegacy[T any](ctx context.Context, s *mcp.ClientSession, spec listSpec[T]) ([]T, Info, error) {
	info := Info{UntilChanged: spec.listChanged(s.InitializeResult().Capabilities)}
	all, err := pages(func(cur string) ([]T, string, error) { return spec.legacy(ctx, s, cur) })
	info.Received = time.Now()
	if err != nil {
		return nil, Info{}, err
	}
	return all, info, nil
}

// readLegacy reads one resource's contents through the 2025-11-25 session.
func (c *Client) readLegacy(ctx context.Context, s *mcp.ClientSession, uri string) ([]*mcp.ResourceContents, Info, error) {
	info := Info{UntilChanged: c.legacy.isSubscribed(uri)}
	r, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	info.Received = time.Now()
	if err != nil {
		return nil, Info{}, err
	}
	return r.Contents, info, nil
}

func pages[T any](read func(cursor string) ([]T, string, error)) ([]T, error) {
	var all []T
	cur := ""
	for range maxPages {
		items, next, err := read(cur)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		cur = next
	}
	return nil, fmt.Errorf("more than %d pages", maxPages)
}
