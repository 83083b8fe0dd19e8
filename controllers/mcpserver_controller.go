// Package controllers reconciles MCPServers and their MCPTools, MCPResources and MCPPrompts
// into the objects that run them: the compiled catalog, the Deployment with the native sidecar,
// the Service, the sidecar's RBAC, a PodDisruptionBudget and a NetworkPolicy.
package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// MCPServerReconciler reconciles an MCPServer.
type MCPServerReconciler struct {
	client.Client
	// APIReader reads what the cache does not hold: the content of exposed resource sources
	// (for their keys) and pods before their report is pruned.
	APIReader client.Reader
	// Sources reads the metadata of the ConfigMaps and Secrets labelled ExposeToLabel
	// (newSourceCache); it holds no other object of users.
	Sources  client.Reader
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// SidecarImage is the default sidecar image (--sidecar-image).
	SidecarImage string
	// TrustDomain is the SPIFFE trust domain of the cluster's ServiceAccounts (--trust-domain).
	TrustDomain string
	// Namespaces the manager reconciles (--watch-namespaces); all when empty. The TokenReview
	// bindings are cluster-scoped: those of servers elsewhere belong to another manager.
	Namespaces []string
	// AppearGrace is how long after its creation a missing ConfigMap or Secret of a resource is
	// waited for (DefaultAppearGrace).
	AppearGrace time.Duration
	// Sharded is set when the manager runs one shard (--watch-label-selector): its cache holds
	// the servers of the shard, but the pods of every server (kube.ShardCacheOptions).
	Sharded bool
	// ItemSettle is how long the first status of an item's generation waits for the replicas'
	// reports (DefaultItemSettle); zero, or no settle clock, writes at once.
	ItemSettle time.Duration

	settle *settleClock
	// applied remembers which children were found applied (appliedMemo); nil checks every child
	// in full.
	applied *appliedMemo
	// sourceReads remembers what was read of exposed ConfigMaps and Secrets, by resourceVersion;
	// nil reads them on every reconcile.
	sourceReads *sourceReads
	// own remembers the reconciler's own writes to children, whose events need no reconcile
	// (ownWrites); nil reconciles on every event.
	own *ownWrites
	// ownStatus remembers the reconciler's last status write of each server, for reads from a
	// cache that has not seen it yet (ownStatus); nil reads the cache as it is.
	ownStatus *ownStatus
}

// scope is what the phases of one reconcile share: the server, and what each phase computed or
// observed for the next and for the status.
type scope struct {
	server *mcpv1alpha1.MCPServer
	before *mcpv1alpha1.MCPServer
	// now is when the reconcile started, and grace the reconciler's AppearGrace.
	now   time.Time
	grace time.Duration
	names inject.ObjectNames
	cfg   inject.Config
	// deployment is the Managed server's Deployment, built by validate.
	deployment *appsv1ac.DeploymentApplyConfiguration

	items      items
	resolution resolution
	// policies are the MCPAccessPolicies that target the server.
	policies []mcpv1alpha1.MCPAccessPolicy
	catalog  *catalog.Catalog
	encoded  []byte
	// revision is the catalog revision stored in the catalog ConfigMap after this reconcile.
	revision        string
	tooLarge        bool
	tooLargeMessage string
	// sourceProblems: accepted MCPResource name -> why its ConfigMap or Secret cannot be read
	// (absent: it can, or the resource has no such source).
	sourceProblems map[string]sourceProblem
	// credentials is what checkCredentials found about the Secret of
	// spec.auth.upstreamCredentials (nil without it).
	credentials *credentialsCheck

	// failedChildren are the children the API server refused in this reconcile.
	failedChildren childErrors

	observed bool
	workload workload
	// reports are the sidecars' reports of the ready pods, parsed once (parseReports).
	reports reports
	pods    []corev1.Pod
	// goneReports are the pods whose reports the status ConfigMap still holds although the API
	// server says they no longer exist.
	goneReports []string
}

type phase func(context.Context, *scope) (ctrl.Result, error)

