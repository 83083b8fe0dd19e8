//go:build e2e

package v1alpha1_test

import (
	"strings"
	"testing"

	v1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// The CEL and schema rules of MCPServer spec.audit against the real API server.

func TestMCPServerAuditValidation(t *testing.T) {
	valid := func() *v1.MCPServer {
		return &v1.MCPServer{
			ObjectMeta: meta("weather"),
			Spec: v1.MCPServerSpec{
				Container: &v1.ServerContainer{Image: "acme/weather-mcp:1.2.0"},
				Audit: &v1.AuditSpec{
					Arguments: v1.AuditArgumentsRedacted,
					Redact:    []string{"password", "auth.token", "items.*.secret", "$.apiKey"},
					Methods:   []v1.AuditMethod{"tools/call", v1.AuditDenials},
					Sink:      &v1.AuditSink{File: "/var/log/switchboard/audit.jsonl"},
				},
			},
		}
	}
	runValidation(t, valid, []validationCase[*v1.MCPServer]{
		{name: "redacted, to a file"},
		{name: "empty audit: every default", mutate: func(s *v1.MCPServer) { s.Spec.Audit = &v1.AuditSpec{} }},
		{name: "full", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Arguments = v1.AuditArgumentsFull }},
		{name: "unknown arguments mode", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Arguments = "Hashed" },
			wantErrors: []string{`spec.audit.arguments: Unsupported value: "Hashed"`}},
		{name: "unknown method", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Methods = []v1.AuditMethod{"tools/delete"} },
			wantErrors: []string{`spec.audit.methods[0]: Unsupported value: "tools/delete"`}},
		{name: "no methods: the default", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Methods = []v1.AuditMethod{} }},
		{name: "a method twice", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Methods = []v1.AuditMethod{"tools/call", "tools/call"} },
			wantErrors: []string{`spec.audit.methods[1]: Duplicate value: "tools/call"`}},
		{name: "redact path with an empty segment", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Redact = []string{"auth..token"} },
			wantErrors: []string{"audit.redact entries are dotted member paths"}},
		{name: "redact path ending in a dot", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Redact = []string{"auth."} },
			wantErrors: []string{"audit.redact entries are dotted member paths"}},
		{name: "redact path of 17 segments", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Redact = []string{strings.Repeat("a.", 16) + "a"}
		}, wantErrors: []string{"audit.redact entries are dotted member paths"}},
		{name: "redact path of 16 segments", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Redact = []string{strings.Repeat("a.", 15) + "a"}
		}},
		{name: "too many redact paths", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Redact = nil
			for i := range v1.MaxAuditRedactPaths + 1 {
				s.Spec.Audit.Redact = append(s.Spec.Audit.Redact, "p"+strings.Repeat("x", i))
			}
		}, wantErrors: []string{"spec.audit.redact: Too many: 65: must have at most 64 items"}},
		{name: "file outside the audit volume", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Sink.File = "/tmp/audit.jsonl" },
			wantErrors: []string{"audit.sink.file must be a file path under /var/log/switchboard/"}},
		{name: "file escaping the audit volume", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Sink.File = "/var/log/switchboard/../../etc/passwd" },
			wantErrors: []string{"audit.sink.file must be a file path under /var/log/switchboard/"}},
		{name: "file that is the directory", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Sink.File = "/var/log/switchboard/" },
			wantErrors: []string{"audit.sink.file must be a file path under /var/log/switchboard/"}},
		{name: "file that is the parent", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Sink.File = "/var/log/switchboard/.." },
			wantErrors: []string{"audit.sink.file must be a file path under /var/log/switchboard/"}},
		{name: "stdout sink", mutate: func(s *v1.MCPServer) { s.Spec.Audit.Sink = &v1.AuditSink{} }},
		{name: "a file and a collector", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink.OTLP = &v1.AuditOTLPSink{Endpoint: "http://otel-collector.observability.svc:4318/v1/logs"}
		}},
		{name: "a collector over https only", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink = &v1.AuditSink{OTLP: &v1.AuditOTLPSink{Endpoint: "https://collector.example.com/v1/logs"}}
		}},
		{name: "a collector without a scheme", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink.OTLP = &v1.AuditOTLPSink{Endpoint: "otel-collector:4318"}
		}, wantErrors: []string{"audit.sink.otlp.endpoint must be an http:// or https:// URL"}},
		{name: "a collector over grpc", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink.OTLP = &v1.AuditOTLPSink{Endpoint: "grpc://otel-collector:4317"}
		}, wantErrors: []string{"audit.sink.otlp.endpoint must be an http:// or https:// URL"}},
		{name: "a collector URL with credentials", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink.OTLP = &v1.AuditOTLPSink{Endpoint: "https://user:pw@collector.example.com/v1/logs"}
		}, wantErrors: []string{"audit.sink.otlp.endpoint must not carry credentials, a query or a fragment"}},
		{name: "an empty collector endpoint", mutate: func(s *v1.MCPServer) {
			s.Spec.Audit.Sink.OTLP = &v1.AuditOTLPSink{}
		}, wantErrors: []string{"spec.audit.sink.otlp.endpoint"}},
	})
}
