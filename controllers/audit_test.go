package controllers

import (
	"reflect"
	"testing"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func TestAuditFor(t *testing.T) {
	for name, tc := range map[string]struct {
		audit      *mcpv1alpha1.AuditSpec
		want       *catalog.Audit
		wantStatus *mcpv1alpha1.AuditStatus
	}{
		"unset: no audit": {},
		"empty: the defaults, to stdout": {
			audit:      &mcpv1alpha1.AuditSpec{},
			want:       &catalog.Audit{Arguments: "Off", Methods: []string{"prompts/get", "resources/read", "tools/call"}, Denials: true},
			wantStatus: &mcpv1alpha1.AuditStatus{Sink: "stdout", Arguments: "Off"},
		},
		"methods without denials, sorted": {
			audit: &mcpv1alpha1.AuditSpec{Arguments: "Full", Methods: []mcpv1alpha1.AuditMethod{"tools/list", "tools/call"}},
			want:  &catalog.Audit{Arguments: "Full", Methods: []string{"tools/call", "tools/list"}},
		},
		"denials only": {
			audit: &mcpv1alpha1.AuditSpec{Methods: []mcpv1alpha1.AuditMethod{mcpv1alpha1.AuditDenials}},
			want:  &catalog.Audit{Arguments: "Off", Denials: true},
		},
		"redacted to a file, paths sorted": {
			audit: &mcpv1alpha1.AuditSpec{Arguments: "Redacted", Redact: []string{"z", "auth.token"},
				Sink: &mcpv1alpha1.AuditSink{File: "/var/log/switchboard/a.jsonl"}},
			want: &catalog.Audit{Arguments: "Redacted", Redact: []string{"auth.token", "z"},
				Methods: []string{"prompts/get", "resources/read", "tools/call"}, Denials: true, File: "/var/log/switchboard/a.jsonl"},
			wantStatus: &mcpv1alpha1.AuditStatus{Sink: "/var/log/switchboard/a.jsonl", Arguments: "Redacted"},
		},
		"to a file and a collector": {
			audit: &mcpv1alpha1.AuditSpec{Sink: &mcpv1alpha1.AuditSink{File: "/var/log/switchboard/a.jsonl",
				OTLP: &mcpv1alpha1.AuditOTLPSink{Endpoint: "http://otel-collector.observability.svc:4318/v1/logs"}}},
			want: &catalog.Audit{Arguments: "Off", Methods: []string{"prompts/get", "resources/read", "tools/call"}, Denials: true,
				File: "/var/log/switchboard/a.jsonl", OTLPEndpoint: "http://otel-collector.observability.svc:4318/v1/logs"},
			wantStatus: &mcpv1alpha1.AuditStatus{Sink: "/var/log/switchboard/a.jsonl", Arguments: "Off",
				OTLPEndpoint: "http://otel-collector.observability.svc:4318/v1/logs"},
		},
		"to a collector only": {
			audit: &mcpv1alpha1.AuditSpec{Sink: &mcpv1alpha1.AuditSink{OTLP: &mcpv1alpha1.AuditOTLPSink{Endpoint: "https://collector.example:4318/v1/logs"}}},
			want: &catalog.Audit{Arguments: "Off", Methods: []string{"prompts/get", "resources/read", "tools/call"}, Denials: true,
				OTLPEndpoint: "https://collector.example:4318/v1/logs"},
			wantStatus: &mcpv1alpha1.AuditStatus{Sink: "none", Arguments: "Off", OTLPEndpoint: "https://collector.example:4318/v1/logs"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer("tools", "weather", 1)
			s.Spec.Audit = tc.audit
			got := auditFor(s)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("auditFor = %+v, want %+v", got, tc.want)
			}
			if got != nil {
				c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Server: catalog.Server{Namespace: "tools", Name: "weather",
					ToolPolicy: catalog.ToolPolicyAll, Caching: catalog.CacheDefaults{Discover: hint, Tools: hint, Prompts: hint,
						Resources: hint, ResourceTemplates: hint, ResourceRead: hint}}, Audit: got}
				if err := catalog.Validate(c); err != nil {
					t.Fatalf("the sidecar would reject it: %v", err)
				}
			}
			if tc.wantStatus != nil && !reflect.DeepEqual(auditStatus(got), tc.wantStatus) {
				t.Fatalf("auditStatus = %+v, want %+v", auditStatus(got), tc.wantStatus)
			}
			if got == nil && auditStatus(got) != nil {
				t.Fatal("status.audit without audit")
			}
		})
	}
}

var hint = catalog.CacheHint{CacheScope: catalog.ScopePrivate}

// TestServerStatusAudit: status.audit follows the compiled catalog: set with audit, gone when
// audit is turned off.
func TestServerStatusAudit(t *testing.T) {
	server := newServer("tools", "weather", 1)
	s := &scope{server: server, before: server.DeepCopy(), names: inject.NamesFor(server), revision: "r1",
		catalog: &catalog.Catalog{Audit: &catalog.Audit{Arguments: "Full", Methods: catalog.DefaultAuditMethods, File: "/var/log/switchboard/a.jsonl"}}}
	st := serverStatus(s, nil)
	if st.Audit == nil || st.Audit.Sink != "/var/log/switchboard/a.jsonl" || st.Audit.Arguments != "Full" {
		t.Fatalf("status.audit %+v", st.Audit)
	}
	s.before.Status = st
	s.catalog = &catalog.Catalog{}
	if st := serverStatus(s, nil); st.Audit != nil {
		t.Fatalf("status.audit %+v after audit was turned off", st.Audit)
	}
}

// The sidecar confines the audit file to catalog.AuditDir; the API's rule and the injected
// volume use mcpv1alpha1.AuditDir: they must be one directory.
func TestAuditDirIsTheSidecars(t *testing.T) {
	if mcpv1alpha1.AuditDir != catalog.AuditDir {
		t.Fatalf("api AuditDir %q, catalog AuditDir %q", mcpv1alpha1.AuditDir, catalog.AuditDir)
	}
}
