//go:build node

package node

import (
	"fmt"
	"testing"
	"time"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

const stdioYAML = `apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPServer
metadata:
  name: everything
  namespace: default
spec:
  replicas: 1
  container:
    image: %s/everything-server:%s
    transport: Stdio
    command: ["/everything-server"]
    port: 8080
`

// TestStdioServerInContainer: a Stdio MCPServer on a real pod: go-sdk's everything-server runs
// as the child of the stdio bridge in its own scratch image (the bridge binary copied in by the
// installer init container), and clients reach its tools through the sidecar.
func TestStdioServerInContainer(t *testing.T) {
	installed(t)
	start := time.Now()
	run(t, fmt.Sprintf(stdioYAML, imageRepo, imageTag), kubectlBin, "apply", "-f", "-")
	defer func() {
		_, _ = runErr("", kubectlBin, "-n", "default", "delete", "mcpserver", "everything", "--wait=false")
	}()
	serverReady(t, "default", "everything")
	fig("Stdio MCPServer applied -> Ready", time.Since(start))
	serverConditions(t, "default", "everything", mcpv1alpha1.ConditionVerified)
	fig("Stdio MCPServer applied -> Verified", time.Since(start))
	pods := runningPods(t, "default", "mcp.switchboard.dev/server=everything")
	if len(pods) != 1 {
		t.Fatalf("%d running pods, want 1", len(pods))
	}
	names := toolNames(t, podClient(pods[0], "everything.default.svc"))
	found := false
	for _, n := range names {
		found = found || n == "test_simple_text"
	}
	if !found {
		t.Fatalf("tools/list through the sidecar and the bridge: %v, want the everything-server's (test_simple_text, ...)", names)
	}
	resp, err := podClient(pods[0], "everything.default.svc").Call(t.Context(), "tools/call", map[string]any{"name": "test_simple_text", "arguments": map[string]any{}})
	if err != nil || resp.Error != nil {
		t.Fatalf("tools/call test_simple_text: %v %+v", err, resp)
	}
}
