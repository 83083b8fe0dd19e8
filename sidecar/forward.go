package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/credential"
	"github.com/switchboard-mcp/switchboard/sidecar/headers"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// forward sends a request the sidecar does not own to the upstream and
// streams the answer back, stamping results on the way. While draining,
// every response asks the client to close its connection, so that clients
// reconnect (through the Service) to a replica that is staying.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, req *request) {
	if req.method == "tools/call" {
		var e *wire.Error
		switch {
		case req.legacy:
			// The headers a 2026 client sends for annotated arguments
			// (sidecar/legacy).
			e = s.legacy.SetParamHeaders(r, req.body)
		default:
			// The client's Mcp-Param-* headers must name unambiguous
			// arguments (wire/strictjson.go); when the upstream will not see
			// them, they are checked here, as it would check them.
			e = s.legacy.CheckBoundArgs(r, req.body)
			if e == nil && !s.upstreamSeesParamHeaders(r.Context()) {
				e = s.legacy.CheckParamHeaders(r, req.body)
			}
		}
		if e != nil {
			s.failReq(w, req, e)
			return
		}
	}
	if req.session != nil {
		// A 2025-era session's call: cancellable by notifications/cancelled,
		// and relayed through input rounds (sidecar/legacy).
		s.forwardLegacy(w, r, req)
		return
	}
	s.forwardOnce(w, r, req, nil)
}

// forwardOnce sends req upstream once and answers the client. With lc (a
// 2025-era session's call), an input_required answer is kept in lc for the
// caller instead, and the answer is an event when lc's stream is started.
func (s *Server) forwardOnce(w http.ResponseWriter, r *http.Request, req *request, lc *legacy.Call) {
	// The upstream call ends when the client goes away or when the drain
	// budget is over (AbortInflight), whichever comes first: both end the
	// request context (BaseContext); a 2025-era client's
	// notifications/cancelled ends lc.ctx too.
	ctx := r.Context()
	if lc != nil {
		ctx = lc.Ctx
	}
	cred, e := s.credentialFor(r)
	if e != nil {
		s.failCall(w, req, lc, e)
		return
	}
	ureq, err := http.NewRequestWithContext(cred.WithHeader(ctx), http.MethodPost, s.up.URL(), bytes.NewReader(req.body))
	if err != nil {
		s.failCall(w, req, lc, wire.NewError(http.StatusInternalServerError, wire.CodeInternalError, "Internal error: "+err.Error()))
		return
	}
	headers.ForUpstream(ureq, r)
	cred.Set(ureq.Header)
	if s.tr != nil {
		s.injectUpstream(ureq.Header, req)
	}
	noteSent(w)
	start := time.Now()
	resp, err := s.up.Do(ureq)
	s.m.ObserveUpstream(req.method, time.Since(start))
	if err != nil {
		if s.abortedByDrain(r) {
			s.failCall(w, req, lc, errDrained())
			return
		}
		if ctx.Err() != nil {
			return // the client went away or cancelled the call
		}
		s.log.Warn("Upstream request failed", "method", req.method, "err", err)
		s.failCall(w, req, lc, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream unavailable"))
		return
	}
	defer resp.Body.Close()
	started := lc != nil && lc.Started
	if !started {
		headers.Copy(w.Header(), resp.Header)
		if s.gate.Draining() {
			w.Header().Set("Connection", "close")
		}
	}
	switch {
	case wire.IsEventStream(resp.Header):
		s.relayEvents(w, r, resp, req, lc)
	case wire.IsJSON(resp.Header):
		buf := respBufs.Get().(*bytes.Buffer)
		defer putRespBuf(buf)
		buf.Reset()
		_, err := buf.ReadFrom(io.LimitReader(resp.Body, int64(s.up.MaxBytes())+1))
		if err != nil || buf.Len() > s.up.MaxBytes() {
			if !started {
				w.Header().Del("Content-Type")
			}
			if s.abortedByDrain(r) {
				s.failCall(w, req, lc, errDrained())
				return
			}
			if ctx.Err() != nil {
				return // the client went away or cancelled the call
			}
			s.log.Warn("Reading upstream response failed", "method", req.method, "err", err, "bytes", buf.Len())
			s.failCall(w, req, lc, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream response unreadable or too large"))
			return
		}
		if lc.Capture(buf.Bytes()) {
			noteInputRound(w)
			return
		}
		noteResponse(w, buf.Bytes())
		b := s.finish(req, buf.Bytes())
		if started {
			_ = legacy.WriteEvent(w, b, false)
			return
		}
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(b))}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
	case started:
		// A later round of a call whose stream is open: what is neither
		// JSON nor SSE cannot go on it.
		s.failCall(w, req, lc, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream answered HTTP "+strconv.Itoa(resp.StatusCode)+" with "+strconv.Quote(resp.Header.Get("Content-Type"))))
	default:
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, int64(s.up.MaxBytes())))
	}
}

// respBufs recycles the buffers JSON responses are read into.
var respBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// respBufKeep is the largest buffer returned to respBufs.
const respBufKeep = 64 << 10

func putRespBuf(b *bytes.Buffer) {
	if b.Cap() <= respBufKeep {
		respBufs.Put(b)
	}
}

