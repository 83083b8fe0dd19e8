package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// Main is the one envtest bootstrap of the test packages: call it from TestMain as
// os.Exit(testenv.Main(m, opts, ready, setup)). It starts one control plane for the package and
// hands it to ready. When setup is not nil it also runs one manager on it, configured as
// cmd/manager configures it (the same cache selection; no metrics or probe listeners; the
// webhook server on envtest's address when opts.WebhookPaths is set): setup registers what the
// manager runs, the manager starts, and the tests run once its cache has synced (and its webhook
// server answers). Controller logs are discarded unless SWITCHBOARD_TEST_LOG=debug.
func Main(m *testing.M, opts Options, ready func(*Env), setup func(context.Context, ctrl.Manager) error) int {
	if os.Getenv("SWITCHBOARD_TEST_LOG") == "debug" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	}
	env, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping testenv:", err)
		}
	}()
	if ready != nil {
		ready(env)
	}
	if setup == nil {
		return m.Run()
	}

	mgrOpts := ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  kube.CacheOptions(),
	}
	wio := &env.Environment.WebhookInstallOptions
	webhooks := len(opts.WebhookPaths) > 0
	if webhooks {
		mgrOpts.WebhookServer = crwebhook.NewServer(crwebhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		})
	}
	mgr, err := ctrl.NewManager(env.Config, mgrOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := setup(ctx, mgr); err != nil {
		fmt.Fprintln(os.Stderr, "setting up the manager:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "the manager's cache did not sync")
		return 1
	}
	if webhooks {
		addr := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
		if err := eventually.Within(30*time.Second, func() error {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
			if err == nil {
				return conn.Close()
			}
			return err
		}); err != nil {
			fmt.Fprintf(os.Stderr, "the webhook server at %s did not come up: %v\n", addr, err)
			return 1
		}
	}
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}
