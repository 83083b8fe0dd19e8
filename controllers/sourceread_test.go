package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// countingReader counts the live reads a reconcile makes.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// len is the number of objects remembered.
func (c *sourceReads) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// metaOf is what the source cache would hold of o: its metadata at its resourceVersion.
func metaOf(t *testing.T, c client.Reader, kind string, key client.ObjectKey) *metav1.PartialObjectMetadata {
	t.Helper()
	var o client.Object = &corev1.Secret{}
	if kind == "ConfigMap" {
		o = &corev1.ConfigMap{}
	}
	if err := c.Get(context.Background(), key, o); err != nil {
		t.Fatal(err)
	}
	m := sourceMeta(kind)
	o.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta).DeepCopyInto(&m.ObjectMeta)
	return m
}

func TestSourceReadsOncePerResourceVersion(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: "team", Name: "keys"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "u1",
		Labels: map[string]string{ExposeToLabel: "weather"},
		// kubectl apply keeps the whole object, data included, in this annotation.
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"alice":"azE="}}`}},
		Data: map[string][]byte{"alice": []byte("k1"), "bob": []byte("k2\n")}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "handbook", UID: "u2"},
		Data: map[string]string{"a.md": "x"}, BinaryData: map[string][]byte{"b.bin": {0}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sec, cm).Build()
	live := &countingReader{Reader: c}
	reads := &sourceReads{}

	m := metaOf(t, c, "Secret", key)
	for range 3 {
		rd, found, err := reads.read(ctx, live, "Secret", m)
		if err != nil || !found {
			t.Fatalf("read = %v, %v", found, err)
		}
		if !rd.keys["alice"] || rd.keys["bob"] || len(rd.keys) != 2 || rd.meta.Labels[ExposeToLabel] != "weather" {
			t.Fatalf("read %+v, want alice valid, bob invalid, the label", rd)
		}
		if len(rd.meta.Annotations) != 0 {
			t.Fatalf("the read keeps annotations %v: they may hold the content", rd.meta.Annotations)
		}
	}
	if live.gets != 1 {
		t.Fatalf("%d live reads of an unchanged Secret, want 1", live.gets)
	}

	// A content change is a new resourceVersion: read again, and what it says now.
	sec = &corev1.Secret{}
	if err := c.Get(ctx, key, sec); err != nil {
		t.Fatal(err)
	}
	delete(sec.Data, "alice")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	rd, _, err := reads.read(ctx, live, "Secret", metaOf(t, c, "Secret", key))
	if err != nil {
		t.Fatal(err)
	}
	if _, has := rd.keys["alice"]; has || live.gets != 2 {
		t.Fatalf("after the edit: keys %v, %d live reads; want alice gone, 2 reads", rd.keys, live.gets)
	}
	// A cache behind the API server (the old resourceVersion) reads live too.
	if _, _, err := reads.read(ctx, live, "Secret", m); err != nil || live.gets != 3 {
		t.Fatalf("a stale resourceVersion: %d live reads (%v), want 3", live.gets, err)
	}

	// Another object of the same name (deleted, created again) has another uid.
	m2 := metaOf(t, c, "Secret", key)
	m2.UID = "u3"
	if _, _, err := reads.read(ctx, live, "Secret", m2); err != nil || live.gets != 4 {
		t.Fatalf("another uid: %d live reads (%v), want 4", live.gets, err)
	}

	// A ConfigMap's keys, from data and binaryData.
	cmKey := client.ObjectKeyFromObject(cm)
	rd, _, err = reads.read(ctx, live, "ConfigMap", metaOf(t, c, "ConfigMap", cmKey))
	if err != nil {
		t.Fatal(err)
	}
	if _, a := rd.keys["a.md"]; !a {
		t.Fatalf("ConfigMap keys %v, want a.md and b.bin", rd.keys)
	}
	if _, b := rd.keys["b.bin"]; !b {
		t.Fatalf("ConfigMap keys %v, want a.md and b.bin", rd.keys)
	}

	// A ServiceAccount token stays refused: its annotation is kept.
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: "legacy-token", UID: "u4",
		Labels: map[string]string{ExposeToLabel: "weather"}, Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}}}
	if err := c.Create(ctx, tok); err != nil {
		t.Fatal(err)
	}
	rd, _, err = reads.read(ctx, live, "Secret", metaOf(t, c, "Secret", client.ObjectKeyFromObject(tok)))
	if err != nil {
		t.Fatal(err)
	}
	if p := refusedSource("Secret", &rd.meta, rd.secretType); p.reason == "" {
		t.Fatalf("a ServiceAccount token's read is not refused: %+v", rd.meta)
	}
	reads.forget("Secret", client.ObjectKeyFromObject(tok))

	// Deleted: forgotten, and a read says not found.
	if err := c.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	reads.forget("Secret", key)
	if reads.len() != 1 {
		t.Fatalf("%d reads remembered after the delete, want 1 (the ConfigMap)", reads.len())
	}
	if _, found, err := reads.read(ctx, live, "Secret", m); err != nil || found {
		t.Fatalf("a deleted Secret: found %v, %v", found, err)
	}
	if reads.len() != 1 {
		t.Fatalf("a read that found nothing is remembered: %d", reads.len())
	}
}
