// Command kubectl-mcp is the kubectl plugin `kubectl mcp` (put it on PATH): what an MCP client of a
// Switchboard server sees. The logic is in internal/kubectlmcp.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchboard-mcp/switchboard/internal/kubectlmcp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlmcp.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
