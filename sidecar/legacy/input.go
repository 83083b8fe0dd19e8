package legacy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file connects a 2025-era client's session to a 2026-07-28 upstream
// for what the two generations do differently during one call:
//
//   - Input (SEP-2322, MRTR). A 2026 upstream that needs elicitation,
//     sampling or the client's roots answers tools/call, prompts/get or
//     resources/read with resultType "input_required" and inputRequests.
//     A 2025-era client expects the server to send it elicitation/create,
//     sampling/createMessage or roots/list itself. The sidecar sends those
//     requests on the call's own SSE response, takes the client's JSON-RPC
//     responses from its POSTs (202), and retries the call upstream with
//     params.inputResponses and params.requestState and a new JSON-RPC id,
//     as the 2026 spec prescribes, until a complete result (at most
//     MaxInputRounds rounds). The client's answer must reach the replica
//     that holds the call (docs/sidecar.md).
//   - Cancellation. A 2025-era client cancels with notifications/cancelled
//     (closing its POST is not a cancellation in 2025-11-25); a 2026
//     upstream is cancelled by closing the request's HTTP stream. The
//     sidecar closes the upstream request of the named call, and answers
//     the call's POST with no JSON-RPC response (the 2025 rule).
//
// Everything here is bounded: calls tracked and input requests waiting per
// replica, input requests per round, rounds per call, the wait for each
// round (Options.InputTimeout), and the size of the client's answer (the
// request body limit).

// Bounds of the input relay and of the cancellation table.
const (
	// DefaultInputTimeout bounds the wait for a client's answers to one
	// round of input requests (a person may be answering an elicitation).
	DefaultInputTimeout = 10 * time.Minute
	// MaxInputRounds bounds the input_required rounds of one call (go-sdk's
	// client gives up after as many).
	MaxInputRounds = 10
	// maxInputRequests bounds the input requests of one round.
	maxInputRequests = 16
	// maxPendingInputs bounds the input requests waiting for an answer on
	// this replica.
	maxPendingInputs = 4096
	// maxTrackedCalls bounds the 2025-era calls this replica can cancel by
	// notifications/cancelled (calls beyond it still end when their POST
	// closes).
	maxTrackedCalls = 16384
	// inputKeepalive is the interval of SSE comments on a call's stream
	// while it waits for the client's input.
	inputKeepalive = 15 * time.Second
)

// Methods of the 2025-era server-to-client requests an input request
// becomes, and the client capability each needs.
var inputMethods = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// inputIDPrefix starts the ids of the requests the sidecar sends clients
// (then the replica's event prefix, a sequence number and a random tail).
const inputIDPrefix = "switchboard-input-"

// ErrCancelledByClient is the cause of a call context ended by the client's
// notifications/cancelled.
var ErrCancelledByClient = errors.New("cancelled by the client (notifications/cancelled)")

// callKey names a request of a session on this replica: the session's key
// and the request id as the client wrote it.
type callKey struct{ session, id string }

// clientCalls is this replica's table of 2025-era calls in flight and of the
// sidecar's requests to 2025-era clients that wait for an answer.
type clientCalls struct {
	mu      sync.Mutex
	calls   map[callKey]context.CancelCauseFunc
	waiting map[callKey]chan []byte
	seq     int64
}

func newClientCalls() *clientCalls {
	return &clientCalls{calls: map[callKey]context.CancelCauseFunc{}, waiting: map[callKey]chan []byte{}}
}

// track makes a session's call cancellable by notifications/cancelled: the
// returned context ends when the client cancels it (cause
// ErrCancelledByClient). done must be called when the call ends.
func (c *clientCalls) track(parent context.Context, sess *Session, id json.RawMessage) (context.Context, func()) {
	k := callKey{sess.key, string(id)}
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	_, dup := c.calls[k]
	if dup || len(c.calls) >= maxTrackedCalls {
		// An id already in flight in this session (the client broke the
		// rule) or a full table: this call ends only when its POST does.
		c.mu.Unlock()
		return ctx, func() { cancel(nil) }
	}
	c.calls[k] = cancel
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.calls, k)
		c.mu.Unlock()
		cancel(nil)
	}
}

// cancel ends the named call; false when none is in flight here.
func (c *clientCalls) cancel(k callKey) bool {
	c.mu.Lock()
	cancel := c.calls[k]
	c.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(ErrCancelledByClient)
	return true
}

// expect registers a request the sidecar is about to send to a session's
// client; the client's response arrives on the returned channel.
func (c *clientCalls) expect(sess *Session, prefix string) (id string, ch chan []byte, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) >= maxPendingInputs {
		return "", nil, false
	}
	c.seq++
	// A random tail: the id is the handle the answer is delivered by, and the
	// prefix is in every priming event id a client sees.
	id = strconv.Quote(inputIDPrefix + prefix + strconv.FormatInt(c.seq, 36) + "-" + rand.Text())
	ch = make(chan []byte, 1)
	c.waiting[callKey{sess.key, id}] = ch
	return id, ch, true
}

