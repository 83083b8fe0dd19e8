//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// sidecarClient talks to the API server as the sidecar's ServiceAccount, so the tests exercise
// the Role the controller wrote, not admin rights.
func sidecarClient(t *testing.T, ns, serviceAccount string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + serviceAccount}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// report does what a sidecar does after applying (or rejecting) a catalog revision: it
// server-side-applies its own key of the status ConfigMap, as itself.
func report(t *testing.T, c client.Client, ns, statusConfigMap, pod string, r catalog.Report) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": statusConfigMap, "namespace": ns},
		"data":     map[string]any{pod: r.String()},
	}}
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(catalog.ReportFieldManagerPrefix+pod), client.ForceOwnership); err != nil {
		t.Fatalf("pod %s reporting: %v", pod, err)
	}
}

func readyPods(t *testing.T, ns, server string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{inject.LabelServer: server}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if kube.PodReady(&p) {
			out = append(out, p)
		}
	}
	return out
}

func replicaSets(t *testing.T, ns, server string) []appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{inject.LabelServer: server}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b appsv1.ReplicaSet) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return list.Items
}

// TestCatalogEditIsLiveImageChangeRolls runs real controllers (kube-controller-manager, kwok):
// editing an MCPTool changes the catalog revision and leaves the pod template, the ReplicaSets
// and the pods alone; the sidecars' reports drive CatalogPropagated; changing the image rolls a
// new ReplicaSet without ever lowering availability (maxUnavailable 0), and the reports of the
// replaced pods are pruned.
func TestCatalogEditIsLiveImageChangeRolls(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := newServer(ns, "weather", 2)
	tool := newTool(ns, "forecast", "weather", "get_forecast")
	mustCreate(t, server, tool)
	key := client.ObjectKeyFromObject(server)
	n := inject.NamesFor(server)
	serverCondition(t, key, mcpv1alpha1.ConditionAvailable, metav1.ConditionTrue, mcpv1alpha1.ReasonDeploymentAvailable)
	itemCondition(t, tool, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	eventually.Succeeds(t, "two ready pods", func() error {
		if p := readyPods(t, ns, "weather"); len(p) != 2 {
			return fmt.Errorf("%d ready pods", len(p))
		}
		return nil
	})
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)

	// The sidecars apply the first revision and report it, with their own (least) privileges.
	sidecar := sidecarClient(t, ns, n.ServiceAccount)
	_, rev1 := getCatalog(t, ns, "weather")
	pods := readyPods(t, ns, "weather")
	for _, p := range pods {
		report(t, sidecar, ns, n.StatusConfigMap, p.Name, catalog.Report{Revision: rev1})
	}
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionTrue, mcpv1alpha1.ReasonAllReplicasUpToDate)
	serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
	eventRecorded(t, server, mcpv1alpha1.ReasonReady)

	// The sidecar's Role reaches exactly its objects: no other ConfigMap, no Secret, no pods.
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}}
	mustCreate(t, other)
	if err := sidecar.Get(ctx, client.ObjectKeyFromObject(other), &corev1.ConfigMap{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the sidecar must not read other ConfigMaps: %v", err)
	}
	if err := sidecar.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.CatalogConfigMap}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the sidecar must read its catalog: %v", err)
	}
	if err := sidecar.List(ctx, &corev1.PodList{}, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Fatalf("the sidecar must not list pods: %v", err)
	}

	d := &appsv1.Deployment{}
	if err := k8s.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	gen, template := d.Generation, d.Spec.Template.DeepCopy()
	rsBefore := replicaSets(t, ns, "weather")
	if len(rsBefore) != 1 {
		t.Fatalf("want one ReplicaSet, got %d", len(rsBefore))
	}

	// Edit the tool: a new catalog revision, and nothing about the pods changes.
	edit(t, tool, func() { tool.Spec.Description = "Forecast for a city, in metric units" })
	var rev2 string
	eventually.Succeeds(t, "a new catalog revision", func() error {
		c, rev := getCatalog(t, ns, "weather")
		if rev == rev1 || c.Tools[0].Description != tool.Spec.Description {
			return fmt.Errorf("catalog still at %s", rev)
		}
		rev2 = rev
		return nil
	})
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
	eventually.Succeeds(t, "the tool names the new revision", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(tool), tool); err != nil {
			return err
		}
		if tool.Status.PublishedRevision != rev2 {
			return fmt.Errorf("tool names %s", tool.Status.PublishedRevision)
		}
		return nil
	})
	if err := k8s.Get(ctx, key, d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != gen || !equalTemplates(template, &d.Spec.Template) {
		t.Fatal("a catalog edit changed the Deployment's pod template")
	}
	rsAfter := replicaSets(t, ns, "weather")
	if len(rsAfter) != 1 || rsAfter[0].UID != rsBefore[0].UID || rsAfter[0].Generation != rsBefore[0].Generation {
		t.Fatalf("a catalog edit touched the ReplicaSets: %d", len(rsAfter))
	}
	for _, p := range pods {
		live := &corev1.Pod{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(&p), live); err != nil || live.UID != p.UID || live.DeletionTimestamp != nil {
			t.Fatalf("pod %s did not survive the catalog edit: %v", p.Name, err)
		}
	}

	// One sidecar applies it, the other rejects it: CatalogRejected names the pod and reason.
	report(t, sidecar, ns, n.StatusConfigMap, pods[0].Name, catalog.Report{Revision: rev2})
	report(t, sidecar, ns, n.StatusConfigMap, pods[1].Name, catalog.Report{Revision: rev1, RejectedRevision: rev2, Reason: "tool get_forecast: inputSchema is not a JSON object"})
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonCatalogRejected)
	eventRecorded(t, server, mcpv1alpha1.ReasonCatalogRejected)
	report(t, sidecar, ns, n.StatusConfigMap, pods[1].Name, catalog.Report{Revision: rev2})
	serverCondition(t, key, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
	eventually.Succeeds(t, "two up-to-date replicas", func() error {
		if err := k8s.Get(ctx, key, server); err != nil {
			return err
		}
		if server.Status.CatalogUpToDateReplicas != 2 {
			return fmt.Errorf("catalogUpToDateReplicas %d", server.Status.CatalogUpToDateReplicas)
		}
		return nil
	})

	// Change the image: a pod-level change rolls a new ReplicaSet, never below 2 available.
	edit(t, server, func() { server.Spec.Container.Image = "example/weather:2" })
	minAvailable := int32(2)
	eventually.Succeeds(t, "the rollout to example/weather:2", func() error {
		if err := k8s.Get(ctx, key, d); err != nil {
			return err
		}
		minAvailable = min(minAvailable, d.Status.AvailableReplicas)
		rs := replicaSets(t, ns, "weather")
		if len(rs) != 2 {
			return fmt.Errorf("%d ReplicaSets", len(rs))
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != 2 || d.Status.AvailableReplicas != 2 || d.Status.Replicas != 2 {
			return fmt.Errorf("deployment status %+v", d.Status)
		}
		// Creation timestamps have one-second resolution: tell the ReplicaSets apart by image.
		replicas := map[string]int32{}
		for _, r := range rs {
			replicas[r.Spec.Template.Spec.Containers[0].Image] = ptrVal(r.Spec.Replicas)
		}
		if replicas["example/weather:1"] != 0 || replicas["example/weather:2"] != 2 {
			return fmt.Errorf("ReplicaSets not rolled: replicas by image %v", replicas)
		}
		if p := readyPods(t, ns, "weather"); len(p) != 2 || p[0].Spec.Containers[0].Image != "example/weather:2" {
			return fmt.Errorf("%d ready pods", len(p))
		}
		return nil
	})
	if d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Fatalf("strategy %+v", d.Spec.Strategy)
	}
	if minAvailable < 2 {
		t.Fatalf("availability dropped to %d during the rollout despite maxUnavailable 0", minAvailable)
	}
	// New pods have not reported yet; the old pods' reports are pruned.
	serverCondition(t, key, mcpv1alpha1.ConditionCatalogPropagated, metav1.ConditionFalse, mcpv1alpha1.ReasonPropagationPending)
	eventually.Succeeds(t, "reports of deleted pods pruned", func() error {
		// Poke a reconcile; pruning waits until the API server confirms a pod is gone.
		if _, err := servers.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: n.StatusConfigMap}, cm); err != nil {
			return err
		}
		for _, p := range pods {
			if _, ok := cm.Data[p.Name]; ok {
				return fmt.Errorf("report of deleted pod %s still there: %v", p.Name, cm.Data)
			}
		}
		return nil
	})
}

func ptrVal(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

func equalTemplates(a, b *corev1.PodTemplateSpec) bool {
	return equality.Semantic.DeepEqual(a, b)
}