// +kubebuilder:rbac:groups=mcp.switchboard.dev,resources=mcpservers;mcptools;mcpresources;mcpprompts,verbs=get;list;watch
// +kubebuilder:rbac:groups=mcp.switchboard.dev,resources=mcpservers/status;mcptools/status;mcpresources/status;mcpprompts/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=switchboard-sidecar-tokenreviewer
// ClusterRoleBindings: one per server whose sidecars validate ServiceAccount tokens, binding
// the ClusterRole switchboard-sidecar-tokenreviewer (create tokenreviews, shipped with the
// manager) to the sidecar's ServiceAccount (tokenReviewBindingFor). bind is granted on exactly
// that ClusterRole, so the manager cannot bind any other; it holds no tokenreviews right itself.
// Secrets: the manager caches only its own (label selected) and the metadata of those labelled
// ExposeToLabel; it reads the content of a user's Secret only once the Secret is exposed to a
// server, to check the key. RBAC cannot select by label, so it still holds get/list/watch on every
// Secret it may see: list/watch for those label-selected caches, and get because RBAC lets it
// grant a sidecar's Role only what it holds itself. It creates and patches Secrets of its own per
// server: the drain token (<server>-drain-token), the session key (<server>-sidecar-session), and
// for External servers the token Secret of <server>-sidecar (<server>-sidecar-token, filled in by
// the cluster's token controller; no serviceaccounts/token right is needed).

// Reconcile turns one MCPServer into its children and tells the truth in its status.
func (r *MCPServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	server := &mcpv1alpha1.MCPServer{}
	if err := r.Get(ctx, req.NamespacedName, server); err != nil {
		if apierrors.IsNotFound(err) {
			r.applied.forget(req.NamespacedName)
			r.ownStatus.forget(req.NamespacedName)
			// A ClusterRoleBinding cannot be owned by a namespaced server: remove it here.
			return ctrl.Result{}, r.removeTokenReviewBinding(ctx, req.Namespace, req.Name)
		}
		return ctrl.Result{}, err
	}
	r.ownStatus.freshen(server)
	s := &scope{server: server, before: server.DeepCopy(), names: inject.NamesFor(server), now: time.Now(), grace: r.AppearGrace}
	s.cfg = inject.ConfigFor(server, r.SidecarImage)
	defer func() {
		failure := retErr
		if errors.Is(retErr, errItemChanged) {
			// Another writer changed an item after it was read (returned alone, below): not a
			// failure of the server, whose status says what the phases found; the reconcile is
			// retried on fresh reads.
			failure = nil
		}
		held, err := r.patchStatus(ctx, s, failure)
		retErr = errors.Join(retErr, err)
		if held > 0 && (result.RequeueAfter == 0 || held < result.RequeueAfter) {
			result.RequeueAfter = held
		}
		if retErr == nil {
			result = waitEnds(result)
		}
	}()
	if !server.DeletionTimestamp.IsZero() {
		r.applied.forget(req.NamespacedName)
		r.ownStatus.forget(req.NamespacedName)
		// Owner references garbage-collect the children, but not the cluster-scoped binding.
		return ctrl.Result{}, r.removeTokenReviewBinding(ctx, server.Namespace, server.Name)
	}
	// The phases apply the children and read what the status is decided from; they write
	// nothing else.
	for _, p := range []phase{r.validate, r.ensureOwnSecrets, r.compileCatalog, r.applyChildren, r.observe} {
		res, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if res.RequeueAfter > 0 && (result.RequeueAfter == 0 || res.RequeueAfter < result.RequeueAfter) {
			result.RequeueAfter = res.RequeueAfter
		}
	}
	held, changed, err := r.writeItemStatusAndPruneReports(ctx, s)
	if err != nil {
		return ctrl.Result{}, errors.Join(s.failedChildren.orNil(), err)
	}
	if len(s.failedChildren) > 0 {
		return ctrl.Result{}, s.failedChildren
	}
	if changed != nil {
		return ctrl.Result{}, changed
	}
	if held > 0 && (result.RequeueAfter == 0 || held < result.RequeueAfter) {
		result.RequeueAfter = held
	}
	return result, nil
}

// waitEnds is the result of a reconcile that looks again after a wait (RequeueAfter: a status
// held for the replicas' reports, a source's appear grace): the look follows, at followPriority,
// whatever the reconcile was queued for.
func waitEnds(result ctrl.Result) ctrl.Result {
	if result.RequeueAfter > 0 {
		result.Priority = new(followPriority)
	}
	return result
}

// validate renders a Managed server's Deployment: its pod template must take the sidecar. The
// API schema (CEL) rejects every spec known not to, and a name that cannot name the Service.
func (r *MCPServerReconciler) validate(_ context.Context, s *scope) (ctrl.Result, error) {
	if s.server.Spec.Mode != mcpv1alpha1.WorkloadExternal {
		d, err := deploymentFor(s.server, s.names, s.cfg)
		if err != nil {
			return ctrl.Result{}, reconcile.TerminalError(err)
		}
		s.deployment = d
	}
	return ctrl.Result{}, nil
}

