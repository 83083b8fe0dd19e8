package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/client"
)

// F19: a redirect to another host must not carry the client's credential. Go's http.Client
// strips Authorization on a cross-host redirect; the client's transport must not put it back.
// The endpoint (localhost) redirects everything to a second server (127.0.0.1, another host
// name) that records the Authorization headers it is sent.
func TestCredentialNotSentAcrossHostRedirect(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(other.Close)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(endpoint.Close)
	url := strings.Replace(endpoint.URL, "127.0.0.1", "localhost", 1) + "/mcp"

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []*client.Options{
		{Credential: "Bearer default-secret"},
		{Credential: "Bearer default-secret", ProtocolVersion: client.Version20251125},
		{Token: client.StaticToken("default-secret")},
		{Token: client.StaticToken("default-secret"), ProtocolVersion: client.Version20251125},
	} {
		c, err := client.Connect(client.WithCredential(ctx, "Bearer ctx-secret"), url, o)
		if err == nil {
			c.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the redirect target was never asked: the test proves nothing")
	}
	for _, a := range seen {
		if a != "" {
			t.Fatalf("redirect target on another host got Authorization %q", a)
		}
	}
}

// net/http forwards Authorization on a redirect to a subdomain of the original host (and the
// same host on another port); the credential must still only go to the endpoint's own scheme and
// host. The endpoint is mcp.test, the redirect goes to evil.mcp.test; a dialer maps both names
// to their test servers.
func TestCredentialNotSentToSubdomainRedirect(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(other.Close)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://evil.mcp.test"+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(endpoint.Close)
	addrs := map[string]string{"mcp.test:80": endpoint.Listener.Addr().String(), "evil.mcp.test:80": other.Listener.Addr().String()}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addrs[addr])
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range []*client.Options{
		{HTTPClient: hc, Credential: "Bearer default-secret"},
		{HTTPClient: hc, Token: client.StaticToken("default-secret"), ProtocolVersion: client.Version20251125},
	} {
		c, err := client.Connect(client.WithCredential(ctx, "Bearer ctx-secret"), "http://mcp.test/mcp", o)
		if err == nil {
			c.Close()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the redirect target was never asked: the test proves nothing")
	}
	for _, a := range seen {
		if a != "" {
			t.Fatalf("redirect target on a subdomain got Authorization %q", a)
		}
	}
}
