package kube

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

func TestParseShardSelector(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
	}{
		{in: ""},
		{in: "sharding.switchboard.dev/key=shard1"},
		{in: "!sharding.switchboard.dev/key"},
		{in: "sharding.switchboard.dev/key in (a,b)"},
		{in: "team=payments", wantErr: `selects on label "team"`},
		{in: "sharding.switchboard.dev/key=a,team=b", wantErr: `selects on label "team"`},
		{in: "sharding.switchboard.dev/key=(", wantErr: "unable to parse"},
	} {
		_, err := ParseShardSelector(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ParseShardSelector(%q) = %v, want no error", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("ParseShardSelector(%q) = %v, want an error containing %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestShardLeaderElectionID(t *testing.T) {
	for _, tc := range []struct{ sel, want string }{
		{"", LeaderElectionID},
		{"!sharding.switchboard.dev/key", LeaderElectionID},
		{"sharding.switchboard.dev/key=shard1", "switchboard-manager-shard1.mcp.switchboard.dev"},
		{"sharding.switchboard.dev/key==shard2", "switchboard-manager-shard2.mcp.switchboard.dev"},
		{"sharding.switchboard.dev/key in (shard3)", "switchboard-manager-shard3.mcp.switchboard.dev"},
		// Not a lowercase DNS label, or not one value: hashed, and still distinct.
		{"sharding.switchboard.dev/key=Shard_1", "switchboard-manager-"},
		{"sharding.switchboard.dev/key in (a,b)", "switchboard-manager-"},
		{"sharding.switchboard.dev/key notin (a)", "switchboard-manager-"},
	} {
		sel, err := ParseShardSelector(tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		got := ShardLeaderElectionID(sel)
		if !strings.HasPrefix(got, tc.want) || (strings.HasSuffix(tc.want, ".dev") && got != tc.want) {
			t.Errorf("ShardLeaderElectionID(%q) = %q, want %q", tc.sel, got, tc.want)
		}
		if len(got) > 253 || strings.ToLower(got) != got {
			t.Errorf("ShardLeaderElectionID(%q) = %q is not a valid Lease name", tc.sel, got)
		}
	}
	a, _ := ParseShardSelector("sharding.switchboard.dev/key in (a,b)")
	b, _ := ParseShardSelector("sharding.switchboard.dev/key notin (a)")
	if ShardLeaderElectionID(a) == ShardLeaderElectionID(b) {
		t.Errorf("two shards share the Lease %s", ShardLeaderElectionID(a))
	}
}

// TestShardCacheOptions: a shard's cache selects the Switchboard kinds by the shard label, and
// the manager's children by the shard label and its own label; pods as unsharded.
func TestShardCacheOptions(t *testing.T) {
	sel, err := ParseShardSelector("sharding.switchboard.dev/key=shard1")
	if err != nil {
		t.Fatal(err)
	}
	opts := ShardCacheOptions(sel)
	server := &mcpv1alpha1.MCPServer{}
	server.Name = "weather"
	shard1 := &mcpv1alpha1.MCPServer{}
	shard1.Name, shard1.Labels = "weather", map[string]string{inject.LabelShard: "shard1"}
	for _, tc := range []struct {
		obj    client.Object
		labels map[string]string
		want   bool
	}{
		{&mcpv1alpha1.MCPServer{}, map[string]string{inject.LabelShard: "shard1"}, true},
		{&mcpv1alpha1.MCPServer{}, map[string]string{inject.LabelShard: "shard2"}, false},
		{&mcpv1alpha1.MCPServer{}, nil, false},
		{&mcpv1alpha1.MCPTool{}, map[string]string{inject.LabelShard: "shard1"}, true},
		{&mcpv1alpha1.MCPTool{}, nil, false},
		{&mcpv1alpha1.MCPResource{}, nil, false},
		{&mcpv1alpha1.MCPPrompt{}, nil, false},
		{&mcpv1alpha1.MCPAccessPolicy{}, map[string]string{inject.LabelShard: "shard1"}, true},
		// Children: the controller's labels for a server of the shard, and of another.
		{&appsv1.Deployment{}, inject.LabelsFor(shard1), true},
		{&appsv1.Deployment{}, inject.LabelsFor(server), false},
		{&corev1.ConfigMap{}, inject.LabelsFor(shard1), true},
		{&corev1.Secret{}, inject.LabelsFor(shard1), true},
		{&corev1.Secret{}, map[string]string{inject.LabelShard: "shard1"}, false}, // not the manager's
		// Pods carry no shard label: every shard sees every server's pods.
		{&corev1.Pod{}, inject.PodLabelsFor(shard1), true},
		{&corev1.Pod{}, inject.PodLabelsFor(server), true},
	} {
		var by cache.ByObject
		ok := false
		for k, v := range opts.ByObject {
			if fmt.Sprintf("%T", k) == fmt.Sprintf("%T", tc.obj) {
				by, ok = v, true
			}
		}
		if !ok {
			t.Fatalf("%T is not in the cache's ByObject", tc.obj)
		}
		if got := by.Label.Matches(labels.Set(tc.labels)); got != tc.want {
			t.Errorf("%T labelled %v: selected %t, want %t", tc.obj, tc.labels, got, tc.want)
		}
	}
	if l := inject.PodLabelsFor(shard1); l[inject.LabelServer] == "" || l[inject.LabelShard] != "" {
		t.Errorf("pod labels %v: want the server label and no shard label", inject.PodLabelsFor(shard1))
	}
	// No selector: the unsharded cache.
	if got, want := len(ShardCacheOptions(labels.Everything()).ByObject), len(CacheOptions().ByObject); got != want {
		t.Errorf("no selector: %d kinds selected, want CacheOptions' %d", got, want)
	}
}
