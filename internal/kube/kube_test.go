package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestTrimPod: the cached pod answers what the controller asks of pods (readiness, deletion,
// the MCP server container, the injected-settings annotation, the owner) as the full pod does,
// and holds nothing else.
func TestTrimPod(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", Labels: map[string]string{inject.LabelServer: "s"},
			Annotations:       map[string]string{inject.InjectedAnnotation: "abc"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "s-1", Controller: new(true)}},
			DeletionTimestamp: &now,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "switchboard-sidecar", Image: "sidecar:1"}},
			Containers: []corev1.Container{{Name: "server", Image: "mcp:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
			Volumes: []corev1.Volume{{Name: "catalog"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Ready: true}}},
	}
	out, err := TrimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	p := out.(*corev1.Pod)
	if p.Name != "p" || p.Labels[inject.LabelServer] != "s" || p.Annotations[inject.InjectedAnnotation] != "abc" ||
		p.DeletionTimestamp == nil || len(p.OwnerReferences) != 1 || p.ManagedFields != nil {
		t.Fatalf("metadata: %+v", p.ObjectMeta)
	}
	if PodReady(p) != PodReady(full) {
		t.Fatal("readiness differs")
	}
	for _, port := range []int32{8080, 9090} {
		n1, r1, _ := inject.FindServerContainer(&full.ObjectMeta, &full.Spec, port)
		n2, r2, _ := inject.FindServerContainer(&p.ObjectMeta, &p.Spec, port)
		if n1 != n2 || r1 != r2 {
			t.Fatalf("port %d: server container %q/%q on the full pod, %q/%q on the cached one", port, n1, r1, n2, r2)
		}
	}
	if len(p.Spec.InitContainers)+len(p.Spec.Volumes)+len(p.Status.ContainerStatuses) != 0 || p.Spec.Containers[0].Image != "" ||
		p.Spec.Containers[0].Env != nil {
		t.Fatalf("kept more than the controller reads: %+v", p)
	}
	if other, _ := TrimPod(&corev1.ConfigMap{}); other == nil {
		t.Fatal("other kinds pass through")
	}
}
