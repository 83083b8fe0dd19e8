// Command manager runs the Switchboard controllers.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/controllers"
	"github.com/switchboard-mcp/switchboard/internal/version"
)

func main() {
	var (
		metricsAddr    string
		probeAddr      string
		leaderElection bool
		sidecarImage   string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElection, "leader-elect", false, "Elect a leader so that only one manager replica reconciles.")
	flag.StringVar(&sidecarImage, "sidecar-image", "switchboard-sidecar:"+version.Version,
		"Sidecar image for servers that do not set spec.sidecar.image.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
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

	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElection,
		LeaderElectionID:       "switchboard-manager.mcp.switchboard.dev",
		// Hand leadership over at once on shutdown instead of waiting a full lease.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controllers.CacheOptions(),
	})
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := controllers.Setup(ctx, mgr, controllers.Options{SidecarImage: sidecarImage}); err != nil {
		log.Error(err, "Setting up the controllers")
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
