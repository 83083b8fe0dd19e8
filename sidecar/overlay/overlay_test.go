package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/overlay/overlaytest"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/rules/rulestest"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
)

func testCatalog(policy string, tools ...catalog.Tool) *catalog.Catalog {
	return rulestest.Catalog(rules.EmptyCatalog, policy, tools...)
}

func TestHints(t *testing.T) {
	o := New(Options{})
	if ttl, scope := o.Hints("tools/list", nil); ttl != 0 || scope != "private" {
		t.Errorf("before a catalog: %d %s", ttl, scope)
	}
	c := testCatalog(catalog.ToolPolicyAll)
	c.Server.Caching.Discover = catalog.CacheHint{TTLMs: 3600000, CacheScope: "public"}
	c.Server.Caching.Tools = catalog.CacheHint{TTLMs: 300000, CacheScope: "public"}
	c.Server.Caching.ResourceRead = catalog.CacheHint{TTLMs: 5, CacheScope: "private"}
	c.Resources = []catalog.Resource{
		{URI: "docs://h", Name: "h", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 600000, CacheScope: "public"}},
		{URITemplate: "weather://station/{id}", Name: "station", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 60000, CacheScope: "public"}},
		{URITemplate: "files://{+path}", Name: "files", Source: catalog.Source{Upstream: true}, Cache: &catalog.CacheHint{TTLMs: 7000, CacheScope: "private"}},
		{URITemplate: "logs://{day}", Name: "logs", Source: catalog.Source{Upstream: true}}, // no hint of its own
	}
	data, err := catalog.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(data, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		method, params string
		ttl            int64
		scope          string
	}{
		{"server/discover", `{}`, 3600000, "public"},
		{"tools/list", `{}`, 300000, "public"},
		{"prompts/list", `{}`, 0, "private"},
		{"resources/read", `{"uri":"docs://h"}`, 600000, "public"},
		{"resources/read", `{"uri":"docs://other"}`, 5, "private"},
		// Reads of URIs a declared template matches get that template's
		// hint; the template syntax is RFC 6570's, as the go-sdk matches it.
		{"resources/read", `{"uri":"weather://station/KSEA"}`, 60000, "public"},
		{"resources/read", `{"uri":"weather://station/KSEA/history"}`, 5, "private"}, // {id} does not span "/"
		{"resources/read", `{"uri":"files://etc/app/config.yaml"}`, 7000, "private"}, // {+path} does
		{"resources/read", `{"uri":"logs://2026-11-29"}`, 5, "private"},              // a template without a hint: the default
	}
	for _, tt := range tests {
		if ttl, scope := o.Hints(tt.method, []byte(tt.params)); ttl != tt.ttl || scope != tt.scope {
			t.Errorf("hints(%s %s) = %d %s, want %d %s", tt.method, tt.params, ttl, scope, tt.ttl, tt.scope)
		}
	}
}

func TestOverlayDiff(t *testing.T) {
	rec := &overlaytest.Recorder{}
	contents := overlaytest.Contents{"cm/k": "v1"}
	o := New(Options{Hub: rec, Contents: contents})
	o.upLists = map[string][]json.RawMessage{"tools/list": rulestest.UpstreamTools, "prompts/list": {}, "resources/list": rulestest.Raws(`{"uri":"up://a","name":"a"}`), "resources/templates/list": {}}
	base := testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "get_alerts", Disabled: true, Description: "one"})
	base.Resources = []catalog.Resource{{URI: "docs://h", Name: "h", Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "cm", Key: "k"}}}}
	apply := func(mut func(c *catalog.Catalog)) {
		t.Helper()
		c := *base
		c.Tools = slices.Clone(base.Tools)
		c.Resources = slices.Clone(base.Resources)
		mut(&c)
		data, err := catalog.Encode(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Apply(data, ""); err != nil {
			t.Fatal(err)
		}
	}
	step := func(upURIs ...string) []string {
		next := o.compute()
		o.publishDiff(o.last, next, upURIs, 0)
		o.last = next
		return rec.Take()
	}
	apply(func(*catalog.Catalog) {})
	o.last = o.compute()
	tests := []struct {
		name   string
		change func()
		upURIs []string
		want   []string
	}{
		{"nothing changed", func() {}, nil, nil},
		{"a disabled tool's description", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Description = "two" })
		}, nil, nil},
		{"enabling a tool", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Disabled = false })
		}, nil, []string{protocol.NotifToolsListChanged + " "}},
		{"a prompt and a tool at once", func() {
			apply(func(c *catalog.Catalog) {
				c.Prompts = []catalog.Prompt{{Name: "p", Messages: []catalog.PromptMessage{{Role: "user", Text: "x"}}}}
			})
		}, nil, []string{protocol.NotifPromptsListChanged + " ", protocol.NotifToolsListChanged + " "}},
		{"ConfigMap content", func() { contents["cm/k"] = "v2" }, nil, []string{protocol.NotifResourcesUpdated + " docs://h"}},
		{"upstream update of an upstream URI passes, of a sidecar URI is dropped", func() {}, []string{"up://a", "docs://h"},
			[]string{protocol.NotifResourcesUpdated + " up://a"}},
		{"upstream tool change that is hidden", func() {
			apply(func(c *catalog.Catalog) { c.Tools[0].Disabled = true })
			rec.Take()
			step()
			o.upLists["tools/list"] = rulestest.Raws(`{"name":"get_alerts","description":"changed"}`, string(rulestest.UpstreamTools[0]), string(rulestest.UpstreamTools[2]))
		}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.change()
			if got := step(tt.upURIs...); !slices.Equal(got, tt.want) {
				t.Errorf("published %q, want %q", got, tt.want)
			}
		})
	}
}

