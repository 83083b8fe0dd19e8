//go:build e2e

package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/switchboard-mcp/switchboard/client"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// A real sidecar process that requires a token (ServiceAccount tokens, checked by TokenReview
// against a real API server): without a token the client's error is an *UnauthorizedError
// naming the sidecar's Protected Resource Metadata URL (which serves the document for the
// resource); with a token of the wrong audience it says invalid_token; with a TokenRequest token
// for the server's audience the tools are listed, at 2026-07-28 and at 2025-11-25.
func TestSidecarRequiresToken(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := tctx(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("agents").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "planner"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const resource = "http://upstream.test.svc/mcp"
	mint := func(aud string) string {
		tr, err := cs.CoreV1().ServiceAccounts("agents").CreateToken(ctx, "planner", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{aud}, ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	up := newUpstream(t)
	cat := newCatalog(t, public60s, "v1")
	cat.auth = &catalog.Auth{Resource: resource, TrustDomain: "cluster.local",
		ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{resource}}}
	cat.write(t, "v1")
	sc := startSidecar(t, up.url, cat.path, "", "", "--kubeconfig", env.KubeconfigPath)
	wantPRM := "http://" + sc.mcpAddr + "/.well-known/oauth-protected-resource/mcp"

	for _, version := range []string{client.Version20260728, client.Version20251125} {
		t.Run(version, func(t *testing.T) {
			_, err := client.Connect(ctx, sc.mcp, &client.Options{ProtocolVersion: version})
			var ue *client.UnauthorizedError
			if !errors.As(err, &ue) || ue.ResourceMetadata != wantPRM || ue.Code != "" {
				t.Fatalf("no token: %v (%+v), want an *UnauthorizedError naming %s", err, ue, wantPRM)
			}
			_, err = client.Connect(ctx, sc.mcp, &client.Options{ProtocolVersion: version, Token: client.StaticToken(mint("http://other.test.svc/mcp"))})
			if !errors.As(err, &ue) || ue.ResourceMetadata != wantPRM || ue.Code != "invalid_token" {
				t.Fatalf("wrong audience: %v (%+v), want invalid_token", err, ue)
			}
			c, err := client.Connect(ctx, sc.mcp, &client.Options{ProtocolVersion: version, Token: client.StaticToken(mint(resource))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tools, _, err := c.ListTools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools {
				names = append(names, tl.Name)
			}
			if !slices.Contains(names, "alpha") {
				t.Fatalf("tools %v", names)
			}
		})
	}

	// The URL the error names serves the document, without a token.
	resp, err := http.Get(wantPRM)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var prm struct {
		Resource string   `json:"resource"`
		Methods  []string `json:"bearer_methods_supported"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&prm); err != nil || resp.StatusCode != http.StatusOK || prm.Resource != resource || !slices.Equal(prm.Methods, []string{"header"}) {
		t.Fatalf("the metadata document: %d %+v %v", resp.StatusCode, prm, err)
	}
}
