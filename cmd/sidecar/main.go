// Command sidecar is the Switchboard MCP sidecar: a Streamable HTTP front
// (protocol revision 2026-07-28) for the MCP server container in its pod.
// This file only wires flags to the sidecar package; see docs/sidecar.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/switchboard-mcp/switchboard/sidecar"
	"github.com/switchboard-mcp/switchboard/sidecar/stdio"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "stdio": // the stdio bridge, run in the MCP server container (docs/upstreams.md)
			os.Exit(stdio.Main(os.Args[2:]))
		case "install": // copies this binary for the stdio bridge (init container)
			os.Exit(stdio.Install(os.Args[2:]))
		}
	}
	var cfg sidecar.Config
	var origins, hosts, logLevel string
	fs := flag.NewFlagSet("sidecar", flag.ExitOnError)
	fs.StringVar(&cfg.Upstream, "upstream", sidecar.DefaultUpstream, "MCP endpoint URL of the server container")
	fs.StringVar(&cfg.Listen, "listen", sidecar.DefaultListen, "address for MCP traffic")
	fs.StringVar(&cfg.AdminListen, "admin-listen", sidecar.DefaultAdminListen, "address for /healthz, /readyz, /metrics and /drain")
	fs.StringVar(&cfg.Path, "path", sidecar.DefaultPath, "HTTP path of the MCP endpoint")
	fs.StringVar(&origins, "allowed-origins", "", "comma-separated Origin values accepted besides loopback origins (* = any)")
	fs.StringVar(&hosts, "allowed-hosts", "", "comma-separated Host names (or host:port) accepted besides loopback names; when set, all others get 403")
	fs.BoolVar(&cfg.DisableLocalhostProtection, "disable-localhost-protection", false, "accept any Host on connections that arrive on a loopback address")
	fs.BoolVar(&cfg.RejectLegacy, "reject-legacy", false, "answer pre-2026-07-28 traffic with -32022 instead of forwarding it untouched")
	fs.IntVar(&cfg.MaxListenStreams, "max-listen-streams", sidecar.DefaultMaxListenStreams, "cap on concurrent subscriptions/listen streams")
	fs.DurationVar(&cfg.Keepalive, "keepalive", sidecar.DefaultKeepalive, "interval between SSE keepalive comments on listen streams")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", sidecar.DefaultMaxBodyBytes, "largest accepted request body")
	fs.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", sidecar.DefaultMaxHeaderBytes, "largest accepted request header block")
	fs.IntVar(&cfg.MaxResponseBytes, "max-response-bytes", sidecar.DefaultMaxResponseBytes, "largest upstream JSON response or SSE event")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", sidecar.DefaultDrainDelay, "on drain, time between failing readiness and ending listen streams")
	fs.DurationVar(&cfg.DrainJitter, "drain-jitter", sidecar.DefaultDrainJitter, "on drain, period over which listen streams are ended")
	fs.DurationVar(&cfg.DrainBudget, "drain-budget", sidecar.DefaultDrainBudget, "on drain, longest wait for forwarded requests in flight")
	fs.StringVar(&cfg.CatalogConfigMap, "catalog-configmap", "", "NAMESPACE/NAME of the catalog ConfigMap to watch and serve live (get/list/watch on that name)")
	fs.StringVar(&cfg.CatalogFile, "catalog-file", "", "catalog file to serve live, re-read on change (instead of --catalog-configmap)")
	fs.StringVar(&cfg.ReportConfigMap, "report-configmap", "", "NAMESPACE/NAME of the status ConfigMap the propagation report is applied into (key: --pod-name)")
	fs.StringVar(&cfg.PodName, "pod-name", "", "this pod's name: the key of its propagation report")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.IntVar(&cfg.PageSize, "page-size", sidecar.DefaultPageSize, "entries per page of the merged lists")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	minHeap := fs.Uint64("min-heap-bytes", sidecar.DefaultMinHeapBytes, "heap size below which the garbage collector does not run (0 = Go's default; ignored when GOGC is set)")
	_ = fs.Parse(os.Args[1:])

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar: bad --log-level:", err)
		os.Exit(2)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	cfg.AllowedOrigins = splitList(origins)
	cfg.AllowedHosts = splitList(hosts)

	_, gogcSet := os.LookupEnv("GOGC")
	defer sidecar.KeepHeapFloor(*minHeap, gogcSet)()

	app, err := sidecar.New(cfg)
	if err != nil {
		cfg.Logger.Error("Starting sidecar failed", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := app.Run(ctx); err != nil {
		cfg.Logger.Error("Sidecar stopped", "err", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