// relayEvents streams an upstream SSE response to the client event by
// event, stamping the final result. Each message goes out as one data: line.
// When the upstream stream ends before the final response (the drain budget
// ran out, or the upstream went away), a request that expects an answer gets
// a JSON-RPC error event with its id, so the client is answered, not cut.
func (s *Server) relayEvents(w http.ResponseWriter, r *http.Request, resp *http.Response, req *request, lc *legacy.Call) {
	if lc == nil || !lc.Started {
		h := w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(resp.StatusCode)
		if req.legacy {
			// 2025-11-25: a server that may close the stream early tells the
			// client when to come back.
			_, _ = w.Write(hub.LegacyRetryEvent)
		}
		if lc != nil {
			lc.Started = true
		}
	}
	rc := http.NewResponseController(w)
	// Nothing is flushed before the first event: the head goes out with it
	// (one write, as a plain proxy's), and the final response is not
	// flushed on its own either, so it leaves with the terminating chunk
	// when the handler returns. Every event before the response (progress,
	// logs) is flushed as it arrives.
	rd := wire.NewSSEReader(resp.Body, s.up.MaxBytes())
	var out []byte
	answered := false
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				s.log.Debug("Upstream event stream ended", "method", req.method, "err", err)
			}
			if answered {
				return
			}
			var e *wire.Error
			switch {
			case s.abortedByDrain(r):
				e = errDrained()
			case r.Context().Err() != nil, lc != nil && lc.Ctx.Err() != nil:
				return // the client went away or cancelled the call
			default:
				e = wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream ended the stream without answering")
			}
			s.m.CountError(e.Code)
			auditError(w, e)
			out = append(append(append(out[:0], "event: message\ndata: "...), wire.ErrorBody(req.id, e)...), '\n', '\n')
			_, _ = w.Write(out)
			_ = rc.Flush()
			return
		}
		data := ev.Data
		if bytes.IndexByte(data, '\n') >= 0 {
			var c bytes.Buffer
			if json.Compact(&c, data) != nil {
				continue // not a JSON message; nothing a client could use
			}
			data = c.Bytes()
		}
		final := false
		if wire.IsResponse(data) {
			if lc.Capture(data) {
				noteInputRound(w)
				return
			}
			noteResponse(w, data)
			data = s.finish(req, data)
			answered, final = true, true
		}
		name := ev.Event
		if name == "" {
			name = "message"
		}
		out = append(out[:0], "event: "...)
		out = append(out, name...)
		out = append(out, "\ndata: "...)
		out = append(out, data...)
		out = append(out, '\n', '\n')
		if _, err := w.Write(out); err != nil {
			return
		}
		if final {
			continue
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// stamp makes a response leaving the sidecar carry resultType on its result
// and, for cacheable complete results, the cache hints. Everything else
// stays the bytes the upstream sent.
func (s *Server) stamp(req *request, msg []byte) []byte {
	rs, re, ok := wire.Span(msg, "result")
	if !ok || !wire.IsObject(msg[rs:re]) {
		return msg
	}
	res := msg[rs:re]
	rt, hasRT, _ := wire.Field(res, "resultType")
	rtv, _ := wire.StringValue(rt)
	cacheable := req.spec != nil && req.spec.cacheable && (!hasRT || rtv == protocol.ResultComplete)
	if hasRT && !cacheable {
		return msg
	}
	sets := make([]wire.KV, 0, 3)
	sets = append(sets, wire.KV{Key: "resultType", Val: []byte(`"complete"`), KeepExisting: true})
	if cacheable {
		ttl, scope := s.opts.Hints(req.method, req.params)
		if ttl < 0 {
			ttl = 0
		}
		// An upstream that says its answer depends on the caller is
		// believed: the scope only ever narrows.
		if up, ok, _ := wire.Field(res, "cacheScope"); scope != "public" || (ok && string(up) == `"private"`) {
			scope = "private"
		}
		sets = append(sets,
			wire.KV{Key: "ttlMs", Val: strconv.AppendInt(nil, ttl, 10)},
			wire.KV{Key: "cacheScope", Val: []byte(`"` + scope + `"`)})
	}
	nres, err := wire.SetMembers(res, sets, nil)
	if err != nil {
		return msg
	}
	out := make([]byte, 0, len(msg)+len(nres)-len(res))
	out = append(out, msg[:rs]...)
	out = append(out, nres...)
	return append(out, msg[re:]...)
}

// credentialFor resolves the upstream credential of the caller of r (sidecar/credential) from
// the live catalog and the watched Secret: none when the catalog asks for none, an error (the
// request must not reach the upstream) when the caller has none or its key cannot be read.
// The credential's Set replaces the client's header of its name after headers.ForUpstream.
func (s *Server) credentialFor(r *http.Request) (credential.Credential, *wire.Error) {
	if s.opts.Overlay == nil {
		return credential.Credential{}, nil
	}
	c, _ := s.opts.Overlay.Catalog()
	if c.Auth == nil || c.Auth.UpstreamCredentials == nil {
		return credential.Credential{}, nil
	}
	return credential.For(c, s.opts.Overlay.Contents(), authn.FromContext(r.Context()))
}
