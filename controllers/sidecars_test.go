package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// externalPod is a pod of the user's own Deployment, annotated as the webhook would inject it
// with cfg (or not injected when cfg is nil). It carries only the opt-in label, not
// app.kubernetes.io/managed-by: the controller must see it anyway.
func externalPod(ns, name, server string, cfg *inject.Config) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{inject.LabelServer: server, "pod-template-hash": "5d4c3b2a1", "app.kubernetes.io/managed-by": "Helm"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "search-5d4c3b2a1",
				UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "search", Image: "example/search:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
	}
	if cfg != nil {
		c := *cfg
		c.ServerContainer = "search"
		p.Annotations = map[string]string{inject.InjectedAnnotation: inject.Hash(c)}
	}
	return p
}

func TestSidecarsCondition(t *testing.T) {
	server := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "search", Namespace: "tools"},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal}}
	cfg := inject.ConfigFor(server, "switchboard-sidecar:v1")
	old := cfg
	old.Image = "switchboard-sidecar:v0"
	optedOut := externalPod("tools", "debug", "search", nil)
	optedOut.Annotations = map[string]string{inject.InjectAnnotation: "false"}
	deleting := externalPod("tools", "leaving", "search", &old)
	deleting.DeletionTimestamp = &metav1.Time{}

	c, n := sidecarsCondition(cfg, []corev1.Pod{*externalPod("tools", "a", "search", &cfg), *optedOut, *deleting})
	if c.Status != metav1.ConditionTrue || n != 0 {
		t.Fatalf("current, opted-out and terminating pods are not stale: %+v, %d", c, n)
	}
	c, n = sidecarsCondition(cfg, []corev1.Pod{
		*externalPod("tools", "a", "search", &cfg), *externalPod("tools", "b", "search", &old), *externalPod("tools", "c", "search", nil)})
	if c.Status != metav1.ConditionFalse || c.Reason != string(mcpv1alpha1.ReasonStaleSidecars) || n != 2 {
		t.Fatalf("want 2 stale pods: %+v, %d", c, n)
	}
	for _, want := range []string{"(b, c)", "kubectl rollout restart -n tools deployment/search"} {
		if !strings.Contains(c.Message, want) {
			t.Fatalf("message %q lacks %q", c.Message, want)
		}
	}
}

func TestRollCommand(t *testing.T) {
	p := externalPod("tools", "search-0", "search", nil)
	p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "StatefulSet", "search"
	if got := rollCommand(p); got != "kubectl rollout restart -n tools statefulset/search" {
		t.Fatal(got)
	}
	p.OwnerReferences = nil
	if got := rollCommand(p); got != "kubectl delete pod -n tools search-0" {
		t.Fatal(got)
	}
}
