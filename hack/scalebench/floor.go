package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// floorManager, as -manager, runs the floor instead of Switchboard.
const floorManager = "none"

// -floor-objects: the floor creates a Deployment and a Service per server, or all the objects
// Switchboard creates for one.
const (
	floorObjectsLeast = "least"
	floorObjectsAll   = "all"
	// floorObjectsApplied: all, each written with server-side apply (as Switchboard writes its
	// children) instead of a create.
	floorObjectsApplied = "all-applied"
)

// floor is the least work any operator can make the cluster do for the fleet, as a baseline for
// the cold phase: it runs each declared MCPServer as a Deployment of one pod behind a Service,
// and says on every object (the server and each of its items) that it is Ready, once, when the
// Deployment is available (with -floor-objects least: no RBAC, no NetworkPolicy, no Secrets, no
// ConfigMaps; never a catalog compiled, an Event or a report). It reacts at once: the benchmark
// hands it each server as soon as its objects are created (no watch of MCPServers, no cache lag)
// and it writes each status without reading it.
// Its writes carry the user agent "floor". What the cold phase measures with it is what this
// machine's control plane, kube-controller-manager, scheduler and kwok cost per server with an
// operator that costs nothing.
type floor struct {
	c     client.Client
	tools int
	all   bool // -floor-objects all or all-applied
	apply bool // -floor-objects all-applied
	queue chan func(context.Context) error

	mu     sync.Mutex
	index  map[string]int // Deployment (server) name -> server index, until its statuses are written
	failed error
}

// floorWorkers: the manager's default concurrent reconciles.
const floorWorkers = 32

func startFloor(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, c cache.Cache, o options) (*floor, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "floor"
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	f := &floor{c: cl, tools: o.tools, all: o.floorObjects != floorObjectsLeast, apply: o.floorObjects == floorObjectsApplied, queue: make(chan func(context.Context) error, 2*o.servers), index: map[string]int{}}
	deployments, err := c.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return nil, err
	}
	if _, err := deployments.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    f.deployment,
		UpdateFunc: func(_, d any) { f.deployment(d) },
	}); err != nil {
		return nil, err
	}
	for range floorWorkers {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case work := <-f.queue:
					if err := work(ctx); err != nil && ctx.Err() == nil {
						f.mu.Lock()
						f.failed = err
						f.mu.Unlock()
					}
				}
			}
		}()
	}
	return f, nil
}

// err is the first write that failed, if any: the run does not count then.
func (f *floor) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// declare queues the writes of server i's children (floorChildren).
func (f *floor) declare(i int, uid types.UID) {
	name := serverName(i)
	f.mu.Lock()
	f.index[name] = i
	f.mu.Unlock()
	f.queue <- func(ctx context.Context) error {
		for _, obj := range floorChildren(name, uid, f.all) {
			if err := f.write(ctx, obj); err != nil {
				return fmt.Errorf("floor: writing %T %s: %w", obj, obj.GetName(), err)
			}
		}
		return nil
	}
}

// write creates obj, or applies it (server-side apply, field manager "floor", without the
// empty fields a typed object marshals, as Switchboard's apply configurations have none).
func (f *floor) write(ctx context.Context, obj client.Object) error {
	if !f.apply {
		return f.c.Create(ctx, obj)
	}
	gvk, err := apiutil.GVKForObject(obj, f.c.Scheme())
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return f.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("floor"), client.ForceOwnership)
}

// deployment queues the status writes of a server whose Deployment became available.
func (f *floor) deployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || !deploymentAvailable(d) {
		return
	}
	f.mu.Lock()
	i, pending := f.index[d.Name]
	delete(f.index, d.Name)
	f.mu.Unlock()
	if pending {
		f.queue <- func(ctx context.Context) error { return f.ready(ctx, i) }
	}
}

// ready writes Ready=True on server i and each of its items, one status patch each. The cold
// phase creates every object once, so each is at generation 1.
func (f *floor) ready(ctx context.Context, i int) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":1,"conditions":[`+
		`{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"`+now+
		`","reason":"Available","message":"The floor's Deployment is available."}]}}`))
	for _, obj := range fleetObjects(i, f.tools) {
		key := client.ObjectKeyFromObject(obj)
		if err := f.c.Status().Patch(ctx, obj, patch); err != nil {
			return fmt.Errorf("floor: status of %T %s: %w", obj, key, err)
		}
	}
	return nil
}

// floorChildren are a server's Deployment (the MCP server and a sidecar container, as
// Switchboard's pods have; kwok runs neither) and Service, owned by the server as Switchboard's
// are; with all, also the other objects Switchboard creates for a server (ServiceAccount, Role,
// RoleBinding, NetworkPolicy, two Secrets, the catalog and status ConfigMaps), of about their size.
func floorChildren(name string, uid types.UID, all bool) []client.Object {
	labels := map[string]string{inject.LabelServer: name}
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: namespace, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: mcpv1alpha1.GroupVersion.String(), Kind: "MCPServer", Name: name, UID: uid,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}
	}
	container := func(n, image string) corev1.Container {
		return corev1.Container{Name: n, Image: image, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}
	}
	objs := []client.Object{
		&appsv1.Deployment{
			ObjectMeta: meta(name),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{
						container("server", "example/mcp-server:1"), container("sidecar", "example/sidecar:1")}},
				},
			},
		},
		&corev1.Service{
			ObjectMeta: meta(name),
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
				Name: "mcp", Port: 8080, TargetPort: intstr.FromInt32(8080)}}},
		},
	}
	if !all {
		return objs
	}
	key := strings.Repeat("0123456789abcdef", 4) // 32 bytes, hex-encoded, as Switchboard's keys
	return append(objs,
		&corev1.ServiceAccount{ObjectMeta: meta(name + "-sidecar")},
		&rbacv1.Role{ObjectMeta: meta(name + "-sidecar"), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}, ResourceNames: []string{name + "-catalog"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "patch"}, ResourceNames: []string{name + "-catalog-status"}},
		}},
		&rbacv1.RoleBinding{ObjectMeta: meta(name + "-sidecar"),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + "-sidecar"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name + "-sidecar", Namespace: namespace}}},
		&networkingv1.NetworkPolicy{ObjectMeta: meta(name), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{
				Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))}}}}}},
		&corev1.Secret{ObjectMeta: meta(name + "-drain-token"), Data: map[string][]byte{"token": []byte(key)}},
		&corev1.Secret{ObjectMeta: meta(name + "-sidecar-session"), Data: map[string][]byte{"key": []byte(key)}},
		// The fleet's catalog of twelve items encodes to 2.3 KB; this stands in for it, a little
		// larger (not under catalog.Key: the fleet watch would decode it).
		&corev1.ConfigMap{ObjectMeta: meta(name + "-catalog"), Data: map[string]string{"floor": strings.Repeat("x", 3<<10)}},
		&corev1.ConfigMap{ObjectMeta: meta(name + "-catalog-status")},
	)
}
