package controllers

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWhatToFix(t *testing.T) {
	svc := schema.GroupResource{Resource: "services"}
	cases := []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(svc, "s1", errors.New(`exceeded quota: q, requested: services=1, used: services=10, limited: services=10`)), "ResourceQuota"},
		{apierrors.NewInternalError(errors.New(`failed to allocate a serviceIP for Service "s0997": range is full`)), "Service IP range is full"},
		{apierrors.NewForbidden(svc, "s1", errors.New(`ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no`)), "admission policy"},
		{apierrors.NewForbidden(svc, "s1", errors.New(`User "x" cannot create resource "services"`)), "config/rbac/role.yaml"},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "s1", nil), "fix the MCPServer field"},
		{apierrors.NewTooManyRequests("slow down", 1), "overloaded"},
		{errors.New("connection refused"), "retries with backoff"},
	}
	for _, tc := range cases {
		if got := whatToFix(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("whatToFix(%v) = %q, want it to mention %q", tc.err, got, tc.want)
		}
	}
	msg := childErrors{
		{kind: "Service", namespace: "n", name: "a", err: errors.New("boom")},
		{kind: "PodDisruptionBudget", namespace: "n", name: "a", err: errors.New("bang")},
	}.Error()
	for _, want := range []string{"2 child objects failed", "Service n/a: boom", "PodDisruptionBudget n/a: bang"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not contain %q", msg, want)
		}
	}
}
