// Command sample-server runs the sample weather MCP server (internal/sampleserver) over
// stateless Streamable HTTP, as the MCP server container behind the Switchboard sidecar.
package main

import (
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/sampleserver"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "Address to serve on.")
	path := flag.String("path", "/mcp", "HTTP path of the MCP endpoint.")
	flag.Parse()

	mux := http.NewServeMux()
	mux.Handle(*path, sampleserver.Handler())
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	slog.Info("Serving the sample MCP server", "address", *listen, "path", *path)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("Serving", "err", err)
		os.Exit(1)
	}
}
