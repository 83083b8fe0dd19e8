package stdio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/switchboard-mcp/switchboard/sidecar/procs"
)

const (
	headerSession = "Mcp-Session-Id"
	// streamWriteTimeout bounds one write to a client (a client that stops
	// reading is dropped, it never holds the child's output).
	streamWriteTimeout = 5 * time.Second
)

// session is one client's initialized session. subs and calls are guarded by
// Bridge.mu; the GET stream by session.mu.
type session struct {
	id    string
	subs  map[string]bool  // resource URIs this session subscribed to
	calls map[string]int64 // the client's request id (JSON) -> the id the child sees

	mu     sync.Mutex  // guards stream
	stream chan []byte // the open GET stream's queue, nil when none
}

// push queues a message for the session's GET stream. With no stream open
// the message is dropped (2025-era streamable HTTP: notifications reach only
// a client that listens); a stream that is sessionQueue behind is closed.
func (s *session) push(msg []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == nil {
		return
	}
	select {
	case s.stream <- msg:
	default:
		close(s.stream)
		s.stream = nil
	}
}

// open replaces the session's GET stream (a new GET supersedes the old one).
func (s *session) open() chan []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		close(s.stream)
	}
	s.stream = make(chan []byte, sessionQueue)
	return s.stream
}

// closeIf forgets ch when it is still the session's stream.
func (s *session) closeIf(ch chan []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == ch {
		close(ch)
		s.stream = nil
	}
}

// end closes the session's GET stream.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		close(s.stream)
		s.stream = nil
	}
}

// ServeHTTP serves the 2025-era Streamable HTTP endpoint.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	procs.Active()
	switch r.Method {
	case http.MethodPost:
		b.post(w, r)
	case http.MethodGet:
		b.get(w, r)
	case http.MethodDelete:
		b.del(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeJSON(w, http.StatusMethodNotAllowed, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Method not allowed"))
	}
}

func (b *Bridge) post(w http.ResponseWriter, r *http.Request) {
	// The deadline covers the body only (a client that never sends it would hold this
	// goroutine and the connection for good); it is cleared before the call, which may stream
	// for long. After a failed read it stays, and the connection closes after the answer.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(b.cfg.BodyReadTimeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.cfg.MaxBodyBytes))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	} else {
		w.Header().Set("Connection", "close")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Request body over %d bytes", b.cfg.MaxBodyBytes)))
			return
		}
		writeJSON(w, http.StatusBadRequest, errorResponse(jsonrpc.ID{}, jsonrpc.CodeParseError, "Reading the request body: "+err.Error()))
		return
	}
	if t := strings.TrimSpace(string(body[:min(len(body), 16)])); strings.HasPrefix(t, "[") {
		writeJSON(w, http.StatusBadRequest, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not supported"))
		return
	}
	msg, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorResponse(jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: "+err.Error()))
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	if isReq && req.IsCall() && req.Method == "initialize" {
		b.initializeSession(w, r, req)
		return
	}
	s, status, text := b.session(r)
	if s == nil {
		var id jsonrpc.ID
		if isReq {
			id = req.ID
		}
		writeJSON(w, status, errorResponse(id, jsonrpc.CodeInvalidRequest, text))
		return
	}
	switch {
	case !isReq:
		// A client's answer to the child's question (ask.go).
		if resp, ok := msg.(*jsonrpc.Response); ok {
			b.clientResponse(resp)
		}
		w.WriteHeader(http.StatusAccepted)
	case !req.IsCall():
		if !b.clientNotification(s, req) {
			// 2025-era Streamable HTTP: a notification the server does not
			// accept gets an error status.
			writeJSON(w, http.StatusBadRequest, errorResponse(jsonrpc.ID{}, jsonrpc.CodeMethodNotFound,
				"Method not found: "+req.Method+" is not a notification a client sends"))
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case req.Method == "resources/subscribe" || req.Method == "resources/unsubscribe":
		b.subscription(w, r, s, req)
	default:
		b.forward(w, r, s, req)
	}
}

// session finds the request's session, or says why there is none.
func (b *Bridge) session(r *http.Request) (*session, int, string) {
	sid := r.Header.Get(headerSession)
	if sid == "" {
		return nil, http.StatusBadRequest, "Bad Request: " + headerSession + " header is required (send initialize first)"
	}
	b.mu.Lock()
	s := b.sessions[sid]
	b.mu.Unlock()
	if s == nil {
		return nil, http.StatusNotFound, "Session not found"
	}
	return s, 0, ""
}

// initializeSession opens a session and answers initialize from the child's
// own initialize result (the child is initialized once, by the bridge).
func (b *Bridge) initializeSession(w http.ResponseWriter, r *http.Request, req *jsonrpc.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyWait)
	defer cancel()
	if _, err := b.waitChild(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error()))
		return
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	s := &session{id: hex.EncodeToString(raw[:]), subs: map[string]bool{}, calls: map[string]int64{}}
	b.mu.Lock()
	if b.draining || len(b.sessions) >= maxSessions {
		b.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, errorResponse(req.ID, jsonrpc.CodeInternalError, "The stdio bridge takes no new sessions (draining, or at its limit)"))
		return
	}
	b.sessions[s.id] = s
	res := b.initRes
	b.mu.Unlock()
	data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: res})
	w.Header().Set(headerSession, s.id)
	writeJSON(w, http.StatusOK, data)
}

