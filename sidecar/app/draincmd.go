package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Defaults of `sidecar drain`, the sidecar container's exec preStop hook.
const (
	// DefaultDrainTokenFile is where injection mounts the Secret <server>-drain-token (key
	// "token") in the sidecar container, and nowhere else.
	DefaultDrainTokenFile = "/var/run/switchboard/drain/token"
	// DefaultDrainAdmin is the sidecar's admin listener seen from inside the pod.
	DefaultDrainAdmin = "127.0.0.1:8801"
	// DefaultDrainCommandTimeout bounds the wait for the drain's answer; the kubelet also ends
	// the hook at the pod's termination grace period.
	DefaultDrainCommandTimeout = 10 * time.Minute
	// maxDrainAnswerBytes bounds the status read back and printed.
	maxDrainAnswerBytes = 64 << 10
)

// DrainMain is `sidecar drain`: it reads the drain token from its file and asks the sidecar
// on loopback to drain (POST /drain), waits for the drain to end and prints its status. The
// exit code is 0 when the drain ran, 1 otherwise (the kubelet records a failed hook as the
// event FailedPreStopHook), 2 on bad flags.
func DrainMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sidecar drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", DefaultDrainAdmin, "the sidecar's admin address")
	tokenFile := fs.String("token-file", DefaultDrainTokenFile, "file holding the drain token")
	timeout := fs.Duration("timeout", DefaultDrainCommandTimeout, "longest wait for the drain to end")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	token, err := ReadDrainToken(*tokenFile)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar drain:", err)
		return 1
	}
	if token == "" {
		fmt.Fprintln(stderr, "sidecar drain: no drain token in", *tokenFile)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+*admin+"/drain", nil)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar drain:", err)
		return 2
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "sidecar drain:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxDrainAnswerBytes))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "sidecar drain: %s: %s", resp.Status, body)
		return 1
	}
	_, _ = stdout.Write(body)
	return 0
}
