package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// A 2025-era server asks its client for input in the middle of a call: it
// sends elicitation/create, sampling/createMessage or roots/list on the
// call's response stream and waits for the answer. A 2026-07-28 client is
// never asked mid-call; it gets an input_required result and calls again
// with inputResponses and the requestState (MRTR). This file joins the two:
//
//   - The upstream's request becomes the client's input_required result (on
//     tools/call, prompts/get and resources/read, the only methods that may
//     answer so). The upstream call stays open, held on this replica for
//     legacyInputWait, with its upstream session.
//   - The client's retry carries requestState "sb1.<token>[.<answers>]": the
//     token finds the held call, the answer goes to the upstream's pending
//     request, and the rest of the call (its result, progress, or the next
//     question) is served as the retry's answer.
//   - A retry whose token is not held here (it reached another replica, the
//     wait expired, the sidecar restarted) runs the call again on this
//     replica's upstream, and answers the upstream's questions itself from
//     the client's inputResponses and the answers of earlier rounds carried in
//     requestState, as long as the upstream asks the same question (the
//     input key is a digest of method and params). Only a question not
//     answered yet goes back to the client. This is the MRTR contract (a
//     server re-runs its handler with the inputs); the tool's work before the
//     question runs again there.
//   - A client that did not declare the capability the question needs gets
//     -32021 (data.requiredCapabilities), and the upstream an error.
//   - The token is 128 random bits bound to the Authorization header of the
//     call that started it: only that caller resumes it.

const (
	// legacyInputWait is how long a held call waits for the client's retry.
	legacyInputWait = 60 * time.Second
	// finishWait and finishMax bound how long, and how much, finish reads
	// of a call's upstream stream after its response.
	finishWait = 100 * time.Millisecond
	finishMax  = 64 << 10
	// legacyInputMax bounds the calls held at once per sidecar; past it the
	// upstream's question is refused and the client asked to retry later.
	legacyInputMax = 64
	// legacyStateAnswersMax bounds the earlier answers carried in
	// requestState (larger ones are not carried: a re-run elsewhere asks
	// again).
	legacyStateAnswersMax = 16 << 10
	// codeMissingCapability is MissingRequiredClientCapability (spec §1.3).
	codeMissingCapability = -32021
	// requestStatePrefix marks the sidecar's own requestState values.
	requestStatePrefix = "sb1."
)

// inputCapability is the client capability each input request needs.
var inputCapability = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// mayNeedInput tells the methods that may answer input_required.
func mayNeedInput(method string) bool {
	return method == "tools/call" || method == "prompts/get" || method == "resources/read"
}

// callInput is what one client call brings to the upstream's questions.
type callInput struct {
	// allowed: the call may answer input_required.
	allowed bool
	// body is the client's request (its _meta has the clientCapabilities,
	// read only when the upstream asks).
	body []byte
	// answers are the client's inputResponses and the earlier rounds'
	// answers (from requestState), by input key, each used once.
	answers map[string]json.RawMessage
	// given are all of them, for the next requestState.
	given map[string]json.RawMessage
	// authHeader is the call's Authorization header and verified subject
	// (X-Switchboard-Subject), NUL-separated (a held call keeps its digest).
	authHeader string
}

// upCall is one upstream call answered on an SSE stream, possibly held
// across client retries.
type upCall struct {
	s      *upSession
	rd     *wire.SSEReader
	body   io.ReadCloser
	cancel context.CancelFunc // ends the upstream request
	// abandon ends it when the client gives the call up, telling the
	// upstream (cancelUpstream).
	abandon func()
	stop    func() bool // detaches cancel from the current client request
	in      callInput
	// released is set by release (one goroutine owns an upCall at a time).
	released bool
}

// heldCall is an upCall waiting for the client's answer to one question.
type heldCall struct {
	c      *upCall
	upID   json.RawMessage // the upstream's request id
	key    string          // the input key the client answers
	method string
	auth   [32]byte // digest of the Authorization of the call that started it
	timer  *time.Timer
}