// clientNotification handles a notification from a client and reports
// whether it is one a client sends: initialized is the bridge's own
// business (done once per child), cancelled is mapped to the id the child
// knows for a call of the same session (never another session's), progress
// and tasks/status go to the child as they are. Nothing else reaches the
// child, which every session shares.
func (b *Bridge) clientNotification(s *session, n *jsonrpc.Request) bool {
	switch n.Method {
	case "notifications/initialized":
		return true
	case "notifications/roots/list_changed":
		return true // the bridge declares no roots capability to the child
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if json.Unmarshal(n.Params, &p) != nil {
			return true
		}
		b.mu.Lock()
		id, ok := s.calls[string(p.RequestID)]
		c := b.child
		b.mu.Unlock()
		if ok && c != nil {
			b.fail(id, -32800, "Request cancelled")
			b.cancel(c, id, p.Reason)
		}
		return true
	case "notifications/progress", "notifications/tasks/status":
	default:
		return false
	}
	b.mu.Lock()
	c := b.child
	b.mu.Unlock()
	if c != nil {
		_ = notify(c, n.Method, n.Params)
	}
	return true
}

// forward sends a client's request to the child and relays the answer, as
// JSON, or as an SSE stream carrying the call's progress first when the
// request asked for progress and the client accepts SSE.
func (b *Bridge) forward(w http.ResponseWriter, r *http.Request, s *session, req *jsonrpc.Request) {
	c, err := b.waitChild(r.Context())
	if err != nil {
		status := http.StatusOK
		if errors.Is(err, errDraining) {
			status = http.StatusServiceUnavailable
		}
		writeJSON(w, status, errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error()))
		return
	}
	// A client that takes SSE gets a stream when something comes before the
	// answer (progress, a question of the child's); otherwise JSON.
	cl := &call{origID: req.ID, session: s, final: make(chan []byte, 1)}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		cl.stream = make(chan []byte, callQueue)
		defer b.dropAsks(cl)
	}
	id, err := b.send(c, req, cl)
	if err != nil {
		writeJSON(w, http.StatusOK, errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error()))
		return
	}
	key := idKey(req.ID)
	b.mu.Lock()
	s.calls[key] = id
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		if s.calls[key] == id {
			delete(s.calls, key)
		}
		b.mu.Unlock()
	}()

	var rc *http.ResponseController
	for {
		select {
		case p := <-cl.stream:
			if rc == nil {
				rc = http.NewResponseController(w)
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Cache-Control", "no-cache")
				w.WriteHeader(http.StatusOK)
			}
			if writeEvent(rc, w, p) != nil {
				b.cancel(c, id, "the client went away")
				return
			}
		case data := <-cl.final:
			if rc == nil {
				writeJSON(w, http.StatusOK, data)
				return
			}
			// Progress sent before the answer is still queued: send it first.
			for drained := false; !drained; {
				select {
				case p := <-cl.stream:
					_ = writeEvent(rc, w, p)
				default:
					drained = true
				}
			}
			_ = writeEvent(rc, w, data)
			return
		case <-r.Context().Done():
			b.cancel(c, id, "the client went away")
			return
		}
	}
}

