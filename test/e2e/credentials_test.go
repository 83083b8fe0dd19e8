//go:build e2e

package e2e

// Per-caller upstream credentials end to end: the controller compiles
// spec.auth.upstreamCredentials into the catalog and grants the sidecar's ServiceAccount the one
// Secret by name; the real sidecar process (acting as that ServiceAccount) watches the Secret and
// sends each caller's key to the real upstream, which records what it receives.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/controllers"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/otlptest"
)

// headerTransport sends a bearer token and extra headers of the client's choosing.
type headerTransport struct {
	token string
	extra http.Header
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range h.extra {
		r.Header[k] = vs
	}
	r.Header.Set("Authorization", "Bearer "+h.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestCallersGetTheirOwnUpstreamCredential: alice and bob (ServiceAccounts, TokenRequest tokens)
// call the weather server through the real sidecar; the upstream sees alice's key on alice's
// calls and bob's on bob's, whatever header of that name they send themselves (the attack
// first), over 2026-07-28 and a 2025-11-25 session. carol, whom the mapping does not list, gets
// an error naming what to configure, and the upstream sees nothing of her call. A Secret edit
// switches alice's key live; a key removed refuses bob alone. No key value appears in the
// sidecar's log, its metrics, the server's status or Events.
func TestCallersGetTheirOwnUpstreamCredential(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	k8s, ns := stack.Env.Client, stack.Namespace
	const aliceKey, aliceKey2, bobKey = "sk-alice-5f0b9c1e", "sk-alice-rotated-7d31aa", "sk-bob-c2e8d410"
	secrets := []string{aliceKey, aliceKey2, bobKey}
	for _, sa := range []string{"alice", "bob", "carol"} {
		if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "weather-api-keys", Namespace: ns,
		Labels: map[string]string{controllers.ExposeToLabel: stack.Server}},
		StringData: map[string]string{"alice": aliceKey, "bob": bobKey}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	server := &mcpv1alpha1.MCPServer{}
	key := client.ObjectKey{Namespace: ns, Name: stack.Server}
	setAuth := func(auth *mcpv1alpha1.AuthSpec) { t.Helper(); setServerAuth(t, key, auth) }
	t.Cleanup(func() {
		ctx := context.Background()
		s := &mcpv1alpha1.MCPServer{}
		if k8s.Get(ctx, key, s) == nil && s.Spec.Auth != nil {
			p := client.MergeFrom(s.DeepCopy())
			s.Spec.Auth = nil
			_ = k8s.Patch(ctx, s, p)
		}
		_ = k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret.Name, Namespace: ns}})
		for _, sa := range []string{"alice", "bob", "carol"} {
			_ = k8s.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
		}
	})
	creds := &mcpv1alpha1.UpstreamCredentials{
		SecretName: secret.Name,
		Header:     mcpv1alpha1.CredentialHeader{Name: "X-Api-Key"},
		Callers:    []mcpv1alpha1.CallerCredential{{Caller: ns + "/alice", Key: "alice"}, {Caller: ns + "/bob", Key: "bob"}},
	}
	setAuth(&mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}, UpstreamCredentials: creds})
	eventually.Succeeds(t, "the UpstreamCredentials condition True", func() error {
		if err := k8s.Get(ctx, key, server); err != nil {
			return err
		}
		c := meta.FindStatusCondition(server.Status.Conditions, string(mcpv1alpha1.ConditionUpstreamCredentials))
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != server.Generation {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})

	cs, err := kubernetes.NewForConfig(stack.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{server.Status.URL}, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	aliceTok, bobTok, carolTok := token("alice"), token("bob"), token("carol")
	// Each caller sends an X-Api-Key of its own: bob sends alice's key, as if stolen.
	forged := func(tok, apiKey string) *mcptest.Client {
		return &mcptest.Client{URL: stack.MCPURL, HTTP: &http.Client{Transport: headerTransport{token: tok,
			extra: http.Header{"X-Api-Key": {apiKey}, "x-api-key": {"lower-" + apiKey}}}}}
	}
	alice, bob, carol := forged(aliceTok, "forged-by-alice"), forged(bobTok, aliceKey), forged(carolTok, "forged-by-carol")
	forecast := map[string]any{"name": "get_forecast", "arguments": map[string]any{"city": "Lyon"}}
	// callSees calls get_forecast as c and returns the X-Api-Key values of the upstream
	// tools/call requests it caused, and the error the caller got, if any.
	callSees := func(c *mcptest.Client, header string) ([][]string, *mcptest.Response) {
		t.Helper()
		mark := stack.Upstream.Mark()
		r, err := c.Call(ctx, "tools/call", forecast)
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		var seen [][]string
		for _, rec := range stack.Upstream.Since(mark, "tools/call") {
			seen = append(seen, rec.Header.Values(header))
		}
		return seen, r
	}
	want := func(who string, c *mcptest.Client, apiKey string) {
		t.Helper()
		eventually.Succeeds(t, who+"'s call carries "+who+"'s key", func() error {
			seen, r := callSees(c, "X-Api-Key")
			if r.Error != nil {
				return fmt.Errorf("%s's call failed: %+v", who, r.Error)
			}
			if len(seen) != 1 || len(seen[0]) != 1 || seen[0][0] != apiKey {
				return fmt.Errorf("the upstream saw X-Api-Key %q on %s's call", seen, who)
			}
			return nil
		})
	}
	want("alice", alice, aliceKey)
	want("bob", bob, bobKey)

	// carol: refused, naming the mapping and the server; the upstream sees nothing.
	seen, r := callSees(carol, "X-Api-Key")
	if len(seen) != 0 {
		t.Errorf("carol's call reached the upstream: %q", seen)
	}
	if r.Error == nil || r.Status != http.StatusForbidden || !strings.Contains(r.Error.Message, "ServiceAccount "+ns+"/carol") ||
		!strings.Contains(r.Error.Message, "defaultKey") || !strings.Contains(r.Error.Message, "MCPServer "+ns+"/"+stack.Server) {
		t.Errorf("carol got HTTP %d %+v, want 403 naming her ServiceAccount, defaultKey and the server", r.Status, r.Error)
	} else {
		t.Logf("carol sees: %s %s", r.Error.Message, r.Error.Data)
	}
	// Her lists are refused too: the merged list reads the upstream with her headers.
	mark := stack.Upstream.Mark()
	if r, err := carol.Call(ctx, "tools/list", nil); err != nil || r.Error == nil || r.Status != http.StatusForbidden {
		t.Errorf("carol's tools/list: %+v, %v", r, err)
	}
	if got := stack.Upstream.Since(mark, "tools/list"); len(got) != 0 {
		t.Errorf("carol's tools/list reached the upstream %d times", len(got))
	}

	// A 2025-era session of alice's (go-sdk at 2025-11-25, with her own forged X-Api-Key).
	legacy := mcp.NewClient(&mcp.Implementation{Name: "alice-2025", Version: "1"}, nil)
	sess, err := legacy.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: stack.MCPURL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: headerTransport{token: aliceTok, extra: http.Header{"X-Api-Key": {"forged-by-alice-2025"}}}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	mark = stack.Upstream.Mark()
	if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "get_forecast", Arguments: map[string]any{"city": "Lyon"}}); err != nil || res.IsError {
		t.Fatalf("alice's 2025-era call: %+v, %v", res, err)
	}
	for _, rec := range stack.Upstream.Since(mark, "tools/call") {
		if v := rec.Header.Values("X-Api-Key"); len(v) != 1 || v[0] != aliceKey {
			t.Errorf("alice's 2025-era call reached the upstream with X-Api-Key %q", v)
		}
	}
	if n := len(stack.Upstream.Since(mark, "tools/call")); n != 1 {
		t.Errorf("alice's 2025-era call reached the upstream %d times", n)
	}
	_ = sess.Close()

	// The Secret edited: alice's next calls carry the new key, no restart.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data["alice"] = []byte(aliceKey2)
	if err := k8s.Patch(ctx, secret, patch); err != nil {
		t.Fatal(err)
	}
	want("alice", alice, aliceKey2)

	// bob's key removed: bob is refused naming the key, alice keeps working, the condition says so.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(secret.DeepCopy())
	delete(secret.Data, "bob")
	if err := k8s.Patch(ctx, secret, patch); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "bob refused for the missing key, the upstream not called", func() error {
		seen, r := callSees(bob, "X-Api-Key")
		if len(seen) != 0 {
			return fmt.Errorf("bob's call reached the upstream with %q", seen)
		}
		if r.Error == nil || !strings.Contains(r.Error.Message, "has no key bob") {
			return fmt.Errorf("bob got %+v", r.Error)
		}
		return nil
	})
	want("alice", alice, aliceKey2)
	eventually.Succeeds(t, "the condition names the missing key", func() error {
		if err := k8s.Get(ctx, key, server); err != nil {
			return err
		}
		c := meta.FindStatusCondition(server.Status.Conditions, string(mcpv1alpha1.ConditionUpstreamCredentials))
		if c == nil || c.Reason != string(mcpv1alpha1.ReasonCredentialsKeyMissing) || !strings.Contains(c.Message, `"bob" (for `+ns+`/bob)`) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})

	// Authorization with a Bearer prefix: the upstream gets the key, never alice's own token.
	creds.Header = mcpv1alpha1.CredentialHeader{Name: "Authorization", ValuePrefix: "Bearer "}
	setAuth(&mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}, UpstreamCredentials: creds})
	eventually.Succeeds(t, "alice's call carries her key as a bearer token", func() error {
		seen, r := callSees(alice, "Authorization")
		if r.Error != nil {
			return fmt.Errorf("alice's call failed: %+v", r.Error)
		}
		if len(seen) != 1 || len(seen[0]) != 1 || seen[0][0] != "Bearer "+aliceKey2 {
			if len(seen) == 1 && len(seen[0]) > 0 && strings.Contains(seen[0][0], aliceTok) {
				return fmt.Errorf("the upstream saw alice's own token")
			}
			return fmt.Errorf("the upstream saw Authorization on %d calls (%d values)", len(seen), len(seen[0]))
		}
		return nil
	})

	// No value anywhere but the upstream's requests: the sidecar's log and metrics, the
	// server's status and the namespace's Events.
	logBytes, err := os.ReadFile(filepath.Join(stack.Dir, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(stack.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	status, _ := json.Marshal(server.Status)
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	notes, _ := json.Marshal(events.Items)
	// The spans of this test's calls: the sidecar exports every request's (stackTraceArgs), in
	// batches every 5 s.
	var spans string
	eventually.True(t, "the spans of the calls exported", func() bool {
		spans = stackSpans.Text()
		return strings.Count(spans, "tools/call get_forecast") >= 3
	})
	for what, b := range map[string][]byte{"the sidecar's log": logBytes, "its metrics": metrics, "the server's status": status,
		"the Events": notes, "its spans": []byte(spans)} {
		if len(b) == 0 {
			t.Errorf("%s is empty: nothing was checked", what)
		}
		for _, v := range secrets {
			if strings.Contains(string(b), v) {
				t.Errorf("%s contains a credential value", what)
			}
		}
	}
	t.Logf("checked %d bytes of sidecar log, %d of metrics, %d Events, %d bytes of spans for the %d key values", len(logBytes), len(metrics),
		len(events.Items), len(spans), len(secrets))
}

// stackSpans receives the stack sidecar's spans: TestMain starts the sidecar with
// stackTraceArgs (every request traced), so tests can grep what the spans carry.
var stackSpans, stackTraceArgs = startStackTraces()

func startStackTraces() (*otlptest.TraceReceiver, []string) {
	rc := &otlptest.TraceReceiver{}
	srv := httptest.NewServer(rc) // as long-lived as the stack: the test process
	return rc, []string{"--otlp-endpoint", srv.URL + "/v1/traces", "--trace-sampling-per-million", "1000000"}
}
