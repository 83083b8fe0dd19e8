package overlay

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/hub"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
)

// A benchmark of the identity-aware fan-out (docs/performance.md, "Caller identity"):
//
//	go test ./sidecar/overlay -run '^$' -bench PolicyEdit -benchtime 20x

// countingWriter is a stream transport that counts what it is given and writes nowhere.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) WriteEvent(_ []byte, scratch []byte) ([]byte, error) {
	w.n.Add(1)
	return scratch, nil
}

func (w countingWriter) End([]byte) {}

// benchPolicyCatalog is a catalog of a server with 100 upstream tools and one rule per caller
// (ServiceAccount bench/agent-<i>): tools tool-<i>, tool-<i+1> and shared; extra is granted to
// the callers for which it returns true.
func benchPolicyCatalog(callers int, extra func(i int) bool) []byte {
	h := catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	c := &catalog.Catalog{SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "ns", Name: "srv", ToolPolicy: catalog.ToolPolicyAll,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Auth: &catalog.Auth{Resource: "https://srv.example/mcp", TrustDomain: "cluster.local",
			ServiceAccountTokens: &catalog.ServiceAccountTokens{Audiences: []string{"https://srv.example/mcp"}}},
		Access: &catalog.Access{},
	}
	for i := range callers {
		r := catalog.AccessRule{Policy: fmt.Sprintf("p%d/0", i),
			Source: catalog.AccessSource{ServiceAccounts: []string{fmt.Sprintf("bench/agent-%d", i)}},
			Tools:  []string{fmt.Sprintf("tool-%d", i), fmt.Sprintf("tool-%d", (i+1)%callers), "shared"}}
		if extra(i) {
			r.Tools = append(r.Tools, "extra")
		}
		c.Access.Rules = append(c.Access.Rules, r)
	}
	b, err := catalog.Encode(c)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkPolicyEditFanout: one policy edit (a new catalog revision whose Access differs) with
// 1,000 listen streams of 100 callers open, from Apply to every notification written: the
// overlay's computation, each caller's view weighed once, and the fan-out. "one-caller" changes
// one caller's grants (its 10 streams are woken); "every-caller" changes all of them.
func BenchmarkPolicyEditFanout(b *testing.B) {
	const callers, streams, tools = 100, 1000, 100
	for _, bc := range []struct {
		name  string
		extra func(i int) bool
		woken int
	}{
		{"one-caller", func(i int) bool { return i == 0 }, streams / callers},
		{"every-caller", func(int) bool { return true }, streams},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := hub.New(hub.Options{Keepalive: -1})
			o := New(Options{Hub: h, Logger: slog.New(slog.DiscardHandler)})
			up := make([]json.RawMessage, 0, tools+2)
			for i := range tools {
				up = append(up, json.RawMessage(fmt.Sprintf(`{"name":"tool-%d","description":"Tool %d of the benchmark server.","inputSchema":{"type":"object"}}`, i, i)))
			}
			up = append(up, json.RawMessage(`{"name":"shared","inputSchema":{"type":"object"}}`), json.RawMessage(`{"name":"extra","inputSchema":{"type":"object"}}`))
			o.upLists = map[string][]json.RawMessage{"tools/list": up}
			var written atomic.Int64
			for j := range streams {
				id := &authn.Identity{Subject: fmt.Sprintf("system:serviceaccount:bench:agent-%d", j%callers),
					ServiceAccount: fmt.Sprintf("bench/agent-%d", j%callers)}
				st := &hub.Stream{ID: []byte(fmt.Sprint(j)), Kinds: protocol.KindTools | protocol.KindPrompts | protocol.KindResources, Caller: id}
				if !h.Reserve() || !h.Add(st) || !st.Start(countingWriter{&written}) {
					b.Fatal("stream not registered")
				}
			}
			revs := [2][]byte{benchPolicyCatalog(callers, func(int) bool { return false }), benchPolicyCatalog(callers, bc.extra)}
			if err := o.Apply(revs[0], ""); err != nil {
				b.Fatal(err)
			}
			o.last = o.compute()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := o.Apply(revs[i%2], ""); err != nil {
					b.Fatal(err)
				}
				next := o.compute()
				o.publishDiff(o.last, next, nil, 0)
				o.last = next
			}
			if got := written.Load() / int64(i); got != int64(bc.woken) {
				b.Fatalf("%d streams written per edit, want %d", got, bc.woken)
			}
			b.ReportMetric(float64(bc.woken), "streams-woken/op")
		})
	}
}
