// Command sidecar is the Switchboard MCP sidecar: a Streamable HTTP front
// (protocol revision 2026-07-28) for the MCP server container in its pod.
// This file only wires flags to the sidecar package; see docs/sidecar.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/sidecar"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/procs"
	"github.com/switchboard-mcp/switchboard/sidecar/stdio"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "stdio": // the stdio bridge, run in the MCP server container (docs/upstreams.md)
			os.Exit(stdio.Main(os.Args[2:]))
		case "install": // copies this binary for the stdio bridge (init container)
			os.Exit(stdio.Install(os.Args[2:]))
		case "drain": // the sidecar container's preStop hook (docs/drain.md)
			os.Exit(app.DrainMain(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	var cfg app.Config
	var origins, hosts, logLevel string
	fs := flag.NewFlagSet("sidecar", flag.ExitOnError)
	fs.StringVar(&cfg.Upstream, inject.FlagUpstream, app.DefaultUpstream, "MCP endpoint URL of the server container")
	fs.StringVar(&cfg.Listen, inject.FlagListen, app.DefaultListen, "address for MCP traffic")
	fs.StringVar(&cfg.AdminListen, inject.FlagAdminListen, app.DefaultAdminListen, "address for /healthz, /readyz, /metrics and /drain")
	fs.StringVar(&cfg.PprofListen, "pprof-listen", "", "address for Go's /debug/pprof profiles (empty: off); bind it to 127.0.0.1 and reach it with kubectl port-forward")
	fs.StringVar(&cfg.Path, "path", app.DefaultPath, "HTTP path of the MCP endpoint")
	fs.StringVar(&origins, inject.FlagAllowedOrigins, "", "comma-separated Origin values accepted besides loopback origins (* = any)")
	fs.StringVar(&hosts, inject.FlagAllowedHosts, "", "comma-separated Host names (or host:port) accepted besides loopback names; when set, all others get 403")
	fs.BoolVar(&cfg.DisableLocalhostProtection, "disable-localhost-protection", false, "accept any Host on connections that arrive on a loopback address")
	legacyClients := fs.String(inject.FlagLegacyClients, "Serve", "2025-era clients: Serve (sessions served by the sidecar through the catalog) or Reject (400 naming the supported versions; 405 for GET/DELETE)")
	fs.BoolVar(&cfg.RejectLegacy, "reject-legacy", false, "the same as --legacy-clients=Reject")
	sessionKeyFile := fs.String("session-key-file", "", "file holding the key that signs 2025-era session ids, shared by every replica of the server (else $"+legacy.SessionKeyEnv+"; else a random key: sessions then work on this replica only)")
	fs.StringVar(&cfg.SessionServer, "session-server", "", "server identity inside session ids (default: --catalog-configmap)")
	fs.DurationVar(&cfg.SessionTTL, "session-ttl", legacy.DefaultSessionTTL, "lifetime of a 2025-era session id")
	fs.DurationVar(&cfg.InputTimeout, "input-timeout", legacy.DefaultInputTimeout, "how long a call of a 2025-era client waits for the client's answers to the MCP server's elicitation, sampling or roots requests")
	fs.IntVar(&cfg.MaxListenStreams, inject.FlagMaxListenStreams, hub.DefaultMaxListenStreams, "cap on concurrent subscriptions/listen streams")
	fs.IntVar(&cfg.MaxSubscriptions, "max-subscriptions", hub.DefaultMaxSubscriptions, "cap on the resource subscriptions held by this replica, every listen stream's and 2025-era session's together")
	fs.Int64Var(&cfg.MaxSubscriptionBytes, "max-subscription-bytes", hub.DefaultMaxSubscriptionBytes, "cap on the bytes of the subscribed URIs held by this replica (as JSON strings)")
	fs.IntVar(&cfg.MaxConnections, "max-connections", 0, "cap on the connections open on the MCP port, listen streams included; past it a connection gets 503 and is closed (0 = --max-listen-streams + 2048)")
	fs.Int64Var(&cfg.MaxInflightRequests, "max-inflight-requests", sidecar.DefaultMaxInflightRequests, "cap on the POSTs served at once, listen streams aside; past it a request gets 503 with Retry-After")
	fs.DurationVar(&cfg.BodyReadTimeout, "body-read-timeout", sidecar.DefaultBodyReadTimeout, "longest wait for one request body; past it the connection is closed")
	fs.DurationVar(&cfg.Keepalive, inject.FlagKeepalive, hub.DefaultKeepalive, "interval between SSE keepalive comments on listen streams")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", sidecar.DefaultMaxBodyBytes, "largest accepted request body")
	fs.IntVar(&cfg.MaxHeaderBytes, "max-header-bytes", sidecar.DefaultMaxHeaderBytes, "largest accepted request header block")
	fs.IntVar(&cfg.MaxResponseBytes, "max-response-bytes", upstream.DefaultMaxResponseBytes, "largest upstream JSON response or SSE event")
	fs.DurationVar(&cfg.DrainDelay, inject.FlagDrainDelay, app.DefaultDrainDelay, "on drain, time between failing readiness and ending listen streams")
	fs.DurationVar(&cfg.DrainJitter, inject.FlagDrainJitter, app.DefaultDrainJitter, "on drain, period over which listen streams are ended")
	fs.DurationVar(&cfg.DrainBudget, inject.FlagDrainBudget, app.DefaultDrainBudget, "on drain, longest wait for forwarded requests in flight")
	fs.StringVar(&cfg.DrainTokenFile, inject.FlagDrainTokenFile, "", "file holding the token /drain must come with, read on every drain request (else $"+app.DrainTokenEnv+"; neither: HTTP cannot drain)")
	fs.DurationVar(&cfg.DrainRecoverAfter, "drain-recover-after", 0, "how long a drained sidecar that was not terminated stays out of service before serving again (0: drain-delay + drain-jitter + drain-budget + 5s; negative: never)")
	fs.StringVar(&cfg.CatalogConfigMap, inject.FlagCatalogConfigMap, "", "NAMESPACE/NAME of the catalog ConfigMap to watch and serve live (get/list/watch on that name)")
	fs.StringVar(&cfg.CatalogFile, "catalog-file", "", "catalog file to serve live, re-read on change (instead of --catalog-configmap)")
	fs.StringVar(&cfg.ReportConfigMap, inject.FlagReportConfigMap, "", "NAMESPACE/NAME of the status ConfigMap the propagation report is applied into (key: --pod-name)")
	fs.StringVar(&cfg.PodName, inject.FlagPodName, "", "this pod's name: the key of its propagation report")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.IntVar(&cfg.PageSize, "page-size", overlay.DefaultPageSize, "entries per page of the merged lists")
	fs.DurationVar(&cfg.AuthRevalidateAfter, "auth-revalidate-after", authn.DefaultRevalidateAfter, "with the catalog's auth: how long a ServiceAccount token's TokenReview is reused before it is asked again (a deleted pod or ServiceAccount is refused at most this long after)")
	fs.IntVar(&cfg.AuthCacheEntries, "auth-cache-entries", authn.DefaultMaxCacheEntries, "with the catalog's auth: verified and refused tokens remembered (by SHA-256), least recently used first out")
	fs.StringVar(&cfg.AuditDir, "audit-dir", catalog.AuditDir, "the only directory the catalog's audit file may be in (the audit volume's mount point)")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&cfg.OTLPEndpoint, inject.FlagOTLPEndpoint, "", "OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces); empty: no traces")
	fs.IntVar(&cfg.TraceSamplingPerMillion, inject.FlagTraceSampling, tracing.DefaultSamplingPerMillion, "traces sampled per million of those the sidecar starts (a client's sampled flag is followed, up to --trace-client-sampled-per-second)")
	fs.IntVar(&cfg.TraceClientSampledPerSecond, "trace-client-sampled-per-second", tracing.DefaultClientSampledPerSecond, "requests per second a client's sampled flag may have traced; beyond it the sampling ratio decides (negative: never)")
	maxProcs := fs.Int(inject.FlagMaxProcs, procs.DefaultMax, "OS threads running Go code at once (GOMAXPROCS) while serving requests; large notification fan-outs, and a load that queues on them, use the container's CPUs (0 = Go's default throughout; ignored when GOMAXPROCS is set)")
	minHeap := fs.Uint64("min-heap-bytes", app.DefaultMinHeapBytes, "heap size below which the garbage collector does not run (0 = Go's default; ignored when GOGC is set)")
	_ = fs.Parse(os.Args[1:])

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "sidecar: bad --log-level:", err)
		os.Exit(2)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	switch *legacyClients {
	case "Serve":
	case "Reject":
		cfg.RejectLegacy = true
	default:
		fmt.Fprintln(os.Stderr, "sidecar: --legacy-clients must be Serve or Reject")
		os.Exit(2)
	}
	key := []byte(os.Getenv(legacy.SessionKeyEnv))
	if *sessionKeyFile != "" {
		b, err := os.ReadFile(*sessionKeyFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sidecar: --session-key-file:", err)
			os.Exit(2)
		}
		key = bytes.TrimSpace(b)
	}
	if len(key) > 0 && len(key) < legacy.MinSessionKeyBytes {
		fmt.Fprintf(os.Stderr, "sidecar: the session key must be at least %d bytes\n", legacy.MinSessionKeyBytes)
		os.Exit(2)
	}
	cfg.SessionKey = key
	cfg.AllowedOrigins = splitList(origins)
	cfg.AllowedHosts = splitList(hosts)
	// From the environment, not a flag: flags show in every process listing.
	cfg.DrainToken = os.Getenv(app.DrainTokenEnv)

	if !procs.EnvSet() {
		defer procs.Limit(*maxProcs, 0)()
	}
	_, gogcSet := os.LookupEnv("GOGC")
	defer app.KeepHeapFloor(*minHeap, gogcSet)()

	app, err := app.New(cfg)
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
