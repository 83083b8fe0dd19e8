package controllers

import (
	"context"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestAppliedMemoKeepsDrift: the memo skips the comparison only for the live object it was made
// from. A child someone changed (a new resourceVersion) is compared again and applied, as is a
// configuration that changed; the same resourceVersion with the same configuration is trusted
// without looking at the object again.
func TestAppliedMemoKeepsDrift(t *testing.T) {
	r, children := settledChildren(t)
	r.applied = &appliedMemo{}
	cache := r.Client.(*cacheReader)
	ctx := context.Background()
	server := types.NamespacedName{Namespace: "tools", Name: "weather"}
	var deployment child
	for _, c := range children {
		if ptr.Deref(c.GetKind(), "") == "Deployment" {
			deployment = c
		}
	}
	live := &appsv1.Deployment{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "tools", Name: "weather"}, live); err != nil {
		t.Fatal(err)
	}
	check := func(step string, obj child, want bool) {
		t.Helper()
		desired, held, err := r.alreadyApplied(ctx, server, obj)
		if err != nil {
			t.Fatal(err)
		}
		if held != want {
			t.Fatalf("%s: alreadyApplied = %t, want %t", step, held, want)
		}
		if !held && desired.GetAnnotations()[AppliedAnnotation] == "" {
			t.Fatalf("%s: the object to apply has no %s", step, AppliedAnnotation)
		}
	}

	check("first look, compared in full", deployment, true)
	if e, ok := r.applied.lookup(server, childKey{"apps/v1", "Deployment", "tools", "weather"}); !ok || e.resourceVersion != live.ResourceVersion {
		t.Fatalf("the memo holds %+v (%t) after the Deployment was found applied at %s", e, ok, live.ResourceVersion)
	}
	check("unchanged", deployment, true)

	// Someone scales the Deployment (kubectl edit): a new resourceVersion, a field that differs.
	drifted := live.DeepCopy()
	drifted.Spec.Replicas = ptr.To[int32](7)
	drifted.ResourceVersion = "500"
	cache.add(drifted)
	check("edited by someone else", deployment, false)
	check("still edited", deployment, false)

	// Another configuration's hash on an object that otherwise holds this one: not applied.
	stale := live.DeepCopy()
	stale.Annotations[AppliedAnnotation] = "0123456789abcdef01234567"
	stale.ResourceVersion = "400"
	cache.add(stale)
	check("another hash", deployment, false)

	// The edit is undone: a newer resourceVersion, every field as applied. The full comparison
	// finds it applied, and the memo moves to the new resourceVersion.
	restored := live.DeepCopy()
	restored.ResourceVersion = "501"
	cache.add(restored)
	check("restored", deployment, true)
	if e, _ := r.applied.lookup(server, childKey{"apps/v1", "Deployment", "tools", "weather"}); e.resourceVersion != "501" {
		t.Fatalf("the memo holds resourceVersion %q, want 501", e.resourceVersion)
	}

	// A new configuration at the same resourceVersion is compared in full: not applied. The
	// entry of the applied one stays.
	s := builderServer()
	s.Spec.Replicas = ptr.To[int32](4)
	scaled, err := deploymentFor(s, inject.NamesFor(s), inject.ConfigFor(s, "sidecar:1"))
	if err != nil {
		t.Fatal(err)
	}
	check("new configuration", scaled, false)
	check("configuration back", deployment, true)

	// The memo trusts the resourceVersion alone: an object changed without a new one (which the
	// API server never serves) still counts as applied, which shows that it was not compared.
	impossible := live.DeepCopy()
	impossible.Spec.Replicas = ptr.To[int32](9)
	impossible.ResourceVersion = "501"
	cache.add(impossible)
	check("same resourceVersion", deployment, true)

	// A server that is gone takes its entries along.
	r.applied.forget(server)
	if _, ok := r.applied.lookup(server, childKey{"apps/v1", "Deployment", "tools", "weather"}); ok {
		t.Fatal("the entries of a forgotten server remain")
	}
	check("forgotten, compared in full", deployment, false)
}

// TestAppliedMemoConcurrent: reconciles of different servers use the memo at once (run with
// -race), and a server forgotten meanwhile is only checked in full again.
func TestAppliedMemoConcurrent(t *testing.T) {
	r, children := settledChildren(t)
	r.applied = &appliedMemo{}
	var wg sync.WaitGroup
	for i := range 8 {
		server := types.NamespacedName{Namespace: "tools", Name: fmt.Sprintf("server-%d", i)}
		wg.Go(func() {
			for j := range 50 {
				for _, c := range children {
					if _, held, err := r.alreadyApplied(context.Background(), server, c); err != nil || !held {
						t.Errorf("%s: alreadyApplied = %t, %v", server, held, err)
						return
					}
				}
				if j%10 == 0 {
					r.applied.forget(server)
				}
			}
		})
	}
	wg.Wait()
}
