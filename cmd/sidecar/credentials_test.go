//go:build e2e

package main_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// TestUpstreamCredentialsLegacyUpstream: a sidecar process reading its catalog ConfigMap and the
// credentials Secret from a real API server, in front of a 2025-era upstream (go-sdk v1.4.1's
// everything-server over HTTP, reached through upstream sessions). A TokenRequest caller gets
// its own key in X-Api-Key and its own X-Api-Key never passes; another ServiceAccount, not
// mapped, is refused and the upstream sees nothing. A catalog edit switches to selecting by an
// OIDC token's claim, live: the tenant claim picks the key, a token without it gets the default
// key. The debug log holds no key value.
func TestUpstreamCredentialsLegacyUpstream(t *testing.T) {
	cluster, tokenOf := serviceAccountCluster(t)
	alice, mallory := tokenOf("team-a", "alice", authAudience), tokenOf("team-b", "mallory", authAudience)
	op, err := testservers.StartOIDCProvider()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(op.Close)
	ctx := context.Background()
	otx, cancel := context.WithTimeout(ctx, hang)
	defer cancel()
	acme, err := op.Token(otx, testservers.TokenOptions{Audiences: []string{authAudience}, Subject: "ci-bot", Claims: map[string]any{"tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	noTenant, err := op.Token(otx, testservers.TokenOptions{Audiences: []string{authAudience}, Subject: "other-bot"})
	if err != nil {
		t.Fatal(err)
	}
	const aliceKey, acmeKey, sharedKey = "k-alice-0e5d3a77", "k-acme-91b2f6c0", "k-shared-44aa1c09"

	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "mcp"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys"},
		StringData: map[string]string{"alice": aliceKey, "acme": acmeKey, "shared": sharedKey}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	issuer := catalog.JWTIssuer{URL: op.Issuer, Audiences: []string{authAudience}, CertificateAuthority: string(op.CAPEM), UsernameClaim: "sub", UsernamePrefix: "oidc:"}
	auth := &catalog.Auth{Resource: authAudience, TrustDomain: "cluster.local",
		ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{authAudience}},
		JWT:                  []catalog.JWTIssuer{issuer},
		UpstreamCredentials: &catalog.UpstreamCredentials{Secret: "keys", Readable: true, Header: "X-Api-Key",
			By: catalog.CredentialByServiceAccount, Keys: map[string]string{"team-a/alice": "alice"}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "everything-catalog"}, Data: map[string]string{catalog.Key: string(encodeAuthCatalog(t, auth))}}
	if cm, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	up := freePort(t)
	start(t, legacyBin(t), "-http="+up)
	eventually.True(t, "the legacy upstream to listen", func() bool {
		c, err := net.Dial("tcp", up)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	front, rec := recordHeaders(t, up, "tools/call")
	e := &env{upAddr: front}
	// Every request traced, to a receiver whose spans are grepped for the keys at the end.
	rc, traces := startTraceReceiver(t)
	e.startSidecar(t, "--catalog-configmap", ns+"/everything-catalog", "--kubeconfig", cluster.KubeconfigPath,
		"--otlp-endpoint", traces, "--trace-sampling-per-million", "1000000")

	// call calls test_simple_text as tok, sending X-Api-Key: forged; it returns the HTTP
	// status, the JSON-RPC message and the X-Api-Key values of the upstream calls it caused.
	call := func(tok string) (int, map[string]any, [][]string) {
		t.Helper()
		rec.mu.Lock()
		mark := len(rec.seen)
		rec.mu.Unlock()
		req := bearer(rpcReq(t, e.mcp, "c", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`), tok)
		req.Header.Set("X-Api-Key", "forged")
		st, _, msg := do(t, req)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var seen [][]string
		for _, h := range rec.seen[mark:] {
			seen = append(seen, h.Values("X-Api-Key"))
		}
		return st, msg, seen
	}
	expectKey := func(who, tok, key string) {
		t.Helper()
		eventually.True(t, who+"'s call to carry "+who+"'s key", func() bool {
			st, msg, seen := call(tok)
			return st == http.StatusOK && msg["error"] == nil && len(seen) == 1 && len(seen[0]) == 1 && seen[0][0] == key
		})
	}
	expectRefused := func(who, tok, want string) {
		t.Helper()
		st, msg, seen := call(tok)
		e, _ := msg["error"].(map[string]any)
		if st != http.StatusForbidden || e == nil || !strings.Contains(e["message"].(string), want) || len(seen) != 0 {
			t.Errorf("%s: HTTP %d %v; the upstream saw %d calls; want 403 naming %q and no upstream call", who, st, msg, len(seen), want)
		}
	}
	expectKey("alice", alice, aliceKey)
	expectRefused("mallory", mallory, "ServiceAccount team-b/mallory")
	expectRefused("an OIDC caller", acme, "a caller without a ServiceAccount")

	// By the tenant claim of OIDC tokens, with a default key: applied live.
	issuer.CredentialClaim = "tenant"
	auth.JWT = []catalog.JWTIssuer{issuer}
	auth.UpstreamCredentials.By, auth.UpstreamCredentials.Keys, auth.UpstreamCredentials.DefaultKey = catalog.CredentialByClaim, map[string]string{"acme": "acme"}, "shared"
	cm.Data[catalog.Key] = string(encodeAuthCatalog(t, auth))
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectKey("acme", acme, acmeKey)
	expectKey("a token without the claim", noTenant, sharedKey)
	expectKey("alice (no claim: the default)", alice, sharedKey)

	// A missing default key refuses only the callers that need it.
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "keys", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(sec.Data, "shared")
	if _, err := cs.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the default key's callers refused", func() bool {
		st, _, seen := call(noTenant)
		return st == http.StatusForbidden && len(seen) == 0
	})
	expectRefused("a token without the claim", noTenant, "Secret keys has no key shared")
	expectKey("acme", acme, acmeKey)

	// The spans of the calls above (exported every 100 ms), before the process goes.
	var spans string
	eventually.True(t, "the tools/call spans exported", func() bool {
		spans = rc.Text()
		return strings.Count(spans, "tools/call") >= 4
	})
	for _, v := range []string{aliceKey, acmeKey, sharedKey} {
		if strings.Contains(spans, v) {
			t.Errorf("a span carries a key value")
		}
	}
	e.sc.kill()
	log := e.sc.output()
	if !strings.Contains(log, "Catalog revision applied") {
		t.Fatalf("the sidecar's log looks empty:\n%s", log)
	}
	for _, v := range []string{aliceKey, acmeKey, sharedKey} {
		if strings.Contains(log, v) {
			t.Errorf("the sidecar's debug log contains a key value")
		}
	}
}