// inputKey names an upstream question: the same question (method and
// params) gets the same key on every replica.
func inputKey(method string, params []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write(params)
	return "sb-" + hex.EncodeToString(h.Sum(nil)[:12])
}

func authDigest(authorization string) [32]byte {
	return sha256.Sum256([]byte(authorization))
}

// encodeState renders a requestState: the token, and the answers so far
// when they fit.
func encodeState(token string, answers map[string]json.RawMessage) string {
	st := requestStatePrefix + token
	if len(answers) > 0 {
		if b, err := json.Marshal(answers); err == nil && len(b) <= legacyStateAnswersMax {
			st += "." + base64.RawURLEncoding.EncodeToString(b)
		}
	}
	return st
}

// decodeState reads a requestState of the sidecar's; anything else gives
// no token and no answers.
func decodeState(st string) (token string, answers map[string]json.RawMessage) {
	rest, ok := strings.CutPrefix(st, requestStatePrefix)
	if !ok {
		return "", nil
	}
	token, enc, _ := strings.Cut(rest, ".")
	if enc != "" && len(enc) <= 2*legacyStateAnswersMax {
		if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
			_ = json.Unmarshal(b, &answers)
		}
	}
	return token, answers
}

// retryInput takes inputResponses and requestState out of a retry's params
// (a 2025 server knows neither) and returns them.
func retryInput(body []byte) (out []byte, token string, answers map[string]json.RawMessage, err error) {
	params, ok, _ := wire.Field(body, "params")
	if !ok || !wire.IsObject(params) {
		return body, "", nil, nil
	}
	if raw, ok, _ := wire.Field(params, "requestState"); ok {
		st, _ := wire.StringValue(raw)
		token, answers = decodeState(st)
	}
	if raw, ok, _ := wire.Field(params, "inputResponses"); ok && wire.IsObject(raw) {
		var rs map[string]json.RawMessage
		if json.Unmarshal(raw, &rs) != nil {
			return nil, "", nil, errors.New("inputResponses must be an object of results")
		}
		if answers == nil {
			answers = make(map[string]json.RawMessage, len(rs))
		}
		for k, v := range rs {
			answers[k] = v
		}
	}
	np, err := wire.SetMembers(params, nil, []string{"requestState", "inputResponses"})
	if err != nil {
		return nil, "", nil, err
	}
	out, err = wire.SetMembers(body, []wire.KV{{Key: "params", Val: np}}, nil)
	return out, token, answers, err
}

// clientCaps returns the request's io.modelcontextprotocol/clientCapabilities.
func clientCaps(body []byte) []byte {
	params, _, _ := wire.Field(body, "params")
	meta, _, _ := wire.Field(params, "_meta")
	caps, _, _ := wire.Field(meta, reservedMetaPrefix+"clientCapabilities")
	return caps
}

// takeHeld removes and returns the call held under token for the caller
// whose Authorization digest is auth.
func (t *generationTransport) takeHeld(token string, auth [32]byte) *heldCall {
	if token == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.held[token]
	if h == nil || subtle.ConstantTimeCompare(h.auth[:], auth[:]) != 1 || !h.timer.Stop() {
		return nil
	}
	delete(t.held, token)
	return h
}

// resume serves a retry of a held call: the client's answer goes to the
// upstream's pending request, and the rest of the call is the answer.
func (t *generationTransport) resume(req *http.Request, token string, h *heldCall, in callInput, origID []byte) (*http.Response, error) {
	answer, ok := in.answers[h.key]
	if !ok {
		t.hold(token, h)
		return jsonResponse(req, http.StatusBadRequest, wire.ErrorBody(origID, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams,
			"Invalid params: inputResponses has no answer for the input request "+strconv.Quote(h.key)+" ("+h.method+") that requestState refers to"))), nil
	}
	c := h.c
	in.given = make(map[string]json.RawMessage, len(c.in.given)+len(in.answers))
	for k, v := range c.in.given {
		in.given[k] = v
	}
	for k, v := range in.answers {
		in.given[k] = v
	}
	for k, v := range c.in.answers {
		if _, ok := in.answers[k]; !ok {
			in.answers[k] = v
		}
	}
	delete(in.answers, h.key)
	c.in = in
	c.stop = context.AfterFunc(req.Context(), c.abandon)
	reply := append(append(append([]byte(`{"jsonrpc":"2.0","id":`), h.upID...), `,"result":`...), answer...)
	if err := t.replyUpstream(req.Context(), c.s, append(reply, '}')); err != nil {
		t.release(c)
		return jsonResponse(req, http.StatusBadGateway, wire.ErrorBody(origID, wire.NewError(http.StatusBadGateway, wire.CodeInternalError,
			"Internal error: the 2025-era upstream did not take the answer to its "+h.method+" ("+err.Error()+"); call again without requestState"))), nil
	}
	return t.serveCallStream(req, c, origID)
}

