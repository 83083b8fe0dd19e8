//go:build e2e

package controllers

import (
	"context"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// TestPrunedServerWritesNothingOnItsItems: a server deleted together with its tools (a GitOps
// prune deletes them one after the other, within seconds) costs no ServerNotFound status patch
// and no Warning Event for the tools; a tool that stays is marked ServerNotFound once
// serverGoneDelay has passed.
func TestPrunedServerWritesNothingOnItsItems(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	server := newServer(ns, "pruned", 1)
	pruned := []*mcpv1alpha1.MCPTool{newTool(ns, "a", "pruned", "a"), newTool(ns, "b", "pruned", "b")}
	stays := newTool(ns, "stays", "pruned", "stays")
	mustCreate(t, server, pruned[0], pruned[1], stays)
	for _, tool := range append(pruned, stays) {
		itemCondition(t, tool, mcpv1alpha1.ConditionPublished, metav1.ConditionTrue, mcpv1alpha1.ReasonPublished)
	}
	deleted := time.Now()
	if err := k8s.Delete(ctx, server); err != nil {
		t.Fatal(err)
	}
	time.Sleep(serverGoneDelay / 5) // the prune reaches the tools a moment later
	for _, tool := range pruned {
		if err := k8s.Delete(ctx, tool); err != nil {
			t.Fatal(err)
		}
	}
	itemCondition(t, stays, mcpv1alpha1.ConditionAccepted, metav1.ConditionFalse, mcpv1alpha1.ReasonServerNotFound)
	if waited := time.Since(deleted); waited < serverGoneDelay {
		t.Fatalf("the remaining tool was marked ServerNotFound %v after the server's deletion, before serverGoneDelay", waited)
	}
	eventRecorded(t, stays, mcpv1alpha1.ReasonServerNotFound)
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == mcpv1alpha1.ReasonServerNotFound && e.Regarding.Name != stays.Name {
			t.Errorf("pruned tool %s got a %s Event: %s", e.Regarding.Name, e.Reason, e.Note)
		}
	}
}
