//go:build e2e

package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// TestFailingChildLeavesOthersApplied makes the real API server refuse one child — a
// ValidatingAdmissionPolicy denies the server's Service — and checks that every other child is
// applied anyway, that Ready names the Service with the API server's message and what to fix,
// and that the Service is applied by the backed-off retries once the policy is gone.
func TestFailingChildLeavesOthersApplied(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	const denial = "Services of this namespace must be created by the platform team"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-services"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: denial}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-no-services"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	mustCreate(t, policy, binding)
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, policy)
	})
	// The policy takes effect once the API server's admission informers have it.
	eventually.Succeeds(t, "the policy to refuse Services", func() error {
		probe := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		err := k8s.Create(ctx, probe, client.DryRunAll)
		if err == nil {
			return errors.New("a Service is still admitted")
		}
		if !strings.Contains(err.Error(), denial) {
			return fmt.Errorf("refused for another reason: %w", err)
		}
		return nil
	})

	server := newServer(ns, "weather", 2) // two replicas: a PodDisruptionBudget too
	mustCreate(t, server, newTool(ns, "weather-forecast", "weather", "get_forecast"))
	key := client.ObjectKeyFromObject(server)

	// Every child but the Service exists.
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "weather-catalog"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "weather-catalog-status"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "weather-sidecar"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "weather-sidecar"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "weather-sidecar"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "weather"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "weather"}},
	} {
		eventually.Succeeds(t, fmt.Sprintf("%T %s applied despite the refused Service", obj, obj.GetName()), func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: obj.GetName()}, obj)
		})
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather"}, &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Service should have been refused, Get says %v", err)
	}
	// Ready names the child, carries the API server's message and says what to fix.
	eventually.Succeeds(t, "Ready to name the refused Service", func() error {
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(ctx, key, s); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(s.Status.Conditions, string(mcpv1alpha1.ConditionReady))
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(mcpv1alpha1.ReasonReconcileFailed) {
			return fmt.Errorf("Ready is %+v", c)
		}
		for _, want := range []string{"1 child object failed", "Service " + ns + "/weather", denial, policy.Name, "admission policy"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("Ready's message %q does not contain %q", c.Message, want)
			}
		}
		return nil
	})
	eventRecorded(t, server, mcpv1alpha1.ReasonReconcileFailed)

	// The retries apply the Service once the policy no longer refuses it.
	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "the Service to be applied by a retry", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "weather"}, &corev1.Service{})
	})
	eventually.Succeeds(t, "Ready to stop reporting the failure", func() error {
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(ctx, key, s); err != nil {
			return err
		}
		if c := apimeta.FindStatusCondition(s.Status.Conditions, string(mcpv1alpha1.ConditionReady)); c == nil || c.Reason == string(mcpv1alpha1.ReasonReconcileFailed) {
			return fmt.Errorf("Ready is %+v", c)
		}
		return nil
	})
}
