package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// listenUpstream answers server/discover and subscriptions/listen; each listen stream is
// handed to the test (streams) after its acknowledgement, and stays open until the request
// ends.
type listenUpstream struct {
	t       *testing.T
	streams chan *upStream
	// open and maxOpen count the listen requests being served (guarded by mu).
	mu            sync.Mutex
	open, maxOpen int
}

func (u *listenUpstream) opened(d int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.open += d
	u.maxOpen = max(u.maxOpen, u.open)
}

type upStream struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	filter string
	done   <-chan struct{}
}

func (s *upStream) send(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":%q}\n\n", method)
	s.w.(http.Flusher).Flush()
}

func (u *listenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Notifications json.RawMessage `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch req.Method {
	case protocol.MethodDiscover:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":[%q],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true}}}}`,
			req.ID, protocol.Version)
	case protocol.MethodListen:
		filter := string(req.Params.Notifications)
		u.opened(1)
		defer u.opened(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":%q,\"params\":{\"notifications\":%s}}\n\n",
			protocol.NotifAcknowledged, filter)
		w.(http.Flusher).Flush()
		s := &upStream{w: w, filter: filter, done: r.Context().Done()}
		u.streams <- s
		<-r.Context().Done()
		s.mu.Lock() // no write after the handler returns
		s.w = discard{}
		s.mu.Unlock()
	default:
		u.t.Errorf("unexpected upstream request %s", req.Method)
		http.Error(w, "unexpected", http.StatusBadRequest)
	}
}

type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
func (discard) Flush()                      {}

// changes is a Publisher that records what the relay publishes.
type changes chan protocol.Kind

func (c changes) Publish(k protocol.Kind, _ string) int { c <- k; return 0 }

// runRelay runs a relay from a listenUpstream into a hub until the test ends; published gets
// the changes it publishes.
func runRelay(t *testing.T) (u *listenUpstream, h *hub.Hub, published changes) {
	u = &listenUpstream{t: t, streams: make(chan *upStream, 16)}
	srv := httptest.NewServer(u)
	h = hub.New(hub.Options{Keepalive: -1})
	up := New(srv.URL, 1<<20)
	up.SetLogger(slog.New(slog.DiscardHandler))
	rl := NewRelay(up, h, slog.New(slog.DiscardHandler), nopRelayObserver{})
	published = make(changes, 16)
	rl.SetPublisher(published)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rl.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return u, h, published
}

// A change the upstream sends on the listen stream it is replacing, after it acknowledged the
// replacement (its delivery to each stream is its own; it had registered the change before the
// replacement), still reaches the relay: re-subscribing for a new resource URI loses no change.
func TestRelayResubscribeKeepsTheOldStreamsChanges(t *testing.T) {
	u, h, published := runRelay(t)

	first := <-u.streams
	if strings.Contains(first.filter, "resourceSubscriptions") {
		t.Fatalf("first listen asked for URIs: %s", first.filter)
	}
	// A client subscribes to a URI: the relay opens a second listen that asks for it.
	if !h.Reserve() || !h.Add(&hub.Stream{ID: []byte("1"), URIs: []string{"test://r"}}) {
		t.Fatal("adding a stream")
	}
	second := <-u.streams
	if !strings.Contains(second.filter, "test://r") {
		t.Fatalf("second listen = %s", second.filter)
	}
	// The tools change happened before the second listen was registered: the upstream
	// sends it on the first one only, after the second is acknowledged.
	time.Sleep(50 * time.Millisecond)
	first.send(protocol.NotifToolsListChanged)
	select {
	case k := <-published:
		if k != protocol.KindTools {
			t.Fatalf("published %v, want tools", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the change sent on the replaced listen was lost")
	}
	// The replaced listen ends once the overlap is over; the new one stays.
	select {
	case <-first.done:
	case <-time.After(relayOverlap + 5*time.Second):
		t.Fatal("the replaced listen was never closed")
	}
	second.send(protocol.NotifToolsListChanged)
	select {
	case <-published:
	case <-time.After(5 * time.Second):
		t.Fatal("the current listen's change was lost")
	}
}

// A client that keeps subscribing to new URIs makes the relay re-subscribe each time; the
// streams it replaces are read a while, but no more than one at a time stays open.
func TestRelayResubscribeChurnIsBounded(t *testing.T) {
	u, h, _ := runRelay(t)
	<-u.streams
	for i := range 8 {
		uri := fmt.Sprintf("test://r%d", i)
		if !h.Reserve() || !h.Add(&hub.Stream{ID: []byte("1"), URIs: []string{uri}}) {
			t.Fatal("adding a stream")
		}
		select {
		case s := <-u.streams:
			if !strings.Contains(s.filter, uri) {
				t.Fatalf("listen %d = %s", i, s.filter)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no re-subscription for %s", uri)
		}
	}
	// Every re-subscription took well under relayOverlap; the last one's predecessor may still
	// be open, and one more while its successor was being opened.
	u.mu.Lock()
	m := u.maxOpen
	u.mu.Unlock()
	if m > 3 {
		t.Fatalf("up to %d upstream listens open at once, want 3 at most", m)
	}
}

type nopRelayObserver struct{}

func (nopRelayObserver) RelayConnected(bool) {}
