//go:build e2e

package testenv

import (
	"context"
	"fmt"
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

// TestFleetSizedControlPlane shows the control plane holds a fleet: more Services than a /24
// has addresses, and more pods than one node holds, spread over several kwok nodes whose pod
// capacity the scheduler enforces.
func TestFleetSizedControlPlane(t *testing.T) {
	const (
		nodes       = 2
		podsPerNode = 80
		services    = 300                    // a /24 holds 254
		replicas    = nodes*podsPerNode + 10 // 170: more than one default node's 110
		unfit       = replicas - nodes*podsPerNode
	)
	env, err := Start(Options{Controllers: true, Nodes: nodes, PodsPerNode: podsPerNode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := env.Client

	// Services: every one gets a distinct ClusterIP.
	ips := map[string]bool{}
	for i := range services {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%03d", i), Namespace: "default"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if err := c.Create(ctx, svc); err != nil {
			t.Fatalf("creating Service %d of %d: %v", i+1, services, err)
		}
		if svc.Spec.ClusterIP == "" || ips[svc.Spec.ClusterIP] {
			t.Fatalf("Service %s got ClusterIP %q (empty or taken)", svc.Name, svc.Spec.ClusterIP)
		}
		ips[svc.Spec.ClusterIP] = true
	}

	// Pods: a Deployment larger than the nodes hold. Exactly nodes*podsPerNode become Ready,
	// on every node; the rest stay Unschedulable.
	labels := map[string]string{"app": "fleet"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](replicas),
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
	var ready, unschedulable int
	var perNode map[string]int
	for {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			t.Fatal(err)
		}
		ready, unschedulable, perNode = 0, 0, map[string]int{}
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				switch {
				case cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue:
					ready++
					perNode[p.Spec.NodeName]++
				case cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
					cond.Reason == corev1.PodReasonUnschedulable:
					unschedulable++
				}
			}
		}
		if ready == nodes*podsPerNode && unschedulable == unfit {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("want %d Ready and %d Unschedulable pods of %d, have %d Ready (per node %v) and %d Unschedulable\n%s\n%s",
				nodes*podsPerNode, unfit, replicas, ready, perNode, unschedulable, env.Logs("kube-scheduler"), env.Logs("kwok"))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if len(perNode) != nodes {
		t.Fatalf("Ready pods should fill all %d nodes, got %v", nodes, perNode)
	}
	for node, n := range perNode {
		if n != podsPerNode {
			t.Errorf("node %s runs %d pods, its capacity is %d", node, n, podsPerNode)
		}
	}
}
