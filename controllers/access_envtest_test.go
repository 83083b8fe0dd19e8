//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// access waits until the server's stored catalog carries want as its Access, and returns the
// catalog's revision.
func accessIs(t *testing.T, ns, server string, want *catalog.Access) string {
	t.Helper()
	var rev string
	eventually.Succeeds(t, fmt.Sprintf("%s/%s catalog access %+v", ns, server, want), func() error {
		c, r, err := readCatalog(ns, server)
		if err != nil {
			return err
		}
		if c.Auth == nil {
			return fmt.Errorf("the catalog has no auth")
		}
		if !reflect.DeepEqual(c.Access, want) {
			return fmt.Errorf("access is %+v", c.Access)
		}
		rev = r
		return nil
	})
	return rev
}

// readCatalog reads the server's stored catalog and its revision annotation.
func readCatalog(ns, server string) (*catalog.Catalog, string, error) {
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: server + "-catalog"}, cm); err != nil {
		return nil, "", err
	}
	c, err := catalog.Decode([]byte(cm.Data[catalog.Key]))
	return c, cm.Annotations[catalog.RevisionAnnotation], err
}

// policyAccepted waits for the policy's Accepted condition on target, and its Ready summary.
func policyAccepted(t *testing.T, p *mcpv1alpha1.MCPAccessPolicy, target string, status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) {
	t.Helper()
	eventually.Succeeds(t, fmt.Sprintf("policy %s Accepted=%s/%s on %s", p.Name, status, reason, target), func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("observedGeneration %d of %d", p.Status.ObservedGeneration, p.Generation)
		}
		a := ancestorFor(p.Status.Ancestors, target)
		if a == nil {
			return fmt.Errorf("no ancestor %s in %+v", target, p.Status.Ancestors)
		}
		if a.ControllerName != mcpv1alpha1.PolicyControllerName {
			return fmt.Errorf("controllerName %q", a.ControllerName)
		}
		if err := conditionIs(a.Conditions, mcpv1alpha1.ConditionAccepted, status, reason); err != nil {
			return err
		}
		ready := metav1.ConditionTrue
		if status != metav1.ConditionTrue {
			ready = metav1.ConditionFalse
		}
		return conditionIs(p.Status.Conditions, mcpv1alpha1.ConditionReady, ready, reason)
	})
}

func deploymentOf(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually.Succeeds(t, "deployment "+name, func() error {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d)
	})
	return d
}