// forget drops a request the sidecar no longer waits for.
func (c *clientCalls) forget(sess *Session, id string) {
	c.mu.Lock()
	delete(c.waiting, callKey{sess.key, id})
	c.mu.Unlock()
}

// deliver hands a client's response to the request waiting for it.
func (c *clientCalls) deliver(k callKey, msg []byte) bool {
	c.mu.Lock()
	ch := c.waiting[k]
	delete(c.waiting, k)
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- msg // buffered, and delivered at most once (deleted above)
	return true
}

// Call is one 2025-era call that may go upstream several times: the
// context the client can cancel, and the call's response stream once the
// sidecar holds it open as SSE across input rounds.
type Call struct {
	Ctx context.Context
	// Started is set once the answer is an SSE stream whose head has been
	// written: every later message is an event on it.
	Started bool
	// Inputs is the input_required result the last upstream attempt
	// captured (nil when it answered otherwise).
	Inputs []byte
	// MRTR says the call may be answered input_required (tools/call,
	// prompts/get, resources/read of a session whose client can answer).
	MRTR bool
}

// Capture keeps an upstream response that is an input_required result
// instead of answering the client with it.
func (lc *Call) Capture(msg []byte) bool {
	if lc == nil || !lc.MRTR {
		return false
	}
	rs, re, ok := wire.Span(msg, "result")
	if !ok {
		return false
	}
	rt, ok, _ := wire.Field(msg[rs:re], "resultType")
	if !ok {
		return false
	}
	if v, _ := wire.StringValue(rt); v != protocol.ResultInputRequired {
		return false
	}
	lc.Inputs = bytes.Clone(msg[rs:re])
	return true
}

// ErrNoAnswer says the call ended without anything more to write (cancelled by
// the client, or the client went away).
var ErrNoAnswer = &wire.Error{}

// StartEvents turns a call's response into an SSE stream (head written, not
// yet flushed); retry adds the 2025-era reconnection hint.
func StartEvents(w http.ResponseWriter, retry bool) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if retry {
		_, _ = w.Write(hub.LegacyRetryEvent)
	}
}

// WriteEvent writes one message as an SSE event on a started stream.
func WriteEvent(w http.ResponseWriter, msg []byte, flush bool) error {
	out := make([]byte, 0, len(msg)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	out = append(out, '\n', '\n')
	if _, err := w.Write(out); err != nil {
		return err
	}
	if flush {
		return http.NewResponseController(w).Flush()
	}
	return nil
}

// inputRequest is one entry of an InputRequiredResult's inputRequests.
type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// AskClient sends the input requests of lc.Inputs to the client of sess as
// 2025-era server-to-client requests on the call's stream and waits for
// every answer. It returns the inputResponses object for the retry and the
// requestState to echo. When the call's context ends, drained says whether
// the drain ended it, and with which answer (nil: the client did).
func (rm *Room) AskClient(w http.ResponseWriter, r *http.Request, sess *Session, lc *Call, drained func() *wire.Error) (json.RawMessage, json.RawMessage, *wire.Error) {
	var ir struct {
		InputRequests map[string]inputRequest `json:"inputRequests"`
		RequestState  json.RawMessage         `json:"requestState"`
	}
	if err := json.Unmarshal(lc.Inputs, &ir); err != nil {
		return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: the MCP server's input_required result is malformed: "+err.Error())
	}
	if len(ir.InputRequests) == 0 {
		// Only a requestState: the upstream wants the call again as is
		// (load shedding); retry once more with nothing to add.
		return json.RawMessage(`{}`), ir.RequestState, nil
	}
	if len(ir.InputRequests) > maxInputRequests {
		return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError,
			"Internal error: the MCP server asked for "+strconv.Itoa(len(ir.InputRequests))+" inputs at once; at most "+strconv.Itoa(maxInputRequests)+" are relayed")
	}
	keys := make([]string, 0, len(ir.InputRequests))
	for k, in := range ir.InputRequests {
		capName, ok := inputMethods[in.Method]
		if !ok {
			return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: the MCP server asked for input by "+strconv.Quote(in.Method)+", which is not elicitation/create, sampling/createMessage or roots/list")
		}
		if _, declared, _ := wire.Field(sess.caps, capName); !declared {
			return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError,
				"Internal error: the MCP server asked for "+in.Method+", but this client did not declare the "+capName+" capability in initialize")
		}
		if in.Params != nil && !wire.IsObject(in.Params) {
			return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: the MCP server's "+in.Method+" input request has params that are not an object")
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !lc.Started {
		StartEvents(w, true)
		lc.Started = true
	}
	out := make([]sentInput, 0, len(keys))
	defer func() {
		for _, x := range out {
			rm.calls.forget(sess, x.id)
		}
	}()
	for _, k := range keys {
		in := ir.InputRequests[k]
		id, ch, ok := rm.calls.expect(sess, rm.eventPrefix)
		if !ok {
			return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: too many requests to clients wait for an answer on this server; retry later")
		}
		out = append(out, sentInput{k, id, ch})
		msg := make([]byte, 0, len(in.Params)+len(in.Method)+64)
		msg = append(msg, `{"jsonrpc":"2.0","id":`...)
		msg = append(msg, id...)
		msg = append(msg, `,"method":`...)
		msg = append(msg, strconv.Quote(in.Method)...)
		if in.Params != nil {
			msg = append(msg, `,"params":`...)
			msg = append(msg, in.Params...)
		}
		msg = append(msg, '}')
		if WriteEvent(w, msg, false) != nil {
			return nil, nil, ErrNoAnswer
		}
	}
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return nil, nil, ErrNoAnswer
	}
	deadline := time.NewTimer(rm.inputTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(inputKeepalive)
	defer tick.Stop()
	var resp bytes.Buffer
	resp.WriteByte('{')
	for i, x := range out {
		var msg []byte
		for msg == nil {
			select {
			case msg = <-x.ch:
			case <-tick.C:
				if _, err := w.Write([]byte(": waiting for the client's input\n\n")); err != nil || rc.Flush() != nil {
					return nil, nil, ErrNoAnswer
				}
			case <-deadline.C:
				cancelInputs(w, out[i:], "timed out")
				return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError,
					"Internal error: the client did not answer the MCP server's "+ir.InputRequests[x.key].Method+" request within "+rm.inputTimeout.String())
			case <-lc.Ctx.Done():
				if e := drained(); e != nil {
					return nil, nil, e
				}
				if r.Context().Err() == nil {
					cancelInputs(w, out[i:], "the call was cancelled")
				}
				return nil, nil, ErrNoAnswer
			}
		}
		res, hasResult, _ := wire.Field(msg, "result")
		if !hasResult || !wire.IsObject(res) {
			text := "no result"
			if eo, ok, _ := wire.Field(msg, "error"); ok {
				mv, _, _ := wire.Field(eo, "message")
				if m, ok := wire.StringValue(mv); ok {
					text = m
				}
			}
			cancelInputs(w, out[i+1:], "another input request failed")
			return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError,
				"Internal error: the client answered the MCP server's "+ir.InputRequests[x.key].Method+" request with an error: "+text)
		}
		if i > 0 {
			resp.WriteByte(',')
		}
		resp.Write(wire.JSONString(x.key))
		resp.WriteByte(':')
		resp.Write(res)
	}
	resp.WriteByte('}')
	return resp.Bytes(), ir.RequestState, nil
}

