//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// TestPlantedSecretsAreRefused (security review F17): someone who may create Secrets in the
// namespace plants <server>-drain-token (a token they know) or <server>-sidecar-session (a
// session key they know) before the MCPServer exists. The controller must not adopt either:
// the server is Ready=False and Stalled with reason SecretNotOwned, the message says which
// Secret to delete, a Warning Event says the same, no Deployment runs with the planted value,
// and the planted Secret is left as it was. Both ways the controller finds a Secret are
// covered: from its cache (the planted Secret carries Switchboard's managed-by label) and from
// the API server after AlreadyExists (it does not). Deleting the planted Secret lets the
// controller create its own.
func TestPlantedSecretsAreRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const planted = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		server, suffix, key string
		labelled            bool
	}{
		{"dt-cached", "-drain-token", kube.DrainTokenKey, true},
		{"dt-direct", "-drain-token", kube.DrainTokenKey, false},
		{"ss-cached", "-sidecar-session", inject.SessionKeySecretKey, true},
		{"ss-direct", "-sidecar-session", inject.SessionKeySecretKey, false},
	} {
		t.Run(tc.server, func(t *testing.T) {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tc.server + tc.suffix, Namespace: ns},
				Data: map[string][]byte{tc.key: []byte(planted)}}
			if tc.labelled {
				sec.Labels = map[string]string{inject.LabelManagedBy: inject.ManagedBy, inject.LabelServer: tc.server}
			}
			mustCreate(t, sec)
			s := newServer(ns, tc.server, 1)
			mustCreate(t, s)
			key := client.ObjectKeyFromObject(s)
			serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionFalse, mcpv1alpha1.ReasonSecretNotOwned)
			serverCondition(t, key, mcpv1alpha1.ConditionStalled, metav1.ConditionTrue, mcpv1alpha1.ReasonSecretNotOwned)
			if err := k8s.Get(ctx, key, s); err != nil {
				t.Fatal(err)
			}
			msg := findConditionIn(s.Status.Conditions, mcpv1alpha1.ConditionReady).Message
			if want := "kubectl delete secret -n " + ns + " " + sec.Name; !strings.Contains(msg, want) {
				t.Errorf("Ready message %q does not say %q", msg, want)
			}
			eventRecorded(t, s, mcpv1alpha1.ReasonSecretNotOwned)
			err := k8s.Get(ctx, key, &appsv1.Deployment{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("a Deployment exists while %s is not the server's (err %v)", sec.Name, err)
			}
			got := &corev1.Secret{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(sec), got); err != nil {
				t.Fatal(err)
			}
			if string(got.Data[tc.key]) != planted || len(got.OwnerReferences) != 0 {
				t.Errorf("the planted Secret was changed: %+v", got)
			}

			// Deleting it, as the message says, lets the controller create its own.
			if err := k8s.Delete(ctx, got); err != nil {
				t.Fatal(err)
			}
			eventually.Succeeds(t, "the server's own "+sec.Name, func() error {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(sec), got); err != nil {
					return err
				}
				if !metav1.IsControlledBy(got, s) || string(got.Data[tc.key]) == planted {
					return fmt.Errorf("not the server's yet: %+v", got.ObjectMeta)
				}
				return k8s.Get(ctx, key, &appsv1.Deployment{})
			})
		})
	}
}