// TestAccessPolicyIsLive: a policy targeting a server that authenticates callers compiles into
// its catalog; an edit is a new catalog revision and never a new pod template; deleting it
// opens the server to every authenticated caller again. A policy of another namespace naming a
// server of the same name does not touch it.
func TestAccessPolicyIsLive(t *testing.T) {
	ns, evil := newNamespace(t), newNamespace(t)
	server := authServer(ns, "weather")
	tool := newTool(ns, "forecast", "weather", "get_forecast")
	mustCreate(t, server, tool)
	// The tool in the catalog first: a catalog compiled before the manager saw the tool has
	// another revision than the one after.
	itemCondition(t, tool, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	open := accessIs(t, ns, "weather", nil)
	d := deploymentOf(t, ns, "weather")

	// Attack: another tenant's policy aimed at this server's name.
	grab := newPolicy(evil, "grab", []string{"weather"}, saRule("", []string{evil + "/*"}, "*"))
	mustCreate(t, grab)
	policyAccepted(t, grab, "weather", metav1.ConditionFalse, mcpv1alpha1.ReasonTargetNotFound)
	if _, rev := getCatalog(t, ns, "weather"); rev != open {
		t.Fatalf("a policy of namespace %s changed the catalog of %s/weather", evil, ns)
	}

	p := newPolicy(ns, "readers", []string{"weather"}, saRule("", []string{"agent", "agents/*"}, "get_forecast"))
	mustCreate(t, p)
	policyAccepted(t, p, "weather", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	accessIs(t, ns, "weather", &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "readers/0", Source: catalog.AccessSource{ServiceAccounts: []string{"agents/*", ns + "/agent"}}, Tools: []string{"get_forecast"}}}})

	edit(t, p, func() {
		p.Spec.Rules[0].Name = "all"
		p.Spec.Rules[0].Tools = []string{"*"}
		p.Spec.Rules[0].Source.Users = []string{"oidc:alice"}
	})
	accessIs(t, ns, "weather", &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "readers/all", Source: catalog.AccessSource{ServiceAccounts: []string{"agents/*", ns + "/agent"}, Users: []string{"oidc:alice"}}, Tools: []string{"*"}}}})
	policyAccepted(t, p, "weather", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	after := deploymentOf(t, ns, "weather")
	if after.Generation != d.Generation || !equalTemplates(&after.Spec.Template, &d.Spec.Template) {
		t.Fatalf("a policy edit changed the pod template (generation %d -> %d)", d.Generation, after.Generation)
	}

	// Retargeted: the server it no longer names is compiled again too (old and new targets).
	mustCreate(t, authServer(ns, "maps"))
	edit(t, p, func() { p.Spec.TargetRefs[0].Name = "maps" })
	accessIs(t, ns, "weather", nil)
	accessIs(t, ns, "maps", &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "readers/all", Source: catalog.AccessSource{ServiceAccounts: []string{"agents/*", ns + "/agent"}, Users: []string{"oidc:alice"}}, Tools: []string{"*"}}}})
	policyAccepted(t, p, "maps", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	if a := ancestorFor(p.Status.Ancestors, "weather"); a != nil {
		t.Errorf("status still speaks of a server the policy no longer targets: %+v", a)
	}

	if err := k8s.Delete(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	accessIs(t, ns, "maps", nil)
}

// TestAccessPolicyStatusReasons: every reason a policy is not enforced, as the controller
// writes it to the real API server, and what kstatus and Argo CD make of it.
func TestAccessPolicyStatusReasons(t *testing.T) {
	ns := newNamespace(t)
	openServer := newServer(ns, "open", 1)
	locked := authServer(ns, "locked")
	mustCreate(t, openServer, locked)
	accessIs(t, ns, "locked", nil)
	var openRev string
	eventually.Succeeds(t, "open: catalog", func() (err error) {
		_, openRev, err = readCatalog(ns, "open")
		return err
	})

	off := newPolicy(ns, "off", []string{"open"}, saRule("", []string{"agent"}, "*"))
	missing := newPolicy(ns, "missing", []string{"ghost"}, saRule("", []string{"agent"}, "*"))
	invalid := newPolicy(ns, "invalid", []string{"locked"}, mcpv1alpha1.AccessRule{
		Source: mcpv1alpha1.AccessRuleSource{Identities: []string{"spiffe://prod.example.com/ns/" + ns + "/sa/agent"}}, Tools: []string{"*"}})
	mustCreate(t, off, missing, invalid)

	policyAccepted(t, off, "open", metav1.ConditionFalse, mcpv1alpha1.ReasonAuthenticationOff)
	eventRecorded(t, off, mcpv1alpha1.ReasonAuthenticationOff)
	if !strings.Contains(findConditionIn(off.Status.Conditions, mcpv1alpha1.ConditionStalled).Message, "spec.auth.mode: Required") {
		t.Errorf("AuthenticationOff does not name the fix: %+v", off.Status.Conditions)
	}
	if c, rev := getCatalog(t, ns, "open"); c.Access != nil || c.Auth != nil || rev != openRev {
		t.Errorf("a policy on a server without auth changed its catalog: %+v", c.Access)
	}

	// Fail closed: the invalid policy grants nothing, yet the server is isolated.
	policyAccepted(t, invalid, "locked", metav1.ConditionFalse, mcpv1alpha1.ReasonInvalid)
	eventRecorded(t, invalid, mcpv1alpha1.ReasonInvalid)
	accessIs(t, ns, "locked", &catalog.Access{Rules: []catalog.AccessRule{}})

	// A missing target is waited for (Reconciling), then Stalled.
	policyAccepted(t, missing, "ghost", metav1.ConditionFalse, mcpv1alpha1.ReasonTargetNotFound)
	eventually.Succeeds(t, "missing: Stalled after the grace", func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(missing), missing); err != nil {
			return err
		}
		return conditionIs(missing.Status.Conditions, mcpv1alpha1.ConditionStalled, metav1.ConditionTrue, mcpv1alpha1.ReasonTargetNotFound)
	})
	eventRecorded(t, missing, mcpv1alpha1.ReasonTargetNotFound)

	script, err := os.ReadFile(argoHealthScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*mcpv1alpha1.MCPAccessPolicy{off, missing, invalid} {
		if res := kstatusOf(t, p); res.Status != kstatus.FailedStatus {
			t.Errorf("kstatus of %s: %s (%s), want Failed", p.Name, res.Status, res.Message)
		}
		if h := argoOf(t, string(script), p); h.Status != "Degraded" {
			t.Errorf("Argo CD health of %s: %+v, want Degraded", p.Name, h)
		}
	}

	// Each is resolved by the fix its status names, without touching the policy.
	ghost := authServer(ns, "ghost")
	mustCreate(t, ghost)
	policyAccepted(t, missing, "ghost", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	d := deploymentOf(t, ns, "open")
	edit(t, openServer, func() {
		openServer.Spec.Auth = &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}
	})
	policyAccepted(t, off, "open", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	accessIs(t, ns, "open", &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "off/0", Source: catalog.AccessSource{ServiceAccounts: []string{ns + "/agent"}}, Tools: []string{"*"}}}})
	if after := deploymentOf(t, ns, "open"); after.Generation != d.Generation || !equalTemplates(&after.Spec.Template, &d.Spec.Template) {
		t.Errorf("turning authentication on changed the pod template (generation %d -> %d)", d.Generation, after.Generation)
	}
	for _, p := range []*mcpv1alpha1.MCPAccessPolicy{off, missing} {
		if res := kstatusOf(t, p); res.Status != kstatus.CurrentStatus {
			t.Errorf("kstatus of %s: %s (%s), want Current", p.Name, res.Status, res.Message)
		}
		if h := argoOf(t, string(script), p); h.Status != "Healthy" {
			t.Errorf("Argo CD health of %s: %+v, want Healthy", p.Name, h)
		}
	}

	// Turning authentication off again: the policy is no longer enforced, and says so.
	edit(t, openServer, func() { openServer.Spec.Auth.Mode = mcpv1alpha1.AuthOff })
	policyAccepted(t, off, "open", metav1.ConditionFalse, mcpv1alpha1.ReasonAuthenticationOff)
	eventually.Succeeds(t, "open: catalog back to no auth", func() error {
		if c, rev, err := readCatalog(ns, "open"); err != nil || c.Auth != nil || c.Access != nil || rev != openRev {
			return fmt.Errorf("auth %+v access %+v", c.Auth, c.Access)
		}
		return nil
	})
}

