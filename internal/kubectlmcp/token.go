package kubectlmcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// tokenExpiration is the lifetime asked of a minted token (--as-sa): the API server's minimum,
// short because it is for testing what an agent sees. A longer `watch` gets new ones.
const tokenExpiration = 10 * time.Minute

// tokenRenewal is the share of a minted token's lifetime after which the next request gets a
// new one (the kubelet renews projected tokens at 80% too), so a token never expires in flight.
const tokenRenewal = 0.8

// parseServiceAccount reads --as-sa: NAMESPACE/NAME, or NAME in namespace ns.
func parseServiceAccount(v, ns string) (string, string, error) {
	name := v
	if before, after, ok := strings.Cut(v, "/"); ok {
		ns, name = before, after
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return "", "", fmt.Errorf("--as-sa %q: namespace %q: %s", v, ns, strings.Join(errs, "; "))
		}
	}
	if name == "" {
		return "", "", fmt.Errorf("--as-sa %q: want NAMESPACE/NAME or NAME", v)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("--as-sa %q: want NAMESPACE/NAME or NAME; name %q: %s", v, name, strings.Join(errs, "; "))
	}
	return ns, name, nil
}

// minter mints tokens of one ServiceAccount for one audience through the TokenRequest API, and
// mints again when the current one is tokenRenewal through its life. mu guards the fields below.
type minter struct {
	cs        kubernetes.Interface
	namespace string
	name      string
	audience  string

	mu      sync.Mutex
	current string
	renew   time.Time
}

// newMinter finds the audience of the MCPServer ns/server (serverAudience) and mints the first
// token, so that a missing ServiceAccount or a missing permission is reported before connecting.
func newMinter(ctx context.Context, cfg *rest.Config, saNamespace, saName, ns, server string, warn func(string)) (*minter, error) {
	aud, err := serverAudience(ctx, cfg, ns, server, warn)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m := &minter{cs: cs, namespace: saNamespace, name: saName, audience: aud}
	if _, err := m.token(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// token is the minter's client.TokenSource.
func (m *minter) token(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.current != "" && time.Now().Before(m.renew) {
		return m.current, nil
	}
	tr, err := m.cs.CoreV1().ServiceAccounts(m.namespace).CreateToken(ctx, m.name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{m.audience},
			ExpirationSeconds: ptr.To(int64(tokenExpiration / time.Second)),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("minting a token of ServiceAccount %s/%s (TokenRequest): %w", m.namespace, m.name, err)
	}
	if tr.Status.Token == "" {
		return "", fmt.Errorf("minting a token of ServiceAccount %s/%s: the API server returned none", m.namespace, m.name)
	}
	now := time.Now()
	life := tr.Status.ExpirationTimestamp.Sub(now)
	if life <= 0 {
		life = tokenExpiration
	}
	m.current, m.renew = tr.Status.Token, now.Add(time.Duration(float64(life)*tokenRenewal))
	return m.current, nil
}

// serverAudience is the audience the MCPServer ns/server accepts ServiceAccount tokens for: the
// first of spec.auth.audiences when set, else its status.url (the default audience). warn says
// why the token may change nothing (the server does not authenticate, or not with
// ServiceAccount tokens); the token is minted anyway, the operator may be ahead of the server.
func serverAudience(ctx context.Context, cfg *rest.Config, ns, server string, warn func(string)) (string, error) {
	scheme := runtime.NewScheme()
	if err := mcpv1alpha1.AddToScheme(scheme); err != nil {
		return "", err
	}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return "", err
	}
	var s mcpv1alpha1.MCPServer
	if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: server}, &s); err != nil {
		return "", fmt.Errorf("the audience of MCPServer %s/%s: %w", ns, server, err)
	}
	a := s.Spec.Auth
	switch {
	case a == nil || a.Mode != mcpv1alpha1.AuthRequired:
		warn("MCPServer " + ns + "/" + server + " does not authenticate its callers (spec.auth.mode is not Required): it lists the same for everyone")
	case a.ServiceAccountTokens == nil:
		warn("MCPServer " + ns + "/" + server + " does not accept ServiceAccount tokens (spec.auth.serviceAccountTokens is not set): expect a 401")
	}
	if a != nil && len(a.Audiences) > 0 {
		return a.Audiences[0], nil
	}
	if s.Status.URL == "" {
		return "", errors.New("MCPServer " + ns + "/" + server + " has no status.url yet (its default token audience): is it Ready?")
	}
	return s.Status.URL, nil
}
