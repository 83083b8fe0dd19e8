//go:build e2e

package kubectlmcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e }, nil))
}

// authServer is a real go-sdk server behind a front that records each request's Authorization
// and, when accept is set, answers 401 with a Bearer challenge to what it does not accept.
type authServer struct {
	url    string
	accept func(auth string) bool

	mu   sync.Mutex
	seen []string
}

const testPRM = "https://weather.example/.well-known/oauth-protected-resource/mcp"

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	srv, _ := newServer(t)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	a := &authServer{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		a.mu.Lock()
		a.seen = append(a.seen, auth)
		accept := a.accept
		a.mu.Unlock()
		if accept != nil && !accept(auth) {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+testPRM+`"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	a.url = ts.URL + "/mcp"
	return a
}

func (a *authServer) authorizations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// claims decodes a JWT's payload (not verified: the TokenReview in the test does that).
type claims struct {
	Aud      []string `json:"aud"`
	Sub      string   `json:"sub"`
	Exp, Iat int64
}

func decodeClaims(t *testing.T, jwt string) claims {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c claims
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// fixture creates namespace agents with ServiceAccount reader, ServiceAccount default/local,
// and MCPServer default/<server> with auth (nil: none) whose status.url is url ("" leaves it
// unset).
func fixture(t *testing.T, server, url string, auth ...*mcpv1alpha1.AuthSpec) {
	t.Helper()
	ctx := t.Context()
	c := env.Client
	// Already there from another test is fine.
	_ = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}})
	_ = c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "agents"}})
	_ = c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: "default"}})
	s := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: server, Namespace: "default"},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal}}
	if len(auth) > 0 {
		s.Spec.Auth = auth[0]
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), s) })
	if url != "" {
		s.Status.URL = url
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// --as-sa mints, through the real API server's TokenRequest API, a token of the ServiceAccount
// whose audience is the MCPServer's (spec.auth.audiences[0], else status.url) and whose subject
// is the ServiceAccount, short lived; the MCP server gets it on every request; the API server's
// TokenReview accepts it for that audience and refuses it for another (it is good for this
// server only). A server that does not authenticate, or not with ServiceAccount tokens, is
// warned about.
func TestAsServiceAccount(t *testing.T) {
	const statusURL = "http://weather.default.svc.cluster.local/mcp"
	const audience = "https://weather.example/mcp"
	fixture(t, "weather", statusURL)
	fixture(t, "weather-auth", "http://weather-auth.default.svc.cluster.local/mcp", &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired,
		Audiences: []string{audience, "https://second.example/mcp"}, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}})
	fixture(t, "weather-oidc", statusURL, &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired,
		JWT: []mcpv1alpha1.JWTAuthenticator{{Issuer: mcpv1alpha1.Issuer{URL: "https://issuer.example", Audiences: []string{"a"}}}}})
	a := newAuthServer(t)
	for _, tc := range []struct{ server, flag, sub, aud, warning string }{
		{"weather", "agents/reader", "system:serviceaccount:agents:reader", statusURL, "does not authenticate its callers"},
		{"weather", "local", "system:serviceaccount:default:local", statusURL, "does not authenticate its callers"}, // a bare name is in -n
		{"weather-auth", "agents/reader", "system:serviceaccount:agents:reader", audience, ""},
		{"weather-oidc", "agents/reader", "system:serviceaccount:agents:reader", statusURL, "does not accept ServiceAccount tokens"},
	} {
		t.Run(tc.server+"/"+tc.flag, func(t *testing.T) {
			before := len(a.authorizations())
			out, errOut, code := runCmd(t, "tools", tc.server, "--url", a.url, "--as-sa", tc.flag,
				"--kubeconfig", env.KubeconfigPath, "-n", "default", "-o", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if tc.warning != "" && !strings.Contains(errOut, "warning: MCPServer default/"+tc.server+" "+tc.warning) ||
				tc.warning == "" && strings.Contains(errOut, "warning") {
				t.Fatalf("stderr %q, want warning %q", errOut, tc.warning)
			}
			var l Listing
			if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Lists) != 1 || len(l.Lists[0].Items) != 1 {
				t.Fatalf("%v: %s", err, out)
			}
			if want := "ServiceAccount " + strings.ReplaceAll(strings.TrimPrefix(tc.sub, "system:serviceaccount:"), ":", "/"); l.As != want {
				t.Fatalf("as %q, want %q", l.As, want)
			}
			seen := a.authorizations()[before:]
			if len(seen) == 0 {
				t.Fatal("no request reached the server")
			}
			for _, s := range seen {
				if s != seen[0] || !strings.HasPrefix(s, "Bearer ") {
					t.Fatalf("Authorization %q, then %q", seen[0], s)
				}
			}
			tok := strings.TrimPrefix(seen[0], "Bearer ")
			cl := decodeClaims(t, tok)
			if !slices.Equal(cl.Aud, []string{tc.aud}) || cl.Sub != tc.sub || cl.Exp-cl.Iat != int64(tokenExpiration.Seconds()) {
				t.Fatalf("claims %+v, want aud [%s], sub %s, a %s lifetime", cl, tc.aud, tc.sub, tokenExpiration)
			}
			cs := kubernetes.NewForConfigOrDie(env.Config)
			for _, aud := range []string{tc.aud, "http://other.default.svc.cluster.local/mcp"} {
				tr, err := cs.AuthenticationV1().TokenReviews().Create(t.Context(), &authenticationv1.TokenReview{
					Spec: authenticationv1.TokenReviewSpec{Token: tok, Audiences: []string{aud}}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := aud == tc.aud
				if tr.Status.Authenticated != want || want && tr.Status.User.Username != tc.sub {
					t.Fatalf("TokenReview for audience %s: authenticated %v as %q (%s), want %v", aud, tr.Status.Authenticated, tr.Status.User.Username, tr.Status.Error, want)
				}
			}
		})
	}
}

// The credential flags: at most one, each checked before anything is sent, with an error that
// says what is wrong; an identity the cluster does not have, or a server without an audience,
// fails before connecting.
func TestCredentialFlags(t *testing.T) {
	fixture(t, "pending", "")
	a := newAuthServer(t)
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from.file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kc := []string{"--kubeconfig", env.KubeconfigPath, "-n", "default"}
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--token", "a", "--token-file", file}, 2, "--token and --token-file: give one of them"},
		{[]string{"--as-sa", "agents/reader", "--authorization", "Bearer x"}, 2, "--authorization and --as-sa: give one"},
		{[]string{"--token", "a", "--authorization-file", file}, 2, "give one"},
		{[]string{"--as-sa", "a/b/c"}, 2, "want NAMESPACE/NAME or NAME"},
		{[]string{"--as-sa", "Bad_NS/x"}, 2, `namespace "Bad_NS"`},
		{[]string{"--as-sa", "agents/"}, 2, "want NAMESPACE/NAME or NAME"},
		{[]string{"--as-sa", "/reader"}, 2, `namespace ""`},
		{[]string{"--token", ""}, 2, "--token is empty"},
		{[]string{"--token-file", filepath.Join(t.TempDir(), "missing")}, 2, "--token-file"},
		{[]string{"--as-sa", "agents/reader"}, 2, "--as-sa needs SERVER"}, // --url only: no audience
		{append([]string{"pending", "--as-sa", "agents/reader"}, kc...), 1, "has no status.url"},
	} {
		args := append([]string{"tools", "--url", a.url}, tc.args...)
		_, errOut, code := runCmd(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}
	fixture(t, "weather2", "http://weather2.default.svc.cluster.local/mcp")
	_, errOut, code := runCmd(t, append([]string{"tools", "weather2", "--url", a.url, "--as-sa", "agents/nobody"}, kc...)...)
	if code != 1 || !strings.Contains(errOut, `serviceaccounts "nobody" not found`) {
		t.Errorf("a missing ServiceAccount: exit %d, %q", code, errOut)
	}
	if n := len(a.authorizations()); n != 0 {
		t.Fatalf("%d requests reached the MCP server from refused command lines", n)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "on.argv"}, "Bearer on.argv"},
		{[]string{"--token-file", file}, "Bearer from.file"},
	} {
		before := len(a.authorizations())
		if _, errOut, code := runCmd(t, append([]string{"tools", "--url", a.url}, tc.args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		for _, s := range a.authorizations()[before:] {
			if s != tc.want {
				t.Fatalf("%v: the server got %q, want %q", tc.args, s, tc.want)
			}
		}
	}
}

// A server that authenticates its callers refuses a command line without a token; the error
// names where to get one (the resource metadata URL) and the hint names the flags.
func TestUnauthorizedHint(t *testing.T) {
	a := newAuthServer(t)
	a.accept = func(auth string) bool { return auth == "Bearer good" }
	_, errOut, code := runCmd(t, "tools", "--url", a.url)
	if code != 1 || !strings.Contains(errOut, testPRM) || !strings.Contains(errOut, "--as-sa") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runCmd(t, "tools", "--url", a.url, "--token", "bad")
	if code != 1 || !strings.Contains(errOut, testPRM) || strings.Contains(errOut, "hint") {
		t.Fatalf("a refused token: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code = runCmd(t, "tools", "--url", a.url, "--token", "good"); code != 0 {
		t.Fatalf("the accepted token: exit %d, %s", code, errOut)
	}
}
