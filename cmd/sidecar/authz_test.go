//go:build e2e

package main_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// authzCatalog is encodeCatalog's catalog with OIDC auth against op and access: alice may use
// test_simple_text, test_simple_prompt and test://static-text; bob test_image_content and the
// resources of the template test://template/{id}/data; bobExtra is granted to bob besides.
func authzCatalog(t *testing.T, op *testservers.OIDCProvider, resource string, bobExtra ...string) []byte {
	t.Helper()
	var c catalog.Catalog
	if err := json.Unmarshal(encodeCatalog(t), &c); err != nil {
		t.Fatal(err)
	}
	c.Auth = &catalog.Auth{Resource: resource, TrustDomain: "cluster.local",
		JWT: []catalog.JWTIssuer{{URL: op.Issuer, Audiences: []string{authAudience}, CertificateAuthority: string(op.CAPEM),
			UsernameClaim: "sub", UsernamePrefix: "oidc:", GroupsClaim: "groups", GroupsPrefix: "oidc:"}}}
	c.Access = &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "alice/0", Source: catalog.AccessSource{Users: []string{"oidc:alice"}},
			Tools: []string{"test_simple_text"}, Prompts: []string{"test_simple_prompt"}, Resources: []string{"test://static-text"}},
		{Policy: "bob/0", Source: catalog.AccessSource{Users: []string{"oidc:bob"}},
			Tools: append([]string{"test_image_content"}, bobExtra...), Resources: []string{"test://template/{id}/data"}},
	}}
	b, err := catalog.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// authzEnv is a sidecar process with auth and access in front of the everything-server, and
// the OIDC provider process that issues its callers' tokens.
type authzEnv struct {
	*env
	op   *testservers.OIDCProvider
	path string
}

func newAuthzEnv(t *testing.T) *authzEnv {
	t.Helper()
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	e := &authzEnv{env: &env{upAddr: freePort(t)}, op: op, path: filepath.Join(t.TempDir(), "catalog.json")}
	startUpstream(t, e.upAddr)
	writeFile(t, e.path, encodeCatalog(t))
	e.startSidecar(t, "--catalog-file", e.path)
	writeFile(t, e.path, authzCatalog(t, op, e.mcp))
	eventually.True(t, "the catalog's auth to apply", func() bool {
		st, _, _ := do(t, rpcReq(t, e.mcp, 1, "tools/list", "", ""))
		return st == http.StatusUnauthorized
	})
	return e
}