// compileCatalog lists the server's tools, resources and prompts, decides which are accepted,
// checks the ConfigMaps and Secrets of the accepted resources, and compiles and encodes the
// catalog of what may be served.
func (r *MCPServerReconciler) compileCatalog(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	if s.items, err = listItems(ctx, r.Client, s.server.Namespace, s.server.Name); err != nil {
		return ctrl.Result{}, err
	}
	s.resolution = resolve(s.items)
	result, err := r.checkSources(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	served := s.resolution.accepted
	served.Resources = slices.DeleteFunc(slices.Clone(served.Resources), func(res mcpv1alpha1.MCPResource) bool {
		p, ok := s.sourceProblems[res.Name]
		return ok && !p.inCatalog
	})
	var policies mcpv1alpha1.MCPAccessPolicyList
	if err := r.List(ctx, &policies, client.InNamespace(s.server.Namespace), client.MatchingFields{policyTargetIndex: s.server.Name}); err != nil {
		return ctrl.Result{}, err
	}
	s.policies = policies.Items
	s.catalog = catalogFor(s.server, served)
	s.catalog.Auth = authFor(s.server, s.names, r.TrustDomain)
	s.catalog.Access = accessFor(s.server, s.policies, r.TrustDomain)
	s.catalog.Audit = auditFor(s.server)
	if s.credentials, err = r.checkCredentials(ctx, s.server); err != nil {
		return ctrl.Result{}, err
	}
	if s.catalog.Auth != nil {
		s.catalog.Auth.UpstreamCredentials = credentialsFor(s.server, s.credentials != nil && s.credentials.readable)
	}
	if s.encoded, err = catalog.Encode(s.catalog); err != nil {
		return ctrl.Result{}, fmt.Errorf("encoding the catalog: %w", err)
	}
	if err := catalog.Validate(s.catalog); err != nil {
		// The API schema should make this impossible; the sidecar would reject it.
		return ctrl.Result{}, reconcile.TerminalError(fmt.Errorf("the compiled catalog is invalid: %w", err))
	}
	s.revision = catalog.Revision(s.encoded)
	if len(s.encoded) > catalog.MaxBytes {
		s.tooLarge = true
		s.tooLargeMessage = fmt.Sprintf("the compiled catalog is %d bytes, more than the %d a ConfigMap can hold; "+
			"sidecars keep serving the previous revision; move large resource contents to ConfigMap- or Secret-backed MCPResources",
			len(s.encoded), catalog.MaxBytes)
		s.revision = ""
		prev := &corev1.ConfigMap{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.CatalogConfigMap}, prev); err == nil {
			s.revision = prev.Annotations[catalog.RevisionAnnotation]
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	return result, nil
}

// childStep is one object the server owns and how to bring it to the wanted state.
type childStep struct {
	kind, name string
	sync       func(context.Context) error
}

// children lists the server's children in the order they are applied: the sidecar's Role, the
// catalog (unless it is too large: then the previous one stays) and the status ConfigMap for the
// sidecars' reports, the sidecar's ServiceAccount and RoleBinding, the Service, and the
// Deployment, PodDisruptionBudget and NetworkPolicy, or their removal when the server does not
// want them (External mode, one replica, spec.networkPolicy). The Secrets come first
// (ensureOwnSecrets). The Role comes before the catalog because a sidecar watches a ConfigMap or
// Secret as soon as the catalog names it: granted after, the sidecar's first list is forbidden
// and client-go retries it about a second later, a second in which the resource answers "not
// found" and every replica's /readyz fails. (A source the catalog stops naming is revoked
// first; the sidecar stops watching it when the catalog arrives.)
func (r *MCPServerReconciler) children(s *scope) []childStep {
	apply := func(obj child) childStep {
		return childStep{kind: ptr.Deref(obj.GetKind(), ""), name: ptr.Deref(obj.GetName(), ""),
			sync: func(ctx context.Context) error { return r.apply(ctx, client.ObjectKeyFromObject(s.server), obj) }}
	}
	remove := func(obj client.Object, kind, name string) childStep {
		return childStep{kind: kind, name: name, sync: func(ctx context.Context) error { return r.deleteOwned(ctx, s, obj, name) }}
	}
	out := []childStep{apply(roleFor(s.server, s.names, s.catalog))}
	if !s.tooLarge {
		out = append(out, apply(catalogConfigMapFor(s.server, s.names, s.encoded)))
	}
	out = append(out,
		apply(statusConfigMapFor(s.server, s.names)),
		apply(serviceAccountFor(s.server, s.names)),
		apply(roleBindingFor(s.server, s.names)),
		apply(serviceFor(s.server, s.names)))
	if s.server.Spec.Mode == mcpv1alpha1.WorkloadExternal {
		out = append(out,
			childStep{kind: "Secret", name: s.names.SidecarTokenSecret, sync: func(ctx context.Context) error { return r.ensureSidecarTokenSecret(ctx, s) }},
			remove(&appsv1.Deployment{}, "Deployment", s.names.Deployment))
	} else {
		out = append(out, apply(s.deployment)) // built, and its injection checked, by validate
	}
	if wantsPDB(s.server) {
		out = append(out, apply(pdbFor(s.server, s.names)))
	} else {
		out = append(out, remove(&policyv1.PodDisruptionBudget{}, "PodDisruptionBudget", s.names.PodDisruptionBudget))
	}
	if wantsNetworkPolicy(s.server) {
		out = append(out, apply(networkPolicyFor(s.server, s.names)))
	} else {
		out = append(out, remove(&networkingv1.NetworkPolicy{}, "NetworkPolicy", s.names.NetworkPolicy))
	}
	if wantsTokenReview(s.server) {
		out = append(out, apply(tokenReviewBindingFor(s.server, s.names)))
	} else {
		out = append(out, childStep{kind: "ClusterRoleBinding", name: tokenReviewBindingName(s.server.Namespace, s.server.Name),
			sync: func(ctx context.Context) error {
				return r.removeTokenReviewBinding(ctx, s.server.Namespace, s.server.Name)
			}})
	}
	return out
}

// applyChildren brings every child to its wanted state on its own: a child the API server
// refuses (a quota, an admission policy, a full Service IP range) does not keep the others
// from being applied. The failures are collected; Reconcile returns them together, so the
// server is retried with the controller's rate-limited backoff, and the Ready condition names
// each failed child with the API server's message and what to fix.
func (r *MCPServerReconciler) applyChildren(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, c := range r.children(s) {
		if err := c.sync(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Applying a child failed; applying the others", "kind", c.kind, "name", c.name)
			s.failedChildren = append(s.failedChildren, childError{kind: c.kind, namespace: s.names.Namespace, name: c.name, err: err})
		}
	}
	return ctrl.Result{}, nil
}

// observe reads the Deployment, the pods and the sidecars' reports, and finds the reports of
// pods that no longer exist (writeItemStatusAndPruneReports removes them).
func (r *MCPServerReconciler) observe(ctx context.Context, s *scope) (ctrl.Result, error) {
	w := workload{External: s.server.Spec.Mode == mcpv1alpha1.WorkloadExternal, Replicas: 1}
	if s.server.Spec.Replicas != nil {
		w.Replicas = *s.server.Spec.Replicas
	}
	if !w.External {
		d := &appsv1.Deployment{}
		err := r.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.Deployment}, d)
		switch {
		case err == nil:
			w.Deployment = d
		case !apierrors.IsNotFound(err):
			return ctrl.Result{}, err
		}
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(s.names.Namespace), client.MatchingLabels{inject.LabelServer: s.server.Name}); err != nil {
		return ctrl.Result{}, err
	}
	s.pods = pods.Items
	p := propagation{Revision: s.revision, TooLarge: s.tooLarge, TooLargeMessage: s.tooLargeMessage}
	for i := range pods.Items {
		if kube.PodReady(&pods.Items[i]) {
			p.ReadyPods = append(p.ReadyPods, pods.Items[i].Name)
		}
	}
	slices.Sort(p.ReadyPods)
	w.ReadyPods = int32(len(p.ReadyPods))

	status := &corev1.ConfigMap{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.StatusConfigMap}, status); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	}
	p.Reports = status.Data
	gone, err := r.goneReports(ctx, s.names.Namespace, status.Data, pods.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.workload, s.reports, s.goneReports, s.observed = w, parseReports(p), gone, true
	return ctrl.Result{}, nil
}

