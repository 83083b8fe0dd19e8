package kube

import (
	"context"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// DrainTokenKey is the key of the token in the Secret <server>-drain-token, which the controller
// creates once per MCPServer (docs/security.md).
const DrainTokenKey = "token"

// drainTokenHexLen: 256 random bits, hex-encoded.
const drainTokenHexLen = 64

// ValidDrainToken returns the token of a drain-token Secret when it is one the controller could
// have generated (64 lowercase or uppercase hex digits).
func ValidDrainToken(sec *corev1.Secret) (string, bool) {
	t := string(sec.Data[DrainTokenKey])
	if len(t) != drainTokenHexLen {
		return "", false
	}
	if _, err := hex.DecodeString(t); err != nil {
		return "", false
	}
	return t, true
}

// DrainToken reads the drain token of a server for the injection webhook: from the cache (which
// holds Switchboard's own Secrets), else from the API server (a Secret created moments ago). It
// is "" while the controller has not created the Secret yet (or when the server does not control
// the Secret of that name); such a pod's sidecar refuses HTTP
// drains, and SidecarsUpToDate names it as stale until its workload is rolled.
func DrainToken(ctx context.Context, cached, direct client.Reader, s *mcpv1alpha1.MCPServer) (string, error) {
	key := client.ObjectKey{Namespace: s.Namespace, Name: inject.NamesFor(s).DrainTokenSecret}
	sec := &corev1.Secret{}
	err := cached.Get(ctx, key, sec)
	if apierrors.IsNotFound(err) && direct != nil {
		err = direct.Get(ctx, key, sec)
	}
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the drain token %s: %w", key, err)
	}
	if !metav1.IsControlledBy(sec, s) {
		// Planted before the server existed (security review F17): never hand its token out. The
		// controller refuses it too, and the server's status says which Secret to delete.
		return "", nil
	}
	t, _ := ValidDrainToken(sec)
	return t, nil
}