func TestApplyRejectsAndKeepsServing(t *testing.T) {
	var reports []catalog.Report
	o := New(Options{Report: func(r catalog.Report) { reports = append(reports, r) }})
	good, _ := catalog.Encode(testCatalog(catalog.ToolPolicyDeclared))
	if err := o.Apply(good, "r1"); err != nil {
		t.Fatal(err)
	}
	o.handOverReport() // what Run does once the computation published
	if err := o.Apply([]byte(`{"schemaVersion":1,"server":{},"bogus":true}`), "r2"); err == nil {
		t.Fatal("a bad catalog was applied")
	}
	c, rev := o.Catalog()
	if rev != "r1" || c.Server.ToolPolicy != catalog.ToolPolicyDeclared {
		t.Errorf("serving %s %s after a rejection", rev, c.Server.ToolPolicy)
	}
	want := []catalog.Report{{Revision: "r1"}, {Revision: "r1", RejectedRevision: "r2", Reason: reports[1].Reason}}
	if !slices.EqualFunc(reports, want, catalog.Report.Equal) || !strings.Contains(reports[1].Reason, "bogus") {
		t.Errorf("reports = %+v", reports)
	}
}

func TestObserveDigests(t *testing.T) {
	o := New(Options{})
	if o.ObservedDigestOf("get_forecast") != "" {
		t.Fatal("a digest before any read")
	}
	c := testCatalog(catalog.ToolPolicyAll, catalog.Tool{Name: "forecast", UpstreamName: "get_forecast"}, catalog.Tool{Name: "ghost"})
	r := o.observeDigests(c, rulestest.UpstreamTools)
	if want := rulestest.Digest(t, rulestest.UpstreamTools[0]); r.digests["forecast"] != want || o.ObservedDigestOf("get_forecast") != want {
		t.Fatalf("report %v, observed %q; want %s", r.digests, o.ObservedDigestOf("get_forecast"), want)
	}
	if _, ok := r.digests["ghost"]; ok || len(r.digests) != 1 {
		t.Fatalf("only declared tools the upstream serves are reported: %v", r.digests)
	}
	if o.ObservedDigestOf("get_alerts") != rulestest.Digest(t, rulestest.UpstreamTools[1]) {
		t.Fatal("an undeclared tool's digest is recorded for tools/call")
	}
	o.observeDigests(c, nil)
	if o.ObservedDigestOf("get_forecast") != "" {
		t.Fatal("an unread list still gives digests")
	}
}

