package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/freeport"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// hang bounds every wait: it only catches hangs.
const hang = 20 * time.Second

// TestExitsZeroOnSignal runs the real binary, checks it serves MCP, signals it the way the
// kubelet (SIGTERM) or a terminal (SIGINT) does and requires exit status 0: a container that
// ends non-zero leaves its stopped pod in Error.
func TestExitsZeroOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sample-server")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := freeport.ForTest(t)
			var out bytes.Buffer
			cmd := exec.Command(bin, "--listen="+addr)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			c := mcptest.New("http://" + addr + "/mcp")
			deadline := time.Now().Add(hang)
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				resp, err := c.Call(ctx, "tools/list", nil)
				cancel()
				if err == nil && resp.Status == 200 && resp.Error == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the server never answered tools/list: %v %+v\n%s", err, resp, out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				// Without a handler the process dies of the signal here ("signal: terminated"); as
				// PID 1 of a container, where the kernel ignores it, the Go runtime exits 2.
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					t.Fatalf("%v after %v, want exit status 0\n%s", ee, sig, out.String())
				}
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(hang):
				t.Fatalf("still running %v after %v\n%s", hang, sig, out.String())
			}
		})
	}
}
