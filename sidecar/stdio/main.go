package stdio

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/switchboard-mcp/switchboard/sidecar/procs"
)

// Main runs `sidecar stdio [flags] -- COMMAND [ARGS...]` and returns the
// process exit code.
func Main(args []string) int {
	var cfg Config
	var logLevel string
	fs := flag.NewFlagSet("sidecar stdio", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: sidecar stdio --listen ADDR [--path /mcp] [flags] -- COMMAND [ARGS...]")
		fmt.Fprintln(fs.Output(), "Runs COMMAND (an MCP server on stdin/stdout) and serves it on ADDR as Streamable HTTP.")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.Listen, "listen", "", "address to serve the MCP endpoint on (e.g. 127.0.0.1:8080)")
	fs.StringVar(&cfg.Path, "path", DefaultPath, "HTTP path of the MCP endpoint")
	fs.IntVar(&cfg.MaxLineBytes, "max-line-bytes", DefaultMaxLineBytes, "largest message the MCP server may write on stdout; a larger answer fails its request")
	fs.IntVar(&cfg.MaxStderrLine, "max-stderr-line-bytes", DefaultMaxStderrLine, "longest stderr line copied to the log whole (longer lines are cut)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest accepted request body")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", DefaultBodyReadTimeout, "longest wait for one request body; past it the connection is closed")
	fs.StringVar(&cfg.ProtocolVersion, "protocol-version", DefaultProtocolVersion, "protocol version the bridge asks of the MCP server in its initialize")
	fs.DurationVar(&cfg.DrainBudget, "drain-budget", DefaultDrainBudget, "on SIGTERM, longest wait for requests in flight")
	fs.DurationVar(&cfg.StdinGrace, "stdin-grace", DefaultStdinGrace, "on SIGTERM, wait after closing the MCP server's stdin before SIGTERM")
	fs.DurationVar(&cfg.TermGrace, "term-grace", DefaultTermGrace, "wait after SIGTERM to the MCP server before SIGKILL")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	maxProcs := fs.Int("max-procs", procs.DefaultMax, "OS threads running Go code at once (GOMAXPROCS); a load that queues on them uses the container's CPUs (0 = Go's default throughout; ignored when GOMAXPROCS is set)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !procs.EnvSet() {
		defer procs.Limit(*maxProcs, 0)()
	}
	cfg.Command = fs.Args()
	if len(cfg.Command) == 0 {
		fs.Usage()
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar stdio: bad --log-level:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("component", "stdio-bridge")
	b, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidecar stdio:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := b.Run(ctx); err != nil {
		cfg.Logger.Error("Stdio bridge stopped", "err", err)
		return 1
	}
	return 0
}

// Install runs `sidecar install DEST`: it copies this executable to DEST
// (mode 0755), so that an init container from the sidecar image can put the
// bridge into an emptyDir that the MCP server container mounts. The images
// have no shell or cp, and the binary is static, so it runs in any image.
func Install(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sidecar install DEST")
		return 2
	}
	if err := copySelf(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar install:", err)
		return 1
	}
	return 0
}

func copySelf(dest string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(dest), ".sidecar-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}
