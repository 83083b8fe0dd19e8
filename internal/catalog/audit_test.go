package catalog

import (
	"strings"
	"testing"
)

func auditSample() *Catalog {
	c := sample()
	c.Audit = &Audit{Arguments: AuditArgumentsRedacted, Redact: []string{"auth.token", "$.items.*.secret"},
		Methods: []string{"tools/call"}, Denials: true, File: "/var/log/switchboard/audit.jsonl",
		OTLPEndpoint: "http://otel-collector.observability.svc:4318/v1/logs"}
	return c
}

func fill(s []string, v string) {
	for i := range s {
		s[i] = v
	}
}

func TestAuditRoundTrips(t *testing.T) {
	b, err := Encode(auditSample())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if a := c.Audit; a == nil || a.Arguments != AuditArgumentsRedacted || a.Redact[1] != "$.items.*.secret" || !a.Denials ||
		a.File != "/var/log/switchboard/audit.jsonl" || a.OTLPEndpoint != "http://otel-collector.observability.svc:4318/v1/logs" ||
		!a.Audits("tools/call") || a.Audits("tools/list") {
		t.Fatalf("lost in the round trip: %s", b)
	}
	// A catalog without audit keeps its bytes: no "audit" member at all.
	plain, _ := Encode(sample())
	if strings.Contains(string(plain), `"audit"`) {
		t.Fatalf("audit member in a catalog without audit: %s", plain)
	}
}

func TestAuditValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Audit)
		want   string
	}{
		"unknown mode":     {func(a *Audit) { a.Arguments = "Hashed" }, "audit.arguments"},
		"empty mode":       {func(a *Audit) { a.Arguments = "" }, "audit.arguments"},
		"empty segment":    {func(a *Audit) { a.Redact = []string{"auth..token"} }, "audit.redact"},
		"long path":        {func(a *Audit) { a.Redact = []string{strings.Repeat("a.", 16) + "a"} }, "audit.redact"},
		"audits nothing":   {func(a *Audit) { a.Methods, a.Denials = nil, false }, "audits nothing"},
		"empty method":     {func(a *Audit) { a.Methods = []string{""} }, "empty method"},
		"relative file":    {func(a *Audit) { a.File = "audit.jsonl" }, "audit.file"},
		"unclean file":     {func(a *Audit) { a.File = "/var/log/switchboard/../x" }, "audit.file"},
		"file a directory": {func(a *Audit) { a.File = "/var/log/switchboard/" }, "audit.file"},
		"too many paths":   {func(a *Audit) { a.Redact = make([]string, 65); fill(a.Redact, "a") }, "at most 64"},
		"otlp not a URL":   {func(a *Audit) { a.OTLPEndpoint = "collector:4318" }, "audit.otlpEndpoint"},
		"otlp with a user": {func(a *Audit) { a.OTLPEndpoint = "http://u:p@collector:4318/v1/logs" }, "audit.otlpEndpoint"},
		"otlp no host":     {func(a *Audit) { a.OTLPEndpoint = "http:///v1/logs" }, "audit.otlpEndpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			c := auditSample()
			tc.mutate(c.Audit)
			err := Validate(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := Validate(auditSample()); err != nil {
		t.Fatalf("valid sample refused: %v", err)
	}
	denialsOnly := auditSample()
	denialsOnly.Audit.Methods = nil
	if err := Validate(denialsOnly); err != nil {
		t.Fatalf("denials only refused: %v", err)
	}
}
