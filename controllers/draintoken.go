package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// drainTokenBytes of randomness: 256 bits, hex-encoded into the Secret (kube.ValidDrainToken).
const drainTokenBytes = 32

// drainTokenSecretFor holds a new random drain token. The controller creates it once and never
// rewrites a valid one. The pod spec names the Secret, never the token: it is mounted into the
// sidecar container only, and read there on every drain, so replacing it rolls no pod.
func drainTokenSecretFor(s *mcpv1alpha1.MCPServer, n inject.ObjectNames) (*corev1.Secret, error) {
	b := make([]byte, drainTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	// Created once, never applied (a valid token is never rewritten), so it is a typed object.
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      n.DrainTokenSecret,
			Namespace: n.Namespace,
			Labels:    inject.LabelsFor(s),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: mcpv1alpha1.GroupVersion.String(), Kind: "MCPServer", Name: s.Name, UID: s.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{kube.DrainTokenKey: []byte(hex.EncodeToString(b))},
	}, nil
}

// ensureOwnSecrets makes sure the server's drain-token and session Secrets exist and are its
// own, before any child uses them: a Secret of either name that the server does not control is
// refused, and nothing is applied (security review F17: whoever planted it would know the token
// or the key).
func (r *MCPServerReconciler) ensureOwnSecrets(ctx context.Context, s *scope) (ctrl.Result, error) {
	if res, err := r.ensureDrainToken(ctx, s); err != nil {
		return res, err
	}
	return ctrl.Result{}, r.ensureSessionSecret(ctx, s)
}

// refusal is a failure only a person can clear; reason is the condition reason that names it.
// It is not terminal: the controller retries with backoff, so it recovers once the person acted.
type refusal struct{ reason, message string }

func (e *refusal) Error() string { return e.message }

// notOwned refuses a Secret of one of the server's reserved names that the server does not
// control, and says how to clear it; nil when the server controls it.
func notOwned(server *mcpv1alpha1.MCPServer, sec *corev1.Secret) error {
	if metav1.IsControlledBy(sec, server) {
		return nil
	}
	return &refusal{reason: string(mcpv1alpha1.ReasonSecretNotOwned), message: fmt.Sprintf(
		"Secret %s/%s exists but this MCPServer does not control it, so Switchboard does not use it (whoever created it would know its token or key); "+
			"delete it (kubectl delete secret -n %s %s) and the controller creates its own", sec.Namespace, sec.Name, sec.Namespace, sec.Name)}
}

// ensureDrainToken makes sure the server's drain-token Secret exists and holds a valid token
// (the pods mount it, and cannot start without it). It reads the Secret from the cache (which holds only Switchboard's own
// Secrets) and, when the cache has none, creates one; if another reconcile created it first the
// API server answers AlreadyExists and the stored token wins, so the token never flips.
func (r *MCPServerReconciler) ensureDrainToken(ctx context.Context, s *scope) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: s.names.Namespace, Name: s.names.DrainTokenSecret}
	sec := &corev1.Secret{}
	err := r.Get(ctx, key, sec)
	switch {
	case err == nil:
		if err := notOwned(s.server, sec); err != nil {
			return ctrl.Result{}, err
		}
		if _, ok := kube.ValidDrainToken(sec); ok {
			return ctrl.Result{}, nil
		}
		// Edited by hand into something unusable: replace the token (the kubelet updates the
		// mounted file; no pod rolls).
		fresh, err := drainTokenSecretFor(s.server, s.names)
		if err != nil {
			return ctrl.Result{}, err
		}
		ctrl.LoggerFrom(ctx).Info("Replacing an invalid drain token", "secret", key)
		patch := client.MergeFrom(sec.DeepCopy())
		sec.Data = fresh.Data
		if err := r.Patch(ctx, sec, patch, client.FieldOwner(FieldOwner)); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	fresh, err := drainTokenSecretFor(s.server, s.names)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.Create(ctx, fresh, client.FieldOwner(FieldOwner))
	if apierrors.IsAlreadyExists(err) {
		// The cache lags behind a Secret created moments ago, or does not hold one created
		// without Switchboard's label: read it from the API server, and take it only if ours.
		if err := r.APIReader.Get(ctx, key, sec); err != nil {
			return ctrl.Result{}, err
		}
		if err := notOwned(s.server, sec); err != nil {
			return ctrl.Result{}, err
		}
		if _, ok := kube.ValidDrainToken(sec); !ok {
			return ctrl.Result{}, fmt.Errorf("secret %s holds no valid drain token yet; retrying", key)
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("Created the drain token", "secret", key)
	return ctrl.Result{}, nil
}
