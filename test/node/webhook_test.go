//go:build node

package node

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

const externalYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: user-app
---
apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPServer
metadata:
  name: forecast
  namespace: user-app
spec:
  mode: External
  container: {port: 8080, path: /mcp}
  sidecar:
    drain: {propagationDelaySeconds: 1, jitterMilliseconds: 100, budgetSeconds: 10}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: forecast
  namespace: user-app
spec:
  replicas: 1
  selector: {matchLabels: {app: forecast}}
  template:
    metadata:
      labels: {app: forecast, mcp.switchboard.dev/server: forecast}
    spec:
      containers:
      - name: app
        image: %s
        ports: [{containerPort: 8080}]
        securityContext: {runAsNonRoot: true}
`

// TestWebhookInjectsUserDeployment: the manager's webhook, serving the certificate it issued,
// injects the native sidecar into the pod of a user's own Deployment (External mode); the pod
// runs and serves MCP through the sidecar, and the MCPServer reports its sidecar up to date.
func TestWebhookInjectsUserDeployment(t *testing.T) {
	installed(t)
	start := time.Now()
	run(t, fmt.Sprintf(externalYAML, sampleServerImage), kubectlBin, "apply", "-f", "-")
	defer func() { _, _ = runErr("", kubectlBin, "delete", "namespace", "user-app", "--wait=false") }()
	s := serverReady(t, "user-app", "forecast")
	fig("External MCPServer + user Deployment applied -> Ready", time.Since(start))
	if st, reason := condition(s.Status.Conditions, string(mcpv1alpha1.ConditionSidecarsUpToDate)); st != metav1.ConditionTrue {
		t.Errorf("SidecarsUpToDate=%s (%s)", st, reason)
	}
	pods := runningPods(t, "user-app", "app=forecast")
	if len(pods) != 1 {
		t.Fatalf("%d running pods, want 1", len(pods))
	}
	p := pods[0]
	if p.Labels[inject.InjectedLabel] != "true" || len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].Name != inject.ContainerName ||
		p.Spec.InitContainers[0].RestartPolicy == nil || *p.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Fatalf("pod %s not injected: labels %v, init containers %v", p.Name, p.Labels, p.Spec.InitContainers)
	}
	if hook := p.Spec.Containers[0].Lifecycle; hook == nil || hook.PreStop == nil {
		t.Errorf("the app container has no drain preStop hook")
	}
	if names := toolNames(t, podClient(p, "forecast.user-app.svc")); len(names) != 3 {
		t.Errorf("tools/list through the injected sidecar: %v, want the sample server's 3 tools", names)
	}
}