// goneReports returns the pods that have a report but no longer exist, sorted. The cache may
// not have seen a brand-new pod yet, so a pod is gone only when the API server says so.
func (r *MCPServerReconciler) goneReports(ctx context.Context, namespace string, reports map[string]string, pods []corev1.Pod) ([]string, error) {
	known := map[string]bool{}
	for _, p := range pods {
		known[p.Name] = true
	}
	var gone []string
	for _, name := range slices.Sorted(maps.Keys(reports)) {
		if known[name] {
			continue
		}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}})
		switch {
		case apierrors.IsNotFound(err):
			gone = append(gone, name)
		case err != nil:
			return nil, err
		}
	}
	return gone, nil
}

// checkSources decides which ConfigMaps and Secrets of accepted resources may be served
// (checkSource). Exposing, editing or deleting one is watched (watchSources), so nothing is
// polled: a server looks again only when the grace of a new resource ends, to turn it Stalled
// on time.
func (r *MCPServerReconciler) checkSources(ctx context.Context, s *scope) (ctrl.Result, error) {
	var result ctrl.Result
	s.sourceProblems = map[string]sourceProblem{}
	for _, res := range s.resolution.accepted.Resources {
		p, err := r.checkSource(ctx, s.server.Name, &res)
		if err != nil {
			return ctrl.Result{}, err
		}
		if p.reason == "" {
			continue
		}
		s.sourceProblems[res.Name] = p
		if left := graceLeft(&res, s.now, s.grace); p.waits() && left > 0 && (result.RequeueAfter == 0 || left < result.RequeueAfter) {
			result.RequeueAfter = left
		}
	}
	return result, nil
}

