package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
)

// Catalog source timing.
const (
	// catalogFilePoll is how often --catalog-file is re-read.
	catalogFilePoll = 100 * time.Millisecond
	// reportBackoffFloor and reportBackoffCeiling bound retries of the
	// propagation report.
	reportBackoffFloor   = 200 * time.Millisecond
	reportBackoffCeiling = 30 * time.Second
	// reportTimeout bounds one report write.
	reportTimeout = 10 * time.Second
	// kubeQPS and kubeBurst are the sidecar's client-side rate limits: it
	// watches a handful of objects and writes one report per revision.
	kubeQPS   = 20
	kubeBurst = 40
)

// catalogWiring is the catalog overlay with its sources: the catalog
// ConfigMap (or file), the watched ConfigMaps/Secrets resources read, and
// the propagation reporter.
type catalogWiring struct {
	overlay  *overlay.Overlay
	log      *slog.Logger
	file     string
	cm       *kubeObjectRef
	refs     *kubeContents
	reporter *Reporter
	prop     *propagationLog
}

type kubeObjectRef struct{ namespace, name string }

func parseNamespacedName(s string) (*kubeObjectRef, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%q is not NAMESPACE/NAME", s)
	}
	return &kubeObjectRef{ns, name}, nil
}

// kubeClient loads client configuration the standard way (the explicit
// kubeconfig, else KUBECONFIG or ~/.kube/config, else in-cluster) and
// returns a REST client for the core/v1 API, which is all the sidecar
// reads and writes. It deliberately avoids client-go's full clientset: that
// registers every built-in API group at start-up, which would triple the
// sidecar's live heap and with it the garbage collector's work on every
// forwarded request (docs/performance.md).
func kubeClient(kubeconfig string) (rest.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	return NewKubeClient(cfg)
}

// NewKubeClient returns the sidecar's REST client for the core/v1 API from a client
// configuration: its rate limits, user agent and codec (kubeClient; the fleet benchmark's
// simulated sidecars use it too).
func NewKubeClient(cfg *rest.Config) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	cfg.UserAgent = "switchboard-sidecar"
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	// The core/v1 objects the sidecar watches, and the meta/v1 lists, watch
	// events and statuses around them.
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.ContentType == "" {
		cfg.ContentType = runtime.ContentTypeJSON
	}
	return rest.RESTClientFor(cfg)
}

// newCatalogWiring builds the overlay and its sources from the command
// line; it returns nil when no catalog source is configured.
func newCatalogWiring(cfg Config, hub *hub.Hub, up *upstream.Client, m *sidecar.Metrics) (*catalogWiring, error) {
	if cfg.CatalogConfigMap == "" && cfg.CatalogFile == "" {
		if cfg.ReportConfigMap != "" {
			return nil, errors.New("--report-configmap needs --catalog-configmap or --catalog-file")
		}
		return nil, nil
	}
	if cfg.CatalogConfigMap != "" && cfg.CatalogFile != "" {
		return nil, errors.New("set one of --catalog-configmap and --catalog-file")
	}
	w := &catalogWiring{log: cfg.Logger, file: cfg.CatalogFile, prop: &propagationLog{log: cfg.Logger}}
	var client rest.Interface
	needKube := cfg.CatalogConfigMap != "" || cfg.ReportConfigMap != ""
	if needKube {
		var err error
		if client, err = kubeClient(cfg.Kubeconfig); err != nil {
			return nil, err
		}
	}
	opts := overlay.Options{Hub: hub, Upstream: up, Logger: cfg.Logger, Observer: m, PageSize: cfg.PageSize,
		Published: w.prop.published}
	if cfg.CatalogConfigMap != "" {
		ref, err := parseNamespacedName(cfg.CatalogConfigMap)
		if err != nil {
			return nil, fmt.Errorf("--catalog-configmap: %w", err)
		}
		w.cm = ref
		w.refs = &kubeContents{client: client, namespace: ref.namespace, log: cfg.Logger, watchers: map[string]*refWatcher{}}
		opts.Contents = w.refs
	}
	if cfg.ReportConfigMap != "" {
		ref, err := parseNamespacedName(cfg.ReportConfigMap)
		if err != nil {
			return nil, fmt.Errorf("--report-configmap: %w", err)
		}
		if cfg.PodName == "" {
			return nil, errors.New("--report-configmap needs --pod-name")
		}
		w.reporter = newReporter(client, *ref, cfg.PodName, cfg.Logger, m)
		opts.Report = w.reporter.Set
	}
	w.overlay = overlay.New(opts)
	if w.refs != nil {
		w.refs.changed = w.overlay.ContentChanged
	}
	return w, nil
}

