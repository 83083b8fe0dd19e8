package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// ExposeToLabel is the label by which the owner of a ConfigMap or Secret lets MCPServers serve
// it through ConfigMap- and Secret-backed MCPResources: its value names the servers (in the
// object's namespace), joined by "." when there are several (a server's name is a DNS-1035
// label, which has no dots). Without it the controller grants the sidecar no access, leaves the
// resource out of the catalog and says so in the MCPResource's status: whoever may create
// MCPResources must not be able to publish a Secret they may not read (the controller would
// grant the sidecar access with its own rights, not theirs). Setting a label needs patch on the
// object, which also returns its content: the opt-in comes from someone who can read it.
const ExposeToLabel = "mcp.switchboard.dev/expose-to"

// Reserved Secret name suffixes: <server>-drain-token and <server>-sidecar-session are
// Switchboard's own (internal/inject.NamesFor). The MCPResource's CEL refuses them too.
var reservedSecretSuffixes = []string{"-drain-token", "-sidecar-session"}

// exposedServers are the servers an object's ExposeToLabel names.
func exposedServers(l map[string]string) []string {
	v, ok := l[ExposeToLabel]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ".")
}

func exposedTo(l map[string]string, server string) bool {
	return slices.Contains(exposedServers(l), server)
}

// sourceCache holds the metadata (never the content) of the ConfigMaps and Secrets that carry
// ExposeToLabel, and nothing else: the manager's main cache holds only Switchboard's own objects
// of these kinds (kube.CacheOptions), and controller-runtime allows one label selector per kind
// and cache. GetCache makes the manager start and sync it before the controllers, as its own.
type sourceCache struct{ cache.Cache }

func (c sourceCache) GetCache() cache.Cache { return c.Cache }

// newSourceCache makes the cache of exposed sources, over the namespaces the manager watches
// (all when empty). It needs no RBAC beyond list and watch on ConfigMaps and Secrets, which the
// manager holds for its own objects.
func newSourceCache(mgr ctrl.Manager, namespaces []string) (sourceCache, error) {
	has, err := labels.NewRequirement(ExposeToLabel, selection.Exists, nil)
	if err != nil {
		return sourceCache{}, err
	}
	opts := cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*has),
		DefaultTransform:     cache.TransformStripManagedFields(),
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	return sourceCache{c}, err
}

// sourceMeta is an empty metadata-only object of kind ("ConfigMap" or "Secret").
func sourceMeta(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// watchSources enqueues the servers an exposed ConfigMap or Secret names, before and after a
// change: adding or removing the label (leaving the selector is a delete), renaming the servers,
// editing the content (a missing key may have appeared) and deleting the object. A deleted
// object's read is forgotten (reads).
func watchSources(b *ctrl.Builder, c sourceCache, reads *sourceReads) *ctrl.Builder {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], objs ...client.Object) {
		for _, o := range objs {
			for _, name := range exposedServers(o.GetLabels()) {
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
			}
		}
	}
	for _, kind := range []string{"ConfigMap", "Secret"} {
		h := handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueue(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueue(q, e.ObjectOld, e.ObjectNew)
			},
			DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				reads.forget(kind, client.ObjectKeyFromObject(e.Object))
				enqueue(q, e.Object)
			},
		}
		b = b.WatchesRawSource(source.Kind[client.Object](c, sourceMeta(kind), h))
	}
	return b
}

// sourceProblem is why a ConfigMap- or Secret-backed resource cannot be read; the zero value
// means it can.
type sourceProblem struct {
	reason  mcpv1alpha1.ConditionReason
	message string
	// inCatalog: the source is granted and the resource stays in the catalog (only its key is
	// missing, and reads succeed once it appears). Otherwise the sidecar gets no access to the
	// object and the resource is left out.
	inCatalog bool
}

// waits reports whether the problem may pass by itself moments after the resource's creation
// (an object applied together with it), so it is Reconciling during the appear grace.
func (p sourceProblem) waits() bool {
	return p.reason == mcpv1alpha1.ReasonSourceNotFound || p.reason == mcpv1alpha1.ReasonSourceNotExposed
}