// writeItemStatusAndPruneReports is the last step, run once every phase succeeded. It writes
// what the reconcile decided about objects other than the server and its children: the
// Accepted and Published status of every tool, resource and prompt (itemStatuses), and the
// removal of the reports of pods that are gone (found by observe). The server's own status is
// written after it, once, by the deferred patchStatus. changed (errItemChanged) names the items
// whose status another writer changed since they were read; they are decided again on retry.
// An item whose status waits for the replicas' reports (DefaultItemSettle) is not written yet;
// held is when to look again if no report comes first (0: nothing held).
func (r *MCPServerReconciler) writeItemStatusAndPruneReports(ctx context.Context, s *scope) (held time.Duration, changed, err error) {
	var errs []error
	var stale []string
	awaiting := r.ItemSettle > 0 && r.settle != nil && awaitingReplicas(s)
	wait := settleWait(s, r.ItemSettle)
	for _, u := range itemStatuses(s) {
		if awaiting && settles(u) {
			if left := r.settle.left(u.object, s.now, wait); left > 0 {
				if held == 0 || left < held {
					held = left
				}
				continue
			}
		}
		if awaiting {
			r.settle.forget(u.object.GetUID())
		}
		err := setItemStatus(ctx, r.Client, r.Recorder, u)
		if apierrors.IsConflict(err) {
			stale = append(stale, u.object.GetName())
			continue
		}
		errs = append(errs, err)
	}
	if len(stale) > 0 {
		changed = fmt.Errorf("%w: %s", errItemChanged, strings.Join(stale, ", "))
	}
	if len(s.goneReports) > 0 {
		status := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.names.Namespace, Name: s.names.StatusConfigMap}}
		ctrl.LoggerFrom(ctx).Info("Pruning catalog reports of deleted pods", "configMap", client.ObjectKeyFromObject(status), "pods", s.goneReports)
		gone := map[string]any{}
		for _, name := range s.goneReports {
			gone[name] = nil
		}
		patch, _ := json.Marshal(map[string]any{"data": gone})
		errs = append(errs, r.Patch(ctx, status, client.RawPatch(types.MergePatchType, patch)))
	}
	return held, changed, errors.Join(errs...)
}

// errItemChanged is returned when an item's status changed between the read it was decided from
// and its patch (setItemStatus's optimistic lock). The reconcile is retried, with the
// controller's backoff, on fresh reads.
var errItemChanged = errors.New("the status of these items changed since they were read; deciding it again")