// run starts every part and returns when ctx ends.
func (w *catalogWiring) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.overlay.Run(ctx) })
	if w.reporter != nil {
		wg.Go(func() { w.reporter.Run(ctx) })
	}
	if w.refs != nil {
		wg.Go(func() { w.refs.run(ctx) })
	}
	switch {
	case w.file != "":
		wg.Go(func() { w.watchFile(ctx) })
	case w.cm != nil:
		wg.Go(func() { w.watchConfigMap(ctx) })
	}
	wg.Wait()
}

// watchFile applies the catalog file whenever its bytes change.
func (w *catalogWiring) watchFile(ctx context.Context) {
	var last []byte
	var lastErr string
	t := time.NewTicker(catalogFilePoll)
	defer t.Stop()
	for {
		data, err := os.ReadFile(w.file)
		switch {
		case err != nil:
			if err.Error() != lastErr {
				w.log.Warn("Reading the catalog file failed; still serving the last good catalog", "file", w.file, "err", err)
				lastErr = err.Error()
			}
		case last == nil || !bytes.Equal(data, last):
			last, lastErr = data, ""
			w.apply(data, "")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// apply applies one catalog revision just delivered, and notes its delivery for the
// propagation log unless it is the revision being served.
func (w *catalogWiring) apply(data []byte, revision string) {
	now := time.Now()
	if revision == "" {
		revision = catalog.Revision(data)
	}
	if _, serving := w.overlay.Catalog(); serving != revision {
		w.prop.arrived(revision, now)
	}
	_ = w.overlay.Apply(data, revision)
}

// nameWatch lists and watches exactly one object by name (RBAC by
// resourceNames allows list/watch only with this field selector).
func nameWatch(client rest.Interface, resource, namespace, name string) *cache.ListWatch {
	return cache.NewListWatchFromClient(client, resource, namespace,
		fields.OneTermEqualSelector("metadata.name", name))
}

// watchConfigMap applies each revision of the catalog ConfigMap. The
// informer's reflector relists and resumes on its own when the API server
// comes back; meanwhile the last good catalog keeps serving.
func (w *catalogWiring) watchConfigMap(ctx context.Context) {
	inf := cache.NewSharedIndexInformer(nameWatch(w.refs.client, "configmaps", w.cm.namespace, w.cm.name),
		&corev1.ConfigMap{}, 0, cache.Indexers{})
	apply := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != w.cm.name {
			return
		}
		data, ok := cm.Data[catalog.Key]
		if !ok {
			w.log.Warn("The catalog ConfigMap has no catalog key", "configMap", w.cm.namespace+"/"+w.cm.name, "key", catalog.Key)
		}
		w.apply([]byte(data), cm.Annotations[catalog.RevisionAnnotation])
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    apply,
		UpdateFunc: func(_, obj any) { apply(obj) },
		DeleteFunc: func(any) {
			w.log.Warn("The catalog ConfigMap was deleted; still serving the last good catalog", "configMap", w.cm.namespace+"/"+w.cm.name)
		},
	})
	w.log.Info("Watching the catalog ConfigMap", "configMap", w.cm.namespace+"/"+w.cm.name)
	inf.Run(ctx.Done())
}

// kubeContents watches exactly the ConfigMaps and Secrets the current
// catalog's resources reference, one informer per object. mu guards
// watchers, want and ctx.
type kubeContents struct {
	client    rest.Interface
	namespace string
	log       *slog.Logger
	changed   func()

	mu       sync.Mutex
	ctx      context.Context
	want     map[string]bool // "configmaps/<name>" or "secrets/<name>"
	watchers map[string]*refWatcher
}

type refWatcher struct {
	store  cache.Store
	synced cache.InformerSynced
	cancel context.CancelFunc
}

// SetRefs implements ContentSource.
func (k *kubeContents) SetRefs(configMaps, secrets []string) {
	want := map[string]bool{}
	for _, n := range configMaps {
		want["configmaps/"+n] = true
	}
	for _, n := range secrets {
		want["secrets/"+n] = true
	}
	k.mu.Lock()
	k.want = want
	k.reconcileLocked()
	k.mu.Unlock()
}

func (k *kubeContents) reconcileLocked() {
	if k.ctx == nil {
		return // run starts them
	}
	for key, w := range k.watchers {
		if !k.want[key] {
			w.cancel()
			delete(k.watchers, key)
		}
	}
	for key := range k.want {
		if k.watchers[key] != nil {
			continue
		}
		resource, name, _ := strings.Cut(key, "/")
		var obj runtime.Object = &corev1.ConfigMap{}
		if resource == "secrets" {
			obj = &corev1.Secret{}
		}
		inf := cache.NewSharedIndexInformer(nameWatch(k.client, resource, k.namespace, name), obj, 0, cache.Indexers{})
		notify := func(any) {
			if k.changed != nil {
				k.changed()
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: notify, UpdateFunc: func(_, o any) { notify(o) }, DeleteFunc: notify,
		})
		ctx, cancel := context.WithCancel(k.ctx)
		k.watchers[key] = &refWatcher{store: inf.GetStore(), synced: inf.HasSynced, cancel: cancel}
		go inf.Run(ctx.Done())
		// One more change once listed: the overlay's readiness (ContentsServed) asks Synced before
		// it reads the content, and the list's own event may have asked for a computation that
		// ran before Synced turned true; this one finds it true.
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				notify(nil)
			}
		}()
		k.log.Info("Watching a resource source", "object", k.namespace+"/"+key)
	}
}

