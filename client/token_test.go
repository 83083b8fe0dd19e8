package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/client"
)

// seenRequest is one HTTP request as it reached the recording front.
type seenRequest struct {
	HTTPMethod, RPCMethod, Authorization string
}

// recorder fronts a real go-sdk server: it records every request's method and Authorization,
// and, when accept is set, answers 401 with challenge to those it does not accept (what a
// resource server does). intercept, when set, may answer a request itself (return true).
type recorder struct {
	srv       *httptest.Server
	inner     http.Handler
	accept    func(auth string) bool
	challenge string
	intercept func(w http.ResponseWriter, r *http.Request, rpc map[string]any) bool

	mu   sync.Mutex
	seen []seenRequest
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var rpc map[string]any
	_ = json.Unmarshal(body, &rpc)
	method, _ := rpc["method"].(string)
	auth := r.Header.Get("Authorization")
	rc.mu.Lock()
	rc.seen = append(rc.seen, seenRequest{r.Method, method, auth})
	accept, intercept := rc.accept, rc.intercept
	rc.mu.Unlock()
	if accept != nil && !accept(auth) {
		w.Header().Set("WWW-Authenticate", rc.challenge)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if intercept != nil && intercept(w, r, rpc) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc.inner.ServeHTTP(w, r)
}

func (rc *recorder) requests() []seenRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.seen)
}

// mcpServer is a real go-sdk v1.8.0 server with a tool, a prompt and a resource. stateful
// serves 2025-11-25 sessions (their GET stream and DELETE); otherwise it is stateless (2026-07-28).
func mcpServer(t *testing.T, stateful bool) (*recorder, string) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "recorded", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "alpha"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "alpha"}}}, nil, nil
	})
	srv.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://doc", Name: "doc"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://doc", Text: "doc"}}}, nil
	})
	rc := &recorder{inner: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: !stateful})}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close)
	return rc, rc.srv.URL + "/mcp"
}