// A computation's report of revision r1 that is still being handed over when r2 is applied must
// not be the last one the reporter gets: the replica would go on reporting r1 until its next
// computation, and not at all while the upstream is unreachable (nothing changes then).
func TestReportOfAnOlderRevisionNeverOvertakesANewerOne(t *testing.T) {
	var (
		mu      sync.Mutex
		last    catalog.Report
		entered = make(chan struct{})
		applied = make(chan struct{})
	)
	o := New(Options{Report: func(r catalog.Report) {
		if r.Revision == "r1" && r.ToolsChecked {
			close(entered)
			// Give Apply(r2) the time to run to its end while this report is in hand.
			select {
			case <-applied:
			case <-time.After(200 * time.Millisecond):
			}
		}
		mu.Lock()
		last = r
		mu.Unlock()
	}})
	cat, _ := catalog.Encode(testCatalog(catalog.ToolPolicyDeclared))
	if err := o.Apply(cat, "r1"); err != nil {
		t.Fatal(err)
	}
	reported := make(chan struct{})
	go func() {
		o.reportMissing("r1", true, nil, nil, pinReport{})
		o.handOverReport()
		close(reported)
	}()
	<-entered
	if err := o.Apply(cat, "r2"); err != nil {
		t.Fatal(err)
	}
	o.handOverReport() // Run's computation of r2
	close(applied)
	<-reported
	mu.Lock()
	defer mu.Unlock()
	if last.Revision != "r2" {
		t.Errorf("last report is of %s, want r2", last.Revision)
	}
}

