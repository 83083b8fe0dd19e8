package sidecar

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay/overlaytest"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/rules/rulestest"
)

// TestSecretReadIsAlwaysPrivate (security review F15): the server's default for resources/read
// is Public and the Secret-backed resource has no hint of its own, as a catalog compiled before
// the controller forced Private on Secret sources (or written by hand for --catalog-file) has
// it. The sidecar still answers the read with cacheScope private: a Secret's content must never
// be marked shareable across authorization contexts. A ConfigMap-backed resource in the same
// catalog keeps the server's Public, and the TTL of both is the server's.
func TestSecretReadIsAlwaysPrivate(t *testing.T) {
	up, _ := tracedUpstream(t, `{}`)
	o := overlay.New(overlay.Options{Hub: &overlaytest.Recorder{}, Contents: overlaytest.Contents{"creds/token": "s3cret", "cm/k": "hello"}})
	c := rulestest.Catalog(rules.EmptyCatalog, catalog.ToolPolicyAll)
	c.Server.Caching.ResourceRead = catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	c.Resources = []catalog.Resource{
		{URI: "secret://token", Name: "token", Source: catalog.Source{Secret: &catalog.KeyRef{Name: "creds", Key: "token"}}},
		{URI: "docs://cm", Name: "cm", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "cm", Key: "k"}}},
		{URI: "secret://hinted", Name: "hinted", Source: catalog.Source{Secret: &catalog.KeyRef{Name: "creds", Key: "token"}},
			Cache: &catalog.CacheHint{TTLMs: 5000, CacheScope: catalog.ScopePublic}},
	}
	data, err := catalog.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(data, ""); err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Options{Upstream: up.URL + "/mcp", Overlay: o})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uri, text, scope string
		ttl              int64
	}{
		{"secret://token", "s3cret", "private", 60000},
		{"secret://hinted", "s3cret", "private", 5000},
		{"docs://cm", "hello", "public", 60000},
	} {
		w := call(t, s, "resources/read", tc.uri, `,"uri":"`+tc.uri+`"`, "", nil)
		var resp struct {
			Result struct {
				Contents []struct {
					Text string `json:"text"`
				} `json:"contents"`
				TTLMs      int64  `json:"ttlMs"`
				CacheScope string `json:"cacheScope"`
			} `json:"result"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || w.Code != 200 {
			t.Fatalf("%s: HTTP %d %s (%v)", tc.uri, w.Code, w.Body, err)
		}
		r := resp.Result
		if len(r.Contents) != 1 || r.Contents[0].Text != tc.text || r.CacheScope != tc.scope || r.TTLMs != tc.ttl {
			t.Errorf("%s: read %+v, want text %q, cacheScope %s, ttlMs %d", tc.uri, r, tc.text, tc.scope, tc.ttl)
		}
	}
}
