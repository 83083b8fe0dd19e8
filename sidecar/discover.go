package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/sidecar/headers"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// serveDiscover answers server/discover: the upstream's versions and
// capabilities, plus what the sidecar provides itself, with cache hints.
func (s *Server) serveDiscover(w http.ResponseWriter, r *http.Request, req *request) {
	cred, e := s.credentialFor(r)
	if e != nil {
		s.fail(w, req.id, e)
		return
	}
	ureq, err := http.NewRequestWithContext(cred.WithHeader(r.Context()), http.MethodPost, s.up.URL(), bytes.NewReader(req.body))
	if err != nil {
		s.fail(w, req.id, wire.NewError(http.StatusInternalServerError, wire.CodeInternalError, "Internal error: "+err.Error()))
		return
	}
	headers.ForUpstream(ureq, r)
	cred.Set(ureq.Header)
	start := time.Now()
	status, msg, err := s.up.RoundTrip(ureq)
	s.m.ObserveUpstream(protocol.MethodDiscover, time.Since(start))
	if err != nil {
		if s.endedByDrain(w, r, req) || r.Context().Err() != nil {
			return
		}
		s.log.Warn("Upstream server/discover failed", "err", err)
		s.fail(w, req.id, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream unavailable"))
		return
	}
	rs, re, ok := wire.Span(msg, "result")
	if !ok || !wire.IsObject(msg[rs:re]) {
		// An error from the upstream goes back as it came.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
		w.WriteHeader(status)
		_, _ = w.Write(msg)
		return
	}
	res := msg[rs:re]
	// Parsed, not stored: this answer was made with the client's headers (store says why).
	info, err := upstream.ParseDiscover(res)
	if err != nil {
		s.log.Warn("Upstream server/discover result unusable", "err", err)
		s.fail(w, req.id, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream discover result unusable"))
		return
	}
	caps, err := s.mergedCapabilities(info)
	if err != nil {
		s.fail(w, req.id, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream capabilities unusable"))
		return
	}
	versions, _ := json.Marshal(s.policy().supported)
	ttl, scope := s.opts.Hints(protocol.MethodDiscover, req.params)
	if scope != "public" {
		scope = "private"
	}
	nres, err := wire.SetMembers(res, []wire.KV{
		{Key: "resultType", Val: []byte(`"complete"`)},
		{Key: "supportedVersions", Val: versions},
		{Key: "capabilities", Val: caps},
		{Key: "ttlMs", Val: strconv.AppendInt(nil, max(ttl, 0), 10)},
		{Key: "cacheScope", Val: []byte(`"` + scope + `"`)},
	}, nil)
	if err != nil {
		s.fail(w, req.id, wire.NewError(http.StatusBadGateway, wire.CodeInternalError, "Internal error: upstream discover result unusable"))
		return
	}
	out := make([]byte, 0, len(msg)+len(nres))
	out = append(append(append(out, msg[:rs]...), nres...), msg[re:]...)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// mergedCapabilities is what the sidecar advertises of the upstream's
// capabilities (sidecar/rules), with a catalog served or not.
func (s *Server) mergedCapabilities(info *upstream.Info) (json.RawMessage, error) {
	return rules.MergedCapabilities(info.CapsRaw, s.opts.Overlay != nil)
}

// effectiveCaps is the capability view used to narrow listen filters.
func (s *Server) effectiveCaps(info *upstream.Info) mcp.ServerCapabilities {
	var c mcp.ServerCapabilities
	merged, err := s.mergedCapabilities(info)
	if err == nil {
		_ = json.Unmarshal(merged, &c)
	}
	return c
}

// upstreamInfoFor returns the cached discover result, asking once if there
// is none.
func (s *Server) upstreamInfoFor(ctx context.Context) (*upstream.Info, error) {
	if info := s.up.Current(); info != nil {
		return info, nil
	}
	ctx, cancel := context.WithTimeout(ctx, upstream.DiscoverTimeout)
	defer cancel()
	return s.up.Discover(ctx)
}