// hold keeps a call for the client's retry, or expires it.
func (t *generationTransport) hold(token string, h *heldCall) {
	t.mu.Lock()
	if h.timer == nil {
		h.timer = time.AfterFunc(legacyInputWait, func() { t.expire(token) })
	} else {
		h.timer.Reset(legacyInputWait)
	}
	t.held[token] = h
	t.mu.Unlock()
}

// expire ends a held call the client did not come back for: the upstream's
// question gets an error, and the rest of its answer is read and dropped.
func (t *generationTransport) expire(token string) {
	t.mu.Lock()
	h := t.held[token]
	delete(t.held, token)
	t.mu.Unlock()
	if h == nil {
		return
	}
	t.log.Load().Info("A call waiting for the client's input expired; the 2025-era upstream's request gets an error",
		"method", h.method, "wait", legacyInputWait)
	t.refuseAndDrain(h.c, h.upID, h.method+" was not answered: the client did not retry the call with inputResponses within "+legacyInputWait.String())
}

// refuseAndDrain answers the upstream's pending question with an error and
// reads the rest of the call's answer in the background (bounded), so that
// the upstream handler ends cleanly and the session is free again.
func (t *generationTransport) refuseAndDrain(c *upCall, upID []byte, msg string) {
	c.stop() // the client request is over; only the deadline ends the drain
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), DiscoverTimeout)
		defer cancel()
		_ = t.replyUpstream(ctx, c.s, wire.ErrorBody(upID, wire.NewError(http.StatusOK, wire.CodeInternalError, msg)))
		timer := time.AfterFunc(legacyInputWait, c.cancel)
		defer timer.Stop()
		_, _ = io.Copy(io.Discard, c.body)
		t.release(c)
	}()
}

// release ends an upstream call and frees its session (and its reader:
// nothing reads c after this).
func (t *generationTransport) release(c *upCall) {
	if t.free(c) {
		c.body.Close()
		c.cancel()
	}
}

// finish releases a call whose response has been read, and reads the rest
// of its stream in the background. A 2025 server ends that stream right
// after the response, but in a write of its own (go-sdk flushes the event,
// then its handler returns), which has often not arrived yet: a body closed
// before its end makes Go's transport discard the connection, and the next
// call opens a new one (measured with go-sdk v1.4.1's everything-server: a
// quarter of calls did, each also costing the upstream an accept). A
// stream that goes on after its response (the spec says the server SHOULD
// end it) is cut after finishWait or finishMax bytes; its connection is
// then discarded, as every early-closed one was before.
func (t *generationTransport) finish(c *upCall) {
	if !t.free(c) {
		return
	}
	go func() {
		timer := time.AfterFunc(finishWait, c.cancel)
		_, _ = io.Copy(io.Discard, io.LimitReader(c.body, finishMax))
		timer.Stop()
		c.body.Close()
		c.cancel()
	}()
}

// free is what release and finish share: it marks c released, detaches it
// from the client's request, and frees its session and its reader. It
// reports false when c was released already. The upstream response is left
// to the caller.
func (t *generationTransport) free(c *upCall) bool {
	if c.released {
		return false
	}
	c.released = true
	c.stop()
	t.done(c.s)
	c.rd.Recycle()
	return true
}

