//go:build e2e

package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestItemStatusWrittenOncePerRevision: when the replicas report a new or edited tool's revision
// promptly, the tool's status is written once, already Ready and with the digest its MCP server
// serves, instead of first without them (DefaultItemSettle); and the server's status is written
// once, with the new revision, without leaving Ready (holdsServerStatus).
func TestItemStatusWrittenOncePerRevision(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	server := newServer(ns, "once", 1)
	first := newTool(ns, "first", "once", "first")
	mustCreate(t, server, first)
	n := inject.NamesFor(server)
	sidecar := sidecarClient(t, ns, n.ServiceAccount)
	var pod string
	eventually.Succeeds(t, "a ready pod", func() error {
		if p := readyPods(t, ns, "once"); len(p) == 1 {
			pod = p[0].Name
			return nil
		}
		return fmt.Errorf("no ready pod yet")
	})
	// checked reports, as the pod's sidecar, the current revision with its tools compared.
	checked := func(tools ...string) (string, time.Time) {
		_, rev := getCatalog(t, ns, "once")
		digests := map[string]string{}
		for _, name := range tools {
			digests[name] = "sha256:" + name
		}
		report(t, sidecar, ns, n.StatusConfigMap, pod, catalog.Report{Revision: rev, ToolsChecked: true, ToolDigests: digests})
		return rev, time.Now()
	}
	rev, _ := checked("first")
	serverCondition(t, client.ObjectKeyFromObject(server), mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)
	itemCondition(t, first, mcpv1alpha1.ConditionReady, metav1.ConditionTrue, mcpv1alpha1.ReasonReady)

	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func() *mcpv1alpha1.MCPTool
	}{
		{"edited", func() *mcpv1alpha1.MCPTool {
			edit(t, first, func() { first.Spec.Description = "edited" })
			return first
		}},
		{"created", func() *mcpv1alpha1.MCPTool {
			second := newTool(ns, "second", "once", "second")
			mustCreate(t, second)
			return second
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list mcpv1alpha1.MCPToolList
			if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			watcher, err := w.Watch(ctx, &mcpv1alpha1.MCPToolList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
			if err != nil {
				t.Fatal(err)
			}
			defer watcher.Stop()
			var servers mcpv1alpha1.MCPServerList
			if err := k8s.List(ctx, &servers, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			serverWatcher, err := w.Watch(ctx, &mcpv1alpha1.MCPServerList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: servers.ResourceVersion}})
			if err != nil {
				t.Fatal(err)
			}
			defer serverWatcher.Stop()
			if len(servers.Items) != 1 {
				t.Fatalf("%d servers in the namespace", len(servers.Items))
			}
			changedAt := time.Now()
			tool := tc.change()
			eventually.Succeeds(t, "a new revision", func() error {
				if _, now := getCatalog(t, ns, "once"); now == rev {
					return fmt.Errorf("still revision %s", rev)
				}
				return nil
			})
			var reportedAt time.Time
			rev, reportedAt = checked("first", "second")
			eventually.Succeeds(t, "the tool Ready at its generation with the reported digest", func() error {
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(tool), tool); err != nil {
					return err
				}
				if c := findCondition(tool, mcpv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue || c.ObservedGeneration != tool.Generation ||
					tool.Status.ObservedUpstreamDigest != "sha256:"+tool.Spec.Name {
					return fmt.Errorf("ready %+v, digest %q", c, tool.Status.ObservedUpstreamDigest)
				}
				return nil
			})
			writes := statusWrites(t, watcher, tool.Name)
			eventually.Succeeds(t, "the server's status at the new revision", func() error {
				got := &mcpv1alpha1.MCPServer{}
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(server), got); err != nil {
					return err
				}
				if got.Status.CatalogRevision != rev || got.Status.CatalogUpToDateReplicas != 1 {
					return fmt.Errorf("revision %s with %d replicas up to date", got.Status.CatalogRevision, got.Status.CatalogUpToDateReplicas)
				}
				return nil
			})
			serverWrites, notReady := serverStatusWrites(t, serverWatcher, &servers.Items[0])
			if took := reportedAt.Sub(changedAt); took > DefaultItemSettle-2*time.Second {
				// The wait ended before the report: the status is written as it stood, then again.
				t.Logf("the report came %v after the change, too late to count the writes (machine busy)", took)
				return
			}
			if writes != 1 {
				t.Errorf("the tool's status was written %d times for one revision reported %v after the change, want once",
					writes, reportedAt.Sub(changedAt))
			}
			if serverWrites != 1 || len(notReady) > 0 {
				t.Errorf("the server's status was written %d times for one revision reported %v after the change, want once; not Ready in between: %v",
					serverWrites, reportedAt.Sub(changedAt), notReady)
			}
		})
	}
}

// serverStatusWrites counts the watch events of the MCPServer that changed its status from last
// (as listed when the watch began), until the watch is quiet for a second, and returns the Ready
// conditions of those that were not True.
func serverStatusWrites(t *testing.T, w watch.Interface, last *mcpv1alpha1.MCPServer) (writes int, notReady []string) {
	t.Helper()
	for {
		select {
		case e := <-w.ResultChan():
			server, ok := e.Object.(*mcpv1alpha1.MCPServer)
			if !ok {
				continue
			}
			if !equality.Semantic.DeepEqual(last.Status, server.Status) {
				writes++
				if c := findConditionIn(server.Status.Conditions, mcpv1alpha1.ConditionReady); c.Status != metav1.ConditionTrue {
					notReady = append(notReady, fmt.Sprintf("%s %s", c.Status, c.Reason))
				}
			}
			last = server
		case <-time.After(time.Second):
			return writes, notReady
		}
	}
}

// statusWrites counts the watch events of the named tool that changed its status, until the
// watch is quiet for a second.
func statusWrites(t *testing.T, w watch.Interface, name string) int {
	t.Helper()
	var last *mcpv1alpha1.MCPTool
	writes := 0
	for {
		select {
		case e := <-w.ResultChan():
			tool, ok := e.Object.(*mcpv1alpha1.MCPTool)
			if !ok || tool.Name != name {
				continue
			}
			if e.Type == watch.Added {
				last = tool
				continue
			}
			if last != nil && !equality.Semantic.DeepEqual(last.Status, tool.Status) {
				writes++
			}
			last = tool
		case <-time.After(time.Second):
			return writes
		}
	}
}
