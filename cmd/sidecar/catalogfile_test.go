//go:build e2e

package main_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
)

// quietFor is how long a stream must stay silent to count as "got nothing": many times the
// file poll interval plus the overlay's coalescing window.
const quietFor = 700 * time.Millisecond

func encodeCatalog(t *testing.T, tools ...catalog.Tool) []byte {
	t.Helper()
	h := catalog.CacheHint{TTLMs: 60000, CacheScope: catalog.ScopePublic}
	b, err := catalog.Encode(&catalog.Catalog{
		SchemaVersion: catalog.SchemaVersion,
		Server: catalog.Server{Namespace: "local", Name: "everything", ToolPolicy: catalog.ToolPolicyAll,
			Caching: catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h}},
		Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile replaces path atomically, as an editor or a ConfigMap volume would, so the sidecar
// never reads a half-written file.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of an unlabelled metric on the admin /metrics page.
func metric(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s on /metrics", name)
	return 0
}

func toolList(t *testing.T, url string) []string {
	t.Helper()
	st, _, msg := do(t, rpcReq(t, url, "list", "tools/list", "", ""))
	if st != 200 || msg["error"] != nil {
		t.Fatalf("tools/list: HTTP %d %v", st, msg)
	}
	var names []string
	for _, tl := range msg["result"].(map[string]any)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	return names
}

// drain returns the methods of the messages that arrive on s within quietFor.
func (s *sse) drain() []string {
	var got []string
	for {
		select {
		case m, ok := <-s.events:
			if !ok {
				return append(got, "(stream ended)")
			}
			got = append(got, fmt.Sprint(m["method"]))
		case <-time.After(quietFor):
			return got
		}
	}
}

func TestCatalogFileIsServedLive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	v1 := encodeCatalog(t, catalog.Tool{Name: "test_simple_text", Description: "Simple text, described by the catalog."})
	writeFile(t, path, v1)
	e := newEnv(t, "--catalog-file", path)
	const (
		applied     = "switchboard_sidecar_catalog_revisions_applied_total"
		rejected    = "switchboard_sidecar_catalog_revisions_rejected_total"
		rejectedNow = "switchboard_sidecar_catalog_rejected"
	)
	tools := listen(t, e.mcp, "tools", `{"toolsListChanged":true}`)
	prompts := listen(t, e.mcp, "prompts", `{"promptsListChanged":true}`)
	resources := listen(t, e.mcp, "resources", `{"resourcesListChanged":true}`)
	for _, s := range []*sse{tools, prompts, resources} {
		s.nextMethod(t, "notifications/subscriptions/acknowledged")
	}
	// expect asserts what each stream receives after one file change: want on tools, nothing
	// on the others.
	expect := func(step string, want []string) {
		t.Helper()
		var got []string
		if len(want) > 0 {
			m, skipped := tools.nextMethod(t, want[0])
			got = append(got, fmt.Sprint(m["method"]))
			for _, s := range skipped {
				t.Errorf("%s: tools stream received %v before %s", step, s["method"], want[0])
			}
		}
		got = append(got, tools.drain()...)
		if !slices.Equal(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Errorf("%s: tools stream received %q, want %q", step, got, want)
		}
		for name, s := range map[string]*sse{"prompts": prompts, "resources": resources} {
			if got := s.drain(); len(got) > 0 {
				t.Errorf("%s: %s stream received %q, want nothing", step, name, got)
			}
		}
	}
	one := []string{"notifications/tools/list_changed"}
	all := toolList(t, e.mcp)
	if !slices.Contains(all, "test_simple_text") || !slices.Contains(all, "test_image_content") {
		t.Fatalf("v1 tools/list = %v, want the upstream's tools", all)
	}

	// v2: rename test_simple_text to simple_text and disable test_image_content.
	v2 := encodeCatalog(t,
		catalog.Tool{Name: "simple_text", UpstreamName: "test_simple_text"},
		catalog.Tool{Name: "test_image_content", Disabled: true})
	writeFile(t, path, v2)
	expect("rename and disable", one)
	got := toolList(t, e.mcp)
	for name, want := range map[string]bool{"simple_text": true, "test_simple_text": false, "test_image_content": false, "test_audio_content": true} {
		if slices.Contains(got, name) != want {
			t.Errorf("after v2 %s listed = %v, want %v (tools %v)", name, !want, want, got)
		}
	}
	// The renamed tool is called upstream by its upstream name: only the upstream's
	// test_simple_text answers with its text.
	msg := callTool(t, e.mcp, "simple_text")
	if text := fmt.Sprint(msg["result"]); !strings.Contains(text, "simple text") {
		t.Errorf("simple_text answered %s, want test_simple_text's text", text)
	}
	for _, name := range []string{"test_image_content", "test_simple_text"} {
		st, _, m := do(t, rpcReq(t, e.mcp, "c-"+name, "tools/call", name, `,"name":"`+name+`","arguments":{}`))
		if ec, _ := m["error"].(map[string]any); st != 200 && st != 400 || ec == nil || ec["code"] != -32602.0 {
			t.Errorf("calling hidden %s: HTTP %d %v, want error -32602", name, st, m)
		}
	}
	if n := metric(t, e.admin, applied); n != 2 {
		t.Errorf("%s = %v after two revisions, want 2", applied, n)
	}
	// catalog_revision_info has one series: the revision served.
	for rev, want := range map[string]float64{catalog.Revision(v2): 1, catalog.Revision(v1): 0} {
		if v := metricOrZero(t, e.admin, `switchboard_sidecar_catalog_revision_info{revision="`+rev+`"}`); v != want {
			t.Errorf("catalog_revision_info of %s = %v, want %v", rev, v, want)
		}
	}

	// Invalid files are refused whole: the last good catalog keeps serving, nobody is told.
	for i, bad := range []string{`{"schemaVersion":1,"server":`, `{"schemaVersion":99}`} {
		writeFile(t, path, []byte(bad))
		eventually.True(t, "the bad file to be rejected", func() bool { return metric(t, e.admin, rejected) == float64(i+1) })
		if n := metric(t, e.admin, rejectedNow); n != 1 {
			t.Errorf("bad file %d: %s = %v, want 1", i, rejectedNow, n)
		}
		expect(fmt.Sprintf("bad file %d", i), nil)
		if after := toolList(t, e.mcp); !slices.Equal(after, got) {
			t.Errorf("bad file %d: tools/list = %v, want the last good %v", i, after, got)
		}
		callTool(t, e.mcp, "simple_text")
	}
	if !strings.Contains(e.sc.output(), "schemaVersion 99 is not supported") {
		t.Error("the sidecar did not log why it refused the catalog")
	}

	// The last good file again (as when an admin reverts the bad edit): it is what is served, so
	// nobody is told anything, and the sidecar no longer counts itself as rejecting.
	writeFile(t, path, v2)
	eventually.True(t, "the last good file to be served again", func() bool { return metric(t, e.admin, rejectedNow) == 0 })
	expect("the last good file again", nil)

	// A new good file: applied and announced once.
	v3 := encodeCatalog(t, catalog.Tool{Name: "simple_text", UpstreamName: "test_simple_text"})
	writeFile(t, path, v3)
	expect("re-enable test_image_content", one)
	if got := toolList(t, e.mcp); !slices.Contains(got, "test_image_content") || !slices.Contains(got, "simple_text") {
		t.Errorf("after v3 tools/list = %v, want test_image_content back and simple_text", got)
	}
	if n, r := metric(t, e.admin, applied), metric(t, e.admin, rejectedNow); n != 3 || r != 0 {
		t.Errorf("after v3 %s = %v, want 3; %s = %v, want 0", applied, n, rejectedNow, r)
	}
}

// TestCatalogListsArePagedOverHTTP walks tools/list page by page through a sidecar process
// with a small --page-size: every page is at most that long, stamped, and the pages together
// are exactly the upstream's tools, each once and in name order; cursors that are not the
// sidecar's own for that list are refused with -32602.
func TestCatalogListsArePagedOverHTTP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, encodeCatalog(t))
	e := newEnv(t, "--catalog-file", path, "--page-size", "3")
	want := toolList(t, "http://"+e.upAddr+"/mcp") // the upstream, directly
	slices.Sort(want)
	if len(want) < 7 {
		t.Fatalf("the upstream lists %d tools; the test needs at least three pages", len(want))
	}

	page := func(method, cursor string) (int, map[string]any) {
		t.Helper()
		extra := ""
		if cursor != "" {
			extra = `,"cursor":` + strconv.Quote(cursor)
		}
		st, _, msg := do(t, rpcReq(t, e.mcp, "page", method, "", extra))
		return st, msg
	}
	var got []string
	cursor, pages := "", 0
	for {
		st, msg := page("tools/list", cursor)
		res, _ := msg["result"].(map[string]any)
		if st != 200 || res == nil {
			t.Fatalf("page %d (cursor %q): HTTP %d %v", pages+1, cursor, st, msg)
		}
		pages++
		tools, _ := res["tools"].([]any)
		if len(tools) == 0 || len(tools) > 3 {
			t.Fatalf("page %d has %d tools, want 1 to 3", pages, len(tools))
		}
		for _, tl := range tools {
			got = append(got, tl.(map[string]any)["name"].(string))
		}
		if res["ttlMs"] != 60000.0 || res["cacheScope"] != "public" || res["resultType"] != "complete" {
			t.Errorf("page %d is stamped %v/%v/%v, want 60000/public/complete", pages, res["ttlMs"], res["cacheScope"], res["resultType"])
		}
		next, _ := res["nextCursor"].(string)
		if next == "" {
			break
		}
		if pages > len(want) {
			t.Fatalf("more pages than tools: the cursors do not advance")
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages list %v, want the upstream's %v in name order, each once", got, want)
	}
	if wantPages := (len(want) + 2) / 3; pages != wantPages {
		t.Errorf("%d pages for %d tools, want %d", pages, len(want), wantPages)
	}

	// A tools/list cursor is not valid for prompts/list, and neither is anything the sidecar
	// did not mint.
	_, first := page("tools/list", "")
	toolsCursor := first["result"].(map[string]any)["nextCursor"].(string)
	for _, c := range []struct{ method, cursor string }{
		{"prompts/list", toolsCursor},
		{"tools/list", "not-a-cursor"},
		{"tools/list", toolsCursor + "x"},
	} {
		st, msg := page(c.method, c.cursor)
		errObj, _ := msg["error"].(map[string]any)
		if st != http.StatusBadRequest || errObj == nil || errObj["code"] != -32602.0 || msg["id"] != "page" {
			t.Errorf("%s with cursor %q: HTTP %d %v, want 400 and -32602 with the request id", c.method, c.cursor, st, msg)
		}
	}
	st, _, msg := do(t, rpcReq(t, e.mcp, "page", "tools/list", "", `,"cursor":7`))
	if errObj, _ := msg["error"].(map[string]any); st != http.StatusBadRequest || errObj == nil || errObj["code"] != -32602.0 {
		t.Errorf("a numeric cursor: HTTP %d %v, want 400 and -32602", st, msg)
	}
}