// replyUpstream posts a JSON-RPC response (to the upstream's own request)
// on the session.
func (t *generationTransport) replyUpstream(ctx context.Context, s *upSession, msg []byte) error {
	t.mu.Lock()
	sid, version := s.id, t.version
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, DiscoverTimeout)
	defer cancel()
	req, err := t.legacyRequest(ctx, msg, sid, version)
	if err != nil {
		return err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return errors.New("HTTP " + strconv.Itoa(resp.StatusCode))
	}
	return nil
}

// askClient turns the upstream's question (msg) into the client's answer:
// input_required with the call held, or -32021 when the client lacks the
// capability, or an error when too many calls are held. It returns the JSON
// response and its HTTP status; the call is held or released either way.
func (t *generationTransport) askClient(c *upCall, msg []byte, origID []byte) ([]byte, int) {
	m, _, _ := wire.Field(msg, "method")
	method, _ := wire.StringValue(m)
	upID, _, _ := wire.Field(msg, "id")
	upID = bytes.Clone(upID)
	params, ok, _ := wire.Field(msg, "params")
	if !ok {
		params = []byte(`{}`)
	}
	capName := inputCapability[method]
	if v, ok, _ := wire.Field(clientCaps(c.in.body), capName); !ok || !wire.IsObject(v) {
		t.refuseAndDrain(c, upID, "the 2026-07-28 client of this call did not declare the "+capName+" capability")
		e := wire.NewError(http.StatusBadRequest, codeMissingCapability, "Missing required client capability: the MCP server asked for "+method+" during this call; declare "+capName+" in io.modelcontextprotocol/clientCapabilities")
		e.Data = map[string]any{"requiredCapabilities": map[string]any{capName: map[string]any{}}}
		return wire.ErrorBody(origID, e), http.StatusBadRequest
	}
	t.mu.Lock()
	full := len(t.held) >= legacyInputMax
	t.mu.Unlock()
	if full {
		t.refuseAndDrain(c, upID, "too many calls wait for their client's input on this sidecar")
		return wire.ErrorBody(origID, wire.NewError(http.StatusServiceUnavailable, wire.CodeInternalError,
			"Internal error: "+strconv.Itoa(legacyInputMax)+" calls already wait for their client's input on this replica; call again later")), http.StatusServiceUnavailable
	}
	if !c.stop() {
		// The client went away while the question came: nobody will answer.
		t.refuseAndDrain(c, upID, "the client went away")
		return wire.ErrorBody(origID, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: client gone")), http.StatusBadGateway
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := base64.RawURLEncoding.EncodeToString(tok[:])
	key := inputKey(method, params)
	t.hold(token, &heldCall{c: c, upID: upID, key: key, method: method, auth: authDigest(c.in.authHeader)})
	b := make([]byte, 0, 128+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, origID...)
	b = append(b, `,"result":{"resultType":"input_required","inputRequests":{"`...)
	b = append(b, key...)
	b = append(b, `":{"method":"`...)
	b = append(b, method...)
	b = append(b, `","params":`...)
	b = append(b, params...)
	b = append(b, `}},"requestState":`...)
	st, _ := json.Marshal(encodeState(token, c.in.given))
	b = append(b, st...)
	return append(b, `}}`...), http.StatusOK
}

// serveCallStream answers a call from its upstream SSE stream: the first
// message decides the shape. A response (most calls) goes back as JSON with
// the status a 2026 server would give it; a question for the client
// becomes input_required; a notification first (progress) makes the answer
// a stream.
func (t *generationTransport) serveCallStream(req *http.Request, c *upCall, origID []byte) (*http.Response, error) {
	first, kind, err := t.nextForward(c, origID)
	if err != nil {
		t.release(c)
		return nil, fmt.Errorf("reading the upstream's answer: %w", err)
	}
	switch kind {
	case fwdResponse:
		t.finish(c)
		first, status := legacyAnswer(first, http.StatusOK)
		return jsonResponse(req, status, first), nil
	case fwdInput:
		b, status := t.askClient(c, first, origID)
		return jsonResponse(req, status, b), nil
	}
	pr, pw := io.Pipe()
	go t.relayCallStream(c, first, pw, origID)
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/event-stream"}},
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}, nil
}
