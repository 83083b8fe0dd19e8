//go:build e2e

package main_test

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestAuthServiceAccountTokens: a sidecar process with a kubeconfig reviews TokenRequest tokens
// of two ServiceAccounts against a real API server: the one for its audience reaches the
// upstream as that ServiceAccount (subject, groups, ServiceAccount and SPIFFE headers), the one
// for another audience gets 401 with the challenge.
func TestAuthServiceAccountTokens(t *testing.T) {
	cluster, tokenOf := serviceAccountCluster(t)
	agentA := tokenOf("team-a", "agent-a", authAudience)
	agentB := tokenOf("team-b", "agent-b", "https://other.example/mcp")

	up := freePort(t)
	startUpstream(t, up)
	front, rec := recordHeaders(t, up, "tools/call")
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, encodeAuthCatalog(t, &catalog.Auth{Resource: authAudience, TrustDomain: "cluster.local",
		ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{authAudience}}}))
	e := &env{upAddr: front}
	e.startSidecar(t, "--catalog-file", path, "--kubeconfig", cluster.KubeconfigPath)
	call := func(tok string) (int, http.Header) {
		req := rpcReq(t, e.mcp, "c", "tools/call", "test_simple_text", `,"name":"test_simple_text","arguments":{}`)
		req.Header.Set("Authorization", "Bearer "+tok)
		st, h, _ := do(t, req)
		return st, h
	}
	if st, h := call(agentB); st != 401 || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("another audience: HTTP %d %q", st, h.Get("WWW-Authenticate"))
	}
	if st, _ := call(agentA); st != 200 {
		t.Fatalf("agent-a: HTTP %d", st)
	}
	eventually.True(t, "the upstream to see agent-a", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.seen) > 0
	})
	rec.mu.Lock()
	h := rec.seen[len(rec.seen)-1]
	rec.mu.Unlock()
	if h.Get("Authorization") != "" || h.Get("X-Switchboard-Subject") != "system:serviceaccount:team-a:agent-a" ||
		h.Get("X-Switchboard-Service-Account") != "team-a/agent-a" || h.Get("X-Switchboard-Spiffe-Id") != "spiffe://cluster.local/ns/team-a/sa/agent-a" ||
		h.Get("X-Switchboard-Issuer") != "kubernetes" || !slices.Contains(h.Values("X-Switchboard-Groups"), "system:serviceaccounts:team-a") {
		t.Fatalf("the upstream saw %v", h)
	}
}

// serviceAccountCluster starts a real API server for the test and returns it with tokenOf,
// which creates the ServiceAccount ns/name (and its namespace) and a TokenRequest token of it
// for the audience aud.
func serviceAccountCluster(t *testing.T) (*testenv.Env, func(ns, name, aud string) string) {
	t.Helper()
	cluster, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	return cluster, func(ns, name, aud string) string {
		t.Helper()
		_, _ = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{Audiences: []string{aud}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
}
