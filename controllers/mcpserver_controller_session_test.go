//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestSessionSecret: every MCPServer gets a Secret holding the key its sidecars sign 2025-era
// session ids with, created once (a reconcile never rotates it: that would end every
// session), owned by the server, different per server; the sidecar reads it from its
// environment and gets --legacy-clients from spec.sidecar.legacyClients (default Serve).
func TestSessionSecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	a, b := newServer(ns, "alpha", 1), newServer(ns, "beta", 1)
	b.Spec.Sidecar = &mcpv1alpha1.SidecarSpec{LegacyClients: mcpv1alpha1.LegacyClientsReject}
	mustCreate(t, a, b)

	secret := func(name string) *corev1.Secret {
		t.Helper()
		s := &corev1.Secret{}
		eventually.Succeeds(t, "the session Secret of "+name, func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-sidecar-session"}, s)
		})
		return s
	}
	sa, sb := secret("alpha"), secret("beta")
	keyA := string(sa.Data[inject.SessionKeySecretKey])
	if len(keyA) != 64 || keyA == string(sb.Data[inject.SessionKeySecretKey]) {
		t.Fatalf("session keys: alpha %q, beta %q: want 64 hex characters, different per server", keyA, sb.Data[inject.SessionKeySecretKey])
	}
	if !metav1.IsControlledBy(sa, a) {
		t.Errorf("the session Secret is not owned by its server: %+v", sa.OwnerReferences)
	}
	// Reconciling again keeps the key.
	for range 3 {
		reconcileServer(t, client.ObjectKeyFromObject(a))
	}
	if again := secret("alpha"); string(again.Data[inject.SessionKeySecretKey]) != keyA || again.ResourceVersion != sa.ResourceVersion {
		t.Errorf("a reconcile rewrote the session key (resourceVersion %s -> %s)", sa.ResourceVersion, again.ResourceVersion)
	}

	sidecarOf := func(name string) corev1.Container {
		t.Helper()
		var c corev1.Container
		eventually.Succeeds(t, "the Deployment of "+name, func() error {
			d := &appsv1.Deployment{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
				return err
			}
			for _, ic := range d.Spec.Template.Spec.InitContainers {
				if ic.Name == inject.ContainerName {
					c = ic
					return nil
				}
			}
			return fmt.Errorf("no sidecar in %s", name)
		})
		return c
	}
	for name, want := range map[string]string{"alpha": "--legacy-clients=Serve", "beta": "--legacy-clients=Reject"} {
		c := sidecarOf(name)
		if !slices.Contains(c.Args, want) {
			t.Errorf("%s sidecar args %v, want %s", name, c.Args, want)
		}
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == inject.SessionKeyEnv })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil ||
			c.Env[i].ValueFrom.SecretKeyRef.Name != name+"-sidecar-session" || c.Env[i].ValueFrom.SecretKeyRef.Key != inject.SessionKeySecretKey {
			t.Errorf("%s sidecar env %+v: want %s from the session Secret", name, c.Env, inject.SessionKeyEnv)
		}
	}
	// The API server refuses any other value.
	bad := newServer(ns, "gamma", 1)
	bad.Spec.Sidecar = &mcpv1alpha1.SidecarSpec{LegacyClients: "Forward"}
	if err := k8s.Create(ctx, bad); err == nil {
		t.Error("legacyClients: Forward was accepted")
	}
}
