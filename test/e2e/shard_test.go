//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/managerproc"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestShardsDivideTheFleet runs three real manager processes (bin/manager, built here) over one
// API server with kube-controller-manager, kube-scheduler and kwok (so servers have pods):
// shard1 and shard2 (--watch-label-selector=sharding.switchboard.dev/key=shardN) and the default
// shard ('!sharding.switchboard.dev/key'), each with leader election. Every server, with its
// tools labelled alike, gets its catalog from its own shard; each manager's log (controller-
// runtime's V(5) "Reconciling" lines) shows that no server or tool was reconciled by two
// shards, the events of the other shards' pods included; each shard leads through its own Lease;
// the children carry their server's shard label, the pods do not.
func TestShardsDivideTheFleet(t *testing.T) {
	bin := managerBin(t)
	env, err := testenv.Start(testenv.Options{Controllers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := env.Client
	const ns = "shards"
	for _, n := range []string{managerproc.Namespace, ns} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}

	shards := []struct{ name, selector, lease string }{
		{"default", "!" + inject.LabelShard, kube.LeaderElectionID},
		{"shard1", inject.LabelShard + "=shard1", "switchboard-manager-shard1.mcp.switchboard.dev"},
		{"shard2", inject.LabelShard + "=shard2", "switchboard-manager-shard2.mcp.switchboard.dev"},
	}
	dir := t.TempDir()
	managers := map[string]*managerproc.Manager{}
	for _, s := range shards {
		m, err := managerproc.Start(ctx, managerproc.Options{Bin: bin, Kubeconfig: env.KubeconfigPath, Dir: dir, Name: s.name,
			LeaderElect: true, Args: []string{"--watch-label-selector=" + s.selector, "--zap-log-level=5"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		managers[s.name] = m
	}

	// Two servers per shard, each with two tools labelled like it.
	owner := map[string]string{} // "kind/name" -> shard
	for _, s := range shards {
		var shardLabels map[string]string
		if s.name != "default" {
			shardLabels = map[string]string{inject.LabelShard: s.name}
		}
		for i := range 2 {
			name := fmt.Sprintf("%s-s%d", s.name, i)
			objs := []client.Object{&mcpv1alpha1.MCPServer{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: shardLabels},
				Spec:       mcpv1alpha1.MCPServerSpec{Container: &mcpv1alpha1.ServerContainer{Image: "example/mcp:1", Port: 8080, Path: "/mcp"}},
			}}
			owner["mcpserver/"+name] = s.name
			for j := range 2 {
				tool := fmt.Sprintf("%s-t%d", name, j)
				objs = append(objs, &mcpv1alpha1.MCPTool{
					ObjectMeta: metav1.ObjectMeta{Name: tool, Namespace: ns, Labels: shardLabels},
					Spec: mcpv1alpha1.MCPToolSpec{ServerRef: mcpv1alpha1.ServerReference{Name: name},
						Name: fmt.Sprintf("tool_%d", j), Description: "a tool of " + name},
				})
				owner["mcptool/"+tool] = s.name
			}
			for _, o := range objs {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	// Every server's catalog holds its two tools, and every server and tool has a status.
	eventually.Succeeds(t, "every server's catalog and status", func() error {
		for key := range owner {
			kind, name, _ := strings.Cut(key, "/")
			switch kind {
			case "mcpserver":
				var cm corev1.ConfigMap
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-catalog"}, &cm); err != nil {
					return err
				}
				cat, err := catalog.Decode([]byte(cm.Data[catalog.Key]))
				if err != nil {
					return fmt.Errorf("catalog of %s: %w", name, err)
				}
				if len(cat.Tools) != 2 {
					return fmt.Errorf("catalog of %s: %d tools, want 2", name, len(cat.Tools))
				}
				var s mcpv1alpha1.MCPServer
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
					return err
				}
				if s.Status.ObservedGeneration != s.Generation {
					return fmt.Errorf("server %s: status not observed", name)
				}
			case "mcptool":
				var tool mcpv1alpha1.MCPTool
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tool); err != nil {
					return err
				}
				if tool.Status.PublishedRevision == "" {
					return fmt.Errorf("tool %s: not published", name)
				}
			}
		}
		return nil
	})
	// Each server's pods exist (their events reach every shard's cache), and a while passes so
	// that what they trigger is reconciled.
	eventually.Succeeds(t, "every server's pod", func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{inject.LabelServer}); err != nil {
			return err
		}
		if len(pods.Items) < 6 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		return nil
	})
	time.Sleep(5 * time.Second)

	// The children carry the shard label; the pods do not.
	for _, s := range shards[1:] {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.name + "-s0-catalog"}, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels[inject.LabelShard] != s.name {
			t.Errorf("catalog ConfigMap of %s-s0: labels %v, want %s=%s", s.name, cm.Labels, inject.LabelShard, s.name)
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{inject.LabelShard}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("pod %s carries the shard label: moving a server between shards would roll it", pods.Items[0].Name)
	}

	// No object reconciled by two shards; each shard reconciled each of its servers.
	reconciledBy := map[string][]string{} // "controller/name" -> shards
	for _, s := range shards {
		for key := range reconciles(t, managers[s.name].Log) {
			reconciledBy[key] = append(reconciledBy[key], s.name)
		}
	}
	for key, by := range reconciledBy {
		if len(by) > 1 {
			t.Errorf("%s was reconciled by %d shards: %v", key, len(by), by)
		}
		if want, ok := owner[key]; ok && by[0] != want {
			t.Errorf("%s was reconciled by %s, want %s", key, by[0], want)
		}
	}
	for key, want := range owner {
		if kind, _, _ := strings.Cut(key, "/"); kind == "mcpserver" && !slices.Contains(reconciledBy[key], want) {
			t.Errorf("%s was never reconciled by %s", key, want)
		}
	}

	// Each shard leads through its own Lease.
	for _, s := range shards {
		if !managers[s.name].IsLeader() {
			t.Errorf("%s does not lead its shard", s.name)
		}
		var lease coordinationv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: managerproc.Namespace, Name: s.lease}, &lease); err != nil {
			t.Errorf("Lease of %s: %v", s.name, err)
		}
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(managerproc.Namespace)); err != nil {
		t.Fatal(err)
	}
	holders := map[string]bool{}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			holders[*l.Spec.HolderIdentity] = true
		}
	}
	if len(leases.Items) != len(shards) || len(holders) != len(shards) {
		t.Errorf("%d Leases with %d holders, want one per shard (%d)", len(leases.Items), len(holders), len(shards))
	}
}

// reconciles reads a manager's JSON log and returns the "controller/name" of every
// reconcile it started (controller-runtime logs "Reconciling" at V(5)).
func reconciles(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg        string `json:"msg"`
			Controller string `json:"controller"`
			Name       string `json:"name"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Reconciling" {
			out[line.Controller+"/"+line.Name] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no reconcile in %s", path)
	}
	return out
}