// patchStatus writes the status serverStatus decides, once and only when it changed, and
// records an Event for every condition change that says something (emitConditionEvents). A
// status that waits for the replicas' reports of a new catalog revision (holdsServerStatus), or
// that only tells of more progress toward Ready less than progressSettle after the last
// (holdsProgress), is not written yet: held is when to look again if nothing else comes first
// (0: nothing held).
func (r *MCPServerReconciler) patchStatus(ctx context.Context, s *scope, reconcileErr error) (held time.Duration, err error) {
	decided := serverStatus(s, reconcileErr)
	if r.ItemSettle > 0 && r.settle != nil && s.server.DeletionTimestamp.IsZero() {
		var version string
		var wait time.Duration
		switch {
		case holdsServerStatus(s, reconcileErr, s.before.Status, decided):
			version, wait = "revision "+s.before.Status.CatalogRevision, r.ItemSettle
		case holdsProgress(s, reconcileErr, s.before.Status, decided):
			version, wait = "progress "+s.before.ResourceVersion, progressSettle
		}
		if version != "" {
			if left := r.settle.hold(s.server.UID, version, s.now, wait); left > 0 {
				return left, nil
			}
		}
		r.settle.forget(s.server.UID)
	}
	s.server.Status = decided
	emitConditionEvents(r.Recorder, s.server, s.before.Status.Conditions, s.server.Status.Conditions)
	if c, ok := driftChanged(s.before.Status.Conditions, s.server.Status.Conditions); ok && r.Recorder != nil {
		r.Recorder.Eventf(s.server, nil, corev1.EventTypeWarning, c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
	if equality.Semantic.DeepEqual(s.before.Status, s.server.Status) {
		return 0, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Patching MCPServer status", "revision", s.server.Status.CatalogRevision)
	if err := r.Status().Patch(ctx, s.server, client.MergeFrom(s.before)); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	r.ownStatus.wrote(s.before.ResourceVersion, s.server)
	return 0, nil
}

// emitConditionEvents records an Event for a condition whose status or reason changed, with the
// event reason equal to the condition reason, when that asks for or tells something a person
// acts on:
//   - it reaches a Warning reason (something to fix);
//   - it reaches its good state from a Warning reason (what was fixed took effect);
//   - Ready reaches True (the server serves, all its conditions in their good state).
//
// A Normal wait (any other state, and Reconciling in any Normal state) clears by itself and asks
// nothing of anyone: for the Deployment, for a ready replica, for the sidecars' report. Every
// server starts in them and a catalog edit passes through them; the return from a wait to the
// good state is told once, by Ready. At 1,000 servers one Event per condition reaching its good
// state was 6 Events per server of a cold start and 3 per fleet-wide MCPTool edit, a fifth of
// Switchboard's writes (docs/performance.md, "Fleet scale"). Ready repeats the reason of the
// condition it summarises, so its Event is left out when that condition's Event says the same.
func emitConditionEvents(rec events.EventRecorder, obj runtime.Object, before, after []metav1.Condition) {
	if rec == nil {
		return
	}
	seen := map[string]bool{}
	for _, c := range after {
		old := meta.FindStatusCondition(before, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		if eventType(c.Reason) == corev1.EventTypeNormal {
			recovered := old != nil && eventType(old.Reason) == corev1.EventTypeWarning && !waiting(c)
			ready := c.Type == string(mcpv1alpha1.ConditionReady) && c.Status == metav1.ConditionTrue
			if !recovered && !ready {
				continue
			}
		}
		if seen[c.Reason] {
			continue
		}
		seen[c.Reason] = true
		rec.Eventf(obj, nil, eventType(c.Reason), c.Reason, "Reconcile", "%s=%s: %s", c.Type, c.Status, c.Message)
	}
}

// waiting reports whether a condition in a Normal state is waiting rather than settled: not in
// its good state, which is True, or False for the conditions True signals trouble with
// (Stalled, ToolsDrifted). Reconciling (kstatus: True while work is in progress) only ever marks
// progress, whose end the other conditions report.
func waiting(c metav1.Condition) bool {
	switch mcpv1alpha1.ConditionType(c.Type) {
	case mcpv1alpha1.ConditionReconciling:
		return true
	case mcpv1alpha1.ConditionStalled, mcpv1alpha1.ConditionToolsDrifted:
		return c.Status != metav1.ConditionFalse
	}
	return c.Status != metav1.ConditionTrue
}

// child is the apply configuration of one child object, as the builders make it.
type child interface {
	runtime.ApplyConfiguration
	GetAPIVersion() *string
	GetKind() *string
	GetNamespace() *string
	GetName() *string
}

// apply server-side-applies a child of server with the controller's field owner, forcing
// ownership of the fields it sets. It sends only the fields the builder set, so defaults the API
// server fills in never cause a diff, and an unchanged child is not written. The configuration
// carries its own hash (AppliedAnnotation); when the cached child already holds all of it, no
// request is sent.
func (r *MCPServerReconciler) apply(ctx context.Context, server types.NamespacedName, obj child) error {
	desired, held, err := r.alreadyApplied(ctx, server, obj)
	if err != nil || held {
		return err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applying child", "kind", ptr.Deref(obj.GetKind(), ""), "name", ptr.Deref(obj.GetName(), ""))
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return err
	}
	r.own.wrote(childKeyOf(obj), desired.GetResourceVersion()) // the apply's answer
	return nil
}

// childKeyOf names the child obj.
func childKeyOf(obj child) childKey {
	return childKey{apiVersion: ptr.Deref(obj.GetAPIVersion(), ""), kind: ptr.Deref(obj.GetKind(), ""),
		namespace: ptr.Deref(obj.GetNamespace(), ""), name: ptr.Deref(obj.GetName(), "")}
}

// alreadyApplied reports whether the cached child holds every field of obj stamped with its hash
// (stampApplied), and when it does not, returns the stamped object to apply. The cheap checks
// come first: a child found holding the same configuration at the same resourceVersion
// (appliedMemo) holds it still, and one whose AppliedAnnotation is another hash does not; only
// the rest is converted and compared field by field (holdsApplied).
func (r *MCPServerReconciler) alreadyApplied(ctx context.Context, server types.NamespacedName, obj child) (*unstructured.Unstructured, bool, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, false, err
	}
	sum := sha256.Sum256(raw)
	key := childKeyOf(obj)
	live := r.cachedChild(ctx, key)
	hash := ""
	if e, ok := r.applied.lookup(server, key); ok && e.sum == sum {
		if live != nil && e.resourceVersion != "" && live.GetResourceVersion() == e.resourceVersion {
			return nil, true, nil
		}
		hash = e.hash
	}
	desired, err := stamp(raw, hash)
	if err != nil {
		return nil, false, err
	}
	hash = desired.GetAnnotations()[AppliedAnnotation]
	if live == nil || live.GetAnnotations()[AppliedAnnotation] != hash || !holdsApplied(live, desired.Object) {
		return desired, false, nil
	}
	r.applied.remember(server, key, appliedEntry{sum: sum, hash: hash, resourceVersion: live.GetResourceVersion()})
	return nil, true, nil
}

// cachedChild returns the cached object of a child, or nil when the cache holds none. It is not
// deep-copied (client.UnsafeDisableDeepCopy): it shares its maps, slices and pointers with the
// cache's object, which other reconciles read at the same time, so it must only be read, never
// changed. A Deployment's deep copy is hundreds of allocations, for an object that is only read.
func (r *MCPServerReconciler) cachedChild(ctx context.Context, key childKey) client.Object {
	fresh, err := r.Scheme.New(schema.FromAPIVersionAndKind(key.apiVersion, key.kind))
	if err != nil {
		return nil
	}
	live, ok := fresh.(client.Object)
	if !ok || r.Get(ctx, client.ObjectKey{Namespace: key.namespace, Name: key.name}, live, client.UnsafeDisableDeepCopy) != nil {
		return nil
	}
	return live
}

// ensureSidecarTokenSecret creates the token Secret of <server>-sidecar for an External
// server's sidecars (sidecarTokenSecretFor) when it does not exist; the token controller fills
// it in. It comes after the ServiceAccount in children: the token controller deletes a token
// Secret whose ServiceAccount does not exist.
func (r *MCPServerReconciler) ensureSidecarTokenSecret(ctx context.Context, s *scope) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.SidecarTokenSecret}, &corev1.Secret{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	err = r.Create(ctx, sidecarTokenSecretFor(s.server, s.names), client.FieldOwner(FieldOwner))
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Created moments ago (the cache lags), or someone else's: the sidecars must not get the
	// token of another ServiceAccount.
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.SidecarTokenSecret}, sec); err != nil {
		return err
	}
	if !metav1.IsControlledBy(sec, s.server) || sec.Annotations[corev1.ServiceAccountNameKey] != s.names.ServiceAccount {
		return fmt.Errorf("secret %s/%s exists but is not Switchboard's token of ServiceAccount %s; delete or rename it",
			s.names.Namespace, s.names.SidecarTokenSecret, s.names.ServiceAccount)
	}
	return nil
}

