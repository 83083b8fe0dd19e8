//go:build e2e

package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// TestEnvSelfSignedCertificates: in self-signed mode the manager fills its (empty) Secret with a
// CA and a serving certificate for the Service's DNS names, writes the CA into the webhook
// configuration's caBundle, and then serves the injector with that certificate. The test plays
// the kubelet's part: it copies the Secret into the mounted folder.
func TestEnvSelfSignedCertificates(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := namespace(t, "")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "switchboard-webhook-cert", Namespace: ns}}
	whc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "certs-test-injector"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "inject.mcp.switchboard.dev", AdmissionReviewVersions: []string{"v1"},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
				Namespace: ns, Name: "switchboard-webhook", Path: ptr.To(Path)}},
			// Matches nothing: this test only checks the certificate plumbing.
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"certs-test": "never"}},
		}},
	}
	for _, o := range []client.Object{secret, whc} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), whc) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	certDir := t.TempDir()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		WebhookServer: crwebhook.NewServer(crwebhook.Options{Host: "127.0.0.1", Port: port, CertDir: certDir}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ready, err := ServeWhenReady(mgr, TLSOptions{Mode: CertSelfSigned, Namespace: ns, Service: "switchboard-webhook",
		Secret: secret.Name, Configuration: whc.Name, CertDir: certDir}, Options{SidecarImage: testImage, OperatorNamespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	probe, _ := http.NewRequest(http.MethodGet, "/readyz", nil)
	if ready(probe) == nil {
		t.Fatal("ready before any certificate exists")
	}

	wait := func(what string, ok func() bool) {
		t.Helper()
		eventually.True(t, what, ok)
	}
	wait("the Secret to hold a certificate", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret) == nil && len(secret.Data["tls.crt"]) > 0
	})
	for _, k := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, k), secret.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	wait("the caBundle", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(whc), whc) == nil && len(whc.Webhooks[0].ClientConfig.CABundle) > 0
	})
	if !bytes.Equal(whc.Webhooks[0].ClientConfig.CABundle, secret.Data["ca.crt"]) {
		t.Fatal("the caBundle is not the Secret's CA")
	}
	wait("the webhook to be ready", func() bool { return ready(probe) == nil })

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(whc.Webhooks[0].ClientConfig.CABundle)
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{RootCAs: pool, ServerName: "switchboard-webhook." + ns + ".svc", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("the served certificate does not verify against the caBundle for the Service name: %v", err)
	}
	_ = conn.Close()
}
