//go:build e2e

package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// TestDrainToken: against the real API server, the controller creates the server's drain-token
// Secret (owned, labelled, 256 random bits), mounts it into the sidecar (the pod template names
// the Secret, never the token), keeps it across reconciles, and replaces a token edited into
// garbage.
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
	// The pod template names the Secret (mounted into the sidecar only), never the token.
	deploymentHas := func(string) error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(s), d); err != nil {
			return err
		}
		raw, _ := json.Marshal(d.Spec.Template)
		if strings.Contains(string(raw), token) {
			return fmt.Errorf("the pod template holds the drain token")
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == inject.DrainTokenVolume && v.Secret != nil && v.Secret.SecretName == key.Name {
				return nil
			}
		}
		return fmt.Errorf("no volume of Secret %s: %+v", key.Name, d.Spec.Template.Spec.Volumes)
	}
	eventually.Succeeds(t, "the token in the pod template", func() error { return deploymentHas(token) })

	// Reconciling again keeps the token (a new one would fail the preStop of a pod whose
	// mounted copy the kubelet has not refreshed yet).
	reconcileServer(t, client.ObjectKeyFromObject(s))
	if err := k8s.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	if got, _ := kube.ValidDrainToken(sec); got != token {
		t.Fatal("the token changed on a second reconcile")
	}

	// Edited into garbage: replaced by a valid one (the kubelet refreshes the mounted file).
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