func argoOf(t *testing.T, script string, obj client.Object) argoStatus {
	t.Helper()
	fresh := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
		t.Fatal(err)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fresh)
	if err != nil {
		t.Fatal(err)
	}
	h, err := argoHealth(script, &unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tokenReviewerRole creates the ClusterRole the manager ships (config/rbac), once.
func tokenReviewerRole(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("../config/rbac/sidecar_tokenreviewer_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.UnmarshalStrict(b, role); err != nil {
		t.Fatal(err)
	}
	if role.Name != TokenReviewerClusterRole {
		t.Fatalf("config/rbac ships %q, the manager binds %q", role.Name, TokenReviewerClusterRole)
	}
	if err := k8s.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// canReviewTokens reports whether the sidecar's ServiceAccount may create a TokenReview.
func canReviewTokens(t *testing.T, ns, serviceAccount string) error {
	t.Helper()
	return sidecarClient(t, ns, serviceAccount).Create(context.Background(), &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "not-a-token"}})
}

func bindingOf(ns, name string) (*rbacv1.ClusterRoleBinding, error) {
	crb := &rbacv1.ClusterRoleBinding{}
	return crb, k8s.Get(context.Background(), client.ObjectKey{Name: tokenReviewBindingName(ns, name)}, crb)
}

func bindingGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually.Succeeds(t, "binding of "+ns+"/"+name+" removed", func() error {
		if _, err := bindingOf(ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
}

// TestTokenReviewBinding: a server that accepts ServiceAccount tokens gets a ClusterRoleBinding
// that lets exactly its sidecar's ServiceAccount create TokenReviews (and that ServiceAccount
// can, as itself, against the real API server); a server that does not gets none; the binding
// goes when the server stops accepting them, when it is deleted, and when the manager finds a
// binding whose server is gone (as at start).
func TestTokenReviewBinding(t *testing.T) {
	tokenReviewerRole(t)
	ns := newNamespace(t)
	managed := authServer(ns, "managed")
	custom := authServer(ns, "custom")
	custom.Spec.Pod = &mcpv1alpha1.PodOverrides{ServiceAccountName: "custom-sa"}
	external := &mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{Mode: mcpv1alpha1.WorkloadExternal, Container: &mcpv1alpha1.ServerContainer{Port: 7000},
			Auth: &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired, ServiceAccountTokens: &mcpv1alpha1.ServiceAccountTokens{}}}}
	jwtOnly := newServer(ns, "jwtonly", 1)
	jwtOnly.Spec.Auth = &mcpv1alpha1.AuthSpec{Mode: mcpv1alpha1.AuthRequired,
		JWT: []mcpv1alpha1.JWTAuthenticator{{Issuer: mcpv1alpha1.Issuer{URL: "https://issuer.example.com"}}}}
	plain := newServer(ns, "plain", 1)
	mustCreate(t, managed, custom, external, jwtOnly, plain)

	for server, sa := range map[string]string{"managed": "managed-sidecar", "custom": "custom-sa", "external": "external-sidecar"} {
		eventually.Succeeds(t, "binding of "+server, func() error {
			crb, err := bindingOf(ns, server)
			if err != nil {
				return err
			}
			want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
			if crb.RoleRef.Name != TokenReviewerClusterRole || crb.RoleRef.Kind != "ClusterRole" || !reflect.DeepEqual(crb.Subjects, want) {
				return fmt.Errorf("binding %+v %+v", crb.RoleRef, crb.Subjects)
			}
			if crb.Labels[inject.LabelServer] != server || crb.Labels[LabelServerNamespace] != ns || crb.Labels[inject.LabelManagedBy] != inject.ManagedBy {
				return fmt.Errorf("labels %v", crb.Labels)
			}
			return canReviewTokens(t, ns, sa)
		})
	}
	// Least privilege: servers that validate no ServiceAccount token get nothing.
	for _, s := range []*mcpv1alpha1.MCPServer{plain, jwtOnly} {
		eventually.Succeeds(t, s.Name+" reconciled", func() error {
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
				return err
			}
			if s.Status.ObservedGeneration != s.Generation || s.Status.CatalogRevision == "" {
				return fmt.Errorf("status of generation %d", s.Status.ObservedGeneration)
			}
			return nil
		})
	}
	for _, s := range []string{"plain", "jwtonly"} {
		if _, err := bindingOf(ns, s); !apierrors.IsNotFound(err) {
			t.Errorf("%s got a TokenReview binding: %v", s, err)
		}
		if err := canReviewTokens(t, ns, s+"-sidecar"); !apierrors.IsForbidden(err) {
			t.Errorf("the sidecar of %s may review tokens: %v", s, err)
		}
	}

	edit(t, managed, func() { managed.Spec.Auth.Mode = mcpv1alpha1.AuthOff })
	bindingGone(t, ns, "managed")
	eventually.Succeeds(t, "managed-sidecar loses the right", func() error {
		if err := canReviewTokens(t, ns, "managed-sidecar"); !apierrors.IsForbidden(err) {
			return fmt.Errorf("want Forbidden, got %w", err)
		}
		return nil
	})

	if err := k8s.Delete(context.Background(), external); err != nil {
		t.Fatal(err)
	}
	bindingGone(t, ns, "external")

	// A binding left by a server deleted while no manager ran.
	stale := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: tokenReviewBindingName(ns, "gone"), Labels: map[string]string{
			inject.LabelServer: "gone", LabelServerNamespace: ns, inject.LabelManagedBy: inject.ManagedBy}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: TokenReviewerClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "gone-sidecar", Namespace: ns}},
	}
	mustCreate(t, stale)
	bindingGone(t, ns, "gone")
}

