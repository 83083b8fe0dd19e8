// Command manager runs the Switchboard controllers.
package main

import (
	"flag"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/controllers"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/version"
	"github.com/switchboard-mcp/switchboard/internal/webhook"
)

// defaultGCPercent is the manager's GOGC unless the environment sets one.
const defaultGCPercent = 25

func main() {
	var (
		metricsAddr     string
		probeAddr       string
		leaderElection  bool
		sidecarImage    string
		watchNamespaces string
		webhookPort     int
		webhookTLS      = webhook.TLSOptions{}
		certMode        string
		webhookHost     string
		qps             float64
		burst           int
		concurrency     int
		pprofAddr       string
		trustDomain     string
		shardSelector   string
		lease           leaseTimes
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElection, "leader-elect", false, "Elect a leader so that only one manager replica reconciles.")
	flag.StringVar(&sidecarImage, "sidecar-image", "switchboard-sidecar:"+version.Version,
		"Sidecar image for servers that do not set spec.sidecar.image.")
	flag.StringVar(&watchNamespaces, "watch-namespaces", "",
		"Comma-separated namespaces to reconcile and serve; empty means all (which needs the ClusterRole).")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Port of the injection webhook server.")
	flag.StringVar(&webhookHost, "webhook-host", "", "Address the webhook server binds to; empty means every interface.")
	flag.Float64Var(&qps, "kube-api-qps", controllers.DefaultQPS,
		"Requests per second the manager may send to the API server (client-side limit; the API server's priority and fairness still applies).")
	flag.IntVar(&burst, "kube-api-burst", controllers.DefaultBurst, "Burst above --kube-api-qps.")
	flag.IntVar(&concurrency, "max-concurrent-reconciles", controllers.DefaultMaxConcurrentReconciles,
		"MCPServers reconciled at the same time.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "",
		"Address of Go's /debug/pprof endpoints (CPU and heap profiles), e.g. 127.0.0.1:6060; empty or 0 disables them. "+
			"They are unauthenticated: bind them to the loopback interface.")
	flag.StringVar(&trustDomain, "trust-domain", controllers.DefaultTrustDomain,
		"SPIFFE trust domain of this cluster's ServiceAccounts: a caller authenticated as ServiceAccount ns/sa is also "+
			"spiffe://<trust-domain>/ns/<ns>/sa/<sa> (MCPAccessPolicy rules[].source.identities).")
	flag.StringVar(&shardSelector, "watch-label-selector", "",
		"Run one shard of the fleet: reconcile only the MCPServers, MCPTools, MCPResources, MCPPrompts and MCPAccessPolicies this "+
			"label selector on "+inject.LabelShard+" selects, e.g. "+inject.LabelShard+"=shard1, or '!"+inject.LabelShard+"' for the "+
			"default shard; each shard elects its own leader (docs/sharding.md). Empty: every object.")
	flag.DurationVar(&lease.duration, "leader-elect-lease-duration", 15*time.Second,
		"How long the other replicas wait after the leader's last renewal before one takes the Lease over (the failover time when the leader dies).")
	flag.DurationVar(&lease.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew its Lease before it gives up leading and exits; raise it, with the lease duration, "+
			"where the API server can be slow to answer for seconds (a loaded control plane).")
	flag.DurationVar(&lease.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How often the leader renews, and the others try to acquire, the Lease.")
	flag.StringVar(&certMode, "webhook-cert-mode", string(webhook.CertSelfSigned),
		"Where the webhook's serving certificate comes from: self-signed (the manager issues, rotates and injects it), "+
			"cert-manager (mounted from a cert-manager Certificate; caBundle injected by cert-manager), or none (no injection webhook).")
	flag.StringVar(&webhookTLS.CertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Folder of the webhook's tls.crt and tls.key (the mounted Secret).")
	flag.StringVar(&webhookTLS.Namespace, "namespace", os.Getenv("POD_NAMESPACE"),
		"The manager's own namespace: never injected; holds the webhook Service and Secret. Defaults to $POD_NAMESPACE.")
	flag.StringVar(&webhookTLS.Service, "webhook-service-name", "switchboard-webhook", "Service in front of the webhook server (self-signed mode).")
	flag.StringVar(&webhookTLS.Secret, "webhook-secret-name", "switchboard-webhook-cert", "Secret holding the webhook's CA and certificate (self-signed mode).")
	flag.StringVar(&webhookTLS.Configuration, "webhook-configuration-name", "switchboard-injector",
		"MutatingWebhookConfiguration whose caBundle the manager keeps current (self-signed mode).")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	// The manager waits on the API server, not on its own CPU (1,000 servers: 46-54 CPU-seconds in
	// a cold start of 250-310 s, while the API server used 6 times that). A tighter GC trades a
	// little of that CPU for memory: the live heap is 70-80 MB at that size; Go's default
	// GOGC=100 let RSS peak at 239 MB, 50 at 173 MB, 25 at 146 MB for about a fifth more CPU
	// (docs/performance.md, "Fleet scale"). $GOGC overrides.
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "Registering the built-in kinds")
		os.Exit(1)
	}
	if err := mcpv1alpha1.AddToScheme(scheme); err != nil {
		log.Error(err, "Registering the Switchboard kinds")
		os.Exit(1)
	}

	webhookTLS.Mode = webhook.CertMode(certMode)
	shard, err := kube.ParseShardSelector(shardSelector)
	if err != nil {
		log.Error(err, "Parsing --watch-label-selector")
		os.Exit(1)
	}
	cacheOptions := kube.ShardCacheOptions(shard)
	var namespaces []string
	if watchNamespaces != "" {
		cacheOptions.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(watchNamespaces, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				cacheOptions.DefaultNamespaces[ns] = cache.Config{}
				namespaces = append(namespaces, ns)
			}
		}
	}
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		WebhookServer:          crwebhook.NewServer(crwebhook.Options{Host: webhookHost, Port: webhookPort, CertDir: webhookTLS.CertDir}),
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		PprofBindAddress:       pprofAddr,
		LeaderElection:         leaderElection,
		LeaderElectionID:       kube.ShardLeaderElectionID(shard),
		// In a cluster the Lease lives in the pod's namespace; outside one, in --namespace.
		LeaderElectionNamespace: webhookTLS.Namespace,
		// Hand leadership over at once on shutdown instead of waiting a full lease.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &lease.duration,
		RenewDeadline:                 &lease.renewDeadline,
		RetryPeriod:                   &lease.retryPeriod,
		Cache:                         cacheOptions,
	})
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := controllers.Setup(ctx, mgr, controllers.Options{SidecarImage: sidecarImage, MaxConcurrentReconciles: concurrency, Namespaces: namespaces, TrustDomain: trustDomain, Sharded: !shard.Empty()}); err != nil {
		log.Error(err, "Setting up the controllers")
		os.Exit(1)
	}
	webhookReady, err := webhook.ServeWhenReady(mgr, webhookTLS, webhook.Options{SidecarImage: sidecarImage, OperatorNamespace: webhookTLS.Namespace})
	if err != nil {
		log.Error(err, "Setting up the injection webhook")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("webhook", webhookReady); err != nil {
		log.Error(err, "Adding the webhook readiness check")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Adding the readiness check")
		os.Exit(1)
	}

	log.Info("Starting the manager", "version", version.Version)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Running the manager")
		os.Exit(1)
	}
}

// leaseTimes are the leader-election durations (--leader-elect-*). client-go's leader election
// refuses, when the manager starts, a lease duration not above the renew deadline, or a renew
// deadline not above 1.2 retry periods.
type leaseTimes struct {
	duration, renewDeadline, retryPeriod time.Duration
}