// writeToken replaces the token file the way the kubelet updates a projected token: a new file
// renamed over the old one (readers see the old or the new token, never half of one).
func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Every request of every revision carries the token, and a rotated token file is used from the
// next request on, without reconnecting: at 2026-07-28 server/discover, subscriptions/listen,
// the lists, resources/read, tools/call and prompts/get; at 2025-11-25 initialize, the
// initialized notification, the GET stream, the lists, tools/call and the DELETE at Close.
func TestTokenOnEveryRequest(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    []string // requests, "HTTP-method rpc-method", that must have been seen
	}{
		{client.Version20260728, []string{"POST server/discover", "POST subscriptions/listen", "POST tools/list", "POST prompts/list",
			"POST resources/read", "POST tools/call", "POST prompts/get"}},
		{client.Version20251125, []string{"POST initialize", "POST notifications/initialized", "GET ", "POST tools/list",
			"POST prompts/list", "POST resources/read", "POST tools/call", "POST prompts/get", "DELETE "}},
	} {
		t.Run(tc.version, func(t *testing.T) {
			rc, url := mcpServer(t, tc.version == client.Version20251125)
			file := filepath.Join(t.TempDir(), "token")
			writeToken(t, file, "token-one\n")
			ctx := tctx(t)
			c, err := client.Connect(ctx, url, &client.Options{Token: client.TokenFile(file), ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			if c.ProtocolVersion() != tc.version {
				t.Fatalf("protocol %s", c.ProtocolVersion())
			}
			use := func() {
				t.Helper()
				if _, _, err := c.ListTools(ctx); err != nil {
					t.Fatal(err)
				}
				if _, err := c.CallTool(ctx, "alpha", nil); err != nil {
					t.Fatal(err)
				}
			}
			use()
			if _, _, err := c.ReadResource(ctx, "test://doc"); err != nil {
				t.Fatal(err)
			}
			rotated := len(rc.requests())
			writeToken(t, file, "token-two")
			use()
			if _, _, err := c.ListPrompts(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.GetPrompt(ctx, "greet", nil); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(); err != nil && tc.version == client.Version20260728 {
				t.Fatal(err)
			}
			seen := rc.requests()
			kinds := map[string]bool{}
			for i, r := range seen {
				kinds[r.HTTPMethod+" "+r.RPCMethod] = true
				want := "Bearer token-one"
				if i >= rotated {
					want = "Bearer token-two"
				}
				if r.Authorization != want {
					t.Errorf("request %d %s %s: Authorization %q, want %q", i, r.HTTPMethod, r.RPCMethod, r.Authorization, want)
				}
			}
			for _, k := range tc.want {
				if !kinds[k] {
					t.Errorf("no %q request seen (seen %v): the test proves less than it says", k, seen)
				}
			}
			if rotated == len(seen) || rotated == 0 {
				t.Fatalf("no requests on one side of the rotation (%d of %d)", rotated, len(seen))
			}
		})
	}
}

// TokenFile follows the file: a rename over it (the kubelet's update), an in-place rewrite,
// a removal (an error, not the old token), and refuses what cannot be a bearer token.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	src := client.TokenFile(path)
	get := func() (string, error) { return src(context.Background()) }
	if _, err := get(); err == nil {
		t.Fatal("a missing file gave a token")
	}
	writeToken(t, path, "  aaaa.bbbb.cccc\n")
	if tok, err := get(); err != nil || tok != "aaaa.bbbb.cccc" {
		t.Fatalf("token %q, %v", tok, err)
	}
	writeToken(t, path, "dddd.eeee.ffff")
	if tok, err := get(); err != nil || tok != "dddd.eeee.ffff" {
		t.Fatalf("after a rename: %q, %v", tok, err)
	}
	// Rewritten in place, same size: the modification time tells.
	if err := os.WriteFile(path, []byte("gggg.hhhh.iiii"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if tok, err := get(); err != nil || tok != "gggg.hhhh.iiii" {
		t.Fatalf("after an in-place rewrite: %q, %v", tok, err)
	}
	// The projected volume's layout: token -> ..data/token, ..data -> a timestamped folder,
	// swapped by renaming a new ..data symlink over the old one.
	proj := filepath.Join(dir, "projected")
	var psrc client.TokenSource // one source sees both updates
	for i, tok := range []string{"jjjj.kkkk", "llll.mmmm"} {
		ts := filepath.Join(proj, fmt.Sprintf("..ts%d", i))
		if err := os.MkdirAll(ts, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts, "token"), []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(ts), filepath.Join(proj, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(proj, "..data_tmp"), filepath.Join(proj, "..data")); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := os.Symlink("..data/token", filepath.Join(proj, "token")); err != nil {
				t.Fatal(err)
			}
		}
		if psrc == nil {
			psrc = client.TokenFile(filepath.Join(proj, "token"))
		}
		if got, err := psrc(context.Background()); err != nil || got != tok {
			t.Fatalf("projected volume, update %d: %q, %v", i, got, err)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if tok, err := get(); err == nil {
		t.Fatalf("a removed file still gave %q", tok)
	}
	for _, bad := range []string{"", "\n", "two\nlines", `"quoted"`, "Bearer abc", "=abc", strings.Repeat("a", client.MaxTokenBytes+1)} {
		writeToken(t, path, bad)
		if tok, err := get(); err == nil {
			t.Errorf("file %.20q gave token %.20q", bad, tok)
		}
	}
	writeToken(t, path, strings.Repeat(" ", 70<<10)+"x")
	if _, err := get(); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("an oversized file: %v", err)
	}
}

const testPRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

// A 401 is an *UnauthorizedError naming the resource metadata URL and the challenge's error, at
// connect (2026-07-28, and 2025-11-25 through go-sdk's session) and on later reads and calls;
// it never makes the client fall back to 2025-11-25 (a 4xx from server/discover otherwise does).
func TestUnauthorizedNamesResourceMetadata(t *testing.T) {
	for _, version := range []string{client.Version20260728, client.Version20251125} {
		t.Run(version, func(t *testing.T) {
			rc, url := mcpServer(t, version == client.Version20251125)
			rc.accept = func(auth string) bool { return auth == "Bearer good" }
			ctx := tctx(t)
			check := func(err error, code string) {
				t.Helper()
				var ue *client.UnauthorizedError
				if !errors.As(err, &ue) {
					t.Fatalf("error %v (%T), want an *UnauthorizedError", err, err)
				}
				if ue.Status != 401 || ue.ResourceMetadata != testPRM || ue.Code != code || !strings.Contains(err.Error(), testPRM) {
					t.Fatalf("%+v (%v)", ue, err)
				}
			}
			rc.challenge = `Bearer resource_metadata="` + testPRM + `"`
			_, err := client.Connect(ctx, url, &client.Options{ProtocolVersion: version})
			check(err, "")
			rc.challenge = `Basic realm="x", Bearer error="invalid_token", error_description="token expired", resource_metadata="` + testPRM + `"`
			_, err = client.Connect(ctx, url, &client.Options{ProtocolVersion: version, Token: client.StaticToken("bad")})
			check(err, "invalid_token")
			if !strings.Contains(err.Error(), "token expired") {
				t.Fatalf("no description in %v", err)
			}
			if version == client.Version20260728 {
				_, err = client.Connect(ctx, url, nil) // negotiating: a 401 is not "an older server"
				check(err, "invalid_token")
				for _, r := range rc.requests() {
					if r.RPCMethod == "initialize" {
						t.Fatal("a 401 at server/discover made the client fall back to 2025-11-25")
					}
				}
			}
			c, err := client.Connect(ctx, url, &client.Options{ProtocolVersion: version, Token: client.StaticToken("good")})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			bad := client.WithCredential(ctx, "Bearer bad")
			_, _, err = c.ListTools(bad)
			check(err, "invalid_token")
			_, err = c.CallTool(bad, "alpha", nil)
			check(err, "invalid_token")
			if _, _, err := c.ListTools(ctx); err != nil {
				t.Fatalf("the good token after refusals: %v", err)
			}
		})
	}
}

// A hostile or broken challenge still gives an *UnauthorizedError, without a metadata URL, and
// says why; nothing a server puts there panics the client or makes it pick a URL from an
// ambiguous challenge.
func TestUnauthorizedHostileChallenge(t *testing.T) {
	rc, url := mcpServer(t, false)
	rc.accept = func(string) bool { return false }
	for _, ch := range []string{
		`Bearer resource_metadata="https://good/", resource_metadata="https://evil/"`,
		`Bearer resource_metadata="javascript:alert(1)"`,
		`Bearer resource_metadata="https://x`,
		"Bearer resource_metadata=\"" + strings.Repeat("a", 100<<10) + "\"",
		strings.Repeat("Bearer, ", 2000),
		`Bearer error="` + strings.Repeat(`\"`, 3000) + `"`,
		``,
	} {
		rc.mu.Lock()
		rc.challenge = ch
		rc.mu.Unlock()
		_, err := client.Connect(tctx(t), url, &client.Options{ProtocolVersion: client.Version20260728, Token: client.StaticToken("x")})
		var ue *client.UnauthorizedError
		if !errors.As(err, &ue) {
			t.Fatalf("challenge %.40q: error %v, want an *UnauthorizedError", ch, err)
		}
		if ue.ResourceMetadata != "" {
			t.Fatalf("challenge %.40q: metadata URL %q taken from it", ch, ue.ResourceMetadata)
		}
		if len(err.Error()) > 4096 {
			t.Fatalf("challenge %.40q: a %d-byte error message", ch, len(err.Error()))
		}
	}
}

// A listen stream the server ends with AuthorizationEnded (data.reason token_expiry) is an
// EventDropped whose Err is an *AuthorizationEndedError; the reconnect asks the token source
// again, a refused attempt is an EventReconnect with an *UnauthorizedError, and the caller acting
// on it (a new token) gets the stream back. The server is a real go-sdk server behind a front
// that, as the sidecar does at a token's expiry, ends the first listen with the error.
func TestListenEndsWithTokenExpiry(t *testing.T) {
	rc, url := mcpServer(t, false)
	rc.challenge = `Bearer error="invalid_token", resource_metadata="` + testPRM + `"`
	rc.accept = func(auth string) bool { return auth != "Bearer stale" }
	until := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	expire := make(chan struct{})
	var intercepted atomic.Bool
	rc.intercept = func(w http.ResponseWriter, r *http.Request, rpc map[string]any) bool {
		if rpc["method"] != "subscriptions/listen" || r.Header.Get("Authorization") != "Bearer expiring" || !intercepted.CompareAndSwap(false, true) {
			return false
		}
		id, _ := json.Marshal(rpc["id"])
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"toolsListChanged\":true},\"authorizedUntil\":%q,\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":%s}}}\n\n",
			until.Format(time.RFC3339), id)
		w.(http.Flusher).Flush()
		select {
		case <-expire:
		case <-r.Context().Done():
			return true
		}
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-31001,\"message\":\"Authorization ended: the access token expired\",\"data\":{\"reason\":\"token_expiry\"}}}\n\n", id)
		return true
	}
	var token atomic.Value
	token.Store("expiring")
	ev := newEvents()
	hooks := ev.hooks()
	inner := hooks.OnEvent
	hooks.OnEvent = func(e client.Event) {
		var ue *client.UnauthorizedError
		if e.Type == client.EventReconnect && errors.As(e.Err, &ue) {
			token.Store("fresh") // the caller re-authenticates
		}
		inner(e)
	}
	c := connect(t, url, &client.Options{Hooks: hooks, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		Token: func(context.Context) (string, error) { return token.Load().(string), nil }})
	ev.waitEvent(t, 0, "the first acknowledgement", func(e client.Event) bool {
		if e.Type == client.EventAcknowledged && !e.AuthorizedUntil.Equal(until) {
			t.Errorf("authorizedUntil %v, want %v", e.AuthorizedUntil, until)
		}
		return e.Type == client.EventAcknowledged
	})
	token.Store("stale") // the source has nothing better yet
	from := ev.count()
	close(expire)
	ev.waitEvent(t, from, "the drop with token_expiry", func(e client.Event) bool {
		var ae *client.AuthorizationEndedError
		return e.Type == client.EventDropped && errors.As(e.Err, &ae) && ae.Reason == client.ReasonTokenExpiry
	})
	ev.waitEvent(t, from, "a reconnect refused with a 401", func(e client.Event) bool {
		var ue *client.UnauthorizedError
		return e.Type == client.EventReconnect && errors.As(e.Err, &ue) && ue.ResourceMetadata == testPRM
	})
	ev.waitEvent(t, from, "the listen back", isType(client.EventAcknowledged))
	ev.waitEvent(t, from, "the re-baseline", isType(client.EventRebaseline))
	if !c.Listening() {
		t.Fatal("not listening after the re-authentication")
	}
	var listens []string
	for _, r := range rc.requests() {
		if r.RPCMethod == "subscriptions/listen" {
			listens = append(listens, r.Authorization)
		}
	}
	if len(listens) != 2 || listens[0] != "Bearer expiring" || listens[1] != "Bearer fresh" {
		t.Fatalf("listens with %v, want the expiring token, then the fresh one", listens)
	}
}

