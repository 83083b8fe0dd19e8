//go:build e2e

package main_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// TestDrainNeedsToken: a peer that reaches the admin port but lacks the pod's drain token
// cannot take the replica out of service. Without a token the answer is 401, with a wrong one
// 403; both are counted, and the replica stays ready with its listen stream open. With the token
// (what the preStop hooks send) the drain runs. A sidecar started without any token refuses
// every HTTP drain (403) but still drains on SIGTERM (TestSIGTERMDrains covers the signal with a
// token configured; here without).
func TestDrainNeedsToken(t *testing.T) {
	e := newEnv(t, "--drain-delay", "0s", "--drain-jitter", "0s", "--drain-budget", "2s")
	s := listen(t, e.mcp, 1, `{"toolsListChanged":true}`)
	s.next(t)

	for _, tc := range []struct {
		name, method, token, header string
		want                        int
	}{
		{name: "GET without a token", method: http.MethodGet, want: http.StatusUnauthorized},
		{name: "POST without a token", method: http.MethodPost, want: http.StatusUnauthorized},
		{name: "wrong token", method: http.MethodGet, token: "guess", want: http.StatusForbidden},
		{name: "token as prefix", method: http.MethodGet, token: testDrainToken[:10], want: http.StatusForbidden},
		{name: "basic auth", method: http.MethodGet, header: "Basic " + testDrainToken, want: http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := drainRequest(tc.method, e.admin, tc.token)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.want {
				t.Fatalf("status %d (%s), want %d", r.StatusCode, body, tc.want)
			}
			if tc.want == http.StatusUnauthorized && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("401 without a Bearer challenge: %v", r.Header)
			}
		})
	}
	metrics := scrape(t, e.admin)
	for _, want := range []string{
		`switchboard_sidecar_drain_refused_total{reason="missing"} 3`,
		`switchboard_sidecar_drain_refused_total{reason="invalid"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// Still serving: ready, and the listen stream still gets notifications.
	if r, err := http.Get(e.admin + "/readyz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("refused drains made the replica unready: %v %v", err, r)
	} else {
		r.Body.Close()
	}
	callTool(t, e.mcp, "test_trigger_tool_change")
	s.nextMethod(t, "notifications/tools/list_changed")

	// The preStop hook's request drains.
	select {
	case st := <-drainAsync(e.admin):
		if st["state"] != "drained" {
			t.Fatalf("drain with the token answered %v", st)
		}
	case <-time.After(hang):
		t.Fatal("drain with the token did not return")
	}
	final := s.next(t)
	for final["method"] != nil {
		final = s.next(t)
	}
	if res, _ := final["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("final frame = %v", final)
	}

	// No token configured: HTTP cannot drain at all; SIGTERM still does.
	bare := &env{upAddr: e.upAddr}
	mcpAddr, adminAddr := freePort(t), freePort(t)
	bare.sc = startEnv(t, []string{"SWITCHBOARD_DRAIN_TOKEN="}, sidecarBin, "--upstream", "http://"+e.upAddr+"/mcp",
		"--listen", mcpAddr, "--admin-listen", adminAddr, "--drain-delay", "0s", "--drain-jitter", "0s")
	bare.mcp, bare.admin = "http://"+mcpAddr+"/mcp", "http://"+adminAddr
	eventually.True(t, "the tokenless sidecar to be ready", func() bool {
		r, err := http.Get(bare.admin + "/readyz")
		if err == nil {
			r.Body.Close()
		}
		return err == nil && r.StatusCode == http.StatusOK
	})
	r, err := http.DefaultClient.Do(drainRequest(http.MethodGet, bare.admin, testDrainToken))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("a sidecar without a token answered %d to a drain", r.StatusCode)
	}
	if !strings.Contains(scrape(t, bare.admin), `switchboard_sidecar_drain_refused_total{reason="disabled"} 1`) {
		t.Fatal("the refused drain is not counted")
	}
	bs := listen(t, bare.mcp, 2, `{"toolsListChanged":true}`)
	bs.next(t)
	sigterm(t, bare.sc)
	final = bs.next(t)
	for final["method"] != nil {
		final = bs.next(t)
	}
	if res, _ := final["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("SIGTERM without a token: final frame = %v", final)
	}
}

func scrape(t *testing.T, admin string) string {
	t.Helper()
	r, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}