// forecastUpstream is a go-sdk MCP server listing one tool, get_forecast.
func forecastUpstream(t *testing.T) *httptest.Server {
	t.Helper()
	ms := mcp.NewServer(&mcp.Implementation{Name: "report-upstream", Version: "1"}, nil)
	mcp.AddTool(ms, &mcp.Tool{Name: "get_forecast", Description: "the forecast"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(up.Close)
	return up
}

// applyForecast applies revision rev of a catalog declaring get_forecast as forecast, described desc.
func applyForecast(t *testing.T, o *Overlay, rev, desc string) {
	t.Helper()
	data, err := catalog.Encode(testCatalog(catalog.ToolPolicyDeclared,
		catalog.Tool{Name: "forecast", UpstreamName: "get_forecast", Description: desc}))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(data, rev); err != nil {
		t.Fatal(err)
	}
}

// timeline records, in order, what the overlay published and the reports it handed over.
type timeline struct {
	mu     sync.Mutex
	events []string
}

func (tl *timeline) add(e string) {
	tl.mu.Lock()
	tl.events = append(tl.events, e)
	tl.mu.Unlock()
}

func (tl *timeline) Publish(k protocol.Kind, _ string) int {
	tl.add("publish " + k.Method())
	return 1
}

func (tl *timeline) since(mark int) []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Clone(tl.events[mark:])
}

// An applied revision is reported once, after its changes were published to the streams, with
// what its computation found: its report (an API write, and the controller's reconcile it
// wakes) does not run beside the fan-out, and says the clients were told.
func TestReportFollowsThePublish(t *testing.T) {
	up := forecastUpstream(t)

	tl := &timeline{}
	o := New(Options{Hub: tl, Upstream: upstream.New(up.URL, 0), Logger: slog.New(slog.DiscardHandler),
		Report: func(r catalog.Report) { tl.add(fmt.Sprintf("report %s checked=%v", r.Revision, r.ToolsChecked)) }})
	waitFor := func(mark int, want string) []string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if got := tl.since(mark); slices.Contains(got, want) {
				time.Sleep(50 * time.Millisecond) // a second report would come at once
				return tl.since(mark)
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("no %q: %q", want, tl.since(mark))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	applyForecast(t, o, "r1", "v1")
	go o.Run(ctx)
	// The first computation reads the upstream's lists: r1 is reported before that read, then
	// with the tools checked.
	if got, want := waitFor(0, "report r1 checked=true"), []string{"report r1 checked=false", "report r1 checked=true"}; !slices.Equal(got, want) {
		t.Fatalf("first revision: %q, want %q", got, want)
	}

	mark := len(tl.since(0))
	applyForecast(t, o, "r2", "v2")
	if got, want := waitFor(mark, "report r2 checked=true"), []string{"publish notifications/tools/list_changed", "report r2 checked=true"}; !slices.Equal(got, want) {
		t.Fatalf("a description edited: %q, want %q", got, want)
	}
}

// stalledHub is a Publisher whose fan-out lasts until release is closed, as one to streams whose
// clients do not read (each write waits for the hub's write timeout).
type stalledHub struct {
	*timeline
	release chan struct{}
}

func (h stalledHub) Publish(k protocol.Kind, uri string) int {
	<-h.release
	return h.timeline.Publish(k, uri)
}

// A fan-out held up by streams that do not read does not hold up the report past reportWait:
// else a client that stops reading would keep every replica's report, and so the server's
// status, from saying which revision it serves.
func TestReportDoesNotWaitForAStalledFanout(t *testing.T) {
	up := forecastUpstream(t)

	tl := &timeline{}
	hub := stalledHub{timeline: tl, release: make(chan struct{})}
	reported := make(chan catalog.Report, 8)
	o := New(Options{Hub: hub, Upstream: upstream.New(up.URL, 0), Logger: slog.New(slog.DiscardHandler),
		Report: func(r catalog.Report) { reported <- r }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer close(hub.release)
	applyForecast(t, o, "r1", "v1")
	go o.Run(ctx)
	for r := range reported {
		if r.Revision == "r1" && r.ToolsChecked {
			break
		}
	}
	applyForecast(t, o, "r2", "v2")
	start := time.Now()
	select {
	case r := <-reported:
		if r.Revision != "r2" || !r.ToolsChecked {
			t.Fatalf("report %+v, want r2 checked", r)
		}
		if waited := time.Since(start); waited < reportWait/2 {
			t.Fatalf("reported after %v, before the fan-out was held up for reportWait (%v)", waited, reportWait)
		}
	case <-time.After(10 * reportWait):
		t.Fatalf("no report of r2 within %v while the fan-out is stalled", 10*reportWait)
	}
	if got := tl.since(0); len(got) != 0 {
		t.Fatalf("published %q before the stalled fan-out ended", got)
	}
}

// listing is a ContentSource whose objects are listed when the test says so, as an informer's
// first list arrives some time after the revision naming them was applied.
type listing struct {
	mu     sync.Mutex
	listed bool
	data   map[string]string // "name/key" -> value, once listed
}

func (l *listing) Content(_ bool, name, key string) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.data[name+"/"+key]
	return []byte(v), ok && l.listed
}

func (*listing) SetRefs(_, _ []string) {}

func (l *listing) Synced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listed
}

// A replica is ready only once a published computation has read the resources' sources after
// they were listed. Being listed is not enough: the computation that first reads them tells
// every subscriber the resource was updated, and a client that connected in between (the
// replica looked ready) would hear of a change that never happened.
func TestContentsServedOnlyAfterAComputationReadTheListedSources(t *testing.T) {
	up := forecastUpstream(t)
	tl := &timeline{}
	src := &listing{data: map[string]string{"handbook/text": "Weather desk handbook"}}
	o := New(Options{Hub: tl, Upstream: upstream.New(up.URL, 0), Logger: slog.New(slog.DiscardHandler), Contents: src})
	c := testCatalog(catalog.ToolPolicyDeclared, catalog.Tool{Name: "forecast", UpstreamName: "get_forecast"})
	c.Resources = []catalog.Resource{{URI: "docs://handbook", Name: "handbook",
		Source: catalog.Source{ConfigMap: &catalog.KeyRef{Name: "handbook", Key: "text"}}}}
	data, err := catalog.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Apply(data, "r1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go o.Run(ctx)
	select {
	case <-o.Applied():
	case <-time.After(10 * time.Second):
		t.Fatal("r1 not applied and published within 10 s")
	}
	if o.ContentsServed() {
		t.Fatal("contents served before the source was listed")
	}

	// The informer's list has arrived; the event that asks for a computation has not.
	src.mu.Lock()
	src.listed = true
	src.mu.Unlock()
	if o.ContentsServed() {
		t.Fatal("contents served once the source was listed, before any computation read it")
	}

	o.ContentChanged()
	deadline := time.Now().Add(10 * time.Second)
	for !o.ContentsServed() {
		if time.Now().After(deadline) {
			t.Fatal("contents not served 10 s after the listed source's event")
		}
		time.Sleep(time.Millisecond)
	}
	if got, want := tl.since(0), []string{"publish notifications/resources/updated"}; !slices.Equal(got, want) {
		t.Fatalf("published %q by the time contents are served, want %q (the first read of the source)", got, want)
	}
	if body, _, err := o.Content(&c.Resources[0]); err != nil || string(body) != "Weather desk handbook" {
		t.Fatalf("content = %q, %v", body, err)
	}
}
