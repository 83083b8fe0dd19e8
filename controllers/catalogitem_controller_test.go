package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestServerGonePredicate: of the MCPServer events, only a deletion (or its start) enqueues the
// server's items in the item reconcilers; the server's own status patches do not.
func TestServerGonePredicate(t *testing.T) {
	server := newServer("tools", "weather", 1)
	patched := server.DeepCopy()
	patched.Status.CatalogRevision = "abc"
	patched.ResourceVersion = "2"
	edited := server.DeepCopy()
	edited.Generation = 2
	deleting := server.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	stillDeleting := deleting.DeepCopy()
	stillDeleting.Status.CatalogRevision = "def"

	for name, c := range map[string]struct {
		got, want bool
	}{
		"create":                           {serverGone.Create(event.CreateEvent{Object: server}), false},
		"status patch":                     {serverGone.Update(event.UpdateEvent{ObjectOld: server, ObjectNew: patched}), false},
		"spec edit":                        {serverGone.Update(event.UpdateEvent{ObjectOld: server, ObjectNew: edited}), false},
		"deletion starts":                  {serverGone.Update(event.UpdateEvent{ObjectOld: server, ObjectNew: deleting}), true},
		"status patch while being deleted": {serverGone.Update(event.UpdateEvent{ObjectOld: deleting, ObjectNew: stillDeleting}), false},
		"delete":                           {serverGone.Delete(event.DeleteEvent{Object: server}), true},
		"generic":                          {serverGone.Generic(event.GenericEvent{Object: server}), false},
	} {
		if c.got != c.want {
			t.Errorf("%s: enqueues items = %v, want %v", name, c.got, c.want)
		}
	}
}
