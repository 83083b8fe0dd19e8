// Package credential is the caller's upstream credential (MCPServer
// spec.auth.upstreamCredentials, docs/credentials.md): the catalog maps the
// verified caller to a key of one Secret, which the catalog's content source
// watches by name, so Secret edits apply live; the value goes to the upstream
// in the header the catalog names, replacing the client's own header of that
// name. A credential value is never logged, traced, counted or put in an
// error: errors name the Secret, the key and the caller.
//
// It knows no request routing and no method table: the request path asks
// For the credential of a caller and sets it on the upstream request.
package credential

import (
	"context"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Credential is the header one caller's upstream requests carry; the zero value is none.
type Credential struct{ header, value string }

// Set puts the credential on an upstream request's header, replacing whatever the client sent
// under that name.
func (c Credential) Set(h http.Header) {
	if c.header != "" {
		h[c.header] = []string{c.value}
	}
}

// WithHeader tells the upstream transport to pass the credential's header on to a 2025-era
// upstream too (whose requests carry only the headers it is told of).
func (c Credential) WithHeader(ctx context.Context) context.Context {
	if c.header == "" {
		return ctx
	}
	return upstream.WithCredentialHeader(ctx, c.header)
}

// Source reads the watched Secrets' content (the catalog's content source).
type Source interface {
	Content(secret bool, name, key string) ([]byte, bool)
}

// For resolves the credential of caller id under catalog c, whose Auth maps callers to keys
// (c.Auth.UpstreamCredentials is set), from the watched Secret in src (nil: none read yet). An
// error (the request must not reach the upstream) when the caller has none or its key cannot
// be read.
func For(c *catalog.Catalog, src Source, id *authn.Identity) (Credential, *wire.Error) {
	u := c.Auth.UpstreamCredentials
	caller := callerOf(u, id)
	key, listed := "", false
	if caller != "" {
		key, listed = u.Keys[caller]
	}
	if !listed {
		key = u.DefaultKey
	}
	switch {
	case key == "":
		return Credential{}, errNoCredential(c, u, caller, "", "spec.auth.upstreamCredentials lists no key for "+describeCaller(u, caller)+
			" and sets no defaultKey; add the caller to callers (with a key of Secret "+u.Secret+") or set defaultKey")
	case !u.Readable:
		return Credential{}, errNoCredential(c, u, caller, key, "Secret "+u.Secret+" is not exposed to the server, or does not exist; "+
			"create it and label it mcp.switchboard.dev/expose-to="+c.Server.Name+" (the MCPServer's UpstreamCredentials condition says the same)")
	}
	var v []byte
	ok := false
	if src != nil {
		v, ok = src.Content(true, u.Secret, key)
	}
	switch {
	case !ok:
		return Credential{}, errNoCredential(c, u, caller, key, "Secret "+u.Secret+" has no key "+key+" (for "+describeCaller(u, caller)+
			"); add it, and it applies without a restart")
	case !catalog.ValidCredentialValue(v):
		return Credential{}, errNoCredential(c, u, caller, key, "the value of key "+key+" of Secret "+u.Secret+
			" cannot be sent in a header (empty, too long, or a control character such as a trailing newline); store it without one")
	}
	return Credential{header: http.CanonicalHeaderKey(u.Header), value: u.ValuePrefix + string(v)}, nil
}

// callerOf is what selects the caller's entry in the mapping ("" if the caller has none).
func callerOf(u *catalog.UpstreamCredentials, id *authn.Identity) string {
	if id == nil {
		return ""
	}
	switch u.By {
	case catalog.CredentialByServiceAccount:
		return id.ServiceAccount
	case catalog.CredentialByUsername:
		return id.Subject
	case catalog.CredentialByClaim:
		return id.CredentialClaim
	}
	return ""
}

// describeCaller names the caller as the mapping sees it.
func describeCaller(u *catalog.UpstreamCredentials, caller string) string {
	switch {
	case caller == "" && u.By == catalog.CredentialByClaim:
		return "a caller whose token has no string claim the mapping selects by"
	case caller == "" && u.By == catalog.CredentialByServiceAccount:
		return "a caller without a ServiceAccount (an OIDC token)"
	case caller == "":
		return "this caller"
	}
	return u.By + " " + caller
}

// errNoCredential refuses a request whose caller has no usable upstream credential: 403, and
// data naming the server, the Secret, the key and the caller, for whoever configures them.
func errNoCredential(c *catalog.Catalog, u *catalog.UpstreamCredentials, caller, key, why string) *wire.Error {
	e := wire.NewError(http.StatusForbidden, wire.CodeInternalError,
		"No upstream credential for this caller: "+why+" (MCPServer "+c.Server.Namespace+"/"+c.Server.Name+")")
	data := map[string]string{"reason": "NoUpstreamCredential", "server": c.Server.Namespace + "/" + c.Server.Name, "secret": u.Secret, "by": u.By}
	if caller != "" {
		data["caller"] = caller
	}
	if key != "" {
		data["key"] = key
	}
	e.Data = data
	return e
}
