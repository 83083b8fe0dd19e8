// Command sample-server runs the sample weather MCP server (internal/sampleserver) over
// stateless Streamable HTTP, as the MCP server container behind the Switchboard sidecar.
//
// On SIGTERM or SIGINT it stops accepting connections, lets requests in flight finish and exits
// 0: the kubelet sends SIGTERM after the sidecar's preStop drain, and a container that ends
// non-zero leaves every stopped pod in Error (as PID 1 without a handler, the Go runtime exits 2).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/sampleserver"
)

// shutdownBudget bounds how long requests in flight may run after SIGTERM. The sidecar has
// drained its clients before the kubelet signals the server, so little is left by then, and the
// budget stays well inside a pod's termination grace period.
const shutdownBudget = 10 * time.Second

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "Address to serve on.")
	path := flag.String("path", "/mcp", "HTTP path of the MCP endpoint.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	mux := http.NewServeMux()
	mux.Handle(*path, sampleserver.Handler())
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.ListenAndServe() }()
	slog.Info("Serving the sample MCP server", "address", *listen, "path", *path)

	select {
	case err := <-served:
		slog.Error("Serving", "err", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	stop() // a second signal kills the process the default way
	slog.Info("Shutting down: finishing requests in flight", "budget", shutdownBudget)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Streams still open at the budget's end are cut; that is the end of the container's
		// life either way, not a failure of the process.
		slog.Warn("Shutdown budget exceeded; closing the remaining connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("Serving", "err", err)
		os.Exit(1)
	}
	slog.Info("Stopped")
}
