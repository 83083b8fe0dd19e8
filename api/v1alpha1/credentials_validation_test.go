//go:build e2e

package v1alpha1_test

import (
	"fmt"
	"testing"

	v1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// The rules of spec.auth.upstreamCredentials against the real API server. The attacks come
// first: a credential header that would override what the sidecar or HTTP itself sets (the
// identity headers, the protocol headers, framing), or the caller's own token forwarded into
// the same header, or one of Switchboard's own Secrets named as the source.
func TestUpstreamCredentialsValidation(t *testing.T) {
	valid := func() *v1.MCPServer {
		return &v1.MCPServer{
			ObjectMeta: meta("weather"),
			Spec: v1.MCPServerSpec{
				Container: &v1.ServerContainer{Image: "acme/weather-mcp:1.2.0"},
				Auth: &v1.AuthSpec{
					Mode:                 v1.AuthRequired,
					ServiceAccountTokens: &v1.ServiceAccountTokens{},
					UpstreamCredentials: &v1.UpstreamCredentials{
						SecretName: "weather-api-keys",
						Header:     v1.CredentialHeader{Name: "Authorization", ValuePrefix: "Bearer "},
						Callers:    []v1.CallerCredential{{Caller: "team-a/agent", Key: "team-a"}},
						DefaultKey: "shared",
					},
				},
			},
		}
	}
	header := func(name string) func(*v1.MCPServer) {
		return func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.Header.Name = name }
	}
	const reserved = "upstreamCredentials.header.name is a header HTTP or the sidecar itself sets"
	const prefixed = "upstreamCredentials.header.name must not start with X-Switchboard-"
	runValidation(t, valid, []validationCase[*v1.MCPServer]{
		{name: "a key per ServiceAccount and a default"},
		// Attacks: headers the credential must never replace.
		{name: "identity header", mutate: header("X-Switchboard-Subject"), wantErrors: []string{prefixed}},
		{name: "identity header in lower case", mutate: header("x-switchboard-service-account"), wantErrors: []string{prefixed}},
		{name: "protocol header", mutate: header("Mcp-Protocol-Version"), wantErrors: []string{prefixed}},
		{name: "session header", mutate: header("MCP-Session-Id"), wantErrors: []string{prefixed}},
		{name: "forwarding header", mutate: header("X-Forwarded-For"), wantErrors: []string{prefixed}},
		{name: "hop-by-hop header", mutate: header("Connection"), wantErrors: []string{reserved}},
		{name: "hop-by-hop header, other spelling", mutate: header("TRANSFER-ENCODING"), wantErrors: []string{reserved}},
		{name: "proxy authorization", mutate: header("Proxy-Authorization"), wantErrors: []string{reserved}},
		{name: "host", mutate: header("Host"), wantErrors: []string{reserved}},
		{name: "content length", mutate: header("Content-Length"), wantErrors: []string{reserved}},
		{name: "trace context", mutate: header("traceparent"), wantErrors: []string{reserved}},
		{name: "not a header name", mutate: header("X Api Key"), wantErrors: []string{"spec.auth.upstreamCredentials.header.name in body should match"}},
		{name: "header with a colon", mutate: header("X-Api-Key:"), wantErrors: []string{"spec.auth.upstreamCredentials.header.name in body should match"}},
		{name: "value prefix with a newline", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.UpstreamCredentials.Header.ValuePrefix = "Bearer\r\nX-Evil: 1 "
		}, wantErrors: []string{"spec.auth.upstreamCredentials.header.valuePrefix in body should match"}},
		{name: "caller's token forwarded into the same header", mutate: func(s *v1.MCPServer) { s.Spec.Auth.ForwardToken = true },
			wantErrors: []string{"auth.forwardToken and auth.upstreamCredentials.header.name Authorization both set"}},
		{name: "caller's token forwarded, credential in another header", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.ForwardToken = true
			s.Spec.Auth.UpstreamCredentials.Header = v1.CredentialHeader{Name: "X-Api-Key"}
		}},
		{name: "drain token Secret", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.SecretName = "weather-drain-token" },
			wantErrors: []string{"upstreamCredentials.secretName names a Switchboard Secret"}},
		{name: "session Secret", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.SecretName = "other-sidecar-session" },
			wantErrors: []string{"upstreamCredentials.secretName names a Switchboard Secret"}},
		{name: "Secret in another namespace", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.SecretName = "tenant-b/keys" },
			wantErrors: []string{"spec.auth.upstreamCredentials.secretName in body should match"}},
		// Where credentials make sense.
		{name: "auth off", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Mode = v1.AuthOff },
			wantErrors: []string{"auth.upstreamCredentials needs auth.mode Required"}},
		{name: "auth mode left out", mutate: func(s *v1.MCPServer) { s.Spec.Auth.Mode = "" },
			wantErrors: []string{"auth.upstreamCredentials needs auth.mode Required"}},
		{name: "stdio server", mutate: func(s *v1.MCPServer) {
			s.Spec.Container.Transport = v1.TransportStdio
			s.Spec.Container.Command = []string{"npx", "-y", "@modelcontextprotocol/server-everything"}
		}, wantErrors: []string{"auth.upstreamCredentials cannot be used with container.transport Stdio: one child process serves every caller"}},
		{name: "external server", mutate: func(s *v1.MCPServer) {
			s.Spec.Mode = v1.WorkloadExternal
			s.Spec.Container = &v1.ServerContainer{Port: 8080}
		}},
		// The mapping.
		{name: "X-Api-Key without a prefix", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.UpstreamCredentials.Header = v1.CredentialHeader{Name: "X-Api-Key"}
		}},
		{name: "default only", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.Callers = nil }},
		{name: "callers only", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.DefaultKey = "" }},
		{name: "no key at all", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.UpstreamCredentials.Callers, s.Spec.Auth.UpstreamCredentials.DefaultKey = nil, ""
		}, wantErrors: []string{"upstreamCredentials maps no caller to a key"}},
		{name: "ServiceAccount without a namespace", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.UpstreamCredentials.Callers[0].Caller = "agent"
		}, wantErrors: []string{"with by ServiceAccount, every upstreamCredentials.callers[].caller is <namespace>/<name>"}},
		{name: "ServiceAccount as a username", mutate: func(s *v1.MCPServer) {
			s.Spec.Auth.UpstreamCredentials.Callers[0].Caller = "system:serviceaccount:team-a:agent"
		}, wantErrors: []string{"with by ServiceAccount, every upstreamCredentials.callers[].caller is <namespace>/<name>"}},
		{name: "by username", mutate: func(s *v1.MCPServer) {
			u := s.Spec.Auth.UpstreamCredentials
			u.By = v1.CredentialByUsername
			u.Callers = []v1.CallerCredential{{Caller: "oidc:alice@example.com", Key: "alice"}, {Caller: "system:serviceaccount:team-a:agent", Key: "team-a"}}
		}},
		{name: "by claim", mutate: func(s *v1.MCPServer) {
			u := s.Spec.Auth.UpstreamCredentials
			u.By, u.Claim = v1.CredentialByClaim, "tenant"
			u.Callers = []v1.CallerCredential{{Caller: "acme", Key: "acme"}}
		}},
		{name: "by claim without the claim", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.By = v1.CredentialByClaim },
			wantErrors: []string{"upstreamCredentials.claim names the token claim when by is Claim, and only then"}},
		{name: "a claim without by claim", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.Claim = "tenant" },
			wantErrors: []string{"upstreamCredentials.claim names the token claim when by is Claim, and only then"}},
		{name: "unknown by", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.By = "Group" },
			wantErrors: []string{`spec.auth.upstreamCredentials.by: Unsupported value: "Group"`}},
		{name: "caller twice", mutate: func(s *v1.MCPServer) {
			u := s.Spec.Auth.UpstreamCredentials
			u.Callers = append(u.Callers, v1.CallerCredential{Caller: "team-a/agent", Key: "other"})
		}, wantErrors: []string{"Duplicate value"}},
		{name: "key not a Secret key", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.Callers[0].Key = "team/a" },
			wantErrors: []string{"spec.auth.upstreamCredentials.callers[0].key in body should match"}},
		{name: "default key not a Secret key", mutate: func(s *v1.MCPServer) { s.Spec.Auth.UpstreamCredentials.DefaultKey = "a key" },
			wantErrors: []string{"spec.auth.upstreamCredentials.defaultKey in body should match"}},
		{name: "257 callers", mutate: func(s *v1.MCPServer) {
			u := s.Spec.Auth.UpstreamCredentials
			u.Callers = nil
			for i := range v1.MaxCredentialCallers + 1 {
				u.Callers = append(u.Callers, v1.CallerCredential{Caller: fmt.Sprintf("ns/sa-%d", i), Key: "k"})
			}
		}, wantErrors: []string{"must have at most 256 items"}},
		{name: "256 callers", mutate: func(s *v1.MCPServer) {
			u := s.Spec.Auth.UpstreamCredentials
			u.Callers = nil
			for i := range v1.MaxCredentialCallers {
				u.Callers = append(u.Callers, v1.CallerCredential{Caller: fmt.Sprintf("ns/sa-%d", i), Key: "k"})
			}
		}},
	})
}
