//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// granted is the names of resource (secrets, configmaps) the sidecar's Role lets it read.
func granted(t *testing.T, ns, server, resource string) []string {
	t.Helper()
	role := &rbacv1.Role{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: server + "-sidecar"}, role); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, "get") {
			out = append(out, r.ResourceNames...)
		}
	}
	return out
}

// inCatalog is the resource of the server's stored catalog with this URI, or nil.
func inCatalog(t *testing.T, ns, server, uri string) *catalog.Resource {
	t.Helper()
	c, _ := getCatalog(t, ns, server)
	for i := range c.Resources {
		if c.Resources[i].URI == uri {
			return &c.Resources[i]
		}
	}
	return nil
}

func label(t *testing.T, obj client.Object, value string) {
	t.Helper()
	edit(t, obj, func() {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		if value == "" {
			delete(l, ExposeToLabel)
		} else {
			l[ExposeToLabel] = value
		}
		obj.SetLabels(l)
	})
}

// TestSourcesNeedOptIn (security review F1, the confused deputy): someone who may create
// MCPResources but not read Secrets names a Secret (and a ConfigMap) of the namespace. Until the
// object's owner labels it mcp.switchboard.dev/expose-to=<server>, the controller grants the
// sidecar no access to it, leaves the resource out of the catalog, and says in the MCPResource's
// Published condition (and a Warning Event) exactly which command exposes it; a Secret that does
// not exist gets the same answer. Labelling it for the server grants and serves it at once (the
// controller watches the label), Private whatever the server's default; relabelling it for
// another server, or removing the label, revokes it.
func TestSourcesNeedOptIn(t *testing.T) {
	ns := newNamespace(t)
	server := newServer(ns, "vault", 1)
	server.Spec.Caching = &mcpv1alpha1.CachingSpec{ResourceRead: &mcpv1alpha1.CacheHint{TTLSeconds: ptr.To[int32](60), Scope: mcpv1alpha1.CacheScopePublic}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prod-db", Namespace: ns}, StringData: map[string]string{"password": "hunter2"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "notes", Namespace: ns}, Data: map[string]string{"text": "internal"}}
	leak := newResource(ns, "leak", "vault", "secret://db", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "prod-db", Key: "password"}})
	notes := newResource(ns, "notes", "vault", "docs://notes", mcpv1alpha1.ResourceSource{ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "notes", Key: "text"}})
	ghost := newResource(ns, "ghost", "vault", "secret://ghost", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "no-such", Key: "k"}})
	mustCreate(t, server, secret, cm, leak, notes, ghost)

	notExposed := func(obj client.Object, kind, name string) {
		t.Helper()
		itemCondition(t, obj, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonSourceNotExposed)
		msg := findCondition(obj, mcpv1alpha1.ConditionPublished).Message
		if want := fmt.Sprintf("kubectl label %s -n %s %s %s=vault", kind, ns, name, ExposeToLabel); !strings.Contains(msg, want) {
			t.Errorf("%s: message %q does not say %q", obj.GetName(), msg, want)
		}
		eventRecorded(t, obj, mcpv1alpha1.ReasonSourceNotExposed)
	}
	notExposed(leak, "secret", "prod-db")
	notExposed(notes, "configmap", "notes")
	notExposed(ghost, "secret", "no-such")
	// The same words for a Secret that exists and one that does not: no existence oracle.
	leakMsg := strings.ReplaceAll(findCondition(leak, mcpv1alpha1.ConditionPublished).Message, "prod-db", "X")
	ghostMsg := strings.ReplaceAll(findCondition(ghost, mcpv1alpha1.ConditionPublished).Message, "no-such", "X")
	if leakMsg != ghostMsg {
		t.Errorf("an unexposed Secret and a missing one are told apart:\n%s\n%s", leakMsg, ghostMsg)
	}
	if s := granted(t, ns, "vault", "secrets"); len(s) != 0 {
		t.Errorf("the sidecar may read Secrets %v that nobody exposed", s)
	}
	if c := granted(t, ns, "vault", "configmaps"); slices.Contains(c, "notes") {
		t.Errorf("the sidecar may read ConfigMaps %v that nobody exposed", c)
	}
	if r := inCatalog(t, ns, "vault", "secret://db"); r != nil {
		t.Errorf("the unexposed Secret is in the catalog: %+v", r)
	}

	// The owner exposes both: granted, in the catalog, published; the Secret read is Private.
	label(t, secret, "vault")
	label(t, cm, "other.vault")
	itemCondition(t, leak, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	itemCondition(t, notes, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	eventually.Succeeds(t, "the exposed sources granted and in the catalog", func() error {
		if s := granted(t, ns, "vault", "secrets"); !slices.Equal(s, []string{"prod-db"}) {
			return fmt.Errorf("granted Secrets %v", s)
		}
		if c := granted(t, ns, "vault", "configmaps"); !slices.Contains(c, "notes") {
			return fmt.Errorf("granted ConfigMaps %v", c)
		}
		r := inCatalog(t, ns, "vault", "secret://db")
		if r == nil || r.Cache == nil || *r.Cache != (catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePrivate}) {
			return fmt.Errorf("catalog entry %+v, want it with ttl 60000 private", r)
		}
		return nil
	})

	// Relabelled for another server, then unlabelled: revoked again.
	label(t, secret, "other")
	label(t, cm, "")
	notExposed(leak, "secret", "prod-db")
	notExposed(notes, "configmap", "notes")
	eventually.Succeeds(t, "the revoked sources dropped", func() error {
		if s := granted(t, ns, "vault", "secrets"); len(s) != 0 {
			return fmt.Errorf("still granted Secrets %v", s)
		}
		if c := granted(t, ns, "vault", "configmaps"); slices.Contains(c, "notes") {
			return fmt.Errorf("still granted ConfigMaps %v", c)
		}
		if r := inCatalog(t, ns, "vault", "secret://db"); r != nil {
			return fmt.Errorf("still in the catalog: %+v", r)
		}
		return nil
	})
}

