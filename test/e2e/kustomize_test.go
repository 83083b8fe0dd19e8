//go:build e2e

// Package e2e holds end-to-end checks against a real API server.
package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	checkKustomizeDefault(t, decodeStream(t, "kubectl kustomize config/default", rendered))

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

// checkKustomizeDefault checks the decoded objects of config/default: the CRDs, the manager's
// RBAC, a restricted Deployment running the sidecar image and self-signed webhook certificates,
// and the injection webhook failing closed.
func checkKustomizeDefault(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if find(objs, "CustomResourceDefinition", "mcpservers.mcp.switchboard.dev") == nil {
		t.Error("config/default lacks the CustomResourceDefinition mcpservers.mcp.switchboard.dev")
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "ServiceAccount"} {
		if find(objs, kind, "") == nil {
			t.Errorf("config/default lacks a %s", kind)
		}
	}
	u := find(objs, "Deployment", "switchboard-manager")
	if u == nil {
		t.Fatal("config/default lacks the Deployment switchboard-manager")
	}
	var d appsv1.Deployment
	into(t, u, &d)
	assertRestricted(t, &d)
	var args []string
	for _, c := range d.Spec.Template.Spec.Containers {
		args = append(append(args, c.Command...), c.Args...)
	}
	for _, want := range []string{"--sidecar-image=switchboard-sidecar:dev", "--webhook-cert-mode=self-signed"} {
		if !slices.Contains(args, want) {
			t.Errorf("the manager's arguments %q lack %s", args, want)
		}
	}
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "switchboard-webhook-cert"
	}) {
		t.Error("the manager mounts no Secret switchboard-webhook-cert")
	}
	wu := find(objs, "MutatingWebhookConfiguration", "switchboard-injector")
	if wu == nil {
		t.Fatal("config/default lacks the MutatingWebhookConfiguration switchboard-injector")
	}
	var wh admissionregistrationv1.MutatingWebhookConfiguration
	into(t, wu, &wh)
	if len(wh.Webhooks) == 0 {
		t.Fatal("switchboard-injector has no webhooks")
	}
	for _, w := range wh.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("webhook %s: failurePolicy %v, want Fail", w.Name, w.FailurePolicy)
		}
	}
}
