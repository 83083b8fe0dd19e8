package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard/sidecar"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/tracing"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
)

// Defaults for the command-line contract (docs/sidecar.md).
const (
	DefaultUpstream    = "http://127.0.0.1:8080/mcp"
	DefaultListen      = ":8800" // api/v1alpha1.SidecarMCPPort
	DefaultAdminListen = ":8801" // api/v1alpha1.SidecarAdminPort
	DefaultPath        = "/mcp"
	DefaultDrainDelay  = 5 * time.Second
	DefaultDrainJitter = 1 * time.Second // MCPServer spec.sidecar.drain defaults
	DefaultDrainBudget = 30 * time.Second

	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 5 * time.Second
	// drainRecoverMargin is added to the drain's own time (delay + jitter + budget) to give the
	// default --drain-recover-after: the pod's terminationGracePeriodSeconds uses the same sum
	// (inject.TerminationGracePeriodSeconds), so a terminating pod is gone before it elapses.
	drainRecoverMargin = 5 * time.Second
	// drainWaitStart bounds how long GET /drain/wait waits for a drain to begin: in a pod the
	// sidecar's own exec preStop hook starts it at the same moment the server container's hook
	// starts waiting.
	drainWaitStart = 10 * time.Second
	// maxDrainWaiters bounds concurrent GET /drain/wait requests (one per pod in practice: the
	// server container's preStop), so a peer cannot pile up blocked requests.
	maxDrainWaiters = 16
	// abortFlushWait bounds how long the drain waits, once its budget is
	// over, for the requests it aborted to write their JSON-RPC errors.
	abortFlushWait = 2 * time.Second
	// inflightPoll is how often the drain looks at the in-flight count.
	inflightPoll = 10 * time.Millisecond
)

// Config is everything the sidecar binary is configured with.
type Config struct {
	Upstream                   string
	Listen                     string
	AdminListen                string
	Path                       string
	AllowedOrigins             []string
	AllowedHosts               []string
	DisableLocalhostProtection bool
	RejectLegacy               bool
	// SessionKey signs 2025-era session ids (shared by every replica of
	// one MCPServer; random when empty); SessionServer names the server in
	// them (default: CatalogConfigMap); SessionTTL is their lifetime.
	SessionKey    []byte
	SessionServer string
	SessionTTL    time.Duration
	// InputTimeout bounds the wait for a 2025-era client's answers to an
	// upstream's input requests (legacy.DefaultInputTimeout when 0).
	InputTimeout     time.Duration
	MaxListenStreams int
	// MaxSubscriptions and MaxSubscriptionBytes bound the resource subscriptions the replica
	// holds (hub.DefaultMaxSubscriptions, hub.DefaultMaxSubscriptionBytes when 0).
	MaxSubscriptions     int
	MaxSubscriptionBytes int64
	// MaxConnections caps the connections open on the MCP port (MaxListenStreams +
	// DefaultExtraConnections when 0); MaxInflightRequests the POSTs served at once
	// (DefaultMaxInflightRequests when 0); BodyReadTimeout the wait for one request body
	// (DefaultBodyReadTimeout when 0).
	MaxConnections      int
	MaxInflightRequests int64
	BodyReadTimeout     time.Duration
	Keepalive           time.Duration
	MaxBodyBytes        int64
	MaxHeaderBytes      int
	MaxResponseBytes    int
	DrainDelay          time.Duration
	DrainJitter         time.Duration
	DrainBudget         time.Duration
	// DrainToken must come with GET/POST /drain (Authorization: Bearer); empty refuses
	// every drain over HTTP (SIGTERM still drains). DrainTokenFile, when set, replaces it: the
	// file (the mounted Secret <server>-drain-token) is read on every drain request.
	DrainToken     string
	DrainTokenFile string
	// DrainRecoverAfter is how long a drained sidecar that was not terminated stays out of
	// service before it serves again (0: DrainDelay + DrainJitter + DrainBudget + 5 s, the
	// pod's drain time; negative: never).
	DrainRecoverAfter time.Duration
	Logger            *slog.Logger

	// The live catalog (catalogsource.go); all optional. With neither
	// catalog source the sidecar is a transparent proxy.
	CatalogConfigMap string // NAMESPACE/NAME of the catalog ConfigMap
	CatalogFile      string // or a file, re-read on change
	ReportConfigMap  string // NAMESPACE/NAME of the status ConfigMap
	PodName          string // key of this sidecar's report
	Kubeconfig       string // explicit kubeconfig (else KUBECONFIG, ~/.kube/config, in-cluster)
	PageSize         int    // page size of merged lists (DefaultPageSize when 0)
	// AuthRevalidateAfter bounds how long a ServiceAccount token's TokenReview is reused
	// (authn.DefaultRevalidateAfter when 0); AuthCacheEntries bounds the verified and refused
	// tokens remembered (authn.DefaultMaxCacheEntries when 0).
	AuthRevalidateAfter time.Duration
	AuthCacheEntries    int

	// UpstreamTransport reaches the MCP server (plain HTTP to Upstream
	// when nil); see upstream.Transport.
	UpstreamTransport upstream.Transport

	// OTLPEndpoint turns traces on: spans go over OTLP/HTTP to this URL
	// (e.g. http://collector:4318/v1/traces), TraceSamplingPerMillion of the
	// traces the sidecar starts itself (tracing.DefaultSamplingPerMillion when
	// 0). Package tracing has what is traced.
	OTLPEndpoint            string
	TraceSamplingPerMillion int
	// TraceClientSampledPerSecond caps the requests per second a client's
	// sampled flag has recorded (tracing.DefaultClientSampledPerSecond when 0;
	// negative: the flag never forces a span).
	TraceClientSampledPerSecond int

	// AuditOutput receives the audit records when the catalog's audit names no file
	// (os.Stdout when nil).
	AuditOutput io.Writer
	// AuditDir is the only directory an audit file may be in (catalog.AuditDir when empty).
	AuditDir string

	// PprofListen is the address of Go's /debug/pprof handlers; empty: not served. Bind it to a
	// loopback address (reached with kubectl port-forward): profiles show the process's internals.
	PprofListen string
}

