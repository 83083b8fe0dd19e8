//go:build e2e

package e2e

// Caller identity end to end: the controller compiles spec.auth and MCPAccessPolicies into the
// catalog, binds the sidecar's ServiceAccount to the TokenReview role, and the real sidecar
// process validates this API server's ServiceAccount tokens and serves each caller its grants,
// for 2026-07-28 and 2025-era clients.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// bearerTransport adds a bearer token to every request of a go-sdk client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestAgentsSeeTheirGrants: two agents (ServiceAccounts) in front of the one weather server.
// With spec.auth Required, a caller without a token gets 401 and the RFC 9728 challenge; with
// a policy targeting the server, the planner lists and calls get_forecast only (a call of
// another tool is refused exactly like an undeclared name), the operator everything, over
// 2026-07-28 and 2025-11-25. A policy edit that grants the planner one more tool wakes the
// planner's listen stream and not the operator's. Turning auth off restores the open catalog.
func TestAgentsSeeTheirGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	k8s, ns := stack.Env.Client, stack.Namespace
	all := toolNames(t)
	if !slices.Equal(all, []string{"celsius_to_fahrenheit", "get_forecast"}) {
		t.Fatalf("the sample catalog lists %v", all)
	}
	for _, sa := range []string{"planner", "operator"} {
		if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	policy := &mcpv1alpha1.MCPAccessPolicy{ObjectMeta: metav1.ObjectMeta{Name: "weather-agents", Namespace: ns},
		Spec: mcpv1alpha1.MCPAccessPolicySpec{
			TargetRefs: []mcpv1alpha1.PolicyTargetReference{{Group: mcpv1alpha1.GroupVersion.Group, Kind: "MCPServer", Name: stack.Server}},
			Rules: []mcpv1alpha1.AccessRule{
				{Name: "planner", Source: mcpv1alpha1.AccessRuleSource{ServiceAccounts: []string{"planner"}}, Tools: []string{"get_forecast"}},
				{Name: "operator", Source: mcpv1alpha1.AccessRuleSource{ServiceAccounts: []string{ns + "/operator"}}, Tools: []string{"*"}},
			}}}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	server := &mcpv1alpha1.MCPServer{}
	key := client.ObjectKey{Namespace: ns, Name: stack.Server}
	setAuth := func(auth *mcpv1alpha1.AuthSpec) { t.Helper(); setServerAuth(t, key, auth) }
	t.Cleanup(func() {
		ctx := context.Background()
		_ = k8s.Delete(ctx, policy)
		for _, sa := range []string{"planner", "operator"} {
			_ = k8s.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
		}
		s := &mcpv1alpha1.MCPServer{}
		if k8s.Get(ctx, key, s) == nil && s.Spec.Auth != nil {
			p := client.MergeFrom(s.DeepCopy())
			s.Spec.Auth = nil
			_ = k8s.Patch(ctx, s, p)
		}
	})
	setAuth(&mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}})

	// No token: 401 with the challenge naming the Protected Resource Metadata.
	eventually.Succeeds(t, "the sidecar requires a token", func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, stack.MCPURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if c := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(c, `resource_metadata="`) {
			return fmt.Errorf("HTTP %d, WWW-Authenticate %q", resp.StatusCode, c)
		}
		return nil
	})

	if err := k8s.Get(ctx, key, server); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(stack.Env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa, audience string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	planner := &mcptest.Client{URL: stack.MCPURL, HTTP: &http.Client{}, Token: token("planner", server.Status.URL)}
	operator := &mcptest.Client{URL: stack.MCPURL, HTTP: &http.Client{}, Token: token("operator", server.Status.URL)}
	stranger := &mcptest.Client{URL: stack.MCPURL, HTTP: &http.Client{}, Token: token("operator", "https://another.example")}

	list := func(c *mcptest.Client) ([]string, string, error) {
		r, err := c.Call(ctx, "tools/list", nil)
		if err != nil {
			return nil, "", err
		}
		if r.Error != nil || r.Status != http.StatusOK {
			return nil, "", fmt.Errorf("HTTP %d, error %+v", r.Status, r.Error)
		}
		var res struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			CacheScope string `json:"cacheScope"`
		}
		if err := json.Unmarshal(r.Result, &res); err != nil {
			return nil, "", err
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		return names, res.CacheScope, nil
	}
	eventually.Succeeds(t, "each agent lists exactly its grants", func() error {
		p, scope, err := list(planner)
		if err != nil {
			return fmt.Errorf("planner: %w", err)
		}
		if !slices.Equal(p, []string{"get_forecast"}) || scope != "private" {
			return fmt.Errorf("planner lists %v (cacheScope %q), want [get_forecast] private", p, scope)
		}
		o, _, err := list(operator)
		if err != nil {
			return fmt.Errorf("operator: %w", err)
		}
		if !slices.Equal(o, all) {
			return fmt.Errorf("operator lists %v, want %v", o, all)
		}
		return nil
	})
	if r, err := stranger.Call(ctx, "tools/list", nil); err == nil && r.Status != http.StatusUnauthorized {
		t.Errorf("a token for another audience got HTTP %d, want 401", r.Status)
	}

	// A call of a tool the planner is not granted is refused like an undeclared name.
	args := map[string]map[string]any{"get_forecast": {"city": "Lyon"}, "celsius_to_fahrenheit": {"celsius": 20}}
	call := func(c *mcptest.Client, name string) *mcptest.Response {
		t.Helper()
		a := args[name]
		if a == nil {
			a = map[string]any{}
		}
		r, err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": a})
		if err != nil {
			t.Fatalf("tools/call %s: %v", name, err)
		}
		return r
	}
	denied, unknown := call(planner, "celsius_to_fahrenheit"), call(planner, "no_such_tool")
	if denied.Error == nil || unknown.Error == nil {
		t.Fatalf("planner's calls were not refused: %+v / %+v", denied, unknown)
	}
	if denied.Status != unknown.Status || denied.Error.Code != unknown.Error.Code ||
		strings.ReplaceAll(denied.Error.Message, "celsius_to_fahrenheit", "X") != strings.ReplaceAll(unknown.Error.Message, "no_such_tool", "X") {
		t.Errorf("a refused tool and an undeclared one are told apart:\n%d %+v\n%d %+v", denied.Status, denied.Error, unknown.Status, unknown.Error)
	}
	if r := call(planner, "get_forecast"); r.Error != nil {
		t.Errorf("planner's granted call failed: %+v", r.Error)
	}
	if r := call(operator, "celsius_to_fahrenheit"); r.Error != nil {
		t.Errorf("operator's call failed: %+v", r.Error)
	}

	// The same grants for a 2025-era client (go-sdk pinned to 2025-11-25).
	legacy := mcp.NewClient(&mcp.Implementation{Name: "planner-2025", Version: "1"}, nil)
	sess, err := legacy.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: stack.MCPURL, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{planner.Token}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var legacyNames []string
	for _, tl := range tools.Tools {
		legacyNames = append(legacyNames, tl.Name)
	}
	if !slices.Equal(legacyNames, []string{"get_forecast"}) {
		t.Errorf("the 2025-era planner lists %v, want [get_forecast]", legacyNames)
	}
	if res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "celsius_to_fahrenheit", Arguments: args["celsius_to_fahrenheit"]}); err == nil && !res.IsError {
		t.Errorf("the 2025-era planner called celsius_to_fahrenheit: %+v", res)
	}

	// A policy edit that grants the planner one more tool wakes the planner only.
	streams := map[string]*mcptest.Stream{}
	for name, c := range map[string]*mcptest.Client{"planner": planner, "operator": operator} {
		s, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
		if err != nil {
			t.Fatalf("listen %s: %v", name, err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(policy.DeepCopy())
	policy.Spec.Rules[0].Tools = append(policy.Spec.Rules[0].Tools, "celsius_to_fahrenheit")
	if err := k8s.Patch(ctx, policy, patch); err != nil {
		t.Fatal(err)
	}
	expect(t, streams, map[string][]string{"planner": {"notifications/tools/list_changed"}})
	if p, _, err := list(planner); err != nil || !slices.Equal(p, all) {
		t.Errorf("after the edit the planner lists %v (err %v)", p, err)
	}

	// Auth off again: the open catalog, for a caller without a token.
	setAuth(nil)
	eventually.Succeeds(t, "the open catalog is back", func() error {
		r, err := mcptest.New(stack.MCPURL).Call(ctx, "tools/list", nil)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("HTTP %d", r.Status)
		}
		return nil
	})
}

// setServerAuth sets the MCPServer's spec.auth (nil: off) with a merge patch of that field alone.
func setServerAuth(t *testing.T, key client.ObjectKey, auth *mcpv1alpha1.AuthSpec) {
	t.Helper()
	k8s, server := stack.Env.Client, &mcpv1alpha1.MCPServer{}
	if err := k8s.Get(t.Context(), key, server); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(server.DeepCopy())
	server.Spec.Auth = auth
	if err := k8s.Patch(t.Context(), server, patch); err != nil {
		t.Fatal(err)
	}
}
