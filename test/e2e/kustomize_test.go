// Package e2e holds end-to-end checks against a real API server.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestKustomizeDefaultInstalls renders config/default with the control plane's kubectl (the
// README's install path) and applies it with server-side dry-run: the real API server accepts
// every object, and the manager runs under a restricted security context.
func TestKustomizeDefaultInstalls(t *testing.T) {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	rendered, err := env.Kubectl(ctx, "kustomize", filepath.Join(root, "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v", err)
	}
	for _, want := range []string{
		"kind: CustomResourceDefinition", "name: mcpservers.mcp.switchboard.dev",
		"kind: ClusterRole", "kind: ClusterRoleBinding", "kind: ServiceAccount",
		"kind: Deployment", "runAsNonRoot: true", "readOnlyRootFilesystem: true",
		"allowPrivilegeEscalation: false", "type: RuntimeDefault", "- ALL",
		"--sidecar-image=switchboard-sidecar:dev", "--webhook-cert-mode=self-signed",
		"kind: MutatingWebhookConfiguration", "name: switchboard-injector", "failurePolicy: Fail",
		"secretName: switchboard-webhook-cert",
	} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("config/default lacks %q", want)
		}
	}

	// Dry-run objects in a namespace that is itself only dry-run created would be refused, so
	// the namespace is created for real first.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "switchboard-system"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(manifest, rendered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "--server-side", "-f", manifest).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range []string{
		"deployment.apps/switchboard-manager serverside-applied (server dry run)",
		"clusterrole.rbac.authorization.k8s.io/switchboard-manager serverside-applied (server dry run)",
		"mutatingwebhookconfiguration.admissionregistration.k8s.io/switchboard-injector serverside-applied (server dry run)",
		"service/switchboard-webhook serverside-applied (server dry run)",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
}

// TestKustomizeOverlaysRender renders the optional overlays: the cert-manager certificate and the
// Prometheus ServiceMonitor.
func TestKustomizeOverlaysRender(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for overlay, wants := range map[string][]string{
		"certmanager": {"kind: Certificate", "kind: Issuer", "secretName: switchboard-webhook-cert"},
		"prometheus":  {"kind: ServiceMonitor", "kind: Service", "port: metrics"},
	} {
		out, err := exec.CommandContext(ctx, filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(root, "config", overlay)).CombinedOutput()
		if err != nil {
			t.Errorf("kubectl kustomize config/%s: %v\n%s", overlay, err, out)
			continue
		}
		for _, want := range wants {
			if !strings.Contains(string(out), want) {
				t.Errorf("config/%s lacks %q", overlay, want)
			}
		}
	}
}
