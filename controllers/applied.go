package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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

// stampApplied turns an apply configuration into the unstructured object that is applied: the
// same fields, plus AppliedAnnotation with their hash.
func stampApplied(obj runtime.ApplyConfiguration) (*unstructured.Unstructured, error) {
	m, err := jsonMap(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedAnnotation] = appliedHash(m)
	u.SetAnnotations(annotations)
	return u, nil
}

// holdsApplied reports whether a live object (typed, from the cache) holds every field of an
// applied configuration from stampApplied. Both sides go through JSON, so numbers compare alike.
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
