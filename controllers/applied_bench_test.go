package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// cacheReader serves Get from typed objects held in memory, as controller-runtime's informer
// cache does: a deep copy of the cached object, or with client.UnsafeDisableDeepCopy a shallow
// copy that shares its maps and slices. Any other call of the embedded (nil) Client panics;
// Apply fails the test, since the children it serves are already applied.
type cacheReader struct {
	client.Client
	tb      testing.TB
	objects map[cacheKey]client.Object
}

type cacheKey struct {
	t   reflect.Type
	key client.ObjectKey
}

func (c *cacheReader) add(obj client.Object) {
	if c.objects == nil {
		c.objects = map[cacheKey]client.Object{}
	}
	c.objects[cacheKey{reflect.TypeOf(obj), client.ObjectKeyFromObject(obj)}] = obj
}

func (c *cacheReader) Get(_ context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	obj, ok := c.objects[cacheKey{reflect.TypeOf(out), key}]
	if !ok {
		return fmt.Errorf("%T %s is not cached", out, key)
	}
	var o client.GetOptions
	o.ApplyOptions(opts)
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		obj = obj.DeepCopyObject().(client.Object)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return nil
}

func (c *cacheReader) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	c.tb.Error("an applied child was applied again")
	return nil
}

// settledChildren returns the apply configurations of a Managed server's children (the catalog
// and status ConfigMaps, the ServiceAccount, Role and RoleBinding, the Service, the Deployment and
// the PodDisruptionBudget), and a reconciler whose cache holds each as its last apply left it.
func settledChildren(tb testing.TB) (*MCPServerReconciler, []child) {
	tb.Helper()
	s := builderServer()
	n := inject.NamesFor(s)
	c := catalogFor(s, items{Tools: []mcpv1alpha1.MCPTool{*newTool(s.Namespace, "forecast", s.Name, "forecast")}})
	encoded, err := catalog.Encode(c)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := deploymentFor(s, n, inject.ConfigFor(s, "sidecar:1"))
	if err != nil {
		tb.Fatal(err)
	}
	children := []child{catalogConfigMapFor(s, n, encoded), statusConfigMapFor(s, n), serviceAccountFor(s, n),
		roleFor(s, n, c), roleBindingFor(s, n), serviceFor(s, n), d, pdbFor(s, n)}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	cache := &cacheReader{tb: tb}
	for i, obj := range children {
		desired, err := stampApplied(obj)
		if err != nil {
			tb.Fatal(err)
		}
		fresh, err := scheme.New(desired.GroupVersionKind())
		if err != nil {
			tb.Fatal(err)
		}
		live := fresh.(client.Object)
		b, err := json.Marshal(desired.Object)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(b, live); err != nil {
			tb.Fatal(err)
		}
		live.GetObjectKind().SetGroupVersionKind(desired.GroupVersionKind())
		live.SetResourceVersion(fmt.Sprint(100 + i))
		cache.add(live)
	}
	return &MCPServerReconciler{Client: cache, Scheme: scheme}, children
}

// BenchmarkApplySettled measures what apply costs for the children of a server that is already
// applied (a reconcile of an unchanged server, the common case at fleet scale), with the memo the
// manager uses (appliedMemo): one op applies every child once, and sends nothing.
func BenchmarkApplySettled(b *testing.B) {
	r, children := settledChildren(b)
	r.applied = &appliedMemo{}
	applyEach(b, r, children)
}

// BenchmarkApplySettledFirstLook is BenchmarkApplySettled without the memo: every child is
// converted and compared in full, as on the first reconcile of a server after the manager starts,
// or after every change of a child.
func BenchmarkApplySettledFirstLook(b *testing.B) {
	r, children := settledChildren(b)
	applyEach(b, r, children)
}

// applyEach is one op of the two benchmarks: every child applied once.
func applyEach(b *testing.B, r *MCPServerReconciler, children []child) {
	server := client.ObjectKeyFromObject(builderServer())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range children {
			if err := r.apply(ctx, server, c); err != nil {
				b.Fatal(err)
			}
		}
	}
}