func (e *authzEnv) token(t *testing.T, sub string, ttl time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	tok, err := e.op.Token(ctx, testservers.TokenOptions{Audiences: []string{authAudience}, Subject: sub, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func bearer(req *http.Request, tok string) *http.Request {
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req
}

// authzLegacyReq builds a 2025-11-25 request (sid "" for none).
func authzLegacyReq(t *testing.T, url, sid, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return req
}

func legacyInitialize(t *testing.T, url, tok string) string {
	t.Helper()
	st, h, msg := do(t, bearer(authzLegacyReq(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), tok))
	if st != 200 || h.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: HTTP %d %v", st, msg)
	}
	return h.Get("Mcp-Session-Id")
}

// listNames returns the sorted key member of a list answer's entries.
func listNames(t *testing.T, what string, st int, msg map[string]any, member, key string) []string {
	t.Helper()
	res, _ := msg["result"].(map[string]any)
	if st != 200 || res == nil {
		t.Fatalf("%s: HTTP %d %v", what, st, msg)
	}
	out := []string{}
	for _, it := range res[member].([]any) {
		out = append(out, it.(map[string]any)[key].(string))
	}
	slices.Sort(out)
	return out
}

// rpcErr renders an answer's error, with name replaced by NAME.
func rpcErr(st int, msg map[string]any, name string) string {
	e, _ := msg["error"].(map[string]any)
	if e == nil {
		return fmt.Sprintf("HTTP %d, no error", st)
	}
	b, _ := json.Marshal(e)
	if name == "" {
		return fmt.Sprintf("HTTP %d %s", st, b)
	}
	return fmt.Sprintf("HTTP %d %s", st, strings.ReplaceAll(string(b), name, "NAME"))
}

// TestAuthzCallersSeeTheirGrants: two callers with real OIDC tokens each list and use exactly
// their grants, over 2026-07-28 and a 2025-11-25 session; what the other may use is refused like
// a name nobody serves, and the known spellings that could smuggle a refused name past the check
// are refused.
func TestAuthzCallersSeeTheirGrants(t *testing.T) {
	e := newAuthzEnv(t)
	alice, bob := e.token(t, "alice", 0), e.token(t, "bob", 0)
	views := map[string]struct {
		tok                         string
		tools, prompts, res, tmpl   []string
		callOK, callRefused, readOK string
		readRefused, promptRefused  string
	}{
		"alice": {alice, []string{"test_simple_text"}, []string{"test_simple_prompt"}, []string{"test://static-text"}, []string{},
			"test_simple_text", "test_image_content", "test://static-text", "test://template/1/data", "test_prompt_with_arguments"},
		"bob": {bob, []string{"test_image_content"}, []string{}, []string{}, []string{"test://template/{id}/data"},
			"test_image_content", "test_simple_text", "test://template/7/data", "test://static-text", "test_simple_prompt"},
	}
	lists := []struct{ method, member, key string }{
		{"tools/list", "tools", "name"}, {"prompts/list", "prompts", "name"},
		{"resources/list", "resources", "uri"}, {"resources/templates/list", "resourceTemplates", "uriTemplate"},
	}
	for who, v := range views {
		want := [][]string{v.tools, v.prompts, v.res, v.tmpl}
		sid := legacyInitialize(t, e.mcp, v.tok)
		for i, l := range lists {
			st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 2, l.method, "", ""), v.tok))
			if got := listNames(t, who+" "+l.method, st, msg, l.member, l.key); !slices.Equal(got, want[i]) {
				t.Errorf("%s %s (2026-07-28) = %v, want %v", who, l.method, got, want[i])
			}
			if s := msg["result"].(map[string]any)["cacheScope"]; s != "private" {
				t.Errorf("%s %s: cacheScope %v, want private", who, l.method, s)
			}
			st, _, msg = do(t, bearer(authzLegacyReq(t, e.mcp, sid, `{"jsonrpc":"2.0","id":3,"method":"`+l.method+`","params":{}}`), v.tok))
			if got := listNames(t, who+" "+l.method+" (2025)", st, msg, l.member, l.key); !slices.Equal(got, want[i]) {
				t.Errorf("%s %s (2025-11-25) = %v, want %v", who, l.method, got, want[i])
			}
		}
		call := func(name string, legacy bool) (int, map[string]any) {
			if legacy {
				st, _, msg := do(t, bearer(authzLegacyReq(t, e.mcp, sid, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"`+name+`","arguments":{}}}`), v.tok))
				return st, msg
			}
			st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 4, "tools/call", name, `,"name":"`+name+`","arguments":{}`), v.tok))
			return st, msg
		}
		read := func(uri string) (int, map[string]any) {
			st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 5, "resources/read", uri, `,"uri":"`+uri+`"`), v.tok))
			return st, msg
		}
		for _, legacy := range []bool{false, true} {
			if st, msg := call(v.callOK, legacy); st != 200 || msg["error"] != nil || msg["result"] == nil {
				t.Errorf("%s calling its %s (legacy %v): HTTP %d %v", who, v.callOK, legacy, st, msg)
			}
			st, msg := call(v.callRefused, legacy)
			ust, umsg := call("no_such_tool", legacy)
			if d, u := rpcErr(st, msg, v.callRefused), rpcErr(ust, umsg, "no_such_tool"); msg["error"] == nil || d != u {
				t.Errorf("%s calling %s (legacy %v): %s; an unknown tool: %s", who, v.callRefused, legacy, d, u)
			}
		}
		if st, msg := read(v.readOK); st != 200 || msg["error"] != nil {
			t.Errorf("%s reading %s: HTTP %d %v", who, v.readOK, st, msg)
		}
		st, msg := read(v.readRefused)
		ust, umsg := read("test://no-such-resource")
		if d, u := rpcErr(st, msg, v.readRefused), rpcErr(ust, umsg, "test://no-such-resource"); msg["error"] == nil || d != u {
			t.Errorf("%s reading %s: %s; an unknown URI: %s", who, v.readRefused, d, u)
		}
		st, _, msg = do(t, bearer(rpcReq(t, e.mcp, 6, "prompts/get", v.promptRefused, `,"name":"`+v.promptRefused+`"`), v.tok))
		ust, _, umsg = do(t, bearer(rpcReq(t, e.mcp, 6, "prompts/get", "no_such_prompt", `,"name":"no_such_prompt"`), v.tok))
		if d, u := rpcErr(st, msg, v.promptRefused), rpcErr(ust, umsg, "no_such_prompt"); msg["error"] == nil || d != u {
			t.Errorf("%s getting %s: %s; an unknown prompt: %s", who, v.promptRefused, d, u)
		}
	}

	// Bob is not granted test_simple_text: no spelling gets it to the upstream.
	sid := legacyInitialize(t, e.mcp, bob)
	raw := func(body string, hdr map[string]string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return bearer(req, bob)
	}
	modern := func(mcpName string) map[string]string {
		return map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": mcpName}
	}
	legacyHdr := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
	for name, req := range map[string]*http.Request{
		"case variant":      raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"test_image_content","Name":"test_simple_text","arguments":{}}}`, modern("test_image_content")),
		"duplicate":         raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"test_image_content","name":"test_simple_text","arguments":{}}}`, modern("test_image_content")),
		"escaped":           raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"test\u005fsimple_text","arguments":{}}}`, modern("test_simple_text")),
		"header mismatch":   raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"test_simple_text","arguments":{}}}`, modern("test_image_content")),
		"batch":             raw(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"test_simple_text","arguments":{}}}]`, modern("test_simple_text")),
		"2025 duplicate":    raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_image_content","name":"test_simple_text","arguments":{}}}`, legacyHdr),
		"2025 case variant": raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"test_simple_text","name":"test_image_content","arguments":{}}}`, legacyHdr),
		"2025 escaped":      raw(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple\u005ftext","arguments":{}}}`, legacyHdr),
	} {
		st, _, msg := do(t, req)
		if msg["error"] == nil {
			t.Errorf("bob's %s call of test_simple_text: HTTP %d, served: %v", name, st, msg["result"])
		}
	}
}

