package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Run serves until ctx ends, then drains: it accepts nothing new, lets the
// requests in flight finish (at most DrainBudget), closes the child's stdin,
// waits StdinGrace, sends SIGTERM, waits TermGrace, sends SIGKILL.
func (b *Bridge) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", b.cfg.Listen)
	if err != nil {
		return err
	}
	return b.Serve(ctx, ln)
}

// Serve is Run on a listener the caller opened.
func (b *Bridge) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle(b.cfg.Path, b)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       120 * time.Second,
	}
	superviseCtx, stopSupervise := context.WithCancel(context.Background())
	defer stopSupervise()
	supervised := make(chan struct{})
	lastChild := make(chan *child, 1)
	go func() {
		defer close(supervised)
		lastChild <- b.supervise(superviseCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	b.log.Info("Stdio bridge serving", "listen", ln.Addr().String(), "path", b.cfg.Path, "command", b.cfg.Command, "gomaxprocs", runtime.GOMAXPROCS(0))

	select {
	case <-ctx.Done():
	case err := <-served:
		stopSupervise()
		<-supervised
		if c := <-lastChild; c != nil {
			c.stop(b.cfg.StdinGrace, b.cfg.TermGrace)
		}
		return err
	}

	// Drain.
	start := time.Now()
	b.mu.Lock()
	b.draining = true
	inflight := len(b.pending)
	streams := make([]*session, 0, len(b.sessions))
	for _, s := range b.sessions {
		streams = append(streams, s)
	}
	b.mu.Unlock()
	for _, s := range streams {
		s.end()
	}
	b.log.Info("Stdio bridge draining", "inflight", inflight)
	shutCtx, cancel := context.WithTimeout(context.Background(), b.cfg.DrainBudget)
	if err := srv.Shutdown(shutCtx); err != nil {
		b.log.Warn("Requests still in flight at the end of the drain budget", "budget", b.cfg.DrainBudget)
		_ = srv.Close()
	}
	cancel()
	stopSupervise()
	<-supervised
	if c := <-lastChild; c != nil {
		c.stop(b.cfg.StdinGrace, b.cfg.TermGrace)
		b.log.Info("MCP server stopped", "exit", exitText(c.err))
	}
	b.log.Info("Stdio bridge drained", "duration", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// supervise starts the child, initializes it, waits for it to exit, fails
// what it left unanswered and starts it again with backoff, until ctx ends.
// It returns the child that runs when ctx ends (for the drain to stop), or nil.
func (b *Bridge) supervise(ctx context.Context) *child {
	backoff := minBackoff
	for {
		b.mu.Lock()
		b.gen++
		gen := b.gen
		b.mu.Unlock()
		started := time.Now()
		c, err := startChild(gen, b.cfg.Command, b.cfg.Stderr, b.cfg.MaxStderrLine, b.log)
		if err == nil {
			go func() {
				b.readLoop(c)
				// stdout closed: a child that closed it but lives on is
				// useless to the bridge, and its exit is what restarts it.
				c.signal(syscall.SIGKILL)
			}()
			err = b.initialize(ctx, c, gen)
			if err != nil {
				c.signal(syscall.SIGKILL)
			}
		}
		if err == nil {
			select {
			case <-c.exit:
			case <-ctx.Done():
				return c
			}
			err = errors.New(exitText(c.err))
		} else if c != nil {
			<-c.exit
		}
		b.childGone(gen, err)
		if time.Since(started) >= stableAfter {
			backoff = minBackoff
		}
		b.log.Error("MCP server process ended; restarting", "err", err, "generation", gen, "backoff", backoff.String())
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// initialize runs the MCP handshake with a new child (the bridge is its one
// client), replays the resource subscriptions the sessions hold, and makes
// the child current. After a restart every session is told that the lists
// may have changed, so that clients re-read them.
func (b *Bridge) initialize(ctx context.Context, c *child, gen uint64) error {
	b.mu.Lock()
	b.live = gen // the bridge's own requests may go to c; clients wait on ready
	b.mu.Unlock()
	ictx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	params := json.RawMessage(`{"protocolVersion":"` + b.cfg.ProtocolVersion + `","capabilities":` + askClientCapabilities + `,"clientInfo":` + bridgeClientInfo + `}`)
	res, err := b.roundTrip(ictx, c, "initialize", params)
	if err != nil {
		return err
	}
	if err := notify(c, "notifications/initialized", json.RawMessage(`{}`)); err != nil {
		return err
	}
	b.mu.Lock()
	uris := make([]string, 0, len(b.subs))
	for u := range b.subs {
		uris = append(uris, u)
	}
	b.mu.Unlock()
	for _, u := range uris {
		p, _ := json.Marshal(map[string]string{"uri": u})
		if _, err := b.roundTrip(ictx, c, "resources/subscribe", p); err != nil {
			b.log.Warn("Replaying a resource subscription to the restarted MCP server failed", "uri", u, "err", err)
		}
	}
	b.mu.Lock()
	b.initRes = res
	b.child = c
	restarted := b.restarts > 0
	close(b.ready)
	b.mu.Unlock()
	var info struct {
		ProtocolVersion string          `json:"protocolVersion"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
	}
	_ = json.Unmarshal(res, &info)
	b.log.Info("MCP server initialized", "generation", gen, "protocolVersion", info.ProtocolVersion, "serverInfo", string(info.ServerInfo))
	if restarted {
		for _, m := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
			b.broadcast(m)
		}
	}
	return nil
}

// childGone fails every request the child left unanswered and makes the
// next requests wait for its successor.
func (b *Bridge) childGone(gen uint64, cause error) {
	b.mu.Lock()
	if b.live == gen {
		b.live = 0
	}
	if b.child != nil && b.child.gen == gen {
		b.child = nil
	}
	select {
	case <-b.ready:
		b.ready = make(chan struct{})
	default:
	}
	b.restarts++
	ids := make([]int64, 0, len(b.pending))
	for id := range b.pending {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	text := "the MCP server process exited before answering (" + cause.Error() + "); it is being restarted"
	for _, id := range ids {
		b.fail(id, jsonrpc.CodeInternalError, text)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