// Synced reports whether every watched source has been listed once, so reads of ConfigMap- and
// Secret-backed resources answer with their content rather than "not found".
func (k *kubeContents) Synced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx == nil && len(k.want) > 0 {
		return false
	}
	for _, w := range k.watchers {
		if !w.synced() {
			return false
		}
	}
	return true
}

// run starts the watches and stops them when ctx ends.
func (k *kubeContents) run(ctx context.Context) {
	k.mu.Lock()
	k.ctx = ctx
	k.reconcileLocked()
	k.mu.Unlock()
	<-ctx.Done()
}

// Content implements ContentSource.
func (k *kubeContents) Content(secret bool, name, key string) ([]byte, bool) {
	resource := "configmaps/"
	if secret {
		resource = "secrets/"
	}
	k.mu.Lock()
	w := k.watchers[resource+name]
	k.mu.Unlock()
	if w == nil {
		return nil, false
	}
	obj, ok, err := w.store.GetByKey(k.namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		if v, ok := o.Data[key]; ok {
			return []byte(v), true
		}
		v, ok := o.BinaryData[key]
		return v, ok
	case *corev1.Secret:
		v, ok := o.Data[key]
		return v, ok
	}
	return nil, false
}

// tokenReviews returns a client for TokenReviews, loaded as kubeClient loads its own: a REST
// client for authentication.k8s.io/v1 only (not client-go's clientset, which registers every
// API group at start-up; see kubeClient).
func tokenReviews(kubeconfig string) (authn.TokenReviewer, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
	cfg.UserAgent = "switchboard-sidecar"
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &authv1.SchemeGroupVersion
	scheme := runtime.NewScheme()
	if err := authv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if cfg.ContentType == "" {
		cfg.ContentType = runtime.ContentTypeJSON
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return restTokenReviews{rc}, nil
}

type restTokenReviews struct{ rc rest.Interface }

func (c restTokenReviews) Create(ctx context.Context, tr *authv1.TokenReview, _ metav1.CreateOptions) (*authv1.TokenReview, error) {
	out := &authv1.TokenReview{}
	return out, c.rc.Post().Resource("tokenreviews").Body(tr).Do(ctx).Into(out)
}
