//go:build e2e

// Package e2e runs the product end to end: the real API server, the manager's controllers, and a
// real sidecar process watching its catalog ConfigMap as its own ServiceAccount, with real
// listening clients.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

var (
	stack      *framework.Stack
	sidecarBin string // the built cmd/sidecar, for tests that start more sidecars
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "switchboard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = dir
	bin := filepath.Join(dir, "sidecar")
	sidecarBin = bin
	build := exec.Command("go", "build", "-o", bin, "./cmd/sidecar")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the sidecar: %v\n%s", err, out)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err = framework.StartStack(ctx, framework.StackOptions{SidecarBin: bin, ExtraArgs: stackTraceArgs})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the stack:", err)
		if stack != nil {
			stack.Stop()
		}
		return 1
	}
	defer stack.Stop()
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "sidecar log tail:\n"+stack.SidecarLog(40))
	}
	return code
}

// quiet is how long a stream must stay silent to count as "got nothing": generous against the
// ~10 ms coalescing window and the controller's own latency.
const quiet = 700 * time.Millisecond

// listeners opens one stream per filter.
func listeners(t *testing.T, filters map[string]map[string]any) map[string]*mcptest.Stream {
	t.Helper()
	c := mcptest.New(stack.MCPURL)
	out := map[string]*mcptest.Stream{}
	for name, f := range filters {
		s, err := c.Listen(t.Context(), f)
		if err != nil {
			t.Fatalf("listen %s: %v", name, err)
		}
		t.Cleanup(s.Close)
		out[name] = s
	}
	return out
}

// expect waits for exactly want on each stream (method plus URI for updates) and then quiet.
func expect(t *testing.T, streams map[string]*mcptest.Stream, want map[string][]string) {
	t.Helper()
	for name, s := range streams {
		var got []string
		deadline := time.Now().Add(10 * time.Second)
		for len(got) < len(want[name]) && time.Now().Before(deadline) {
			for _, n := range s.Collect(100 * time.Millisecond) {
				got = append(got, strings.TrimSpace(n.Method+" "+n.URI))
			}
		}
		for _, n := range s.Collect(quiet) {
			got = append(got, strings.TrimSpace(n.Method+" "+n.URI))
		}
		w := want[name]
		if w == nil {
			w = []string{}
		}
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, w) {
			t.Errorf("stream %s received %q, want %q", name, got, w)
		}
	}
}

