//go:build e2e

package v1alpha1_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestSamplesAreValid applies config/samples (the objects the README uses) with kubectl and
// server-side dry-run: the real API server must accept every one of them.
func TestSamplesAreValid(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "--namespace=default",
		"-k", filepath.Join(root, "config", "samples")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s", err, out)
	}
	for _, want := range []string{
		"mcpserver.mcp.switchboard.dev/weather created (server dry run)",
		"mcptool.mcp.switchboard.dev/weather-celsius-to-fahrenheit created (server dry run)",
		"mcpresource.mcp.switchboard.dev/weather-handbook created (server dry run)",
		"mcpprompt.mcp.switchboard.dev/weather-trip-brief created (server dry run)",
		"configmap/weather-handbook created (server dry run)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl output lacks %q:\n%s", want, out)
		}
	}
}

// TestStdioSampleIsValid applies config/samples/stdio (a stdio server from npm behind the
// bridge) with server-side dry-run.
func TestStdioSampleIsValid(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "--namespace=default", "-o", "yaml",
		"-k", filepath.Join(root, "config", "samples", "stdio")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/samples/stdio: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "transport: Stdio") || !strings.Contains(string(out), "@modelcontextprotocol/server-memory@") {
		t.Errorf("the stdio sample did not come back as a Stdio server:\n%s", out)
	}
}

// TestAuthSampleIsValid applies config/samples/auth (a server that authenticates callers and a
// policy) with server-side dry-run.
func TestAuthSampleIsValid(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "--namespace=default",
		"-k", filepath.Join(root, "config", "samples", "auth")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -k config/samples/auth: %v\n%s", err, out)
	}
	for _, want := range []string{
		"mcpserver.mcp.switchboard.dev/weather-private created (server dry run)",
		"mcpaccesspolicy.mcp.switchboard.dev/weather-private created (server dry run)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl output lacks %q:\n%s", want, out)
		}
	}
}

// TestReadmeRejectionExample runs the README's example of a rejected object and checks the
// message the README quotes.
func TestReadmeRejectionExample(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := env.Kubectl(ctx, "apply", "--namespace=default",
		"-f", filepath.Join(root, "docs", "examples", "bad-resource.yaml")).CombinedOutput()
	if err == nil {
		t.Fatalf("kubectl apply of docs/examples/bad-resource.yaml succeeded:\n%s", out)
	}
	t.Logf("kubectl said:\n%s", out)
	const want = `The MCPResource "api-token" is invalid: spec: Invalid value: a Secret-backed resource must use caching.scope Private: its content must never be shared across callers`
	if !strings.Contains(string(out), want) {
		t.Errorf("kubectl output lacks the README's message %q:\n%s", want, out)
	}
}
