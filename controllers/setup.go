package controllers

import (
	"cmp"
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// Defaults of the manager's throughput settings (docs/performance.md, make bench-scale). A new
// MCPServer costs about 24 writes; 32 servers reconciled at once keep pace with a fleet created
// as fast as an API server on two cores accepts it, where 8 fell behind waiting on each write's
// latency. The client-side limit is headroom, not the guard: the API server's priority and
// fairness queues the manager's requests behind other clients' when it is busy.
const (
	DefaultQPS                     = 500
	DefaultBurst                   = 1000
	DefaultMaxConcurrentReconciles = 32
)

// DefaultAppearGrace is how long after an object's creation a missing MCPServer (for a tool,
// resource, prompt or access policy) or a missing ConfigMap or Secret (for a resource) is waited
// for with Reconciling=True instead of Stalled=True. A GitOps pipeline applies an MCPTool and its
// MCPServer, or an MCPResource and its ConfigMap, together, in an order of its own; the
// controller may look in between. Flux fails a Kustomization at once on a Stalled object, so
// without the grace the pipeline would fail on a state that passes by itself moments later.
const DefaultAppearGrace = 30 * time.Second

// Options configures the controllers.
type Options struct {
	// SidecarImage is the default sidecar image.
	SidecarImage string
	// MaxConcurrentReconciles is how many MCPServers are reconciled at once; 1 when zero.
	MaxConcurrentReconciles int
	// Namespaces the manager watches (--watch-namespaces); all when empty. The cache of exposed
	// ConfigMaps and Secrets watches the same.
	Namespaces []string
	// TrustDomain is the SPIFFE trust domain of the cluster's ServiceAccounts (--trust-domain);
	// DefaultTrustDomain when empty.
	TrustDomain string
	// AppearGrace is DefaultAppearGrace when zero.
	AppearGrace time.Duration
	// ItemSettle is DefaultItemSettle when zero; negative writes every item status at once.
	ItemSettle time.Duration
	// Sharded is set when the manager's cache holds one shard (kube.ShardCacheOptions).
	Sharded bool
}

// Leader election (cmd/manager) uses a Lease in the manager's own namespace (a namespaced Role:
// cluster-wide, a compromised manager could take over other components' leader Leases, such as
// kube-system's) and records core Events.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=switchboard-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Setup registers the field indexes and every Switchboard controller with the manager, and
// returns the MCPServer reconciler (tests call it directly).
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*MCPServerReconciler, error) {
	for _, obj := range []client.Object{&mcpv1alpha1.MCPTool{}, &mcpv1alpha1.MCPResource{}, &mcpv1alpha1.MCPPrompt{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, serverRefIndex, func(o client.Object) []string {
			return []string{serverRefOf(o)}
		}); err != nil {
			return nil, fmt.Errorf("indexing %T by %s: %w", obj, serverRefIndex, err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &mcpv1alpha1.MCPAccessPolicy{}, policyTargetIndex, policyTargets); err != nil {
		return nil, fmt.Errorf("indexing MCPAccessPolicy by %s: %w", policyTargetIndex, err)
	}
	trustDomain := cmp.Or(opts.TrustDomain, DefaultTrustDomain)
	grace := cmp.Or(opts.AppearGrace, DefaultAppearGrace)
	sources, err := newSourceCache(mgr, opts.Namespaces)
	if err != nil {
		return nil, fmt.Errorf("making the cache of exposed ConfigMaps and Secrets: %w", err)
	}
	if err := mgr.Add(sources); err != nil {
		return nil, err
	}
	servers := &MCPServerReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Sources:      sources,
		Scheme:       mgr.GetScheme(),
		Recorder:     mgr.GetEventRecorder("switchboard"),
		SidecarImage: opts.SidecarImage,
		TrustDomain:  trustDomain,
		Namespaces:   opts.Namespaces,
		AppearGrace:  grace,
		Sharded:      opts.Sharded,
		ItemSettle:   max(cmp.Or(opts.ItemSettle, DefaultItemSettle), 0),
		settle:       &settleClock{},
		applied:      &appliedMemo{},
		sourceReads:  &sourceReads{},
		own:          &ownWrites{},
		ownStatus:    &ownStatus{},
	}
	if err := servers.SetupWithManager(mgr, sources, max(opts.MaxConcurrentReconciles, 1)); err != nil {
		return nil, err
	}
	rec := mgr.GetEventRecorder("switchboard")
	for _, err := range []error{
		(&CatalogItemReconciler[*mcpv1alpha1.MCPTool]{Client: mgr.GetClient(), Recorder: rec, AppearGrace: grace}).SetupWithManager(mgr),
		(&CatalogItemReconciler[*mcpv1alpha1.MCPResource]{Client: mgr.GetClient(), Recorder: rec, AppearGrace: grace}).SetupWithManager(mgr),
		(&CatalogItemReconciler[*mcpv1alpha1.MCPPrompt]{Client: mgr.GetClient(), Recorder: rec, AppearGrace: grace}).SetupWithManager(mgr),
	} {
		if err != nil {
			return nil, err
		}
	}
	policies := &MCPAccessPolicyReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("switchboard"), TrustDomain: trustDomain, AppearGrace: grace}
	if err := policies.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return servers, nil
}
