package stdio

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Server-to-client requests. A stdio server asks its client for input
// (elicitation/create, sampling/createMessage, roots/list) in the middle of
// a call, on the one stdin/stdout pair every client shares, without saying
// which call it is for. The bridge passes the request to a client when that
// is unambiguous: exactly one client call is in flight that is not already
// waiting for an answer to an earlier question (a server that asks waits for
// the answer), and its client takes an SSE answer. The request goes on that call's stream under an id of the
// bridge's (ids of the child and of clients never mix), and the client's
// response (a POST) goes back to the child under the child's id. With no
// call or several calls in flight the child gets an error that says why.

// askClientCapabilities are what the bridge declares to its child: the
// questions a client (the sidecar, which turns them into input_required for
// 2026-07-28 clients) can be asked during a call. Not roots: a server may
// ask for them outside any call.
const askClientCapabilities = `{"elicitation":{"form":{},"url":{}},"sampling":{}}`

// maxAsks bounds the child's questions waiting for a client's answer.
const maxAsks = 256

// ask is one question of the child's, passed to a client.
type ask struct {
	childID jsonrpc.ID
	child   *child
	call    *call
}

// serverRequest answers or routes a request the child makes of its client:
// ping is answered by the bridge; a question goes to the one call in flight.
func (b *Bridge) serverRequest(c *child, req *jsonrpc.Request) {
	if req.Method == "ping" {
		data, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Result: json.RawMessage(`{}`)})
		_ = c.write(data)
		return
	}
	b.mu.Lock()
	var target *call
	n := 0
	for _, cl := range b.pending {
		if cl.session != nil && cl.asked == 0 {
			n++
			target = cl
		}
	}
	reason := ""
	switch {
	case n == 0:
		reason = "no client call is in flight"
	case n > 1:
		reason = fmt.Sprintf("%d client calls that could be asking are in flight, and a stdio server does not say which one it asks for", n)
	case target.stream == nil:
		reason = "the client of the call in flight takes no event stream"
	case len(b.asks) >= maxAsks:
		reason = "too many questions wait for their clients"
	}
	var id string
	if reason == "" {
		b.nextID++
		id = "sb-ask-" + strconv.FormatInt(b.nextID, 10)
		b.asks[id] = &ask{childID: req.ID, child: c, call: target}
		target.asked++
	}
	b.mu.Unlock()
	if reason != "" {
		b.log.Info("Refused a server-to-client request of the MCP server", "method", req.Method, "reason", reason)
		_ = c.write(errorResponse(req.ID, jsonrpc.CodeMethodNotFound, fmt.Sprintf(
			"%s is not available: the Switchboard stdio bridge shares this server among its clients and passes a server-to-client request only to the one call in flight (%s)", req.Method, reason)))
		return
	}
	out := *req
	out.ID = jsonrpc.ID{}
	data, err := jsonrpc.EncodeMessage(&out)
	if err == nil {
		// The id is the bridge's: set it in the encoded message.
		data, err = setMember(data, "id", json.RawMessage(strconv.Quote(id)))
	}
	if err == nil {
		select {
		case target.stream <- data:
			return
		default:
			err = fmt.Errorf("the call's stream is %d messages behind", callQueue)
		}
	}
	b.mu.Lock()
	delete(b.asks, id)
	target.asked--
	b.mu.Unlock()
	_ = c.write(errorResponse(req.ID, jsonrpc.CodeInternalError, req.Method+" could not be passed to the client: "+err.Error()))
}

// clientResponse routes a client's response to the child's question.
func (b *Bridge) clientResponse(resp *jsonrpc.Response) {
	key, _ := resp.ID.Raw().(string)
	b.mu.Lock()
	a := b.asks[key]
	delete(b.asks, key)
	if a != nil {
		a.call.asked--
	}
	live := a != nil && b.live == a.child.gen
	b.mu.Unlock()
	if !live {
		return // unknown, or the child that asked is gone
	}
	resp.ID = a.childID
	data, err := jsonrpc.EncodeMessage(resp)
	if err != nil {
		data = errorResponse(a.childID, jsonrpc.CodeInternalError, "the client's answer could not be encoded: "+err.Error())
	}
	_ = a.child.write(data)
}

// dropAsks forgets the questions passed to cl's client (the call ended).
func (b *Bridge) dropAsks(cl *call) {
	b.mu.Lock()
	for k, a := range b.asks {
		if a.call == cl {
			delete(b.asks, k)
			cl.asked--
		}
	}
	b.mu.Unlock()
}
