package sidecar

import (
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// currentAuth is the live catalog's Auth (nil: auth mode Off), and keeps the Authenticator
// configured with it.
func (s *Server) currentAuth() *catalog.Auth {
	if s.opts.Authn == nil || s.opts.Overlay == nil {
		return nil
	}
	c, _ := s.opts.Overlay.Catalog()
	s.opts.Authn.Configure(c.Auth)
	return c.Auth
}

// authenticate verifies the request's bearer token before anything else is done with the
// request (its Host and Origin aside, which the challenge's URL is built from). On failure it
// answers 401 with the challenge and returns false; on success it returns the request carrying
// the caller (authn.FromContext), without its Authorization header unless auth.ForwardToken.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, auth *catalog.Auth) (*http.Request, bool) {
	if e := s.checkHostOrigin(r); e != nil {
		s.fail(w, nil, e)
		return nil, false
	}
	tok, err := authn.Bearer(r.Header)
	var id *authn.Identity
	if err == nil {
		id, err = s.opts.Authn.Verify(r.Context(), tok)
	}
	if err != nil {
		reason := "invalid_token"
		if errors.Is(err, authn.ErrNoToken) {
			reason = "no_token"
		}
		s.m.AuthRefused.WithLabelValues(reason).Inc()
		s.auditUnauthenticated(r, reason == "no_token")
		s.log.Debug("Caller not authenticated", "reason", reason, "err", err)
		w.Header().Set("WWW-Authenticate", authn.Challenge(authn.MetadataURL(r, auth.Resource, r.URL.Path), err))
		// The body is not read: the connection closes after the answer rather than net/http
		// reading an unauthenticated body to reuse it.
		if r.Method == http.MethodPost {
			w.Header().Set("Connection", "close")
		}
		s.fail(w, nil, wire.NewError(http.StatusUnauthorized, wire.CodeInvalidRequest, "Unauthorized: a valid bearer token is required"))
		return nil, false
	}
	if !auth.ForwardToken {
		r.Header.Del("Authorization")
	}
	return r.WithContext(authn.WithIdentity(r.Context(), id)), true
}

// ServeMetadata serves the Protected Resource Metadata document (RFC 9728) of the MCP
// endpoint, without a token; Host and Origin are checked as for the endpoint.
func (s *Server) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	if e := s.checkHostOrigin(r); e != nil {
		s.fail(w, nil, e)
		return
	}
	if s.currentAuth() == nil {
		http.NotFound(w, r)
		return
	}
	s.opts.Authn.ServeMetadata(w, r)
}