// TestSourcesRefused (security review F1): whatever their labels, the controller never grants
// a sidecar a ServiceAccount token Secret or a Secret of Switchboard's own (one an MCPServer
// controls; the reserved names are refused by the MCPResource's CEL before they get here).
func TestSourcesRefused(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := newServer(ns, "vault", 1)
	mustCreate(t, server, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "deployer", Namespace: ns}})
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), server); err != nil {
		t.Fatal(err)
	}
	exposed := map[string]string{ExposeToLabel: "vault"}
	saToken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "deployer-token", Namespace: ns, Labels: exposed,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: "deployer"}}, Type: corev1.SecretTypeServiceAccountToken}
	owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-internal", Namespace: ns, Labels: exposed,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: mcpv1alpha1.GroupVersion.String(), Kind: "MCPServer", Name: "vault",
			UID: server.UID, Controller: ptr.To(true)}}}, StringData: map[string]string{"k": "v"}}
	tokenRes := newResource(ns, "token", "vault", "secret://token", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "deployer-token", Key: "token"}})
	ownedRes := newResource(ns, "owned", "vault", "secret://owned", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "vault-internal", Key: "k"}})
	mustCreate(t, saToken, owned, tokenRes, ownedRes)
	for _, r := range []*mcpv1alpha1.MCPResource{tokenRes, ownedRes} {
		itemCondition(t, r, mcpv1alpha1.ConditionPublished, metav1.ConditionFalse, mcpv1alpha1.ReasonSourceRefused)
		itemCondition(t, r, mcpv1alpha1.ConditionStalled, metav1.ConditionTrue, mcpv1alpha1.ReasonSourceRefused)
		eventRecorded(t, r, mcpv1alpha1.ReasonSourceRefused)
	}
	if s := granted(t, ns, "vault", "secrets"); len(s) != 0 {
		t.Errorf("the sidecar may read Secrets %v", s)
	}

	// The server's own drain token, named directly: refused at admission.
	dt := newResource(ns, "dt", "vault", "secret://dt", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "vault-drain-token", Key: "token"}})
	if err := k8s.Create(ctx, dt); err == nil || !strings.Contains(err.Error(), "names a Switchboard Secret") {
		t.Errorf("an MCPResource serving the drain token was admitted (err %v)", err)
	}
}

