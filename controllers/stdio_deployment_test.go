package controllers

import (
	"testing"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/golden"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// An MCPServer with transport Stdio yields a pod whose server container runs the stdio bridge:
// the installer init container from the sidecar image copies the binary into an emptyDir, the
// server container mounts it and runs `<bridge> stdio --listen 127.0.0.1:<port> --path <path>
// -- <command>` with its own args. Refresh with: go test ./controllers -run TestStdioDeployment -update
func TestStdioDeploymentGolden(t *testing.T) {
	s := builderServer()
	s.Spec.Container.Image = "node:22-alpine"
	s.Spec.Container.Transport = mcpv1alpha1.TransportStdio
	s.Spec.Container.Command = []string{"npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"}
	s.Spec.Container.Args = []string{"--verbose"}
	s.Spec.Container.RunAsUser = ptr.To[int64](1000)
	cfg := inject.ConfigFor(s, "switchboard-sidecar:v0.1.0")
	d, err := deploymentFor(s, inject.NamesFor(s), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := yaml.Marshal(d.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/stdio-deployment.pod.yaml", got)

	c := d.Spec.Template.Spec.Containers[0]
	want := inject.BridgeCommand(cfg, s.Spec.Container.Command)
	if len(c.Command) != len(want) || c.Command[0] != inject.StdioBridgePath || c.Args[0] != "--verbose" {
		t.Fatalf("server container command %v args %v", c.Command, c.Args)
	}
}
