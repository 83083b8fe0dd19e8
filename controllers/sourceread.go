package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// sourceRead is what a reconcile needs of the content of an exposed ConfigMap or Secret, read
// from the API server at one resourceVersion: its metadata, its type and its keys, each with
// whether its value could be sent as an upstream credential. It holds no value.
type sourceRead struct {
	meta       metav1.ObjectMeta // name, uid, resourceVersion, labels, owner references, the ServiceAccount annotation
	secretType corev1.SecretType
	keys       map[string]bool // key -> a Secret's value could be sent as a credential (catalog.ValidCredentialValue)
}

// sourceKey names an exposed object: its kind ("ConfigMap" or "Secret") and key.
type sourceKey struct {
	kind string
	types.NamespacedName
}

// sourceReads remembers the last read of each exposed ConfigMap and Secret (sourceRead) by the
// uid and resourceVersion it was read at. The source cache holds their metadata only (the
// manager caches no content of users' objects); a reconcile that finds the same uid and
// resourceVersion there uses what was read, and reads the object live only after it changed:
// every content change is a new resourceVersion. Without it every reconcile of a server with a
// ConfigMap- or Secret-backed resource, or upstream credentials, made one more GET per object.
type sourceReads struct {
	mu sync.Mutex
	m  map[sourceKey]*sourceRead
}

// read returns the content facts of the exposed object of kind whose cached metadata is m;
// found is false when the API server has no such object. A nil sourceReads reads every time.
func (c *sourceReads) read(ctx context.Context, live client.Reader, kind string, m *metav1.PartialObjectMetadata) (rd *sourceRead, found bool, err error) {
	key := sourceKey{kind, types.NamespacedName{Namespace: m.Namespace, Name: m.Name}}
	if c != nil {
		c.mu.Lock()
		rd = c.m[key]
		c.mu.Unlock()
		if rd != nil && rd.meta.UID == m.UID && rd.meta.ResourceVersion == m.ResourceVersion {
			return rd, true, nil
		}
	}
	rd = &sourceRead{}
	switch kind {
	case "ConfigMap":
		cm := &corev1.ConfigMap{}
		if err := live.Get(ctx, key.NamespacedName, cm); err != nil {
			return nil, false, client.IgnoreNotFound(err)
		}
		rd.meta, rd.keys = cm.ObjectMeta, make(map[string]bool, len(cm.Data)+len(cm.BinaryData))
		for k := range cm.Data {
			rd.keys[k] = false
		}
		for k := range cm.BinaryData {
			rd.keys[k] = false
		}
	case "Secret":
		sec := &corev1.Secret{}
		if err := live.Get(ctx, key.NamespacedName, sec); err != nil {
			return nil, false, client.IgnoreNotFound(err)
		}
		rd.meta, rd.secretType, rd.keys = sec.ObjectMeta, sec.Type, credentialValues(sec.Data)
	default:
		return nil, false, fmt.Errorf("no source of kind %q", kind)
	}
	// Of the annotations only the one refusedSource reads: others may carry the content
	// (kubectl apply's last-applied-configuration holds a Secret's data).
	var annotations map[string]string
	if v, ok := rd.meta.Annotations[corev1.ServiceAccountNameKey]; ok {
		annotations = map[string]string{corev1.ServiceAccountNameKey: v}
	}
	rd.meta = metav1.ObjectMeta{Name: rd.meta.Name, Namespace: rd.meta.Namespace, UID: rd.meta.UID,
		ResourceVersion: rd.meta.ResourceVersion, Labels: rd.meta.Labels, Annotations: annotations,
		OwnerReferences: rd.meta.OwnerReferences}
	if c != nil {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[sourceKey]*sourceRead{}
		}
		c.m[key] = rd
		c.mu.Unlock()
	}
	return rd, true, nil
}

// forget drops the read of a deleted object.
func (c *sourceReads) forget(kind string, key types.NamespacedName) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.m, sourceKey{kind, key})
	c.mu.Unlock()
}

// credentialValues is, per key of data, whether its value could be sent as a credential.
func credentialValues(data map[string][]byte) map[string]bool {
	out := make(map[string]bool, len(data))
	for k, v := range data {
		out[k] = catalog.ValidCredentialValue(v)
	}
	return out
}
