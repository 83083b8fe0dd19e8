//go:build node

package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

var (
	installOnce sync.Once
	installErr  error
)

// installed installs Switchboard as users do, once for every test: the Helm chart (the
// manager as a pod, with its RBAC, leader election and self-signed webhook certificate) and
// config/samples (kustomize) with the sample server's image built here.
func installed(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		start := time.Now()
		if _, err := runErr("", helmBin, "install", "switchboard", "../../charts/switchboard",
			"--namespace", releaseNamespace, "--create-namespace",
			"--set", "image.repository="+imageRepo+"/manager", "--set", "image.tag="+imageTag,
			"--set", "sidecar.image.repository="+imageRepo+"/sidecar", "--set", "sidecar.image.tag="+imageTag); err != nil {
			installErr = fmt.Errorf("helm install: %w", err)
			return
		}
		if _, err := runErr("", kubectlBin, "-n", releaseNamespace, "rollout", "status", "deployment/switchboard-manager", "--timeout=3m"); err != nil {
			installErr = errors.Join(fmt.Errorf("manager rollout: %w", err), managerDiagnostics())
			return
		}
		fig("manager Ready after helm install", time.Since(start))
		samples, err := runErr("", kubectlBin, "kustomize", "../../config/samples")
		if err != nil {
			installErr = err
			return
		}
		samples = strings.ReplaceAll(samples, "image: switchboard-sample-server:dev", "image: "+sampleServerImage)
		if !strings.Contains(samples, sampleServerImage) {
			installErr = errors.New("config/samples no longer names image switchboard-sample-server:dev: update test/node")
			return
		}
		start = time.Now()
		// The webhook (failurePolicy Fail) answers only once its certificate is in place: retry.
		var applyErr error
		for range 60 {
			if _, applyErr = runErr(samples, kubectlBin, "apply", "-f", "-"); applyErr == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if applyErr != nil {
			installErr = fmt.Errorf("kubectl apply config/samples: %w", applyErr)
			return
		}
		t0 := time.Now()
		for {
			s, err := mcpServer(t, sampleNamespace, sampleServer)
			if err == nil {
				if st, _ := condition(s.Status.Conditions, string(mcpv1alpha1.ConditionReady)); st == metav1.ConditionTrue && s.Status.ReadyReplicas == 2 {
					break
				}
			}
			if time.Since(t0) > hang {
				installErr = fmt.Errorf("the samples' MCPServer is not Ready after %v: %+v %v", hang, s, err) //nolint:errorlint // err may be nil: printed, not wrapped
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		fig("samples applied -> MCPServer Ready=True (2 replicas)", time.Since(start))
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
}

func managerDiagnostics() error {
	out, _ := runErr("", kubectlBin, "-n", releaseNamespace, "describe", "pods")
	logs, _ := runErr("", kubectlBin, "-n", releaseNamespace, "logs", "deployment/switchboard-manager", "--tail=40")
	return fmt.Errorf("manager pods:\n%s\nlogs:\n%s", out, logs)
}

// fig prints a figure for the report (timings are reported, never asserted).
func fig(what string, d time.Duration) {
	fmt.Printf("FIGURE %s: %.2f s\n", what, d.Seconds())
}

// TestManagerInstalledByHelmChart: the manager runs as a pod from the chart: Ready, leader of
// its Lease, and its webhook serving a certificate it issued itself (the caBundle in the
// MutatingWebhookConfiguration is the CA in the Secret it mounts).
func TestManagerInstalledByHelmChart(t *testing.T) {
	installed(t)
	ctx := context.Background()
	pods := runningPods(t, releaseNamespace, managerLabel)
	if len(pods) != 1 {
		t.Fatalf("%d running manager pods, want 1", len(pods))
	}
	mgr := pods[0]
	for _, c := range mgr.Status.ContainerStatuses {
		if !c.Ready || c.RestartCount != 0 {
			t.Errorf("manager container %s ready=%v restarts=%d", c.Name, c.Ready, c.RestartCount)
		}
	}
	lease, err := cs.CoordinationV1().Leases(releaseNamespace).Get(ctx, "switchboard-manager.mcp.switchboard.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || !strings.HasPrefix(*h, mgr.Name) {
		t.Errorf("lease holder %v, want the manager pod %s", lease.Spec.HolderIdentity, mgr.Name)
	}
	secret, err := cs.CoreV1().Secrets(releaseNamespace).Get(ctx, "switchboard-webhook-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca := secret.Data["ca.crt"]
	if len(ca) == 0 || len(secret.Data["tls.crt"]) == 0 {
		t.Fatalf("webhook Secret has keys %v, want ca.crt and tls.crt filled by the manager", keysOf(secret.Data))
	}
	mwc, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "switchboard-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(mwc.Webhooks[0].ClientConfig.CABundle); got != string(ca) {
		t.Errorf("caBundle of the webhook configuration is not the manager's CA (%d bytes, CA %d bytes)", len(got), len(ca))
	}
	fmt.Printf("FIGURE manager RSS in its container: %s\n", rss(t, mgr, "manager"))
}

func keysOf(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

// TestSamplesReadyFromSidecarReports: config/samples on real pods: the MCPServer is Ready with
// every condition decided from what the two real sidecars report (catalog applied, upstream
// verified, tools served), and clients through the Service list and call the tools.
func TestSamplesReadyFromSidecarReports(t *testing.T) {
	installed(t)
	s := serverConditions(t, sampleNamespace, sampleServer, mcpv1alpha1.ConditionAvailable, mcpv1alpha1.ConditionCatalogPropagated,
		mcpv1alpha1.ConditionToolsServed, mcpv1alpha1.ConditionVerified)
	if s.Status.ReadyReplicas != 2 || s.Status.CatalogUpToDateReplicas != 2 {
		t.Errorf("readyReplicas %d, catalogUpToDateReplicas %d, want 2 and 2", s.Status.ReadyReplicas, s.Status.CatalogUpToDateReplicas)
	}
	pods := runningPods(t, sampleNamespace, "mcp.switchboard.dev/server="+sampleServer)
	if len(pods) != 2 {
		t.Fatalf("%d running pods, want 2", len(pods))
	}
	for _, p := range pods {
		if len(p.Spec.InitContainers) == 0 || p.Spec.InitContainers[0].RestartPolicy == nil ||
			*p.Spec.InitContainers[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("pod %s: no native sidecar", p.Name)
		}
	}
	c := serviceClient(t)
	names := toolNames(t, c)
	if strings.Join(names, ",") != "celsius_to_fahrenheit,get_forecast" {
		t.Errorf("tools/list through the Service: %v", names)
	}
	resp, err := c.Call(context.Background(), "tools/call", map[string]any{"name": "get_forecast", "arguments": map[string]any{"city": "Oslo", "days": 1}})
	if err != nil || resp.Error != nil {
		t.Fatalf("tools/call get_forecast: %v %+v", err, resp)
	}
	fmt.Printf("FIGURE sidecar RSS in its container: %s\n", rss(t, pods[0], "switchboard-sidecar"))
}
