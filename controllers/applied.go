package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// AppliedAnnotation on every child holds a hash of the configuration the controller last
// applied to it. Together with holds it lets a reconcile skip a child whose live object already
// is what the controller would apply: at fleet scale, every reconcile of an unchanged server
// would otherwise send one no-op server-side apply per child (docs/performance.md).
const AppliedAnnotation = "mcp.switchboard.dev/applied"

// appliedHash is the hash stored in AppliedAnnotation for an applied configuration (without
// the annotation itself). Any change to the configuration, including a field it stops setting
// (which an apply removes), changes the hash.
func appliedHash(desired map[string]any) string {
	b, err := json.Marshal(desired) // map keys are sorted: deterministic
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// holds reports whether live already holds every field desired sets, with the same value:
// maps by key (live may have more keys, e.g. defaults the API server filled in), lists element
// by element and of the same length, scalars equal. Both sides come from typed objects through
// the same converter, so numbers have the same Go types.
func holds(live, desired any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			lv, ok := l[k]
			if !ok || !holds(lv, dv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return false
		}
		for i := range d {
			if !holds(l[i], d[i]) {
				return false
			}
		}
		return true
	default:
		return live == desired
	}
}

// stamp turns the JSON of an apply configuration into the unstructured object that is applied:
// the same fields, plus AppliedAnnotation with their hash. hash, when not empty, is the hash an
// earlier stamp of the same JSON computed (appliedMemo): the map is decoded from the JSON alone,
// and the hash from the map alone, so it is the same, and not computed again.
func stamp(raw []byte, hash string) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if hash == "" {
		hash = appliedHash(m)
	}
	u := &unstructured.Unstructured{Object: m}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedAnnotation] = hash
	u.SetAnnotations(annotations)
	return u, nil
}

// holdsApplied reports whether a live object (typed, from the cache) holds every field of an
// applied configuration from stampApplied. Both sides go through JSON, so numbers compare alike.
// The live object is only read: it may be the cache's own.
func holdsApplied(live runtime.Object, desired map[string]any) bool {
	lm, err := jsonMap(live)
	if err != nil {
		return false
	}
	want := maps.Clone(desired)
	delete(want, "apiVersion") // typed objects from the cache carry no TypeMeta
	delete(want, "kind")
	return holds(lm, want)
}

func jsonMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// appliedMemo remembers, per child, the configuration the cached child was last found to hold
// (holdsApplied): the digest of its apply configuration's JSON, the hash stamped from it, and the
// resourceVersion of the live object that held it. A reconcile of an unchanged server builds the
// same JSON and finds the same resourceVersion in the cache: the child still holds it, since the
// same resourceVersion is the same version of the object, and the live object need not be
// converted and compared again. Any write to the child (someone's kubectl edit, another
// controller's change, the child deleted and created again) gives it a new resourceVersion, and
// any change of the configuration a new digest: both are checked in full. At 1,000 servers the children's
// applies allocated 1.2 of the 4.1 GB the manager allocated over a run, most of it in these
// conversions (docs/performance.md, "Heap").
//
// Entries are grouped by server and a server's are dropped once it is gone or being deleted
// (forget); a server has one entry per child it applies, at most a dozen, so nothing accumulates
// (about 3 MB at 1,000 servers). mu guards servers: reconciles of different servers run at once.
type appliedMemo struct {
	mu      sync.Mutex
	servers map[types.NamespacedName]map[childKey]appliedEntry
}

// childKey names a child: its apiVersion, kind, namespace (empty for a cluster-scoped one) and
// name.
type childKey struct {
	apiVersion, kind, namespace, name string
}

type appliedEntry struct {
	// sum is the sha256 of the apply configuration's JSON, and hash what stamp computed from it.
	sum  [sha256.Size]byte
	hash string
	// resourceVersion is that of the live object found to hold the configuration.
	resourceVersion string
}

// lookup returns the server's entry of the child, if any. A nil memo has none.
func (m *appliedMemo) lookup(server types.NamespacedName, key childKey) (appliedEntry, bool) {
	if m == nil {
		return appliedEntry{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.servers[server][key]
	return e, ok
}

// remember stores the server's entry of the child. A nil memo remembers nothing.
func (m *appliedMemo) remember(server types.NamespacedName, key childKey, e appliedEntry) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.servers == nil {
		m.servers = map[types.NamespacedName]map[childKey]appliedEntry{}
	}
	children := m.servers[server]
	if children == nil {
		children = map[childKey]appliedEntry{}
		m.servers[server] = children
	}
	children[key] = e
}

// forget drops the entries of a server that is gone or being deleted.
func (m *appliedMemo) forget(server types.NamespacedName) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.servers, server)
}
