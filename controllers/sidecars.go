package controllers

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// maxNamedPods bounds the pods a condition message names.
const maxNamedPods = 5

// staleSidecars finds the pods of an External server whose sidecar is not the one the current
// settings give: injected with an older hash, or not injected. The expected hash is recomputed
// per pod, since it includes the pod's MCP server container (inject.FindServerContainer). Pods
// being deleted are left out.
func staleSidecars(cfg inject.Config, pods []corev1.Pod) []corev1.Pod {
	var stale []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Annotations[inject.InjectAnnotation] == "false" {
			continue
		}
		want := cfg
		name, reason, _ := inject.FindServerContainer(&p.ObjectMeta, &p.Spec, cfg.UpstreamPort)
		want.ServerContainer = name
		if reason != "" || p.Annotations[inject.InjectedAnnotation] != inject.Hash(want) {
			stale = append(stale, p)
		}
	}
	return stale
}

// rollCommand is how to replace a pod: restart its workload, or delete it when it has none.
func rollCommand(p *corev1.Pod) string {
	if o := metav1.GetControllerOfNoCopy(p); o != nil {
		switch {
		case o.Kind == "ReplicaSet" && p.Labels["pod-template-hash"] != "":
			return fmt.Sprintf("kubectl rollout restart -n %s deployment/%s", p.Namespace, strings.TrimSuffix(o.Name, "-"+p.Labels["pod-template-hash"]))
		case o.Kind == "StatefulSet" || o.Kind == "DaemonSet":
			return fmt.Sprintf("kubectl rollout restart -n %s %s/%s", p.Namespace, strings.ToLower(o.Kind), o.Name)
		}
	}
	return fmt.Sprintf("kubectl delete pod -n %s %s", p.Namespace, p.Name)
}

// sidecarsCondition decides SidecarsUpToDate for an External server; it is advisory and never
// makes the server not Ready: Switchboard does not restart user workloads.
func sidecarsCondition(cfg inject.Config, pods []corev1.Pod) (metav1.Condition, int32) {
	const typ = mcpv1alpha1.ConditionSidecarsUpToDate
	stale := staleSidecars(cfg, pods)
	if len(stale) == 0 {
		return condition(typ, true, mcpv1alpha1.ReasonSidecarsUpToDate,
			"every pod runs the sidecar of the current sidecar settings"), 0
	}
	var names, commands []string
	for i := range stale {
		if len(names) < maxNamedPods {
			names = append(names, stale[i].Name)
		}
		if c := rollCommand(&stale[i]); !slices.Contains(commands, c) {
			commands = append(commands, c)
		}
	}
	slices.Sort(names)
	slices.Sort(commands)
	more := ""
	if len(stale) > len(names) {
		more = fmt.Sprintf(" and %d more", len(stale)-len(names))
	}
	return condition(typ, false, mcpv1alpha1.ReasonStaleSidecars, fmt.Sprintf(
		"%d pods run a sidecar older than the MCPServer's sidecar settings, or none (%s%s); Switchboard does not restart your workloads: "+
			"roll them to re-inject: %s", len(stale), strings.Join(names, ", "), more, strings.Join(commands, "; "))), int32(len(stale))
}
