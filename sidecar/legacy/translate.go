package legacy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file is the translation: a 2025-era request into the modern shape
// (the _meta claim in params, the Mcp-* headers a 2026-07-28 upstream
// requires), and a modern answer back into the legacy shape (no
// resultType, ttlMs or cacheScope; input_required as an error when it
// cannot be relayed).

// Versions are the 2025-era revisions the sidecar serves, newest first.
var Versions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// IsVersion reports whether v is a 2025-era revision the sidecar serves.
func IsVersion(v string) bool { return slices.Contains(Versions, v) }

// MetaKeyLogLevel is the modern _meta key that carries a request's log
// level (go-sdk's MetaKeyLogLevel, deprecated with logging itself by
// SEP-2577; 2025-era clients still use logging).
const MetaKeyLogLevel = protocol.MetaLogLevel

// HeaderSessionID is the 2025-era session header.
const HeaderSessionID = "Mcp-Session-Id"

// ToModern returns a 2025-era request body in the modern shape: the _meta
// claim (protocol version, the client's capabilities, its log level)
// spliced into params (whose raw value is params, and meta its _meta; nil
// when absent). Members the client sent (progressToken, arguments, …) are
// kept byte for byte.
func ToModern(reqBody, params, meta []byte, clientCaps json.RawMessage, logLevel string) ([]byte, *wire.Error) {
	if len(clientCaps) == 0 {
		clientCaps = json.RawMessage(`{}`)
	}
	claim := []wire.KV{
		{Key: mcp.MetaKeyProtocolVersion, Val: []byte(`"` + protocol.Version + `"`)},
		{Key: mcp.MetaKeyClientCapabilities, Val: clientCaps},
		{Key: MetaKeyLogLevel, Val: wire.JSONString(logLevel)},
	}
	if meta != nil && !wire.IsObject(meta) {
		return nil, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: _meta must be an object")
	}
	if params != nil && !wire.IsObject(params) {
		return nil, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: params must be an object")
	}
	var nmeta []byte
	if meta == nil {
		// The usual case: the claim is the whole _meta.
		nmeta = make([]byte, 0, len(clientCaps)+len(logLevel)+128)
		for i, c := range claim {
			if i == 0 {
				nmeta = append(nmeta, '{')
			} else {
				nmeta = append(nmeta, ',')
			}
			nmeta = append(append(append(append(nmeta, '"'), c.Key...), '"', ':'), c.Val...)
		}
		nmeta = append(nmeta, '}')
	} else {
		var err error
		if nmeta, err = wire.SetMembers(meta, claim, nil); err != nil {
			return nil, wire.NewError(http.StatusOK, wire.CodeInvalidParams, "Invalid params: _meta must be an object")
		}
	}
	// One splice into the body: everything the client sent stays where it
	// was, byte for byte.
	body := make([]byte, 0, len(reqBody)+len(nmeta)+24)
	ps, pe, hasParams := wire.Span(reqBody, "params")
	switch {
	case !hasParams:
		end := bytes.LastIndexByte(reqBody, '}')
		if end < 0 {
			return nil, wire.NewError(http.StatusOK, wire.CodeInvalidRequest, "Invalid Request: body must be a JSON-RPC request object")
		}
		body = append(body, reqBody[:end]...)
		body = append(body, `,"params":{"_meta":`...)
		body = append(body, nmeta...)
		body = append(body, '}')
		body = append(body, reqBody[end:]...)
	case meta != nil:
		params := reqBody[ps:pe]
		ms, me, _ := wire.Span(params, "_meta")
		body = append(body, reqBody[:ps]...)
		body = append(body, params[:ms]...)
		body = append(body, nmeta...)
		body = append(body, params[me:]...)
		body = append(body, reqBody[pe:]...)
	default:
		params := reqBody[ps:pe]
		open := bytes.IndexByte(params, '{')
		body = append(body, reqBody[:ps]...)
		body = append(body, `{"_meta":`...)
		body = append(body, nmeta...)
		if rest := params[open+1:]; len(bytes.TrimLeft(rest, " \t\r\n")) > 0 && bytes.TrimLeft(rest, " \t\r\n")[0] != '}' {
			body = append(body, ',')
		}
		body = append(body, params[open+1:]...)
		body = append(body, reqBody[pe:]...)
	}
	return body, nil
}

