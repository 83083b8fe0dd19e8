package controllers

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestHolds(t *testing.T) {
	live := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1", "extra": "kept"}, "resourceVersion": "7"},
		"spec": map[string]any{
			"replicas": int64(2),
			"ports":    []any{map[string]any{"port": int64(80), "protocol": "TCP"}},
		},
	}
	cases := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"subset with defaults filled in live", map[string]any{
			"metadata": map[string]any{"name": "a", "labels": map[string]any{"x": "1"}},
			"spec":     map[string]any{"replicas": int64(2), "ports": []any{map[string]any{"port": int64(80)}}},
		}, true},
		{"changed scalar", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{"changed label", map[string]any{"metadata": map[string]any{"labels": map[string]any{"x": "2"}}}, false},
		{"missing key", map[string]any{"spec": map[string]any{"paused": true}}, false},
		{"longer list", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}, map[string]any{"port": int64(81)}}}}, false},
		{"shorter list", map[string]any{"spec": map[string]any{"ports": []any{}}}, false},
		{"type differs", map[string]any{"spec": map[string]any{"replicas": "2"}}, false},
		{"map where live has a scalar", map[string]any{"spec": map[string]any{"replicas": map[string]any{"a": "b"}}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holds(live, tc.desired); got != tc.want {
				t.Fatalf("holds = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestAppliedHashChangesWithEveryField(t *testing.T) {
	a := map[string]any{"spec": map[string]any{"replicas": int64(2), "paused": false}}
	b := map[string]any{"spec": map[string]any{"replicas": int64(2)}} // a field no longer set
	c := map[string]any{"spec": map[string]any{"paused": false, "replicas": int64(2)}}
	if appliedHash(a) == appliedHash(b) {
		t.Fatal("dropping a field must change the hash (an apply would remove it)")
	}
	if appliedHash(a) != appliedHash(c) {
		t.Fatal("the hash must not depend on map order")
	}
}

// writeCounter counts the writes a reconciler sends.
type writeCounter struct {
	client.Client
	n *atomic.Int32
}

func (c writeCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c writeCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c writeCounter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c writeCounter) Status() client.SubResourceWriter { return statusCounter{c.Client.Status(), c.n} }

type statusCounter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (c statusCounter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (c statusCounter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

// TestAppliedHashIsStable pins AppliedAnnotation's value for two configurations: it is stored on
// every child, so a change of how it is computed would re-apply every child of every server once
// the new manager runs (HTML characters, a line separator and numbers included, which encoding/json
// escapes and formats in its own way).
func TestAppliedHashIsStable(t *testing.T) {
	for _, tc := range []struct {
		obj  child
		want string
	}{
		{corev1ac.ConfigMap("a", "ns").WithLabels(map[string]string{"x": "1"}).
			WithData(map[string]string{"k": "<v & w>", "é": "\u2028"}), "b640ead639fe70e46a6e6a29"},
		{corev1ac.Service("svc", "ns").WithSpec(corev1ac.ServiceSpec().
			WithPorts(corev1ac.ServicePort().WithPort(8080).WithTargetPort(intstr.FromInt32(9000)))), "04811692a7ff9cac9029ada4"},
	} {
		u, err := stampApplied(tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.GetAnnotations()[AppliedAnnotation]; got != tc.want {
			t.Errorf("%s %s: hash %s, want %s", *tc.obj.GetKind(), *tc.obj.GetName(), got, tc.want)
		}
	}
}

// stampApplied is what the reconciler applies for an apply configuration (alreadyApplied, with
// no memo): the configuration's fields, plus AppliedAnnotation with their hash.
func stampApplied(obj runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return stamp(raw, "")
}
