package controllers

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// TestDrainToken: against the real API server, the controller creates the server's drain-token
// Secret (owned, labelled, 256 random bits), puts the same token into both preStop hooks and the
// sidecar's environment, keeps it across reconciles, and replaces a token edited into garbage.
func TestDrainToken(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	s := newServer(ns, "drained", 1)
	mustCreate(t, s)
	key := client.ObjectKey{Namespace: ns, Name: "drained-drain-token"}
	sec := &corev1.Secret{}
	eventually.Succeeds(t, "the drain-token Secret", func() error { return k8s.Get(ctx, key, sec) })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(sec, s) || sec.Labels[inject.LabelManagedBy] != inject.ManagedBy {
		t.Fatalf("secret meta: %+v", sec.ObjectMeta)
	}
	token, ok := kube.ValidDrainToken(sec)
	if !ok {
		t.Fatalf("token %q", sec.Data[kube.DrainTokenKey])
	}
	deploymentHas := func(token string) error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), d); err != nil {
			return err
		}
		sc, server := d.Spec.Template.Spec.InitContainers[0], d.Spec.Template.Spec.Containers[0]
		for _, c := range []corev1.Container{sc, server} {
			h := c.Lifecycle.PreStop.HTTPGet.HTTPHeaders
			if len(h) != 1 || h[0].Name != "Authorization" || h[0].Value != "Bearer "+token {
				return fmt.Errorf("%s preStop headers %v", c.Name, h)
			}
		}
		for _, e := range sc.Env {
			if e.Name == inject.DrainTokenEnv && e.Value == token {
				return nil
			}
		}
		return fmt.Errorf("sidecar env %v", sc.Env)
	}
	eventually.Succeeds(t, "the token in the pod template", func() error { return deploymentHas(token) })

	// Reconciling again keeps the token (it is in the pod template: a new one would roll pods).
	if _, err := servers.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(s)}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	if got, _ := kube.ValidDrainToken(sec); got != token {
		t.Fatal("the token changed on a second reconcile")
	}

	// Edited into garbage: replaced by a valid one, and the pods follow.
	sec.Data[kube.DrainTokenKey] = []byte("guessable")
	if err := k8s.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "a fresh token", func() error {
		if err := k8s.Get(ctx, key, sec); err != nil {
			return err
		}
		got, ok := kube.ValidDrainToken(sec)
		if !ok || got == token {
			return fmt.Errorf("token %q", sec.Data[kube.DrainTokenKey])
		}
		return deploymentHas(got)
	})
}