// TestAuthzSessionOfAnotherCaller: a 2025-era session opened by alice is refused with bob's
// token like a session the server never issued, and an id whose binding was edited too.
func TestAuthzSessionOfAnotherCaller(t *testing.T) {
	e := newAuthzEnv(t)
	alice, bob := e.token(t, "alice", 0), e.token(t, "bob", 0)
	sid := legacyInitialize(t, e.mcp, alice)
	list := func(tok, id string) (int, map[string]any) {
		st, _, msg := do(t, bearer(authzLegacyReq(t, e.mcp, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`), tok))
		return st, msg
	}
	if st, msg := list(alice, sid); st != 200 || msg["error"] != nil {
		t.Fatalf("alice in her own session: HTTP %d %v", st, msg)
	}
	ust, umsg := list(bob, "s1.e30.AAAA")
	if ust != http.StatusNotFound {
		t.Fatalf("an unknown session: HTTP %d %v", ust, umsg)
	}
	if st, msg := list(bob, sid); rpcErr(st, msg, "") != rpcErr(ust, umsg, "") {
		t.Errorf("alice's session with bob's token: %s, want as unknown: %s", rpcErr(st, msg, ""), rpcErr(ust, umsg, ""))
	}
	if st, _ := list("", sid); st != http.StatusUnauthorized {
		t.Errorf("alice's session without a token: HTTP %d, want 401", st)
	}
	// The payload re-signed is impossible without the key; an edited payload (bob's binding
	// spliced into alice's id) fails the signature.
	parts := strings.Split(sid, ".")
	bobSid := legacyInitialize(t, e.mcp, bob)
	bobParts := strings.Split(bobSid, ".")
	for name, id := range map[string]string{
		"bob's payload, alice's MAC": parts[0] + "." + bobParts[1] + "." + parts[2],
		"alice's payload, bob's MAC": parts[0] + "." + parts[1] + "." + bobParts[2],
	} {
		if st, msg := list(bob, id); st != http.StatusNotFound {
			t.Errorf("%s with bob's token: HTTP %d %v", name, st, msg)
		}
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(m, e.mcp, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		if st, _, _ := send(t, bearer(req, bob)); st != http.StatusNotFound {
			t.Errorf("%s of alice's session with bob's token: HTTP %d, want 404", m, st)
		}
	}
	if st, msg := list(alice, sid); st != 200 || msg["error"] != nil {
		t.Fatalf("alice's session after bob's attempts (the DELETE must not have ended it): HTTP %d %v", st, msg)
	}
}

// TestAuthzPolicyEditWakesOnlyTheAffectedCaller: a catalog edit that grants bob one more tool
// sends bob's listen stream and 2025-era GET stream tools/list_changed, and alice's nothing.
func TestAuthzPolicyEditWakesOnlyTheAffectedCaller(t *testing.T) {
	e := newAuthzEnv(t)
	alice, bob := e.token(t, "alice", 0), e.token(t, "bob", 0)
	filter := `{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true}`
	la := openStream(t, bearer(rpcReq(t, e.mcp, "la", "subscriptions/listen", "", `,"notifications":`+filter), alice))
	lb := openStream(t, bearer(rpcReq(t, e.mcp, "lb", "subscriptions/listen", "", `,"notifications":`+filter), bob))
	la.nextMethod(t, "notifications/subscriptions/acknowledged")
	lb.nextMethod(t, "notifications/subscriptions/acknowledged")
	get := func(tok, sid string) *sse {
		req, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		req.Header.Set("Accept", "text/event-stream")
		return openStream(t, bearer(req, tok))
	}
	ga, gb := get(alice, legacyInitialize(t, e.mcp, alice)), get(bob, legacyInitialize(t, e.mcp, bob))
	ga.drain()
	gb.drain()

	writeFile(t, e.path, authzCatalog(t, e.op, e.mcp, "test_audio_content"))
	for name, s := range map[string]*sse{"bob's listen": lb, "bob's GET stream": gb} {
		if _, skipped := s.nextMethod(t, "notifications/tools/list_changed"); len(skipped) != 0 {
			t.Errorf("%s: before tools/list_changed: %v", name, skipped)
		}
		if more := s.drain(); len(more) != 0 {
			t.Errorf("%s: after tools/list_changed: %v", name, more)
		}
	}
	for name, s := range map[string]*sse{"alice's listen": la, "alice's GET stream": ga} {
		if got := s.drain(); len(got) != 0 {
			t.Errorf("%s woken by an edit of bob's grants: %v", name, got)
		}
	}
	st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 2, "tools/list", "", ""), bob))
	if got := listNames(t, "bob tools/list", st, msg, "tools", "name"); !slices.Equal(got, []string{"test_audio_content", "test_image_content"}) {
		t.Errorf("bob's tools after the edit: %v", got)
	}
}

// TestAuthzListenEndsWithTheToken: a listen stream opened with a token of a few seconds carries
// authorizedUntil = its exp in the acknowledgement, and ends with the AuthorizationEnded error
// (reason token_expiry) once it has expired, not before; a 2025-era GET stream is closed.
func TestAuthzListenEndsWithTheToken(t *testing.T) {
	e := newAuthzEnv(t)
	tok := e.token(t, "alice", 3*time.Second)
	var claims struct {
		Exp int64 `json:"exp"`
	}
	payload, _ := base64Segment(strings.Split(tok, ".")[1])
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 {
		t.Fatalf("token payload %s: %v", payload, err)
	}
	exp := time.Unix(claims.Exp, 0)
	l := openStream(t, bearer(rpcReq(t, e.mcp, "short", "subscriptions/listen", "", `,"notifications":{"toolsListChanged":true}`), tok))
	ack, _ := l.nextMethod(t, "notifications/subscriptions/acknowledged")
	if got := ack["params"].(map[string]any)["authorizedUntil"]; got != exp.UTC().Format(time.RFC3339) {
		t.Fatalf("authorizedUntil %v, want %s", got, exp.UTC().Format(time.RFC3339))
	}
	req, _ := http.NewRequest(http.MethodGet, e.mcp, nil)
	req.Header.Set("Mcp-Session-Id", legacyInitialize(t, e.mcp, tok))
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Accept", "text/event-stream")
	g := openStream(t, bearer(req, tok))

	end := l.next(t)
	at := time.Now()
	e1, _ := end["error"].(map[string]any)
	data, _ := e1["data"].(map[string]any)
	if end["id"] != "short" || e1 == nil || data["reason"] != "token_expiry" {
		t.Fatalf("the stream's end: %v, want the listen's AuthorizationEnded error with reason token_expiry", end)
	}
	if at.Before(exp) {
		t.Fatalf("ended at %s, before the token's exp %s", at.Format(time.RFC3339Nano), exp)
	}
	t.Logf("listen stream ended %v after exp", at.Sub(exp))
	if _, ok := <-l.events; ok {
		t.Fatal("something was written after AuthorizationEnded")
	}
	for {
		select {
		case _, ok := <-g.events:
			if !ok {
				return
			}
		case <-time.After(hang):
			t.Fatal("the 2025-era GET stream outlived its token")
		}
	}
}

func base64Segment(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