// App is a running sidecar: MCP listener, admin listener, hub and relay.
type App struct {
	cfg     Config
	log     *slog.Logger
	Metrics *sidecar.Metrics
	Hub     *hub.Hub
	Server  *sidecar.Server
	relay   *upstream.Relay
	tracing *tracing.Tracer // nil when traces are off
	catalog *catalogWiring  // nil without a catalog source

	mcpLn, adminLn net.Listener
	pprofLn        net.Listener // nil: no /debug/pprof

	// drainMu guards drainState, drainBegun, drainDone, drainInfo and stopping.
	drainMu    sync.Mutex
	drainState string // "", "draining", "drained"
	// drainBegun is closed when a drain starts; a recovery replaces it (GET /drain/wait).
	drainBegun chan struct{}
	drainDone  chan struct{}
	drainInfo  DrainStatus
	// stopping is set once Run's context ends: the process is terminating and never recovers.
	stopping bool
	// drainWaiters is the semaphore of GET /drain/wait (maxDrainWaiters).
	drainWaiters chan struct{}
}

// DrainStatus is what /drain and /drain/status report.
type DrainStatus struct {
	State        string `json:"state"` // serving, draining, drained
	StreamsEnded int    `json:"streamsEnded"`
	// EndStreamsMs is how long sending every complete result took (the
	// jitter window plus the writes).
	EndStreamsMs    int64 `json:"endStreamsMs"`
	InflightAtStart int64 `json:"inflightAtStart"`
	// InflightAtBudget is what was still in flight when the budget ran
	// out; InflightAborted of those were answered with a JSON-RPC error.
	InflightAtBudget int64 `json:"inflightAtBudget"`
	InflightAborted  int64 `json:"inflightAborted"`
	InflightLeft     int64 `json:"inflightLeft"`
	DurationMs       int64 `json:"durationMs"`
}

