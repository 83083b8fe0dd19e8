package authn

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// MetadataPrefix starts the path of the Protected Resource Metadata document (RFC 9728 §3.1):
// the document of the resource at path /mcp is served at MetadataPrefix + "/mcp".
const MetadataPrefix = "/.well-known/oauth-protected-resource"

// Challenge is the WWW-Authenticate value of a 401 (RFC 6750 §3, RFC 9728 §5.1):
// Bearer resource_metadata="<metadataURL>", with error="invalid_token" when the request carried
// a token (err is not ErrNoToken). Nothing of the token is echoed.
func Challenge(metadataURL string, err error) string {
	v := `Bearer resource_metadata="` + quoted(metadataURL) + `"`
	if err != nil && !errors.Is(err, ErrNoToken) {
		v += `, error="invalid_token"`
	}
	return v
}

// quoted escapes s for an RFC 9110 quoted-string.
func quoted(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// MetadataURL is the URL of the Protected Resource Metadata document of the MCP endpoint at
// path, as reached by r (whose Host the caller has validated): https when the connection is TLS
// or when the Host is the resource's own and the resource is https (TLS ended in front of the
// sidecar), else http.
func MetadataURL(r *http.Request, resource, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	} else if u, err := url.Parse(resource); err == nil && u.Scheme == "https" && strings.EqualFold(u.Host, r.Host) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + MetadataPrefix + path
}

// ProtectedResourceMetadata is the RFC 9728 document.
type ProtectedResourceMetadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
}

// Metadata is auth's Protected Resource Metadata: the resource, its OIDC issuers as
// authorization servers (ServiceAccount tokens come from the cluster, not from an
// authorization server a client could ask), the header as the only bearer method.
func Metadata(auth *catalog.Auth) ProtectedResourceMetadata {
	m := ProtectedResourceMetadata{Resource: auth.Resource, BearerMethodsSupported: []string{"header"}, ScopesSupported: auth.ScopesSupported}
	for _, j := range auth.JWT {
		m.AuthorizationServers = append(m.AuthorizationServers, j.URL)
	}
	return m
}

// ServeMetadata serves the Protected Resource Metadata document of the Auth being enforced
// (GET or HEAD; 404 when none is).
func (a *Authenticator) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	auth := a.Auth()
	if auth == nil {
		http.NotFound(w, r)
		return
	}
	body, err := json.Marshal(Metadata(auth))
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=60")
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}