// subscription keeps one child subscription per URI however many sessions
// subscribe to it: the first subscribe and the last unsubscribe reach the
// child, the rest are answered by the bridge. Subscriptions are replayed to
// a restarted child.
func (b *Bridge) subscription(w http.ResponseWriter, r *http.Request, s *session, req *jsonrpc.Request) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(req.Params, &p) != nil || p.URI == "" {
		writeJSON(w, http.StatusOK, errorResponse(req.ID, jsonrpc.CodeInvalidParams, "params.uri is required"))
		return
	}
	subscribe := req.Method == "resources/subscribe"
	b.mu.Lock()
	had := s.subs[p.URI]
	others := b.subs[p.URI]
	if had {
		others--
	}
	b.mu.Unlock()
	ok := data(req.ID, `{}`)
	if subscribe == had || others > 0 {
		// Nothing changes for the child: already (un)subscribed by this
		// session, or other sessions keep the child's subscription.
		b.setSub(s, p.URI, subscribe)
		writeJSON(w, http.StatusOK, ok)
		return
	}
	c, err := b.waitChild(r.Context())
	if err == nil {
		_, err = b.roundTrip(r.Context(), c, req.Method, req.Params)
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			writeJSON(w, http.StatusOK, errorResponse(req.ID, we.Code, we.Message))
			return
		}
		writeJSON(w, http.StatusOK, errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error()))
		return
	}
	b.setSub(s, p.URI, subscribe)
	writeJSON(w, http.StatusOK, ok)
}

// setSub records session s as (un)subscribed to uri, keeping the counts.
func (b *Bridge) setSub(s *session, uri string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.subs[uri] == on {
		return
	}
	if on {
		s.subs[uri] = true
		b.subs[uri]++
		return
	}
	delete(s.subs, uri)
	if b.subs[uri]--; b.subs[uri] <= 0 {
		delete(b.subs, uri)
	}
}

func (b *Bridge) get(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		writeJSON(w, http.StatusNotAcceptable, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "GET needs Accept: text/event-stream"))
		return
	}
	s, status, text := b.session(r)
	if s == nil {
		writeJSON(w, status, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, text))
		return
	}
	b.mu.Lock()
	draining := b.draining
	b.mu.Unlock()
	if draining {
		writeJSON(w, http.StatusServiceUnavailable, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInternalError, errDraining.Error()))
		return
	}
	ch := s.open()
	defer s.closeIf(ch)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	tick := time.NewTicker(keepalive)
	defer tick.Stop()
	for {
		select {
		case msg, ok := <-ch:
			if !ok || writeEvent(rc, w, msg) != nil {
				return
			}
		case <-tick.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}

func (b *Bridge) del(w http.ResponseWriter, r *http.Request) {
	s, status, text := b.session(r)
	if s == nil {
		writeJSON(w, status, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, text))
		return
	}
	b.mu.Lock()
	delete(b.sessions, s.id)
	var last []string
	for uri := range s.subs {
		if b.subs[uri]--; b.subs[uri] <= 0 {
			delete(b.subs, uri)
			last = append(last, uri)
		}
	}
	s.subs = map[string]bool{}
	c := b.child
	b.mu.Unlock()
	s.end()
	if c != nil && len(last) > 0 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), readyWait)
			defer cancel()
			for _, uri := range last {
				p, _ := json.Marshal(map[string]string{"uri": uri})
				_, _ = b.roundTrip(ctx, c, "resources/unsubscribe", p)
			}
		}()
	}
	w.WriteHeader(http.StatusOK)
}

func writeEvent(rc *http.ResponseController, w io.Writer, msg []byte) error {
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	buf := make([]byte, 0, len(msg)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, msg...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return rc.Flush()
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// data is a success response with a literal result.
func data(id jsonrpc.ID, result string) []byte {
	out, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(result)})
	return out
}

// idKey is a request id as JSON (the form notifications/cancelled names it in).
func idKey(id jsonrpc.ID) string {
	out, _ := json.Marshal(id.Raw())
	return string(out)
}
