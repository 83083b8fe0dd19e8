package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// CertMode says where the webhook's serving certificate comes from (--webhook-cert-mode).
type CertMode string

const (
	// CertSelfSigned means the manager creates a CA and a serving certificate in a Secret, rotates
	// them before they expire, and writes the CA into the webhook configuration's caBundle
	// (github.com/open-policy-agent/cert-controller). The Secret is mounted at the cert dir.
	CertSelfSigned CertMode = "self-signed"
	// CertManager means cert-manager issues the certificate into the mounted Secret and its CA
	// injector fills the caBundle (config/certmanager).
	CertManager CertMode = "cert-manager"
	// CertNone means the webhook is not served; External servers get no injection.
	CertNone CertMode = "none"
)

// TLSOptions name the objects the webhook needs; defaults match config/webhook.
type TLSOptions struct {
	Mode CertMode
	// Namespace is the manager's namespace, holding the Service and the Secret.
	Namespace string
	// Service fronts the webhook server: its DNS names go into the serving certificate.
	Service string
	// Secret holds the CA and the serving certificate (self-signed mode).
	Secret string
	// Configuration is the MutatingWebhookConfiguration whose caBundle is kept current.
	Configuration string
	// CertDir is where the Secret is mounted (the webhook server's CertDir).
	CertDir string
}

// The rotator updates the webhook configuration's caBundle and its own Secret; it reads them
// through a cache, so it lists and watches them too. Secrets: namespaced to the manager's
// namespace (a Role), by name for writes.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=update;patch,resourceNames=switchboard-injector
// +kubebuilder:rbac:groups="",namespace=switchboard-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=switchboard-system,resources=secrets,verbs=update;patch,resourceNames=switchboard-webhook-cert

// ServeWhenReady registers the injector once the serving certificate is in place, and returns
// a readiness check that fails until the webhook server serves. In self-signed mode it adds
// cert-controller's rotator to the manager; the injector is registered after the rotator wrote
// the certificate, the kubelet mounted it and the caBundle was patched (the webhook server
// loads its certificate when it starts, then follows the files).
func ServeWhenReady(mgr ctrl.Manager, tls TLSOptions, opts Options) (healthz.Checker, error) {
	switch tls.Mode {
	case CertNone:
		return healthz.Ping, nil
	case CertManager:
		if err := Setup(mgr, opts); err != nil {
			return nil, err
		}
		return mgr.GetWebhookServer().StartedChecker(), nil
	case CertSelfSigned:
	default:
		return nil, fmt.Errorf("unknown webhook certificate mode %q (self-signed, cert-manager or none)", tls.Mode)
	}
	if tls.Namespace == "" {
		return nil, errors.New("self-signed webhook certificates need the manager's namespace (--namespace or POD_NAMESPACE)")
	}
	ready := make(chan struct{})
	svc := tls.Service + "." + tls.Namespace + ".svc"
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: tls.Namespace, Name: tls.Secret},
		CertDir:        tls.CertDir,
		CAName:         "switchboard-webhook-ca",
		CAOrganization: "switchboard",
		DNSName:        svc,
		ExtraDNSNames:  []string{tls.Service, tls.Service + "." + tls.Namespace, svc + ".cluster.local"},
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: tls.Configuration, Type: rotator.Mutating}},
		FieldOwner:     "switchboard",
		// Every replica serves the webhook, so every replica keeps its mounted copy and the
		// caBundle current; writes are optimistic-concurrency updates of one Secret.
		RequireLeaderElection: false,
	}); err != nil {
		return nil, fmt.Errorf("adding the certificate rotator: %w", err)
	}
	var (
		mu       sync.Mutex
		done     bool
		setupErr error
	)
	if err := mgr.Add(runnableFunc(func(ctx context.Context) error {
		select {
		case <-ready:
		case <-ctx.Done():
			return nil
		}
		err := Setup(mgr, opts)
		mu.Lock()
		done, setupErr = true, err
		mu.Unlock()
		return err
	})); err != nil {
		return nil, err
	}
	return func(req *http.Request) error {
		mu.Lock()
		d, err := done, setupErr
		mu.Unlock()
		switch {
		case !d:
			return errors.New("waiting for the webhook serving certificate")
		case err != nil:
			return err
		}
		return mgr.GetWebhookServer().StartedChecker()(req)
	}, nil
}

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection: every replica serves the webhook.
func (f runnableFunc) NeedLeaderElection() bool { return false }
