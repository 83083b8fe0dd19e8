package controllers

import (
	"reflect"
	"strings"
	"testing"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func TestCredentialsFor(t *testing.T) {
	s := newServer("ns", "weather", 1)
	if got := credentialsFor(s, true); got != nil {
		t.Fatalf("without auth: %+v", got)
	}
	s.Spec.Auth = &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, JWT: []mcpv1alpha1.JWTAuthenticator{{Issuer: mcpv1alpha1.Issuer{URL: "https://issuer.example"}}},
		UpstreamCredentials: &mcpv1alpha1.UpstreamCredentials{
			SecretName: "keys", Header: mcpv1alpha1.CredentialHeader{Name: "Authorization", ValuePrefix: "Bearer "},
			By: mcpv1alpha1.CredentialByClaim, Claim: "tenant",
			Callers:    []mcpv1alpha1.CallerCredential{{Caller: "acme", Key: "acme"}, {Caller: "globex", Key: "globex"}},
			DefaultKey: "shared",
		}}
	want := &catalog.UpstreamCredentials{Secret: "keys", Readable: true, Header: "Authorization", ValuePrefix: "Bearer ", By: "Claim",
		Keys: map[string]string{"acme": "acme", "globex": "globex"}, DefaultKey: "shared"}
	if got := credentialsFor(s, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("credentialsFor = %+v, want %+v", got, want)
	}
	// by Claim: every issuer maps the claim, and the compiled catalog is valid.
	auth := authFor(s, inject.NamesFor(s), "")
	if auth.JWT[0].CredentialClaim != "tenant" {
		t.Fatalf("issuer credentialClaim %q", auth.JWT[0].CredentialClaim)
	}
	auth.UpstreamCredentials = credentialsFor(s, false)
	c := catalogFor(s, items{})
	c.Auth = auth
	if err := catalog.Validate(c); err != nil {
		t.Fatalf("compiled catalog invalid: %v", err)
	}
	if c.CredentialsSecret() != "" {
		t.Fatal("a Secret that is not readable is named for the sidecar to watch")
	}
	s.Spec.Auth.UpstreamCredentials.By, s.Spec.Auth.UpstreamCredentials.Claim = "", ""
	if got := credentialsFor(s, true); got.By != catalog.CredentialByServiceAccount {
		t.Fatalf("by defaults to %q", got.By)
	}
	if authFor(s, inject.NamesFor(s), "").JWT[0].CredentialClaim != "" {
		t.Fatal("credentialClaim without by Claim")
	}
}

func TestCredentialKeys(t *testing.T) {
	u := &mcpv1alpha1.UpstreamCredentials{SecretName: "keys", Header: mcpv1alpha1.CredentialHeader{Name: "X-Api-Key"},
		Callers: []mcpv1alpha1.CallerCredential{{Caller: "a/alice", Key: "alice"}, {Caller: "a/bob", Key: "bob"}, {Caller: "a/carol", Key: "bob"}}}
	for name, tc := range map[string]struct {
		defaultKey string
		data       map[string]string
		reason     mcpv1alpha1.ConditionReason
		names      []string
	}{
		"all there":          {data: map[string]string{"alice": "k1", "bob": "k2"}, reason: mcpv1alpha1.ReasonCredentialsResolved},
		"a key missing":      {data: map[string]string{"alice": "k1"}, reason: mcpv1alpha1.ReasonCredentialsKeyMissing, names: []string{`"bob" (for a/bob, a/carol)`}},
		"the default absent": {defaultKey: "shared", data: map[string]string{"alice": "k1", "bob": "k2"}, reason: mcpv1alpha1.ReasonCredentialsKeyMissing, names: []string{`"shared" (for every caller not listed`}},
		"a trailing newline": {data: map[string]string{"alice": "k1\n", "bob": "k2"}, reason: mcpv1alpha1.ReasonCredentialsValueInvalid, names: []string{`"alice" (for a/alice)`}},
		"an empty value":     {data: map[string]string{"alice": "", "bob": "k2"}, reason: mcpv1alpha1.ReasonCredentialsValueInvalid, names: []string{`"alice"`}},
	} {
		t.Run(name, func(t *testing.T) {
			u := *u
			u.DefaultKey = tc.defaultKey
			data := map[string][]byte{}
			for k, v := range tc.data {
				data[k] = []byte(v)
			}
			got := credentialKeys(&u, credentialValues(data))
			if got.reason != tc.reason || !got.readable {
				t.Fatalf("credentialKeys = %+v, want reason %s", got, tc.reason)
			}
			for _, n := range tc.names {
				if !strings.Contains(got.message, n) {
					t.Errorf("message %q does not name %s", got.message, n)
				}
			}
			for _, v := range tc.data {
				if v != "" && strings.Contains(got.message, strings.TrimSpace(v)) {
					t.Errorf("message %q carries a value", got.message)
				}
			}
		})
	}
}
