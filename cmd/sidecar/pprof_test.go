//go:build e2e

package main_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Go's profiles are served only when --pprof-listen names an address, and only there: never on
// the MCP or admin ports, which the Service and the kubelet reach.
func TestPprofOnlyWhereAsked(t *testing.T) {
	get := func(url string) (int, string) {
		t.Helper()
		r, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	pprofAddr := freePort(t)
	e := newEnv(t, "--pprof-listen", pprofAddr)
	if st, body := get("http://" + pprofAddr + "/debug/pprof/heap?debug=1"); st != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Errorf("heap profile: HTTP %d %.80q", st, body)
	}
	if st, body := get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1"); st != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile: HTTP %d %.80q", st, body)
	}
	mcpBase := strings.TrimSuffix(e.mcp, "/mcp")
	for _, base := range []string{e.admin, mcpBase} {
		if st, _ := get(base + "/debug/pprof/"); st == http.StatusOK {
			t.Errorf("%s serves /debug/pprof/", base)
		}
	}
	off := newEnv(t)
	for _, base := range []string{off.admin, strings.TrimSuffix(off.mcp, "/mcp")} {
		if st, _ := get(base + "/debug/pprof/"); st == http.StatusOK {
			t.Errorf("without --pprof-listen, %s serves /debug/pprof/", base)
		}
	}
}
