package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestOwnWritesDropOnlyTheirOwnEvent(t *testing.T) {
	w := &ownWrites{}
	cms := w.notOwnWrite("v1", "ConfigMap")
	cm := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "weather-catalog", ResourceVersion: rv}}
	}
	key := childKey{apiVersion: "v1", kind: "ConfigMap", namespace: "team", name: "weather-catalog"}

	w.wrote(key, "7")
	if cms.Update(event.UpdateEvent{ObjectOld: cm("6"), ObjectNew: cm("6")}) != true {
		t.Fatal("an event of another resourceVersion was dropped")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("6"), ObjectNew: cm("7")}) != false {
		t.Fatal("the event of the controller's own write reconciles")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("7"), ObjectNew: cm("7")}) != true {
		t.Fatal("a second event at the same resourceVersion (a resync) was dropped")
	}
	if cms.Update(event.UpdateEvent{ObjectOld: cm("7"), ObjectNew: cm("8")}) != true {
		t.Fatal("someone else's write was dropped")
	}

	w.wrote(key, "9")
	if cms.Create(event.CreateEvent{Object: cm("9")}) != false {
		t.Fatal("the creation by the controller's own apply reconciles")
	}
	w.wrote(key, "10")
	if cms.Delete(event.DeleteEvent{Object: cm("10")}) != true || len(w.rv) != 0 {
		t.Fatalf("a deletion: dropped, or the write still remembered (%v)", w.rv)
	}

	// Kinds whose watch does not filter (the Deployment) are not remembered.
	w.wrote(childKey{apiVersion: "apps/v1", kind: "Deployment", namespace: "team", name: "weather"}, "11")
	if len(w.rv) != 0 {
		t.Fatalf("a Deployment's write is remembered: %v", w.rv)
	}
	// A nil ownWrites filters nothing.
	var none *ownWrites
	none.wrote(key, "12")
	if !none.notOwnWrite("apps/v1", "Deployment").Update(event.UpdateEvent{ObjectOld: &appsv1.Deployment{}, ObjectNew: &appsv1.Deployment{}}) {
		t.Fatal("a nil ownWrites dropped an event")
	}
}
