//go:build e2e

package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// TestAuthzServiceAccounts: TokenRequest tokens of two ServiceAccounts of a real API server
// against a sidecar process with policies: agent-a (granted by its namespace, "team-a/*") and
// agent-b (granted by its SPIFFE ID) each list and call exactly their grants, over 2026-07-28
// and a 2025-11-25 session. An OIDC user whose username is agent-a's subject
// ("system:serviceaccount:team-a:agent-a", no prefix) is not agent-a: refused or shown nothing.
func TestAuthzServiceAccounts(t *testing.T) {
	cluster, tokenOf := serviceAccountCluster(t)
	ctx := context.Background()
	agentA, agentB := tokenOf("team-a", "agent-a", authAudience), tokenOf("team-b", "agent-b", authAudience)
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	otx, cancel := context.WithTimeout(ctx, hang)
	defer cancel()
	mallory, err := op.Token(otx, testservers.TokenOptions{Audiences: []string{authAudience}, Subject: "system:serviceaccount:team-a:agent-a"})
	if err != nil {
		t.Fatal(err)
	}

	var c catalog.Catalog
	if err := json.Unmarshal(encodeCatalog(t), &c); err != nil {
		t.Fatal(err)
	}
	c.Auth = &catalog.Auth{Resource: authAudience, TrustDomain: "cluster.local",
		ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{authAudience}},
		JWT:                  []catalog.JWTIssuer{{URL: op.Issuer, Audiences: []string{authAudience}, CertificateAuthority: string(op.CAPEM), UsernameClaim: "sub"}}}
	c.Access = &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "a/0", Source: catalog.AccessSource{ServiceAccounts: []string{"team-a/*"}}, Tools: []string{"test_simple_text"}},
		{Policy: "b/0", Source: catalog.AccessSource{Identities: []string{"spiffe://cluster.local/ns/team-b/sa/agent-b"}}, Tools: []string{"test_image_content"}},
	}}
	data, err := catalog.Encode(&c)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{upAddr: freePort(t)}
	startUpstream(t, e.upAddr)
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, data)
	e.startSidecar(t, "--catalog-file", path, "--kubeconfig", cluster.KubeconfigPath)
	eventually.True(t, "the catalog's auth to apply", func() bool {
		st, _, _ := do(t, rpcReq(t, e.mcp, 1, "tools/list", "", ""))
		return st == http.StatusUnauthorized
	})

	for who, v := range map[string]struct{ tok, granted, other string }{
		"agent-a": {agentA, "test_simple_text", "test_image_content"},
		"agent-b": {agentB, "test_image_content", "test_simple_text"},
	} {
		st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 2, "tools/list", "", ""), v.tok))
		if got := listNames(t, who+" tools/list", st, msg, "tools", "name"); !slices.Equal(got, []string{v.granted}) {
			t.Errorf("%s tools/list (2026-07-28) = %v, want [%s]", who, got, v.granted)
		}
		sid := legacyInitialize(t, e.mcp, v.tok)
		st, _, msg = do(t, bearer(authzLegacyReq(t, e.mcp, sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`), v.tok))
		if got := listNames(t, who+" tools/list (2025)", st, msg, "tools", "name"); !slices.Equal(got, []string{v.granted}) {
			t.Errorf("%s tools/list (2025-11-25) = %v, want [%s]", who, got, v.granted)
		}
		if st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 4, "tools/call", v.granted, `,"name":"`+v.granted+`","arguments":{}`), v.tok)); st != 200 || msg["error"] != nil {
			t.Errorf("%s calling %s: HTTP %d %v", who, v.granted, st, msg)
		}
		st, _, msg = do(t, bearer(rpcReq(t, e.mcp, 4, "tools/call", v.other, `,"name":"`+v.other+`","arguments":{}`), v.tok))
		ust, _, umsg := do(t, bearer(rpcReq(t, e.mcp, 4, "tools/call", "no_such_tool", `,"name":"no_such_tool","arguments":{}`), v.tok))
		if d, u := rpcErr(st, msg, v.other), rpcErr(ust, umsg, "no_such_tool"); msg["error"] == nil || d != u {
			t.Errorf("%s calling %s: %s; an unknown tool: %s", who, v.other, d, u)
		}
		st, _, msg = do(t, bearer(authzLegacyReq(t, e.mcp, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"`+v.other+`","arguments":{}}}`), v.tok))
		if msg["error"] == nil {
			t.Errorf("%s calling %s in its 2025-era session: HTTP %d %v", who, v.other, st, msg)
		}
	}

	// Mallory's OIDC username spells agent-a's subject: she is refused outright, or authenticated
	// as an OIDC user whom no rule names; either way agent-a's tool is not hers.
	st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 6, "tools/list", "", ""), mallory))
	if st != http.StatusUnauthorized {
		if got := listNames(t, "mallory tools/list", st, msg, "tools", "name"); len(got) != 0 {
			t.Errorf("an OIDC user named like agent-a's subject sees %v", got)
		}
	}
	t.Logf("mallory's tools/list: HTTP %d", st)
	if st, _, msg := do(t, bearer(rpcReq(t, e.mcp, 7, "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`), mallory)); msg["error"] == nil {
		t.Errorf("an OIDC user named like agent-a's subject called agent-a's tool: HTTP %d %v", st, msg)
	}
	// A session agent-a opened is not mallory's, although her subject is the same string: the
	// binding is by subject, so it is hers only if she authenticates at all, and even then she
	// gets her own grant, which is nothing.
	sid := legacyInitialize(t, e.mcp, agentA)
	st, _, msg = do(t, bearer(authzLegacyReq(t, e.mcp, sid, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`), mallory))
	if msg["error"] == nil && st == 200 {
		t.Errorf("mallory called agent-a's tool in agent-a's session: %v", msg)
	}
}