// New builds the sidecar and binds its two listeners.
func New(cfg Config) (*App, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = sidecar.DefaultMaxHeaderBytes
	}
	m := sidecar.NewMetrics()
	var tr *tracing.Tracer
	if cfg.OTLPEndpoint != "" {
		perMillion := cfg.TraceSamplingPerMillion
		if perMillion == 0 {
			perMillion = tracing.DefaultSamplingPerMillion
		}
		var err error
		if tr, err = tracing.New(context.Background(), cfg.OTLPEndpoint, perMillion, "switchboard-sidecar"); err != nil {
			return nil, err
		}
		if n := cfg.TraceClientSampledPerSecond; n != 0 {
			tr.WithClientSampledPerSecond(n)
		}
	}
	if cfg.MaxListenStreams <= 0 {
		cfg.MaxListenStreams = hub.DefaultMaxListenStreams
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = cfg.MaxListenStreams + DefaultExtraConnections
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = sidecar.DefaultBodyReadTimeout
	}
	streams := hub.New(hub.Options{MaxStreams: cfg.MaxListenStreams, Keepalive: cfg.Keepalive, Logger: cfg.Logger, Observer: m, Tracer: tr,
		MaxSubscriptions: cfg.MaxSubscriptions, MaxSubscriptionBytes: cfg.MaxSubscriptionBytes})
	up := upstream.NewWith(cfg.Upstream, cfg.MaxResponseBytes, cfg.UpstreamTransport)
	up.SetLogger(cfg.Logger)
	cat, err := newCatalogWiring(cfg, streams, up, m)
	if err != nil {
		return nil, err
	}
	var ov *overlay.Overlay
	var authenticator *authn.Authenticator
	if cat != nil {
		ov = cat.overlay
		// Callers are authenticated when the catalog says so (spec.auth); ServiceAccount
		// tokens are reviewed with the sidecar's own Kubernetes client.
		reviews, err := tokenReviews(cfg.Kubeconfig)
		if err != nil {
			cfg.Logger.Info("No Kubernetes client: ServiceAccount tokens will be refused", "err", err)
		}
		authenticator = authn.New(authn.Options{TokenReviews: reviews, RevalidateAfter: cfg.AuthRevalidateAfter, MaxCacheEntries: cfg.AuthCacheEntries, Logger: cfg.Logger})
	}
	sessionServer := cfg.SessionServer
	if sessionServer == "" {
		sessionServer = cfg.CatalogConfigMap
	}
	if len(cfg.SessionKey) == 0 && !cfg.RejectLegacy {
		cfg.Logger.Info("No session key: 2025-era sessions are honoured by this replica only (set --session-key-file or " + legacy.SessionKeyEnv + ")")
	}
	srv, err := sidecar.NewServer(sidecar.Options{
		Client:                     up,
		Overlay:                    ov,
		Authn:                      authenticator,
		Upstream:                   cfg.Upstream,
		AllowedOrigins:             cfg.AllowedOrigins,
		AllowedHosts:               cfg.AllowedHosts,
		DisableLocalhostProtection: cfg.DisableLocalhostProtection,
		RejectLegacy:               cfg.RejectLegacy,
		SessionKey:                 cfg.SessionKey,
		SessionServer:              sessionServer,
		SessionTTL:                 cfg.SessionTTL,
		InputTimeout:               cfg.InputTimeout,
		MaxBodyBytes:               cfg.MaxBodyBytes,
		BodyReadTimeout:            cfg.BodyReadTimeout,
		MaxInflightRequests:        cfg.MaxInflightRequests,
		MaxResponseBytes:           cfg.MaxResponseBytes,
		Hub:                        streams,
		Logger:                     cfg.Logger,
		Metrics:                    m,
		Tracing:                    tr,
		AuditOutput:                cfg.AuditOutput,
		AuditDir:                   cfg.AuditDir,
		PodName:                    cfg.PodName,
	})
	if err != nil {
		return nil, err
	}
	if cfg.DrainRecoverAfter == 0 {
		cfg.DrainRecoverAfter = cfg.DrainDelay + cfg.DrainJitter + cfg.DrainBudget + drainRecoverMargin
	}
	a := &App{cfg: cfg, log: cfg.Logger, Metrics: m, Hub: streams, Server: srv, catalog: cat, tracing: tr,
		relay:      upstream.NewRelay(srv.Upstream(), streams, cfg.Logger, m),
		drainBegun: make(chan struct{}), drainWaiters: make(chan struct{}, maxDrainWaiters)}
	if ov != nil {
		a.relay.SetPublisher(ov)
	}
	if a.mcpLn, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, err
	}
	a.mcpLn = newLimitListener(a.mcpLn, cfg.MaxConnections, m)
	if a.adminLn, err = net.Listen("tcp", cfg.AdminListen); err != nil {
		a.mcpLn.Close()
		return nil, err
	}
	if cfg.PprofListen != "" {
		if a.pprofLn, err = net.Listen("tcp", cfg.PprofListen); err != nil {
			a.mcpLn.Close()
			a.adminLn.Close()
			return nil, err
		}
	}
	return a, nil
}

