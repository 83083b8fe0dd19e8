package controllers

import (
	"cmp"
	"slices"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// auditFor compiles spec.audit into the catalog's Audit: nil when unset, so a server without
// audit keeps its catalog's exact bytes (and revision). Empty methods mean the defaults
// (tools/call, resources/read, prompts/get and denials).
func auditFor(s *mcpv1alpha1.MCPServer) *catalog.Audit {
	spec := s.Spec.Audit
	if spec == nil {
		return nil
	}
	out := &catalog.Audit{
		Arguments: string(cmp.Or(spec.Arguments, mcpv1alpha1.AuditArgumentsOff)),
		Redact:    slices.Clone(spec.Redact),
	}
	slices.Sort(out.Redact)
	out.Redact = slices.Compact(out.Redact)
	if len(spec.Methods) == 0 {
		out.Methods = slices.Clone(catalog.DefaultAuditMethods)
		out.Denials = true
	}
	for _, m := range spec.Methods {
		if m == mcpv1alpha1.AuditDenials {
			out.Denials = true
			continue
		}
		out.Methods = append(out.Methods, string(m))
	}
	slices.Sort(out.Methods)
	out.Methods = slices.Compact(out.Methods)
	if spec.Sink != nil {
		out.File = spec.Sink.File
		if spec.Sink.OTLP != nil {
			out.OTLPEndpoint = spec.Sink.OTLP.Endpoint
		}
	}
	return out
}

// status.audit.sink for records written to the sidecar's stdout, and for records exported over
// OTLP only.
const (
	AuditStdout = "stdout"
	AuditNone   = "none"
)

// auditStatus is status.audit for a compiled Audit: nil without audit.
func auditStatus(a *catalog.Audit) *mcpv1alpha1.AuditStatus {
	if a == nil {
		return nil
	}
	sink := a.File
	switch {
	case a.Stdout():
		sink = AuditStdout
	case sink == "":
		sink = AuditNone
	}
	return &mcpv1alpha1.AuditStatus{Sink: sink, Arguments: mcpv1alpha1.AuditArguments(a.Arguments), OTLPEndpoint: a.OTLPEndpoint}
}