// checkSource decides whether the ConfigMap or Secret behind a resource of server may be
// served. An object that is not exposed to the server and one that does not exist get the same
// answer, so the status tells an MCPResource's author nothing about objects not exposed to
// them. The content of an object is read only once it is exposed (for the key).
func (r *MCPServerReconciler) checkSource(ctx context.Context, server string, res *mcpv1alpha1.MCPResource) (sourceProblem, error) {
	src := res.Spec.Source
	var ref *mcpv1alpha1.KeyReference
	kind := ""
	switch {
	case src.ConfigMapKeyRef != nil:
		ref, kind = src.ConfigMapKeyRef, "ConfigMap"
	case src.SecretKeyRef != nil:
		ref, kind = src.SecretKeyRef, "Secret"
	default:
		return sourceProblem{}, nil
	}
	notExposed := sourceProblem{reason: mcpv1alpha1.ReasonSourceNotExposed, message: fmt.Sprintf(
		"%s %q is not exposed to MCPServer %q, or does not exist: the sidecar serves only ConfigMaps and Secrets whose owner labelled them for the server. "+
			"Label it: kubectl label %s -n %s %s %s=%s (several servers: join their names with '.'); the resource is then served without a restart",
		kind, ref.Name, server, strings.ToLower(kind), res.Namespace, ref.Name, ExposeToLabel, server)}
	key := client.ObjectKey{Namespace: res.Namespace, Name: ref.Name}
	m := sourceMeta(kind)
	err := r.Sources.Get(ctx, key, m)
	if apierrors.IsNotFound(err) {
		return notExposed, nil
	}
	if err != nil {
		return sourceProblem{}, err
	}
	if p := refusedSource(kind, m, ""); p.reason != "" || !exposedTo(m.Labels, server) {
		return cmpProblem(p, notExposed), nil
	}
	// Exposed: read it from the API server (once per resourceVersion) for the key, and for its
	// type, which metadata lacks.
	rd, found, err := r.sourceReads.read(ctx, r.APIReader, kind, m)
	if err != nil {
		return sourceProblem{}, err
	}
	if !found {
		return notExposed, nil
	}
	if p := refusedSource(kind, &rd.meta, rd.secretType); p.reason != "" || !exposedTo(rd.meta.Labels, server) {
		return cmpProblem(p, notExposed), nil
	}
	if _, has := rd.keys[ref.Key]; !has {
		return sourceProblem{reason: mcpv1alpha1.ReasonSourceNotFound, inCatalog: true,
			message: fmt.Sprintf("%s %q has no key %q; add it, and reads of this resource succeed without a restart", kind, ref.Name, ref.Key)}, nil
	}
	return sourceProblem{}, nil
}

// cmpProblem is p when it is a problem, else otherwise.
func cmpProblem(p, otherwise sourceProblem) sourceProblem {
	if p.reason != "" {
		return p
	}
	return otherwise
}

// refusedSource refuses, whatever their labels, the objects a sidecar must never serve:
// ServiceAccount tokens (the type; from metadata alone, the annotation the API server requires
// on them) and Switchboard's own objects (controlled by an MCPServer, labelled as managed by
// Switchboard, or, for Secrets, named like a server's drain token or session key).
func refusedSource(kind string, o metav1.Object, secretType corev1.SecretType) sourceProblem {
	refuse := func(why string) sourceProblem {
		return sourceProblem{reason: mcpv1alpha1.ReasonSourceRefused, message: fmt.Sprintf(
			"%s %q %s, which Switchboard never serves, whatever its labels; point spec.source at a %s of your own", kind, o.GetName(), why, kind)}
	}
	if kind == "Secret" {
		if secretType == corev1.SecretTypeServiceAccountToken || o.GetAnnotations()[corev1.ServiceAccountNameKey] != "" {
			return refuse("is a ServiceAccount token")
		}
		for _, suffix := range reservedSecretSuffixes {
			if strings.HasSuffix(o.GetName(), suffix) {
				return refuse("is named like a Switchboard Secret (<server>" + suffix + ")")
			}
		}
	}
	if c := metav1.GetControllerOfNoCopy(o); c != nil && c.Kind == "MCPServer" && strings.HasPrefix(c.APIVersion, mcpv1alpha1.GroupVersion.Group+"/") {
		return refuse("belongs to MCPServer " + c.Name)
	}
	if o.GetLabels()[inject.LabelManagedBy] == inject.ManagedBy {
		return refuse("is managed by Switchboard")
	}
	return sourceProblem{}
}
