//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// auditIs waits until the server's stored catalog carries want as its Audit and status.audit
// says wantStatus.
func auditIs(t *testing.T, ns, server string, want *catalog.Audit, wantStatus *mcpv1alpha1.AuditStatus) {
	t.Helper()
	eventually.Succeeds(t, fmt.Sprintf("%s/%s audit %+v", ns, server, want), func() error {
		c, _, err := readCatalog(ns, server)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(c.Audit, want) {
			return fmt.Errorf("catalog audit is %+v", c.Audit)
		}
		s := &mcpv1alpha1.MCPServer{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: server}, s); err != nil {
			return err
		}
		if !reflect.DeepEqual(s.Status.Audit, wantStatus) {
			return fmt.Errorf("status.audit is %+v", s.Status.Audit)
		}
		return nil
	})
}

func hasAuditVolume(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == inject.AuditVolume })
}

// TestAuditIsLive: spec.audit reaches the catalog and status.audit, and its edits leave the pod
// template alone, except a file sink, which adds the audit volume.
func TestAuditIsLive(t *testing.T) {
	ns := newNamespace(t)
	server := newServer(ns, "weather", 1)
	server.Spec.Audit = &mcpv1alpha1.AuditSpec{}
	mustCreate(t, server)
	defaults := []string{"prompts/get", "resources/read", "tools/call"}
	auditIs(t, ns, "weather", &catalog.Audit{Arguments: "Off", Methods: defaults, Denials: true},
		&mcpv1alpha1.AuditStatus{Sink: "stdout", Arguments: "Off"})
	d := deploymentOf(t, ns, "weather")
	template := d.Spec.Template.Annotations[inject.InjectedAnnotation]
	if hasAuditVolume(d) {
		t.Fatal("a stdout audit mounts the audit volume")
	}

	edit(t, server, func() {
		server.Spec.Audit = &mcpv1alpha1.AuditSpec{Arguments: "Redacted", Redact: []string{"apiKey"}}
	})
	auditIs(t, ns, "weather", &catalog.Audit{Arguments: "Redacted", Redact: []string{"apiKey"}, Methods: defaults, Denials: true},
		&mcpv1alpha1.AuditStatus{Sink: "stdout", Arguments: "Redacted"})
	if got := deploymentOf(t, ns, "weather").Spec.Template.Annotations[inject.InjectedAnnotation]; got != template {
		t.Fatal("an audit edit changed the pod template")
	}

	edit(t, server, func() { server.Spec.Audit.Sink = &mcpv1alpha1.AuditSink{File: "/var/log/switchboard/audit.jsonl"} })
	auditIs(t, ns, "weather", &catalog.Audit{Arguments: "Redacted", Redact: []string{"apiKey"}, Methods: defaults, Denials: true,
		File: "/var/log/switchboard/audit.jsonl"}, &mcpv1alpha1.AuditStatus{Sink: "/var/log/switchboard/audit.jsonl", Arguments: "Redacted"})
	eventually.True(t, "the audit volume in the pod template", func() bool { return hasAuditVolume(deploymentOf(t, ns, "weather")) })

	// OTLP only: no stream sink (status sink none), the collector in status.
	const collector = "http://otel-collector.observability.svc:4318/v1/logs"
	edit(t, server, func() {
		server.Spec.Audit.Sink = &mcpv1alpha1.AuditSink{OTLP: &mcpv1alpha1.AuditOTLPSink{Endpoint: collector}}
	})
	auditIs(t, ns, "weather", &catalog.Audit{Arguments: "Redacted", Redact: []string{"apiKey"}, Methods: defaults, Denials: true,
		OTLPEndpoint: collector}, &mcpv1alpha1.AuditStatus{Sink: "none", Arguments: "Redacted", OTLPEndpoint: collector})

	edit(t, server, func() { server.Spec.Audit = nil })
	auditIs(t, ns, "weather", nil, nil)
}