// pprofHandler serves Go's profiles (net/http/pprof) under /debug/pprof/.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// Addrs returns the bound MCP and admin addresses.
func (a *App) Addrs() (mcpAddr, adminAddr net.Addr) { return a.mcpLn.Addr(), a.adminLn.Addr() }

// Run serves until ctx ends, then drains (as on POST /drain) and shuts down.
func (a *App) Run(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle(a.cfg.Path, a.closeWhenDraining(a.Server))
	mux.Handle(authn.MetadataPrefix+a.cfg.Path, a.closeWhenDraining(http.HandlerFunc(a.Server.ServeMetadata)))
	mcpSrv := &http.Server{
		Handler:           mux,
		ConnContext:       a.Server.ConnContext,
		ReadHeaderTimeout: readHeaderTimeout,
		// A backstop for bodies no handler reads (another path, a refused method), which
		// net/http reads before answering: the MCP handler sets its own body deadline and
		// clears the read deadline once the body is in, so streams and long calls are not
		// cut by it.
		ReadTimeout:    readHeaderTimeout + a.cfg.BodyReadTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: a.cfg.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
		ConnState:      a.closeIdleWhenDraining,
	}
	adminSrv := &http.Server{
		Handler:           a.adminHandler(),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	var wg sync.WaitGroup
	wg.Go(func() { a.Hub.Run(bg) })
	wg.Go(func() { a.relay.Run(bg) })
	if a.catalog != nil {
		wg.Go(func() { a.catalog.run(bg) })
	}
	errc := make(chan error, 3)
	go func() { errc <- mcpSrv.Serve(a.mcpLn) }()
	go func() { errc <- adminSrv.Serve(a.adminLn) }()
	pprofSrv := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
	if a.pprofLn != nil {
		go func() { errc <- pprofSrv.Serve(a.pprofLn) }()
		a.log.Info("Serving Go's /debug/pprof", "address", a.pprofLn.Addr().String())
	}
	a.log.Info("Sidecar serving", "mcp", a.mcpLn.Addr().String(), "admin", a.adminLn.Addr().String(), "upstream", a.cfg.Upstream)

	var err error
	select {
	case <-ctx.Done():
		a.log.Info("Shutting down: draining first")
		a.drainMu.Lock()
		a.stopping = true
		a.drainMu.Unlock()
		a.Drain()
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	_ = mcpSrv.Shutdown(sctx)
	_ = adminSrv.Shutdown(sctx)
	_ = pprofSrv.Shutdown(sctx)
	stopBG()
	wg.Wait()
	if err := a.tracing.Shutdown(sctx); err != nil {
		a.log.Warn("Exporting the last spans failed", "err", err)
	}
	a.Server.CloseAudit()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// closeWhenDraining makes every response given while draining close its
// connection (Connection: close), so keep-alive clients reconnect through the
// Service to a replica that stays, instead of finding their idle connection
// closed under them at shutdown. (The forwarding path sets it again after
// copying the upstream's headers.)
func (a *App) closeWhenDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Server.Draining() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}

// closeIdleWhenDraining closes a connection as soon as it goes idle while
// draining. Every response begun during the drain says Connection: close,
// so net/http closes its connection itself; a connection that still goes
// idle carried a response whose headers went out before the drain began
// (a forwarded call in flight, an SSE answer). Its client was never told to
// close it and may reuse it at any moment: left open, the Shutdown after the
// drain closes it under a request being sent (the client sees EOF or a
// reset, and a POST is not retried). Closed right after its last response,
// the client sees the end before it has a next request to send. (What
// SetKeepAlivesEnabled(false) does per connection, without also closing at
// once the idle connections that a next request would tell to close.)
func (a *App) closeIdleWhenDraining(c net.Conn, st http.ConnState) {
	if st == http.StateIdle && a.Server.Draining() {
		_ = c.Close()
	}
}

func (a *App) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if a.Server.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		if a.catalog != nil {
			select {
			case <-a.catalog.overlay.Applied():
			default:
				// Serving before the catalog is applied would show disabled tools.
				http.Error(w, "no catalog revision applied yet", http.StatusServiceUnavailable)
				return
			}
			// Nor before the ConfigMaps and Secrets behind resources are listed and read by a
			// published computation: their resources would answer "not found", and a stream
			// opened before that computation would be told they were updated.
			if !a.catalog.overlay.ContentsServed() {
				http.Error(w, "resource sources not synced yet", http.StatusServiceUnavailable)
				return
			}
		}
		if err := a.Server.Upstream().Ready(r.Context()); err != nil {
			// The error quotes what the upstream answered, which may hold anything; it goes to
			// the log, not to whoever can reach the admin port.
			a.log.Warn("Not ready: upstream does not answer", "err", err)
			http.Error(w, "upstream not ready (see the sidecar log)", http.StatusServiceUnavailable)
			return
		}
		// A replica that takes listens before its own upstream listen is
		// acknowledged could miss a change for the clients that just moved
		// to it during a rollout.
		if !a.relay.Settled() {
			http.Error(w, "upstream listen not established yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Metrics.Registry, promhttp.HandlerOpts{}))
	// Only the pod's own lifecycle may drain it: the sidecar's exec preStop (`sidecar drain`)
	// sends the drain token it reads from the Secret mounted into the sidecar container only
	// (drainauth.go). GET as well as POST, for callers that can only GET.
	drain := newDrainAuth(a.drainToken, a.Metrics.Registry).wrap(func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Drain()) })
	mux.HandleFunc("GET /drain", drain)
	mux.HandleFunc("POST /drain", drain)
	// The MCP server container's preStop (an httpGet, which holds no token) waits here for the
	// drain the sidecar's hook started, so that container gets its TERM only once in-flight
	// calls are done. It cannot start a drain.
	mux.HandleFunc("GET /drain/wait", a.serveDrainWait)
	mux.HandleFunc("GET /drain/status", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, a.DrainState())
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// drainToken is the token /drain must come with: the file's, else the configured one.
func (a *App) drainToken() string {
	if a.cfg.DrainTokenFile == "" {
		return a.cfg.DrainToken
	}
	t, err := ReadDrainToken(a.cfg.DrainTokenFile)
	if err != nil {
		a.log.Error("Reading the drain token failed: refusing the drain", "err", err)
		return ""
	}
	return t
}

// serveDrainWait answers GET /drain/wait: it waits (up to drainWaitStart) for a drain to
// begin, then for it to end, and answers its status; 503 with the status when none began.
func (a *App) serveDrainWait(w http.ResponseWriter, r *http.Request) {
	select {
	case a.drainWaiters <- struct{}{}:
		defer func() { <-a.drainWaiters }()
	default:
		http.Error(w, "too many drain waiters", http.StatusServiceUnavailable)
		return
	}
	a.drainMu.Lock()
	begun := a.drainBegun
	a.drainMu.Unlock()
	t := time.NewTimer(drainWaitStart)
	defer t.Stop()
	select {
	case <-begun:
	case <-t.C:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(a.DrainState())
		return
	case <-r.Context().Done():
		return
	}
	a.drainMu.Lock()
	done := a.drainDone
	a.drainMu.Unlock()
	select {
	case <-done:
		writeJSON(w, a.DrainState())
	case <-r.Context().Done():
	}
}

// recoverFromDrain puts a drained sidecar back into service when the process was not
// terminated after its drain: a drain triggered outside a pod termination (or one whose
// termination was called off) must not leave the replica out of the Service for good.
// A SIGTERM afterwards drains again.
func (a *App) recoverFromDrain() {
	a.drainMu.Lock()
	defer a.drainMu.Unlock()
	if a.drainState != "drained" || a.stopping {
		return
	}
	a.Server.ResetAbort()
	a.Hub.Reopen()
	a.Server.SetDraining(false)
	a.Metrics.Draining(false)
	a.drainState = ""
	a.drainBegun = make(chan struct{})
	a.log.Info("Not terminated after the drain: serving again", "after", a.cfg.DrainRecoverAfter)
}

// DrainState reports the drain progress.
func (a *App) DrainState() DrainStatus {
	a.drainMu.Lock()
	defer a.drainMu.Unlock()
	st := a.drainInfo
	if a.drainState == "" {
		st.State = "serving"
	}
	st.InflightLeft = a.Server.Inflight()
	return st
}

// Drain runs the graceful drain once and blocks until it is done; later
// calls wait for the same drain (both containers' preStop hooks call it).
// Sequence (docs/drain.md):
//
//  1. fail readiness; answer new listens with ack + complete; keep serving
//     ordinary requests, each now with Connection: close;
//  2. wait DrainDelay for endpoint removal to propagate;
//  3. end every open listen with its complete result, spread evenly over
//     DrainJitter;
//  4. wait up to DrainBudget for forwarded requests in flight; answer any
//     still running with a JSON-RPC error carrying its id, and wait (up to
//     abortFlushWait) until those answers are written.
func (a *App) Drain() DrainStatus {
	a.drainMu.Lock()
	if a.drainState != "" {
		done := a.drainDone
		a.drainMu.Unlock()
		<-done
		return a.DrainState()
	}
	a.drainState = "draining"
	a.drainDone = make(chan struct{})
	close(a.drainBegun)
	a.drainInfo = DrainStatus{State: "draining", InflightAtStart: a.Server.Inflight()}
	a.drainMu.Unlock()

	start := time.Now()
	a.Server.SetDraining(true)
	a.Metrics.Draining(true)
	a.log.Info("Draining", "delay", a.cfg.DrainDelay, "jitter", a.cfg.DrainJitter, "budget", a.cfg.DrainBudget, "streams", a.Hub.Len())
	time.Sleep(a.cfg.DrainDelay)
	endStart := time.Now()
	n := a.Hub.EndAll(a.cfg.DrainJitter)
	endTook := time.Since(endStart)
	a.log.Info("Listen streams completed", "streams", n, "took", endTook)
	left := waitInflight(a.Server, a.cfg.DrainBudget)
	var aborted int64
	if left > 0 {
		a.log.Warn("Drain budget over: answering requests still in flight with an error", "inflight", left)
		a.Server.AbortInflight()
		waitInflight(a.Server, abortFlushWait)
		aborted = a.Server.Aborted()
	}
	a.drainMu.Lock()
	a.drainState = "drained"
	a.drainInfo.State = "drained"
	a.drainInfo.StreamsEnded = n
	a.drainInfo.EndStreamsMs = endTook.Milliseconds()
	a.drainInfo.InflightAtBudget = left
	a.drainInfo.InflightAborted = aborted
	a.drainInfo.DurationMs = time.Since(start).Milliseconds()
	a.Metrics.Drained(n, time.Since(start))
	st := a.drainInfo
	close(a.drainDone)
	if a.cfg.DrainRecoverAfter > 0 && !a.stopping {
		time.AfterFunc(a.cfg.DrainRecoverAfter, a.recoverFromDrain)
	}
	a.drainMu.Unlock()
	if a.tracing != nil {
		a.tracing.DrainSpan(start, st.StreamsEnded, st.InflightAborted)
	}
	a.log.Info("Drained", "streamsEnded", n, "inflightAborted", aborted, "inflightLeft", a.Server.Inflight(), "took", time.Since(start))
	return a.DrainState()
}

// waitInflight waits up to d for the forwarded requests in flight to finish
// and returns how many are left.
func waitInflight(s *sidecar.Server, d time.Duration) int64 {
	deadline := time.Now().Add(d)
	for {
		n := s.Inflight()
		if n == 0 || !time.Now().Before(deadline) {
			return n
		}
		time.Sleep(inflightPoll)
	}
}
