//go:build e2e

package main_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testservers"
)

// The real `sidecar stdio` process in front of go-sdk v1.4.1's
// everything-server over stdio: the CLI contract, a session, a call, and the
// drain on SIGTERM (the child stopped through its stdin, not by a signal).
func TestStdioBridgeCLI(t *testing.T) {
	srv, err := testservers.LegacyEverythingServer()
	if err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	// GOMAXPROCS given empty (ignored, as by the runtime), so that a value set for the tests is
	// not inherited: the bridge's default is checked below.
	p := startEnv(t, []string{"GOMAXPROCS="}, sidecarBin, "stdio", "--listen", addr, "--path", "/rpc", "--", srv)
	url := "http://" + addr + "/rpc"
	var sid string
	eventually.True(t, "the stdio bridge to answer initialize", func() bool {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		sid = resp.Header.Get("Mcp-Session-Id")
		return resp.StatusCode == http.StatusOK && sid != ""
	})
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	status, _, body := do(t, req)
	if status != http.StatusOK || body["error"] != nil || !strings.Contains(fmt.Sprint(body["result"]), "simple text") {
		t.Fatalf("tools/call: HTTP %d %v", status, body)
	}
	sigterm(t, p)
	// Stopped through its stdin, not by a signal: it exits by itself once stdin ends. go-sdk
	// v1.4.1's server mostly returns nil from Run then (exit 0); when the end races its own
	// close, Run returns "server is closing: EOF" and the everything-server logs "Server failed"
	// and exits 1: still the child ending on the EOF the bridge gave it.
	out := p.output()
	endedOnEOF := strings.Contains(out, `"exit":"exit status 0"`) ||
		(strings.Contains(out, `"exit":"exit status 1"`) && strings.Contains(out, "server is closing: EOF"))
	if !strings.Contains(out, `"MCP server stopped"`) || !endedOnEOF {
		t.Fatalf("the MCP server was not stopped through its stdin:\n%s", out)
	}
	// The bridge serves on one P by default, like the sidecar (--max-procs).
	if !strings.Contains(p.output(), `"gomaxprocs":1,`) && !strings.Contains(p.output(), `"gomaxprocs":1}`) {
		t.Errorf("the bridge does not serve on one P by default:\n%s", p.output())
	}
}