// sentInput is an input request sent to the client: its key in
// inputRequests, its JSON-RPC id, where its answer arrives.
type sentInput struct {
	key, id string
	ch      chan []byte
}

// cancelInputs tells the client that the sidecar no longer waits for these
// requests (2025 notifications/cancelled, best effort).
func cancelInputs(w http.ResponseWriter, pending []sentInput, reason string) {
	for _, x := range pending {
		_ = WriteEvent(w, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+x.id+`,"reason":`+string(wire.JSONString(reason))+`}}`), false)
	}
	_ = http.NewResponseController(w).Flush()
}

// RetryWithInput rewrites the body of a call (whose client id is id) for
// its next upstream attempt: the client's answers in params.inputResponses,
// the upstream's requestState echoed (dropped when it gave none), and a new
// JSON-RPC id, upID (the answer is given the client's id back by
// WithClientID).
func RetryWithInput(body []byte, id, responses, state json.RawMessage, round int) (_, upID []byte, _ *wire.Error) {
	sets := []wire.KV{{Key: "inputResponses", Val: responses}}
	var drop []string
	if len(state) > 0 && string(state) != "null" {
		sets = append(sets, wire.KV{Key: "requestState", Val: state})
	} else {
		drop = []string{"requestState"}
	}
	body, err := wire.WithParams(body, func(p []byte) ([]byte, error) { return wire.SetMembers(p, sets, drop) })
	if err != nil {
		return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: retrying the call with the client's input: "+err.Error())
	}
	upID = wire.JSONString("switchboard-retry-" + strconv.Itoa(round) + "-" + string(id))
	body, err = wire.SetMembers(body, []wire.KV{{Key: "id", Val: upID}}, nil)
	if err != nil {
		return nil, nil, wire.NewError(http.StatusOK, wire.CodeInternalError, "Internal error: retrying the call with the client's input: "+err.Error())
	}
	return body, upID, nil
}

// WithClientID gives an upstream answer to a retried call (sent upstream
// as upstreamID; nil: not retried) the client's request id back.
func WithClientID(id, upstreamID json.RawMessage, msg []byte) []byte {
	if upstreamID == nil {
		return msg
	}
	if _, ok, _ := wire.Field(msg, "id"); !ok {
		return msg
	}
	out, err := wire.SetMembers(msg, []wire.KV{{Key: "id", Val: id}}, nil)
	if err != nil {
		return msg
	}
	return out
}