// ensureSessionSecret creates the session Secret when it does not exist. It never rewrites the
// key: that would end every 2025-era session of the server (a deleted Secret is created again
// with a new key; sidecars read it at start, so pods started afterwards use the new one). A
// Secret of that name the server does not control is refused (notOwned), never adopted.
func (r *MCPServerReconciler) ensureSessionSecret(ctx context.Context, s *scope) error {
	// Read from the cache, which holds Switchboard's own Secrets (kube.CacheOptions), as the drain
	// token is: a settled server costs no request.
	key := client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.SessionSecret}
	sec := &corev1.Secret{}
	err := r.Get(ctx, key, sec)
	if err == nil {
		return notOwned(s.server, sec)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	err = r.Create(ctx, sessionSecretFor(s.server, s.names), client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		// The cache lags behind a Secret created moments ago, or does not hold one created
		// without Switchboard's label: ask the API server whose it is.
		if err := r.APIReader.Get(ctx, key, sec); err != nil {
			return err
		}
		return notOwned(s.server, sec)
	}
	return err
}

// deleteOwned deletes a child this server owns, if it exists.
func (r *MCPServerReconciler) deleteOwned(ctx context.Context, s *scope, obj client.Object, name string) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: s.names.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(obj, s.server) {
		return nil
	}
	kind := ""
	if gvk, err := apiutil.GVKForObject(obj, r.Scheme); err == nil {
		kind = gvk.Kind
	}
	ctrl.LoggerFrom(ctx).Info("Deleting unwanted child", "kind", kind, "name", name)
	return client.IgnoreNotFound(r.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}))
}