// TestSourceGrantedBeforeReferenced: a sidecar starts watching a ConfigMap or Secret as soon as
// its catalog names it, so the Role must grant the read first. Otherwise the sidecar's first
// list is forbidden, client-go backs off for about a second, and for that second the resource
// answers "not found" and every replica's /readyz says its sources are not synced. The
// controller writes the Role that grants a new source before the catalog that references it
// (resourceVersions of one etcd order the two writes), for an added resource and for one whose
// source was exposed after it was declared.
func TestSourceGrantedBeforeReferenced(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns := newNamespace(t)
	server := newServer(ns, "keys", 1)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "api-key", Namespace: ns, Labels: map[string]string{ExposeToLabel: "keys"}},
		StringData: map[string]string{"key": "k1"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns}, Data: map[string]string{"text": "t"}}
	mustCreate(t, server, secret, cm, newTool(ns, "t", "keys", "t"))
	eventually.Succeeds(t, "the first catalog", func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "keys-catalog"}, &corev1.ConfigMap{})
	})

	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// rv returns the resourceVersion of the first write, from now on, of the object named name
	// (a Role or the catalog ConfigMap) that names the source.
	rv := func(list client.ObjectList, name string, names func(client.Object) bool) <-chan int64 {
		out := make(chan int64, 1)
		watcher, err := w.Watch(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer watcher.Stop()
			for ev := range watcher.ResultChan() {
				obj, ok := ev.Object.(client.Object)
				if ok && names(obj) {
					v, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
					out <- v
					return
				}
			}
		}()
		return out
	}
	grants := func(resource, source string) func(client.Object) bool {
		return func(obj client.Object) bool {
			for _, r := range obj.(*rbacv1.Role).Rules {
				if slices.Contains(r.Resources, resource) && slices.Contains(r.ResourceNames, source) {
					return true
				}
			}
			return false
		}
	}
	references := func(configMap bool, source string) func(client.Object) bool {
		return func(obj client.Object) bool {
			c, err := catalog.Decode([]byte(obj.(*corev1.ConfigMap).Data[catalog.Key]))
			if err != nil {
				return false
			}
			cms, secrets := c.ContentRefs()
			if configMap {
				return slices.Contains(cms, source)
			}
			return slices.Contains(secrets, source)
		}
	}
	order := func(what string, granted, referenced <-chan int64) {
		t.Helper()
		var g, r int64
		for g == 0 || r == 0 {
			select {
			case g = <-granted:
			case r = <-referenced:
			case <-ctx.Done():
				t.Fatalf("%s: granted at %d, referenced at %d (0: not seen)", what, g, r)
			}
		}
		if g >= r {
			t.Errorf("%s: the catalog referenced it (resourceVersion %d) before the Role granted it (%d)", what, r, g)
		}
	}

	// A resource added with an exposed Secret.
	granted, referenced := rv(&rbacv1.RoleList{}, "keys-sidecar", grants("secrets", "api-key")), rv(&corev1.ConfigMapList{}, "keys-catalog", references(false, "api-key"))
	mustCreate(t, newResource(ns, "key", "keys", "secret://key", mcpv1alpha1.ResourceSource{SecretKeyRef: &mcpv1alpha1.KeyReference{Name: "api-key", Key: "key"}}))
	order("an added Secret-backed resource", granted, referenced)

	// A resource declared first, its ConfigMap exposed later.
	mustCreate(t, newResource(ns, "late", "keys", "docs://late", mcpv1alpha1.ResourceSource{ConfigMapKeyRef: &mcpv1alpha1.KeyReference{Name: "late", Key: "text"}}))
	granted, referenced = rv(&rbacv1.RoleList{}, "keys-sidecar", grants("configmaps", "late")), rv(&corev1.ConfigMapList{}, "keys-catalog", references(true, "late"))
	label(t, cm, "keys")
	order("a ConfigMap exposed after its resource was declared", granted, referenced)
}