// A 2025-11-25 GET stream refused its token (the sidecar ends that stream at the token's expiry;
// go-sdk asks for it again) ends the session with an *UnauthorizedError; the reconnect asks the
// token source again and a good token brings the session back.
func TestLegacyStreamRefusedItsToken(t *testing.T) {
	rc, url := mcpServer(t, true)
	var token atomic.Value
	token.Store("old")
	rc.challenge = `Bearer error="invalid_token", resource_metadata="` + testPRM + `"`
	rc.accept = func(auth string) bool { return auth != "Bearer old" || token.Load() == "old" }
	ev := newEvents()
	hooks := ev.hooks()
	inner := hooks.OnEvent
	hooks.OnEvent = func(e client.Event) {
		var ue *client.UnauthorizedError
		if e.Type == client.EventDropped && errors.As(e.Err, &ue) && ue.ResourceMetadata == testPRM {
			token.Store("new") // the caller re-authenticates
		}
		inner(e)
	}
	c := connect(t, url, &client.Options{Hooks: hooks, ProtocolVersion: client.Version20251125, MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Token: func(context.Context) (string, error) {
			if token.Load() == "new" {
				return "new", nil
			}
			return "old", nil
		}})
	from := ev.count()
	token.Store("expired") // the server now refuses "old"; the source still returns it
	rc.srv.CloseClientConnections()
	ev.waitEvent(t, from, "the session's end with an *UnauthorizedError", func(e client.Event) bool {
		var ue *client.UnauthorizedError
		return e.Type == client.EventDropped && errors.As(e.Err, &ue)
	})
	ev.waitEvent(t, from, "the session back", isType(client.EventAcknowledged))
	if _, _, err := c.ListTools(tctx(t)); err != nil {
		t.Fatal(err)
	}
	var gets []string
	for _, r := range rc.requests() {
		if r.HTTPMethod == http.MethodGet {
			gets = append(gets, r.Authorization)
		}
	}
	if len(gets) < 3 || gets[0] != "Bearer old" || gets[len(gets)-1] != "Bearer new" {
		t.Fatalf("GET streams with %v: want the old token, refused, then the new one", gets)
	}
}
