//go:build e2e

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
)

// drainCmd runs `sidecar drain` (the sidecar container's exec preStop hook) against admin and
// returns its exit code, stdout and stderr.
func drainCmd(t *testing.T, admin, tokenFile string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecarBin, "drain", "--admin", strings.TrimPrefix(admin, "http://"), "--token-file", tokenFile)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("sidecar drain did not return: %s %s", out.String(), errOut.String())
	}
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func readyStatus(t *testing.T, admin string) int {
	t.Helper()
	r, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	return r.StatusCode
}

// TestDrainCommand: the pod's preStop is `sidecar drain`, which reads the drain token from the
// file the drain-token Secret is mounted at (in the sidecar container only) and drains the
// sidecar on loopback; the token is in no flag and no environment variable of the pod. With a
// wrong token file it fails and the replica stays in service. GET /drain/wait (the MCP server
// container's preStop, which holds no token) cannot start a drain, and answers once the one
// the hook started is done.
func TestDrainCommand(t *testing.T) {
	tokenFile := writeToken(t, testDrainToken)
	e := &env{upAddr: freePort(t)}
	e.up = startUpstream(t, e.upAddr)
	// No token in the environment: only the file.
	e.startSidecarEnv(t, []string{app.DrainTokenEnv + "="}, "--drain-token-file", tokenFile,
		"--drain-delay", "200ms", "--drain-jitter", "0s", "--drain-budget", "2s", "--drain-recover-after=-1s")
	s := listen(t, e.mcp, 1, `{"toolsListChanged":true}`)
	s.next(t)

	if code, _, stderr := drainCmd(t, e.admin, writeToken(t, "wrong")); code != 1 || !strings.Contains(stderr, "403") {
		t.Fatalf("drain with a wrong token: exit %d, %s", code, stderr)
	}
	if code, _, stderr := drainCmd(t, e.admin, filepath.Join(t.TempDir(), "absent")); code != 1 || !strings.Contains(stderr, "no drain token") {
		t.Fatalf("drain without a token file: exit %d, %s", code, stderr)
	}
	// /drain/wait alone starts nothing: a waiter that gives up leaves the replica serving.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.admin+"/drain/wait", nil)
	if r, err := http.DefaultClient.Do(req); err == nil {
		r.Body.Close()
		t.Fatalf("/drain/wait answered %d without any drain", r.StatusCode)
	}
	cancel()
	if got := readyStatus(t, e.admin); got != http.StatusOK {
		t.Fatalf("refused drains made the replica unready: %d", got)
	}

	waited := make(chan map[string]any, 1)
	go func() {
		var m map[string]any
		r, err := http.Get(e.admin + "/drain/wait")
		if err == nil {
			_ = json.NewDecoder(r.Body).Decode(&m)
			r.Body.Close()
		}
		waited <- m
	}()
	code, stdout, stderr := drainCmd(t, e.admin, tokenFile)
	if code != 0 {
		t.Fatalf("sidecar drain: exit %d: %s", code, stderr)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || st["state"] != "drained" {
		t.Fatalf("sidecar drain printed %q (%v)", stdout, err)
	}
	select {
	case w := <-waited:
		if w["state"] != "drained" {
			t.Fatalf("/drain/wait answered %v", w)
		}
	case <-time.After(hang):
		t.Fatal("/drain/wait did not answer after the drain")
	}
	final := s.next(t)
	for final["method"] != nil {
		final = s.next(t)
	}
	if res, _ := final["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("final frame = %v", final)
	}
	if got := readyStatus(t, e.admin); got != http.StatusServiceUnavailable {
		t.Fatalf("drained replica answers /readyz %d", got)
	}
}

// TestDrainedSidecarRecovers: a drain that is not followed by the process's termination (the
// drain was triggered by hand, or the pod's deletion was called off) no longer leaves the
// replica out of the Service for good: after --drain-recover-after it is ready again and takes
// listens, and a SIGTERM later still drains it.
func TestDrainedSidecarRecovers(t *testing.T) {
	e := newEnv(t, "--drain-delay", "0s", "--drain-jitter", "0s", "--drain-budget", "1s", "--drain-recover-after", "1s")
	select {
	case st := <-drainAsync(e.admin):
		if st["state"] != "drained" {
			t.Fatalf("drain answered %v", st)
		}
	case <-time.After(hang):
		t.Fatal("drain did not return")
	}
	if got := readyStatus(t, e.admin); got != http.StatusServiceUnavailable {
		t.Fatalf("just drained, /readyz = %d", got)
	}
	eventually.True(t, "the drained sidecar to be ready again", func() bool {
		return readyStatus(t, e.admin) == http.StatusOK
	})
	s := listen(t, e.mcp, 7, `{"toolsListChanged":true}`)
	s.next(t)
	callTool(t, e.mcp, "test_trigger_tool_change")
	s.nextMethod(t, "notifications/tools/list_changed")
	sigterm(t, e.sc)
	final := s.next(t)
	for final["method"] != nil {
		final = s.next(t)
	}
	if res, _ := final["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("SIGTERM after recovering: final frame = %v", final)
	}
}
