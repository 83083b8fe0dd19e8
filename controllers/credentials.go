package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// credentialsCheck is what the controller found about the Secret of
// spec.auth.upstreamCredentials: the condition's reason and message, and whether the sidecars
// may read the Secret. It names keys and callers, never a value.
type credentialsCheck struct {
	reason   mcpv1alpha1.ConditionReason
	message  string
	readable bool
}

// credentialsFor compiles spec.auth.upstreamCredentials into the catalog (the mapping only: the
// values stay in the Secret, which the sidecars watch). Nil without it or without auth.
func credentialsFor(s *mcpv1alpha1.MCPServer, readable bool) *catalog.UpstreamCredentials {
	if !authRequired(s) || s.Spec.Auth.UpstreamCredentials == nil {
		return nil
	}
	u := s.Spec.Auth.UpstreamCredentials
	out := &catalog.UpstreamCredentials{
		Secret:      u.SecretName,
		Readable:    readable,
		Header:      u.Header.Name,
		ValuePrefix: u.Header.ValuePrefix,
		By:          string(u.By),
		DefaultKey:  u.DefaultKey,
	}
	if out.By == "" {
		out.By = catalog.CredentialByServiceAccount
	}
	if len(u.Callers) > 0 {
		out.Keys = make(map[string]string, len(u.Callers))
		for _, c := range u.Callers {
			out.Keys[c.Caller] = c.Key
		}
	}
	return out
}

// credentialClaim is the claim every JWT issuer maps to the caller's credential selector ("" unless
// spec.auth.upstreamCredentials.by is Claim).
func credentialClaim(s *mcpv1alpha1.MCPServer) string {
	if u := s.Spec.Auth.UpstreamCredentials; u != nil && u.By == mcpv1alpha1.CredentialByClaim {
		return u.Claim
	}
	return ""
}

// checkCredentials decides whether the Secret of spec.auth.upstreamCredentials may be read by
// the server's sidecars and holds what the mapping names; nil without upstreamCredentials. As
// for Secret-backed resources, a Secret not exposed to the server (the ExposeToLabel) and one
// that does not exist get the same answer, and the content is read only once it is exposed.
// Exposing, editing or deleting it is watched (watchSources).
func (r *MCPServerReconciler) checkCredentials(ctx context.Context, s *mcpv1alpha1.MCPServer) (*credentialsCheck, error) {
	if !authRequired(s) || s.Spec.Auth.UpstreamCredentials == nil {
		return nil, nil
	}
	u := s.Spec.Auth.UpstreamCredentials
	notExposed := &credentialsCheck{reason: mcpv1alpha1.ReasonCredentialsSecretNotExposed, message: fmt.Sprintf(
		"Secret %q of spec.auth.upstreamCredentials is not exposed to MCPServer %q, or does not exist, so every caller is refused; "+
			"create it and label it: kubectl label secret -n %s %s %s=%s (several servers: join their names with '.'); it applies without a restart",
		u.SecretName, s.Name, s.Namespace, u.SecretName, ExposeToLabel, s.Name)}
	key := client.ObjectKey{Namespace: s.Namespace, Name: u.SecretName}
	m := sourceMeta("Secret")
	err := r.Sources.Get(ctx, key, m)
	if apierrors.IsNotFound(err) {
		return notExposed, nil
	}
	if err != nil {
		return nil, err
	}
	if p := refusedSource("Secret", m, ""); p.reason != "" {
		return refusedCredentials(p), nil
	}
	if !exposedTo(m.Labels, s.Name) {
		return notExposed, nil
	}
	rd, found, err := r.sourceReads.read(ctx, r.APIReader, "Secret", m)
	if err != nil {
		return nil, err
	}
	if !found {
		return notExposed, nil
	}
	if p := refusedSource("Secret", &rd.meta, rd.secretType); p.reason != "" {
		return refusedCredentials(p), nil
	}
	if !exposedTo(rd.meta.Labels, s.Name) {
		return notExposed, nil
	}
	return credentialKeys(u, rd.keys), nil
}

func refusedCredentials(p sourceProblem) *credentialsCheck {
	return &credentialsCheck{reason: mcpv1alpha1.ReasonCredentialsSecretRefused,
		message: strings.Replace(p.message, "point spec.source at", "point spec.auth.upstreamCredentials.secretName at", 1)}
}

// credentialKeys checks an exposed Secret's keys (credentialValues: whether each value could be
// sent) against the mapping: every key it names is present and holds a value a header can carry.
// The message names keys and the callers mapped to them, never a value.
func credentialKeys(u *mcpv1alpha1.UpstreamCredentials, keys map[string]bool) *credentialsCheck {
	callers := map[string][]string{} // key -> callers mapped to it
	for _, c := range u.Callers {
		callers[c.Key] = append(callers[c.Key], c.Caller)
	}
	if u.DefaultKey != "" {
		callers[u.DefaultKey] = append(callers[u.DefaultKey], "every caller not listed (defaultKey)")
	}
	var missing, invalid []string
	for _, k := range slices.Sorted(maps.Keys(callers)) {
		valid, ok := keys[k]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%q (for %s)", k, strings.Join(callers[k], ", ")))
		case !valid:
			invalid = append(invalid, fmt.Sprintf("%q (for %s)", k, strings.Join(callers[k], ", ")))
		}
	}
	switch {
	case len(missing) > 0:
		return &credentialsCheck{readable: true, reason: mcpv1alpha1.ReasonCredentialsKeyMissing, message: fmt.Sprintf(
			"Secret %q has no key %s; those callers are refused until the keys are added (other callers keep working)",
			u.SecretName, strings.Join(missing, ", "))}
	case len(invalid) > 0:
		return &credentialsCheck{readable: true, reason: mcpv1alpha1.ReasonCredentialsValueInvalid, message: fmt.Sprintf(
			"Secret %q: the value of key %s cannot be sent in a header (empty, or a control character such as a trailing newline); "+
				"store it without one (kubectl create secret generic --from-literal, or printf instead of echo); those callers are refused until then",
			u.SecretName, strings.Join(invalid, ", "))}
	}
	return &credentialsCheck{readable: true, reason: mcpv1alpha1.ReasonCredentialsResolved, message: fmt.Sprintf(
		"Secret %q holds every mapped key; the sidecars send each caller's credential in header %s", u.SecretName, u.Header.Name)}
}
