//go:build e2e

package e2e

// 2025-era clients against the real stack (API server, controller, sidecar process, go-sdk
// upstream): the catalog and its notifications hold for them too.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const legacyToolYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPTool
metadata:
  name: weather-forecast-legacy
spec:
  serverRef: {name: weather}
  name: legacy_forecast
  upstreamName: get_forecast
  description: %s
  state: %s
`

// TestLegacyClientGetsListChangedOnMCPToolEdit: a go-sdk client pinned to 2025-11-25 hears
// tools/list_changed on its GET stream after each MCPTool edit applied with kubectl, and its
// tools/list and tools/call follow the catalog (a disabled tool is neither listed nor callable).
func TestLegacyClientGetsListChangedOnMCPToolEdit(t *testing.T) {
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	before, _ := sidecarGauge(stack.AdminURL, "switchboard_sidecar_listen_streams")
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: stack.MCPURL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s", v)
	}
	// The GET stream opens in the background after initialize; a change made before it is
	// open would not reach it. Wait until the sidecar counts it.
	waitStreams(t, before+1)

	describe := func(want string, listed bool) {
		t.Helper()
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "legacy_forecast" })
		if (i >= 0) != listed || (listed && tools.Tools[i].Description != want) {
			t.Fatalf("tools/list: legacy_forecast listed=%v (want %v), description %q (want %q)", i >= 0, listed, func() string {
				if i >= 0 {
					return tools.Tools[i].Description
				}
				return ""
			}(), want)
		}
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "legacy_forecast", Arguments: map[string]any{"city": "Lyon"}})
		if listed != (err == nil) {
			t.Fatalf("tools/call legacy_forecast: err %v, want callable=%v", err, listed)
		}
	}
	wait := func(step string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no tools/list_changed on the 2025-era GET stream", step)
		}
	}
	steps := []struct {
		name, description, state string
		listed                   bool
	}{
		{"create", "Legacy forecast.", "Enabled", true},
		{"edit", "Edited legacy forecast.", "Enabled", true},
		{"disable", "Edited legacy forecast.", "Disabled", false},
	}
	for _, st := range steps {
		if _, err := stack.Kubectl(ctx, fmt.Sprintf(legacyToolYAML, st.description, st.state), "apply", "-f", "-"); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		wait(st.name)
		describe(st.description, st.listed)
		if st.state == "Disabled" {
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "get_forecast" }) {
				t.Error("get_forecast is still listed while an alias of its upstream tool is Disabled")
			}
		}
	}
	if _, err := stack.Kubectl(ctx, "", "delete", "mcptool", "weather-forecast-legacy"); err != nil {
		t.Fatal(err)
	}
	// Disabled belongs to the upstream tool (docs/security.md, section 4): while the alias
	// legacy_forecast was Disabled, get_forecast (the sample's own MCPTool of the same upstream
	// tool) was withheld too. Deleting the disabled alias serves it again, so a list_changed is due.
	wait("delete")
	deadline := time.Now().Add(30 * time.Second)
	for {
		tools, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "get_forecast" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("get_forecast is not listed again after its disabled alias was deleted")
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		}
	}
	// Drain what may still come so the next test starts quiet.
	select {
	case <-changed:
	case <-time.After(quiet):
	}
}

// waitStreams waits until the sidecar has at least n open streams (with the client's GET).
func waitStreams(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got, ok := sidecarGauge(stack.AdminURL, "switchboard_sidecar_listen_streams"); ok && got >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the client's GET stream did not open")
}

// sidecarGauge reads an unlabelled metric from the sidecar's admin port.
func sidecarGauge(admin, name string) (float64, bool) {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}
