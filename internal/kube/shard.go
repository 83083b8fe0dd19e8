package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// LeaderElectionID is the name of the unsharded manager's leader-election Lease, and of the
// default shard's (--watch-label-selector='!sharding.switchboard.dev/key'), so that an
// installation that starts sharding keeps one leader for its unlabelled servers.
const LeaderElectionID = "switchboard-manager.mcp.switchboard.dev"

// ParseShardSelector parses --watch-label-selector: a label selector on inject.LabelShard only
// (e.g. `sharding.switchboard.dev/key=shard1`, or `!sharding.switchboard.dev/key` for the default
// shard). The key is fixed because the controller copies exactly that label from a server onto
// its children, which is what lets a shard's cache select them. Empty means every object.
func ParseShardSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, err
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() != inject.LabelShard {
			return nil, fmt.Errorf("%q selects on label %q: a shard is selected by %s only (the label the controller copies onto each server's children)",
				s, r.Key(), inject.LabelShard)
		}
	}
	return sel, nil
}

// shardName is what a Lease name may hold of a label value.
var shardName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)

// ShardLeaderElectionID is the leader-election Lease of the shard sel selects: one Lease per
// shard, so each shard elects its own leader. A selector of one value (key=v, key in (v)) gives
// switchboard-manager-<v>.mcp.switchboard.dev (a hash of the value when it is not a lowercase DNS
// label); no selector, or only `!key` (the default shard), LeaderElectionID; any other selector
// a hash of its canonical form.
func ShardLeaderElectionID(sel labels.Selector) string {
	reqs, _ := sel.Requirements()
	if len(reqs) == 0 || (len(reqs) == 1 && reqs[0].Operator() == selection.DoesNotExist) {
		return LeaderElectionID
	}
	shard := sel.String()
	if len(reqs) == 1 && reqs[0].Values().Len() == 1 &&
		(reqs[0].Operator() == selection.Equals || reqs[0].Operator() == selection.DoubleEquals || reqs[0].Operator() == selection.In) {
		shard = reqs[0].Values().UnsortedList()[0]
	}
	if !shardName.MatchString(shard) {
		sum := sha256.Sum256([]byte(shard))
		shard = hex.EncodeToString(sum[:6])
	}
	return "switchboard-manager-" + shard + ".mcp.switchboard.dev"
}

// ShardCacheOptions narrows CacheOptions to one shard: the Switchboard kinds (MCPServer,
// MCPTool, MCPResource, MCPPrompt, MCPAccessPolicy) are those sel selects, and of the manager's
// own children (label-selected already) those whose shard label sel selects, which the
// controller copies from their server (inject.LabelsFor). Pods stay unsharded: they carry no
// shard label (moving a server between shards would roll them), so every shard caches every
// server pod, and the MCPServer controller ignores the events of pods whose server is not in
// its cache. A nil or empty sel returns CacheOptions unchanged.
func ShardCacheOptions(sel labels.Selector) cache.Options {
	opts := CacheOptions()
	if sel == nil || sel.Empty() {
		return opts
	}
	reqs, _ := sel.Requirements()
	for obj, by := range opts.ByObject {
		if by.Label == nil || isPod(obj) {
			continue
		}
		by.Label = by.Label.Add(reqs...)
		opts.ByObject[obj] = by
	}
	for _, obj := range []client.Object{&mcpv1alpha1.MCPServer{}, &mcpv1alpha1.MCPTool{}, &mcpv1alpha1.MCPResource{},
		&mcpv1alpha1.MCPPrompt{}, &mcpv1alpha1.MCPAccessPolicy{}} {
		opts.ByObject[obj] = cache.ByObject{Label: sel}
	}
	return opts
}

func isPod(obj client.Object) bool {
	_, ok := obj.(*corev1.Pod)
	return ok
}
