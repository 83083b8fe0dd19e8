package main

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
)

// TestImageListensOnLoopback: the sample-server image's entrypoint binds the MCP server to
// 127.0.0.1, so inside a pod only the sidecar (same network namespace) reaches it, never a
// peer that knows the pod IP (docs/security.md).
func TestImageListensOnLoopback(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	inStage, found := false, false
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "FROM ") {
			inStage = strings.HasSuffix(strings.TrimSpace(line), " AS sample-server")
			continue
		}
		if !inStage || !strings.HasPrefix(line, "ENTRYPOINT ") {
			continue
		}
		var argv []string
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "ENTRYPOINT ")), &argv); err != nil {
			t.Fatalf("ENTRYPOINT is not exec form: %v", err)
		}
		listen := "127.0.0.1:8080" // the flag's default (main.go)
		for _, a := range argv[1:] {
			if v, ok := strings.CutPrefix(a, "--listen="); ok {
				listen = v
			}
		}
		host, _, err := net.SplitHostPort(listen)
		if err != nil {
			t.Fatal(err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			t.Fatalf("the sample-server image listens on %q: every peer that can reach the pod IP bypasses the sidecar", listen)
		}
		found = true
	}
	if !found {
		t.Fatal("no ENTRYPOINT in the sample-server stage")
	}
}
