package testenv

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestControllersRollDeployment proves the test control plane is real: with
// kube-controller-manager, kube-scheduler and kwok, a Deployment gets Ready pods, and an image
// change rolls it to a new ReplicaSet.
func TestControllersRollDeployment(t *testing.T) {
	env, err := Start(Options{Controllers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := env.Client

	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example/web:1"}}},
			},
		},
	}
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitRolledOut := func(image string) {
		t.Helper()
		for {
			err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
			if err == nil && d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 2 &&
				d.Status.ReadyReplicas == 2 && d.Status.AvailableReplicas == 2 && d.Status.Replicas == 2 {
				var pods corev1.PodList
				if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err == nil {
					running := 0
					for _, p := range pods.Items {
						if p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
							running++
						}
					}
					if running == 2 && len(pods.Items) == 2 {
						return
					}
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("deployment did not roll out %s: %+v\n%s\n%s", image, d.Status,
					env.Logs("kube-controller-manager"), env.Logs("kwok"))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	waitRolledOut("example/web:1")
	d.Spec.Template.Spec.Containers[0].Image = "example/web:2"
	if err := c.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitRolledOut("example/web:2")
	var rss appsv1.ReplicaSetList
	if err := c.List(ctx, &rss, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	if len(rss.Items) != 2 {
		t.Fatalf("want 2 ReplicaSets after one rollout, got %d", len(rss.Items))
	}
}