// removeTokenReviewBinding deletes the server's ClusterRoleBinding to the TokenReview
// ClusterRole, if the cache holds one (so a server that never had one costs no request).
func (r *MCPServerReconciler) removeTokenReviewBinding(ctx context.Context, namespace, name string) error {
	crb := &rbacv1.ClusterRoleBinding{}
	err := r.Get(ctx, client.ObjectKey{Name: tokenReviewBindingName(namespace, name)}, crb)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !boundFor(crb, namespace, name) {
		return nil // not ours to delete
	}
	ctrl.LoggerFrom(ctx).Info("Deleting the sidecar's TokenReview binding", "clusterRoleBinding", crb.Name)
	return client.IgnoreNotFound(r.Delete(ctx, crb, client.Preconditions{UID: ptr.To(crb.UID)}))
}

// SetupWithManager watches the server, its children, its pods, and the tools, resources and
// prompts that reference it.
func (r *MCPServerReconciler) SetupWithManager(mgr ctrl.Manager, sources sourceCache, concurrency int) error {
	toServer := enqueueServerOf()
	fromPod := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[inject.LabelServer]
		if name == "" {
			return nil
		}
		key := types.NamespacedName{Namespace: o.GetNamespace(), Name: name}
		if r.Sharded && r.Get(ctx, key, &mcpv1alpha1.MCPServer{}) != nil {
			return nil // another shard's server (or gone: its own deletion is reconciled)
		}
		return []reconcile.Request{{NamespacedName: key}}
	})
	items := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	// Changes of what a server serves are reconciled first; changes that follow from them (its
	// children, its pods, its sidecars' reports) and creations of servers and items
	// (createsFollow) after them (followPriority).
	child := owned(mgr.GetClient())
	b := ctrl.NewControllerManagedBy(mgr).
		Watches(&mcpv1alpha1.MCPServer{}, createsFollow(&handler.EnqueueRequestForObject{}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.Deployment{}, child).
		Watches(&corev1.Secret{}, child)
	// The events of the reconciler's own applies of the other children are dropped (ownWrites).
	for _, o := range []client.Object{&corev1.Service{}, &corev1.ServiceAccount{}, &corev1.ConfigMap{}, &rbacv1.Role{},
		&rbacv1.RoleBinding{}, &policyv1.PodDisruptionBudget{}, &networkingv1.NetworkPolicy{}} {
		gvk, err := apiutil.GVKForObject(o, mgr.GetScheme())
		if err != nil {
			return err
		}
		b = b.Watches(o, child, builder.WithPredicates(r.own.notOwnWrite(gvk.GroupVersion().String(), gvk.Kind)))
	}
	b = b.Watches(&corev1.Pod{}, following(fromPod)).
		Watches(&mcpv1alpha1.MCPTool{}, createsFollow(toServer), items).
		Watches(&mcpv1alpha1.MCPResource{}, createsFollow(toServer), items).
		Watches(&mcpv1alpha1.MCPPrompt{}, createsFollow(toServer), items).
		Watches(&mcpv1alpha1.MCPAccessPolicy{}, enqueueTargets(), items).
		// Every binding's server, also each one that exists when the manager starts: a server
		// deleted while the manager was down is NotFound, and its binding removed.
		Watches(&rbacv1.ClusterRoleBinding{}, following(handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if ns, name, ok := bindingServer(o); ok && (len(r.Namespaces) == 0 || slices.Contains(r.Namespaces, ns)) {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
			}
			return nil
		})))
	return watchSources(b, sources, r.sourceReads).
		Named("mcpserver").
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}
