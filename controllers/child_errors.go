package controllers

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// childError is a child object the API server refused: which one, the API server's message,
// and what to fix.
type childError struct {
	kind, namespace, name string
	err                   error
}

func (e childError) Error() string {
	return fmt.Sprintf("%s %s/%s: %s (%s)", e.kind, e.namespace, e.name, e.err.Error(), whatToFix(e.err))
}

func (e childError) Unwrap() error { return e.err }

// childErrors are the children that failed in one reconcile; the others were applied.
type childErrors []childError

func (es childErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	noun := "child object"
	if len(es) > 1 {
		noun = "child objects"
	}
	return fmt.Sprintf("%d %s failed, the others are applied; retrying with backoff: %s", len(es), noun, strings.Join(parts, "; "))
}

// orNil returns nil for no failures (a nil childErrors in an error interface is not nil).
func (es childErrors) orNil() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

func (es childErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// whatToFix turns an API error into the action that clears it.
func whatToFix(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "exceeded quota"):
		return "the namespace's ResourceQuota is used up: raise it or delete objects it counts"
	case strings.Contains(msg, "range is full") || strings.Contains(msg, "failed to allocate"):
		return "the cluster's Service IP range is full: widen kube-apiserver --service-cluster-ip-range (or add a ServiceCIDR) or delete unused Services"
	case strings.Contains(msg, "ValidatingAdmissionPolicy") || strings.Contains(msg, "admission webhook"):
		return "an admission policy of the cluster refused it: change the MCPServer so the policy admits it, or ask the policy's owner to exempt it"
	case apierrors.IsForbidden(err):
		return "the manager may not write it: grant its ServiceAccount the verbs in config/rbac/role.yaml, or check the cluster's admission policies"
	case apierrors.IsInvalid(err):
		return "the API server refused the object: fix the MCPServer field it comes from"
	case apierrors.IsConflict(err):
		return "another writer changed it at the same time; the retry resolves it"
	case apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err):
		return "the API server is overloaded or unavailable; the retry resolves it"
	default:
		return "see the API server's message; Switchboard retries with backoff"
	}
}
