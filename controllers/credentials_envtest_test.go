//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// credentialsServer is an MCPServer with spec.auth.upstreamCredentials from Secret keys.
func credentialsServer(ns, name string) *mcpv1alpha1.MCPServer {
	s := newServer(ns, name, 1)
	s.Spec.Auth = &mcpv1alpha1.AuthSpec{
		Mode:                 mcpv1alpha1.AuthRequired,
		ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{},
		UpstreamCredentials: &mcpv1alpha1.UpstreamCredentials{
			SecretName: "keys",
			Header:     mcpv1alpha1.CredentialHeader{Name: "X-Api-Key"},
			Callers: []mcpv1alpha1.CallerCredential{
				{Caller: ns + "/alice", Key: "alice"}, {Caller: ns + "/bob", Key: "bob"},
			},
		},
	}
	return s
}

func getServer(t *testing.T, key client.ObjectKey) *mcpv1alpha1.MCPServer {
	t.Helper()
	s := &mcpv1alpha1.MCPServer{}
	if err := k8s.Get(context.Background(), key, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// mayReadSecret asks the API server (SubjectAccessReview) whether the server's sidecar
// ServiceAccount may get (or list) the Secret name in namespace ns.
func mayReadSecret(t *testing.T, sidecarNS, server, ns, name, verb string) bool {
	t.Helper()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + sidecarNS + ":" + server + "-sidecar",
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + sidecarNS, "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: "secrets", Name: name},
	}}
	if err := k8s.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// TestUpstreamCredentialsSecret: the credentials Secret is read by the sidecar only once its
// owner exposes it to the server, and then only it (RBAC by resourceNames, in the server's
// namespace): not another Secret of the namespace, not a Secret of the same name in another
// tenant's namespace. The UpstreamCredentials condition (and a Warning Event) says what to fix:
// label the Secret, add a missing key (naming the callers it concerns), store a value without
// a trailing newline. The catalog carries the mapping, never a value.
func TestUpstreamCredentialsSecret(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	server := credentialsServer(ns, "weather")
	const aliceKey, bobKey = "alice-key-3b1f0c", "bob-key-9d2e77"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns},
		StringData: map[string]string{"alice": aliceKey}}
	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prod-db", Namespace: ns, Labels: map[string]string{ExposeToLabel: "weather"}},
		StringData: map[string]string{"password": "hunter2"}}
	tenant := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: other, Labels: map[string]string{ExposeToLabel: "weather"}},
		StringData: map[string]string{"alice": "tenant-b-key"}}
	mustCreate(t, server, secret, unrelated, tenant)
	key := client.ObjectKeyFromObject(server)

	// Not exposed: not granted, every caller refused, the condition gives the command.
	serverCondition(t, key, mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsSecretNotExposed)
	eventRecorded(t, server, mcpv1alpha1.ReasonCredentialsSecretNotExposed)
	if msg := findConditionIn(getServer(t, key).Status.Conditions, mcpv1alpha1.ConditionUpstreamCredentials).Message; !strings.Contains(msg, "kubectl label secret -n "+ns+" keys "+ExposeToLabel+"=weather") {
		t.Errorf("condition message %q does not give the label command", msg)
	}
	if s := granted(t, ns, "weather", "secrets"); len(s) != 0 {
		t.Errorf("the sidecar may read Secrets %v before the credentials Secret is exposed", s)
	}
	c, _ := getCatalog(t, ns, "weather")
	if u := c.Auth.UpstreamCredentials; u == nil || u.Readable || u.Secret != "keys" || u.Keys[ns+"/alice"] != "alice" {
		t.Fatalf("catalog credentials %+v, want the mapping, not readable", u)
	}

	// Exposed, bob's key missing: granted by name, the condition names the key and its caller.
	label(t, secret, "weather")
	serverCondition(t, key, mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsKeyMissing)
	eventRecorded(t, server, mcpv1alpha1.ReasonCredentialsKeyMissing)
	if msg := findConditionIn(getServer(t, key).Status.Conditions, mcpv1alpha1.ConditionUpstreamCredentials).Message; !strings.Contains(msg, `"bob" (for `+ns+`/bob)`) {
		t.Errorf("condition message %q does not name the missing key and its caller", msg)
	}
	eventually.Succeeds(t, "the credentials Secret granted, alone", func() error {
		if s := granted(t, ns, "weather", "secrets"); !slices.Equal(s, []string{"keys"}) {
			return fmt.Errorf("granted Secrets %v, want [keys]", s)
		}
		return nil
	})
	for _, verb := range []string{"get", "list", "watch"} {
		if !mayReadSecret(t, ns, "weather", ns, "keys", verb) {
			t.Errorf("the sidecar may not %s its credentials Secret", verb)
		}
		// Attack: another Secret of the namespace (even one exposed to the server), and another
		// tenant's Secret of the same name.
		if mayReadSecret(t, ns, "weather", ns, "prod-db", verb) {
			t.Errorf("the sidecar may %s Secret prod-db, which no resource or credential names", verb)
		}
		if mayReadSecret(t, ns, "weather", other, "keys", verb) {
			t.Errorf("the sidecar may %s Secret keys of namespace %s", verb, other)
		}
	}
	if mayReadSecret(t, ns, "weather", ns, "", "list") {
		t.Error("the sidecar may list every Secret of its namespace")
	}

	// A trailing newline: named, not trimmed.
	edit(t, secret, func() { secret.Data = map[string][]byte{"alice": []byte(aliceKey), "bob": []byte(bobKey + "\n")} })
	serverCondition(t, key, mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsValueInvalid)
	edit(t, secret, func() { secret.Data = map[string][]byte{"alice": []byte(aliceKey), "bob": []byte(bobKey)} })
	serverCondition(t, key, mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionTrue, mcpv1alpha1.ReasonCredentialsResolved)

	// No value anywhere the controller writes: status, Events, the catalog.
	srv := getServer(t, key)
	var events []string
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		events = append(events, e.Note)
	}
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "weather-catalog"}, cm); err != nil {
		t.Fatal(err)
	}
	raw := cm.Data[catalog.Key]
	for _, v := range []string{aliceKey, bobKey} {
		if strings.Contains(fmt.Sprint(srv.Status), v) || strings.Contains(strings.Join(events, "\n"), v) || strings.Contains(raw, v) {
			t.Errorf("a credential value appears in the status, an Event or the catalog")
		}
	}
	if c, _ := getCatalog(t, ns, "weather"); !c.Auth.UpstreamCredentials.Readable {
		t.Error("the exposed Secret is not readable in the catalog")
	}

	// Turned off: the condition and the grant go.
	edit(t, server, func() { server.Spec.Auth.UpstreamCredentials = nil })
	eventually.Succeeds(t, "the condition and the grant removed", func() error {
		if c := findConditionIn(getServer(t, key).Status.Conditions, mcpv1alpha1.ConditionUpstreamCredentials); c.Type != "" {
			return fmt.Errorf("condition still there: %+v", c)
		}
		if s := granted(t, ns, "weather", "secrets"); len(s) != 0 {
			return fmt.Errorf("still granted Secrets %v", s)
		}
		c, _ := getCatalog(t, ns, "weather")
		if c.Auth == nil || c.Auth.UpstreamCredentials != nil {
			return fmt.Errorf("catalog auth %+v", c.Auth)
		}
		return nil
	})
}

// TestUpstreamCredentialsRefusedSecret: a ServiceAccount token Secret is never a credentials
// source, whatever its labels.
func TestUpstreamCredentialsRefusedSecret(t *testing.T) {
	ns := newNamespace(t)
	server := credentialsServer(ns, "weather")
	server.Spec.Auth.UpstreamCredentials.SecretName = "deployer-token"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}}
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "deployer-token", Namespace: ns,
		Labels: map[string]string{ExposeToLabel: "weather"}, Annotations: map[string]string{corev1.ServiceAccountNameKey: "deployer"}},
		Type: corev1.SecretTypeServiceAccountToken}
	mustCreate(t, server, sa, tok)
	serverCondition(t, client.ObjectKeyFromObject(server), mcpv1alpha1.ConditionUpstreamCredentials, metav1.ConditionFalse, mcpv1alpha1.ReasonCredentialsSecretRefused)
	if s := granted(t, ns, "weather", "secrets"); len(s) != 0 {
		t.Errorf("the sidecar may read Secrets %v", s)
	}
	c, _ := getCatalog(t, ns, "weather")
	if c.CredentialsSecret() != "" {
		t.Errorf("the catalog names a readable credentials Secret: %+v", c.Auth.UpstreamCredentials)
	}
}