// TestManagerMayBindOnlyTheTokenReviewer runs the manager's generated ClusterRole
// (config/rbac/role.yaml) as a ServiceAccount against the real API server: it may bind the
// TokenReview ClusterRole, but no other (cluster-admin), and may not review tokens itself.
func TestManagerMayBindOnlyTheTokenReviewer(t *testing.T) {
	tokenReviewerRole(t)
	ns := newNamespace(t)
	b, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(b), "\n---\n") {
		r := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), r); err == nil && r.Kind == "ClusterRole" {
			role = r
		}
	}
	if role == nil {
		t.Fatal("no ClusterRole in config/rbac/role.yaml")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "manager-" + ns}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "manager-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "manager", Namespace: ns}}}
	mustCreate(t, role, binding)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), binding); _ = k8s.Delete(context.Background(), role) })
	manager := sidecarClient(t, ns, "manager")

	bind := func(name, clusterRole string) error {
		return manager.Create(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "x", Namespace: ns}}})
	}
	eventually.Succeeds(t, "the manager binds the TokenReview role", func() error {
		return bind("ok-"+ns, TokenReviewerClusterRole)
	})
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ok-" + ns}})
	})
	if err := bind("escalate-"+ns, "cluster-admin"); !apierrors.IsForbidden(err) {
		t.Errorf("the manager bound cluster-admin: %v", err)
	}
	if err := manager.Create(context.Background(), &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager may review tokens itself: %v", err)
	}
}

// TestSettledAuthServerSendsNoRequest: a server with auth, a policy and a TokenReview binding
// settles like any other (a reconcile sends no write), and a binding someone deletes comes back.
func TestSettledAuthServerSendsNoRequest(t *testing.T) {
	tokenReviewerRole(t)
	ns := newNamespace(t)
	server := authServer(ns, "quiet")
	p := newPolicy(ns, "readers", []string{"quiet"}, saRule("", []string{"agent"}, "*"))
	mustCreate(t, server, p)
	policyAccepted(t, p, "quiet", metav1.ConditionTrue, mcpv1alpha1.ReasonAccepted)
	accessIs(t, ns, "quiet", &catalog.Access{Rules: []catalog.AccessRule{
		{Policy: "readers/0", Source: catalog.AccessSource{ServiceAccounts: []string{ns + "/agent"}}, Tools: []string{"*"}}}})
	key := client.ObjectKeyFromObject(server)

	var n atomic.Int32
	counting := *servers
	counting.Client = writeCounter{Client: servers.Client, n: &n}
	eventually.Succeeds(t, "a reconcile that sends no write", func() error {
		n.Store(0)
		if _, err := counting.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			return err
		}
		if w := n.Load(); w > 0 {
			return fmt.Errorf("the reconcile sent %d writes", w)
		}
		return nil
	})

	crb, err := bindingOf(ns, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), crb); err != nil {
		t.Fatal(err)
	}
	eventually.Succeeds(t, "the deleted binding to come back", func() error {
		again, err := bindingOf(ns, "quiet")
		if err != nil {
			return err
		}
		if again.UID == crb.UID {
			return fmt.Errorf("still the old binding")
		}
		return nil
	})
}