// ModernHeaders gives a translated request the headers a modern upstream
// requires: the protocol version, Mcp-Method (method), Accept, and Mcp-Name
// (name; none when nil), without the 2025-era session headers.
func ModernHeaders(h http.Header, method, name []string) {
	delete(h, "Mcp-Session-Id")
	delete(h, "Last-Event-Id")
	h[protocol.HeaderProtocolVersion] = modernVersionValue
	h[protocol.HeaderMethod] = method
	h["Accept"] = acceptBothValue
	delete(h, protocol.HeaderName)
	if name != nil {
		h[protocol.HeaderName] = name
	}
}

// Header values the translation sets on every request. Shared, read-only:
// len == cap, so an append elsewhere copies.
var (
	modernVersionValue = []string{protocol.Version}
	acceptBothValue    = []string{"application/json, text/event-stream"}
)

// upstreamCaps are the client capabilities a translated request declares:
// the session's as the client gave them. Sampling, elicitation and roots
// included: the sidecar relays an upstream's input requests for them to the
// client (input.go).
func upstreamCaps(caps json.RawMessage) json.RawMessage {
	if !wire.IsObject(caps) {
		return nil
	}
	return caps
}

// errInputRequired answers a 2025-era request for which the upstream asked
// for client input where the sidecar cannot relay it: a request without a
// session (the client's answer would have nowhere to go).
func errInputRequired(id json.RawMessage) []byte {
	return wire.ErrorBody(id, wire.NewError(http.StatusOK, wire.CodeInternalError,
		"Internal error: the MCP server asked the client for input (input_required: elicitation, sampling or roots); "+
			"the sidecar relays it to clients of protocol revision 2025-11-25 and earlier only within a session: initialize first"))
}

// Result turns a modern response into the 2025-era shape: a
// complete result loses resultType, ttlMs and cacheScope; an
// input_required result becomes an error naming the limitation. Errors
// and anything else stay the upstream's bytes.
func Result(id json.RawMessage, msg []byte) []byte {
	rs, re, ok := wire.Span(msg, "result")
	if !ok || !wire.IsObject(msg[rs:re]) {
		return msg
	}
	res := msg[rs:re]
	// One pass: is there anything to drop, and is it input_required?
	drop := 0
	inputRequired := false
	_ = wire.EachMember(res, func(m wire.Member) bool {
		switch {
		case wire.KeyIs(m.Key, "resultType"):
			drop++
			v, _ := wire.StringValue(res[m.Start:m.End])
			inputRequired = v == protocol.ResultInputRequired
		case wire.KeyIs(m.Key, "ttlMs"), wire.KeyIs(m.Key, "cacheScope"):
			drop++
		}
		return true
	})
	if inputRequired {
		return errInputRequired(id)
	}
	if drop == 0 {
		return msg
	}
	// The result rebuilt without them, straight into the answer.
	out := make([]byte, 0, len(msg))
	out = append(out, msg[:rs]...)
	out = append(out, '{')
	first := true
	err := wire.EachMember(res, func(m wire.Member) bool {
		if wire.KeyIs(m.Key, "resultType") || wire.KeyIs(m.Key, "ttlMs") || wire.KeyIs(m.Key, "cacheScope") {
			return true
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, m.Key...), ':'), res[m.Start:m.End]...)
		return true
	})
	if err != nil {
		return msg
	}
	out = append(out, '}')
	return append(out, msg[re:]...)
}

// Negotiate picks the 2025-era revision for an initialize that asked for
// requested: that one when served, else the newest (the legacy rule: the
// client decides whether it can speak it).
func Negotiate(requested string) string {
	if slices.Contains(Versions, requested) {
		return requested
	}
	return Versions[0]
}

// IsLogLevel reports whether level is a logging/setLevel level.
func IsLogLevel(level string) bool { return logLevels[level] }

var logLevels = map[string]bool{"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true}

// AcceptsEventStream reports whether a GET accepts an SSE stream.
func AcceptsEventStream(h http.Header) bool {
	for _, v := range h["Accept"] {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			if strings.EqualFold(mt, "text/event-stream") || mt == "*/*" || strings.EqualFold(mt, "text/*") {
				return true
			}
		}
	}
	return false
}