func toolNames(t *testing.T) []string {
	t.Helper()
	r, err := mcptest.New(stack.MCPURL).Call(t.Context(), "tools/list", nil)
	if err != nil || r.Error != nil {
		t.Fatalf("tools/list: %v %+v", err, r)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		CacheScope string `json:"cacheScope"`
		TTLMs      int64  `json:"ttlMs"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.CacheScope != "public" || res.TTLMs != 300000 {
		t.Errorf("tools/list hints = %d %s, want the sample's 300000 public", res.TTLMs, res.CacheScope)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestSampleCatalogIsServedAndReported(t *testing.T) {
	if got, want := toolNames(t), []string{"celsius_to_fahrenheit", "get_forecast"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v (renamed, disabled hidden)", got, want)
	}
	c := mcptest.New(stack.MCPURL)
	r, err := c.Call(t.Context(), "tools/call", map[string]any{"name": "get_alerts", "arguments": map[string]any{"region": "ca"}})
	if err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("calling the disabled tool: %v %+v", err, r)
	}
	r, err = c.Call(t.Context(), "tools/call", map[string]any{"name": "celsius_to_fahrenheit", "arguments": map[string]any{"celsius": 100}})
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "212") {
		t.Errorf("calling the renamed tool: %v %+v %s", err, r, r.Result)
	}
	r, err = c.Call(t.Context(), "resources/read", map[string]any{"uri": "docs://weather/handbook"})
	var read mcp.ReadResourceResult
	if err != nil || r.Error != nil || json.Unmarshal(r.Result, &read) != nil || len(read.Contents) != 1 ||
		read.Contents[0].URI != "docs://weather/handbook" || !strings.Contains(read.Contents[0].Text, "Weather desk handbook") ||
		!strings.Contains(string(r.Result), `"ttlMs":600000`) || !strings.Contains(string(r.Result), `"cacheScope":"public"`) {
		t.Errorf("reading the ConfigMap resource: %v %+v %s", err, r, r.Result)
	}
	r, err = c.Call(t.Context(), "prompts/get", map[string]any{"name": "trip_brief", "arguments": map[string]any{"city": "Oslo", "days": "3"}})
	var prompt mcp.GetPromptResult
	if err != nil || r.Error != nil || json.Unmarshal(r.Result, &prompt) != nil || len(prompt.Messages) == 0 {
		t.Errorf("rendering the prompt: %v %+v %s", err, r, r.Result)
	} else if text, ok := prompt.Messages[0].Content.(*mcp.TextContent); !ok || !strings.Contains(text.Text, "travelling to Oslo for 3 days") {
		t.Errorf("the prompt's first message = %+v, want text naming the trip", prompt.Messages[0].Content)
	}
	r, err = c.Call(t.Context(), "prompts/get", map[string]any{"name": "trip_brief", "arguments": map[string]any{"days": "3"}})
	if err != nil || r.Error == nil || r.Error.Code != -32602 {
		t.Errorf("prompt without its required argument: %v %+v", err, r)
	}

	// The report makes the MCPServer's CatalogPropagated true for the one Ready pod.
	eventually.Succeeds(t, "CatalogPropagated True", func() error {
		var s mcpv1alpha1.MCPServer
		if err := stack.Env.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.Namespace, Name: stack.Server}, &s); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(s.Status.Conditions, string(mcpv1alpha1.ConditionCatalogPropagated))
		if cond != nil && cond.Status == "True" && s.Status.CatalogUpToDateReplicas == 1 {
			return nil
		}
		return fmt.Errorf("cond=%+v upToDate=%d revision=%s reports=%v (pod %s)\n%s",
			cond, s.Status.CatalogUpToDateReplicas, s.Status.CatalogRevision, reports(t), stack.Pod, stack.SidecarLog(30))
	})
}

// reports returns the sidecars' reports (the status ConfigMap's data), for failure messages.
func reports(t *testing.T) map[string]string {
	var status corev1.ConfigMap
	_ = stack.Env.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.Namespace, Name: stack.Server + "-catalog-status"}, &status)
	return status.Data
}

const toolYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPTool
metadata:
  name: weather-forecast-short
spec:
  serverRef: {name: weather}
  name: short_forecast
  upstreamName: get_forecast
  description: %s
  state: %s
`

func TestMCPToolLifecycleNotifiesExactlyTheRightStreams(t *testing.T) {
	streams := listeners(t, map[string]map[string]any{
		"tools":     {"toolsListChanged": true},
		"tools2":    {"toolsListChanged": true, "promptsListChanged": true},
		"prompts":   {"promptsListChanged": true},
		"resources": {"resourcesListChanged": true, "resourceSubscriptions": []string{"docs://weather/handbook"}},
	})
	one := []string{"notifications/tools/list_changed"}
	steps := []struct {
		name   string
		do     func() error
		tools  []string
		listed bool
	}{
		{"create", func() error { return applyTool(t, "Short forecast.", "Enabled") }, one, true},
		{"edit", func() error { return applyTool(t, "Shorter forecast.", "Enabled") }, one, true},
		{"disable", func() error { return applyTool(t, "Shorter forecast.", "Disabled") }, one, false},
		{"edit while disabled", func() error { return applyTool(t, "Nobody sees this.", "Disabled") }, nil, false},
		{"enable", func() error { return applyTool(t, "Nobody sees this.", "Enabled") }, one, true},
		{"delete", func() error {
			_, err := stack.Kubectl(t.Context(), "", "delete", "mcptool", "weather-forecast-short")
			return err
		}, one, false},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		expect(t, streams, map[string][]string{"tools": st.tools, "tools2": st.tools})
		if got := slices.Contains(toolNames(t), "short_forecast"); got != st.listed {
			t.Errorf("%s: short_forecast listed = %v, want %v", st.name, got, st.listed)
		}
		if t.Failed() {
			t.Fatalf("step %s failed", st.name)
		}
	}
}

func applyTool(t *testing.T, description, state string) error {
	_, err := stack.Kubectl(t.Context(), fmt.Sprintf(toolYAML, description, state), "apply", "-f", "-")
	return err
}

func TestConfigMapEditUpdatesOnlyItsSubscribers(t *testing.T) {
	streams := listeners(t, map[string]map[string]any{
		"handbook": {"resourceSubscriptions": []string{"docs://weather/handbook"}},
		"stations": {"resourceSubscriptions": []string{"weather://stations"}},
		"lists":    {"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true},
	})
	patch := `{"data":{"handbook.md":"# Weather desk handbook\nEdited at ` + time.Now().Format(time.RFC3339Nano) + `\n"}}`
	if _, err := stack.Kubectl(t.Context(), "", "patch", "configmap", "weather-handbook", "--type=merge", "-p", patch); err != nil {
		t.Fatal(err)
	}
	expect(t, streams, map[string][]string{"handbook": {"notifications/resources/updated docs://weather/handbook"}})
	r, err := mcptest.New(stack.MCPURL).Call(t.Context(), "resources/read", map[string]any{"uri": "docs://weather/handbook"})
	if err != nil || r.Error != nil || !strings.Contains(string(r.Result), "Edited at") {
		t.Errorf("read after the edit: %v %+v", err, r)
	}
}

func TestInvalidCatalogIsRefusedAndTheLastGoodKeepsServing(t *testing.T) {
	streams := listeners(t, map[string]map[string]any{"tools": {"toolsListChanged": true}})
	before := toolNames(t)
	// Write a catalog no sidecar can read, as an admin would by hand (the controller restores its
	// own catalog right after; the sidecar must refuse the bad one and report it).
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: stack.Namespace, Name: stack.Server + "-catalog"}
	if err := stack.Env.Client.Get(t.Context(), key, &cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[catalog.Key] = `{"schemaVersion":99}`
	cm.Annotations[catalog.RevisionAnnotation] = "bad-revision"
	if err := stack.Env.Client.Update(t.Context(), &cm); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "the rejection reported", func() error {
		var status corev1.ConfigMap
		if err := stack.Env.Client.Get(t.Context(), client.ObjectKey{Namespace: stack.Namespace, Name: stack.Server + "-catalog-status"}, &status); err != nil {
			return err
		}
		rep, _ := catalog.ParseReport(status.Data[stack.Pod])
		if rep.RejectedRevision == "bad-revision" && strings.Contains(rep.Reason, "schemaVersion 99") && rep.Revision != "" {
			return nil
		}
		return fmt.Errorf("reports %+v (pod %s)\n%s", status.Data, stack.Pod, stack.SidecarLog(30))
	})
	expect(t, streams, map[string][]string{})
	if after := toolNames(t); !slices.Equal(before, after) {
		t.Errorf("tools changed from %v to %v after an invalid catalog", before, after)
	}
}

const ghostToolYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPTool
metadata:
  name: weather-ghost
spec:
  serverRef: {name: weather}
  name: ghost_tool
  upstreamName: no_such_tool
  description: A tool the weather server does not have.
`

// TestToolMissingUpstreamShowsInStatus: an MCPTool whose upstreamName the MCP server does not
// list is not shown to clients, the sidecar reports it, and the MCPServer's ToolsServed
// condition names it (with a Warning Event) until the MCPTool is fixed or removed.
func TestToolMissingUpstreamShowsInStatus(t *testing.T) {
	key := client.ObjectKey{Namespace: stack.Namespace, Name: stack.Server}
	waitToolsServed := func(step string, want metav1.ConditionStatus, wantInMessage string) *metav1.Condition {
		t.Helper()
		var cond *metav1.Condition
		eventually.Succeeds(t, fmt.Sprintf("%s: ToolsServed %s with %q", step, want, wantInMessage), func() error {
			var s mcpv1alpha1.MCPServer
			if err := stack.Env.Client.Get(t.Context(), key, &s); err != nil {
				return err
			}
			cond = meta.FindStatusCondition(s.Status.Conditions, string(mcpv1alpha1.ConditionToolsServed))
			if cond != nil && cond.Status == want && strings.Contains(cond.Message, wantInMessage) {
				return nil
			}
			return fmt.Errorf("cond=%+v revision=%s reports=%v\n%s", cond, s.Status.CatalogRevision, reports(t), stack.SidecarLog(30))
		})
		return cond
	}
	waitToolsServed("the sample", metav1.ConditionTrue, "lists every enabled MCPTool")

	if _, err := stack.Kubectl(t.Context(), ghostToolYAML, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	cond := waitToolsServed("a tool the server lacks", metav1.ConditionFalse, "ghost_tool")
	if cond.Reason != string(mcpv1alpha1.ReasonToolsMissingUpstream) || !strings.Contains(cond.Message, "pod "+stack.Pod) {
		t.Errorf("ToolsServed = %+v, want reason %s naming pod %s", cond, mcpv1alpha1.ReasonToolsMissingUpstream, stack.Pod)
	}
	if slices.Contains(toolNames(t), "ghost_tool") {
		t.Error("ghost_tool is listed to clients")
	}
	var ready mcpv1alpha1.MCPServer
	if err := stack.Env.Client.Get(t.Context(), key, &ready); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(ready.Status.Conditions, string(mcpv1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v; ToolsServed is advisory and must not change it", c)
	}
	eventually.Succeeds(t, "a Warning event "+string(mcpv1alpha1.ReasonToolsMissingUpstream)+" naming ghost_tool", func() error {
		var list eventsv1.EventList
		if err := stack.Env.Client.List(t.Context(), &list, client.InNamespace(stack.Namespace)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == string(mcpv1alpha1.ReasonToolsMissingUpstream) && e.Regarding.Name == stack.Server &&
				e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "ghost_tool") {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(list.Items))
	})

	if _, err := stack.Kubectl(t.Context(), "", "delete", "mcptool", "weather-ghost"); err != nil {
		t.Fatal(err)
	}
	waitToolsServed("the tool removed", metav1.ConditionTrue, "lists every enabled MCPTool")
}
