package overlay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yosida95/uritemplate/v3"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/access"
	"github.com/switchboard-mcp/switchboard/sidecar/authn"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// Overlay timing.
const (
	// CoalesceWindow is the least time between two computations of the
	// overlay. A change (a catalog revision, a referenced ConfigMap/Secret, an
	// upstream notification) that arrives when the last computation ended a
	// window ago or more is diffed and published at once; changes that follow
	// within the window wait for its end, so a burst of changes becomes at
	// most two notifications per list (the first change, then the rest).
	CoalesceWindow = 10 * time.Millisecond
	// overlayRetryFloor and overlayRetryCeiling bound the backoff of
	// re-reading the upstream's lists after a failure.
	overlayRetryFloor   = 200 * time.Millisecond
	overlayRetryCeiling = 10 * time.Second
	// reportWait is the longest a fan-out holds up the report of the revision it publishes: a
	// stream whose client does not read holds each write for up to the hub's write timeout.
	reportWait = time.Second
)

// ContentSource serves the ConfigMap and Secret keys that resources
// reference. The Kubernetes implementation watches exactly the named
// objects; the overlay tells it which (SetRefs) after each revision.
type ContentSource interface {
	// Content returns the value of key in the named ConfigMap (or Secret).
	Content(secret bool, name, key string) ([]byte, bool)
	// SetRefs names the ConfigMaps and Secrets the current catalog uses.
	SetRefs(configMaps, secrets []string)
	// Synced reports whether every object SetRefs named has been listed once.
	Synced() bool
}

// Options configure an Overlay.
type Options struct {
	Hub      upstream.Publisher // the listen hub (or a recorder in tests)
	Upstream *upstream.Client
	Logger   *slog.Logger
	// Observer counts what the overlay does (the sidecar's metrics; nil: nothing is counted).
	Observer Observer
	// PageSize is the page size of merged lists (DefaultPageSize when 0).
	PageSize int
	// Contents serves ConfigMap/Secret-backed resources (none when nil).
	Contents ContentSource
	// Report receives the propagation report (nil: not reported): a rejected
	// revision's at once; an applied revision's once the computation it starts
	// has published its changes to the streams, with what that computation
	// found (the tools missing upstream, the digests), or before that
	// computation reads the upstream's lists, or once the fan-out has taken
	// reportWait. So the report of a revision says its clients were told, is
	// written once, and its write (a request to the API server, and the
	// controller's reconcile it wakes) does not compete with the fan-out. It is called in the order the reports were
	// made, under the overlay's lock: it must not block or call the overlay.
	Report func(catalog.Report)
	// Published, when set, is told when the stages of each computation ended
	// (the sidecar's propagation log).
	Published func(PublishTimes)
}

// PublishTimes are the stages of one computation of the overlay: the revision it covered, when
// that revision was applied, when the coalescing window ended, when the effective catalog was
// computed and when its changes were published (every write to a listen stream attempted).
type PublishTimes struct {
	Revision                                string
	Applied, Coalesced, Computed, Published time.Time
}

// Overlay is the live catalog: it holds the last good revision, merges it
// with the upstream's lists, and turns every change (new revision, changed
// ConfigMap/Secret content, upstream notification) into exactly the
// notifications a client could observe.
//
// Concurrency: the current catalog is an atomic pointer (read by request
// handlers, swapped by Apply). pendMu guards the pending changes. Run's
// goroutine alone owns the upstream lists and the last published snapshot.
type Overlay struct {
	opts Options
	log  *slog.Logger
	m    Observer

	cur atomic.Pointer[appliedCatalog]
	// digests are the upstream digests of the upstream's tools by their
	// upstream name, from the overlay's last read of tools/list (nil before
	// it): tools/call checks pins against them.
	digests atomic.Pointer[map[string]string]

	pendMu      sync.Mutex
	report      catalog.Report // last report (guarded by pendMu)
	reportDue   bool           // report changed since it was handed to Options.Report (guarded by pendMu)
	upKinds     protocol.Kind  // upstream lists to re-read
	upURIs      map[string]bool
	kick        chan struct{}
	appliedC    chan struct{} // closed once the first revision is applied and its changes published
	appliedOnce sync.Once

	// Owned by Run.
	upLists map[string][]json.RawMessage // by list method; nil = unknown
	last    *snapshot
	// sourcesRead is whether the last published computation read the ConfigMap and Secret
	// sources after they were listed (ContentsServed).
	sourcesRead atomic.Bool
	// grants memoises callers' grants for the fan-out (safe for concurrent use).
	grants access.Cache
}

// viewPublisher is a upstream.Publisher that knows the callers of its streams (the Hub): the overlay
// then publishes each caller's own view.
type viewPublisher interface {
	PublishViews(tools bool, changed func(*authn.Identity) protocol.Kind) int
	PublishUpdate(uri string, allowed func(*authn.Identity) bool) int
}

type appliedCatalog struct {
	cat *catalog.Catalog
	rev string
	at  time.Time // when Apply stored it
	// templates are the resource templates with their own cache hint,
	// compiled once per revision, in catalog order (see readHintFor).
	templates []hintTemplate
}

// hintTemplate is a resource template that carries its own cache hint.
type hintTemplate struct {
	re   *regexp.Regexp
	hint catalog.CacheHint
}

// compileHintTemplates compiles the templates of c that carry a cache hint.
// They match URIs the way the go-sdk's server routes resources/read to a
// template (github.com/yosida95/uritemplate). A template that does not parse
// is skipped: its reads get the server's default hint, and the log says so.
func compileHintTemplates(c *catalog.Catalog, log *slog.Logger) []hintTemplate {
	var out []hintTemplate
	for _, r := range c.Resources {
		if r.URITemplate == "" || r.Cache == nil {
			continue
		}
		t, err := uritemplate.New(r.URITemplate)
		if err != nil {
			log.Warn("Resource template does not parse; its reads get the default cache hint", "resource", r.Name, "uriTemplate", r.URITemplate, "err", err)
			continue
		}
		out = append(out, hintTemplate{re: t.Regexp(), hint: *r.Cache})
	}
	return out
}

// DefaultPageSize is the number of entries on one page of a merged list.
const DefaultPageSize = rules.DefaultPageSize

// New returns an overlay serving the empty catalog until Apply.
func New(o Options) *Overlay {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.PageSize <= 0 {
		o.PageSize = rules.DefaultPageSize
	}
	return &Overlay{opts: o, log: o.Logger, m: o.Observer, kick: make(chan struct{}, 1),
		appliedC: make(chan struct{}), upURIs: map[string]bool{}}
}

// Catalog returns the catalog being served and its revision ("" before the
// first one).
func (o *Overlay) Catalog() (*catalog.Catalog, string) {
	if a := o.cur.Load(); a != nil {
		return a.cat, a.rev
	}
	return rules.EmptyCatalog, ""
}

// readHintFor is the cache hint of resources/read for uri: the declared
// resource with that URI, else the first declared template that matches it,
// else the server's default.
func (o *Overlay) readHintFor(uri string) catalog.CacheHint {
	a := o.cur.Load()
	if a == nil {
		return rules.EmptyCatalog.Server.Caching.ResourceRead
	}
	if r := rules.FindResource(a.cat, uri); r != nil {
		return ReadHint(a.cat, r)
	}
	for _, t := range a.templates {
		if t.re.MatchString(uri) {
			return t.hint
		}
	}
	return a.cat.Server.Caching.ResourceRead
}

// Applied is closed once a first revision has been applied and the changes
// it made published (readiness waits for it, so clients that connect once
// the pod is ready never see the switch from the empty catalog).
func (o *Overlay) Applied() <-chan struct{} { return o.appliedC }

// ContentsServed reports whether the last published computation read the ConfigMap and Secret
// sources of the catalog's resources after they were listed. Before that, their resources
// answer "not found", and the computation that first reads them tells their subscribers
// notifications/resources/updated: a replica is not ready until then (sidecar/app's /readyz).
func (o *Overlay) ContentsServed() bool { return o.sourcesRead.Load() }

func (o *Overlay) signal() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Apply decodes and applies one catalog revision. revision may be empty
// (then it is computed from data). A catalog that fails to decode or
// validate is rejected whole: the last good one keeps serving, the reason
// is logged, counted and reported.
func (o *Overlay) Apply(data []byte, revision string) error {
	if revision == "" {
		revision = catalog.Revision(data)
	}
	if a := o.cur.Load(); a != nil && a.rev == revision {
		// The newest revision seen is the one being served (e.g. a bad
		// edit was reverted): nothing to apply, but no longer rejecting.
		o.m.CatalogRejecting(false)
		return nil
	}
	c, err := catalog.Decode(data)
	o.pendMu.Lock()
	if err != nil {
		o.report.RejectedRevision, o.report.Reason = revision, err.Error()
		rep := o.report
		o.sendReport(rep)
		o.pendMu.Unlock()
		o.m.CatalogRejected()
		o.m.CatalogRejecting(true)
		o.log.Error("Catalog revision rejected; still serving the last good one", "revision", revision, "serving", rep.Revision, "err", err)
		return err
	}
	o.cur.Store(&appliedCatalog{cat: c, rev: revision, at: time.Now(), templates: compileHintTemplates(c, o.log)})
	o.report.Revision = revision
	o.m.ServingRevision(revision)
	// Not known for the new revision until the next computation.
	o.report.ToolsChecked, o.report.MissingTools, o.report.MissingToolCount = false, nil, 0
	o.report.ToolDigests, o.report.WithheldTools, o.report.WithheldToolCount = nil, nil, 0
	o.reportDue = true // handed over by the computation Apply asks for (Run)
	o.pendMu.Unlock()
	o.m.CatalogApplied()
	o.m.CatalogRejecting(false)
	o.log.Info("Catalog revision applied", "revision", revision, "tools", len(c.Tools), "resources", len(c.Resources), "prompts", len(c.Prompts))
	if o.opts.Contents != nil {
		cms, secrets := c.ContentRefs()
		o.opts.Contents.SetRefs(cms, secrets)
	}
	o.signal()
	return nil
}

// sendReport hands r to the reporter. It is called with pendMu held, so that reports reach the
// reporter in the order they were built: a report of an older revision never lands after a
// newer one's (Options.Report must not block, nor call back into the overlay).
func (o *Overlay) sendReport(r catalog.Report) {
	o.reportDue = false
	if o.opts.Report != nil {
		o.opts.Report(r)
	}
}

// handOverReport sends the report if it changed since it was last sent.
func (o *Overlay) handOverReport() {
	o.pendMu.Lock()
	if o.reportDue {
		o.sendReport(o.report)
	}
	o.pendMu.Unlock()
}

// ContentChanged tells the overlay that a referenced ConfigMap or Secret
// changed.
func (o *Overlay) ContentChanged() { o.signal() }

// Publish receives the upstream relay's changes. They go through the same
// diff as catalog changes: a list is re-read and published only if the
// effective list changed; an update of a URI the sidecar serves itself is
// dropped.
func (o *Overlay) Publish(k protocol.Kind, uri string) int {
	o.pendMu.Lock()
	if k == protocol.KindResourceUpdated {
		o.upURIs[uri] = true
	} else {
		o.upKinds |= k
	}
	o.pendMu.Unlock()
	o.signal()
	return 0
}

func (o *Overlay) takePending() (protocol.Kind, []string) {
	o.pendMu.Lock()
	defer o.pendMu.Unlock()
	k := o.upKinds
	uris := slices.Sorted(maps.Keys(o.upURIs))
	o.upKinds = 0
	clear(o.upURIs)
	return k, uris
}

// Run owns the diff: it re-reads upstream lists when asked, recomputes the
// effective catalog at most once per CoalesceWindow and publishes what changed.
func (o *Overlay) Run(ctx context.Context) {
	o.upLists = map[string][]json.RawMessage{}
	refetch := protocol.KindTools | protocol.KindPrompts | protocol.KindResources
	backoff := overlayRetryFloor
	var retry <-chan time.Time
	first := true
	var done time.Time // when the last computation ended
	for {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-o.kick:
			case <-retry:
				retry = nil
			}
			if wait := CoalesceWindow - time.Since(done); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		first = false
		coalesced := time.Now()
		asked, uris := o.takePending()
		refetch |= asked
		var failed protocol.Kind
		if refetch != 0 {
			// Reading the upstream may take its timeout: an applied revision is reported first.
			o.handOverReport()
			failed = o.fetchUpstream(ctx, refetch)
			if ctx.Err() != nil {
				return
			}
		}
		refetch = failed
		if failed != 0 {
			retry = time.After(backoff)
			backoff = min(backoff*2, overlayRetryCeiling)
		} else {
			backoff = overlayRetryFloor
		}
		snap := o.compute()
		computed := time.Now()
		if o.last != nil {
			late := time.AfterFunc(reportWait, o.handOverReport)
			o.publishDiff(o.last, snap, uris, asked&failed)
			late.Stop()
		}
		o.last = snap
		o.sourcesRead.Store(snap.sourcesRead)
		done = time.Now()
		o.handOverReport()
		if o.opts.Published != nil {
			t := PublishTimes{Revision: snap.rev, Coalesced: coalesced, Computed: computed, Published: done}
			if a := o.cur.Load(); a != nil && a.rev == snap.rev {
				t.Applied = a.at
			}
			o.opts.Published(t)
		}
		if _, rev := o.Catalog(); rev != "" {
			o.appliedOnce.Do(func() { close(o.appliedC) })
		}
	}
}

// fetchUpstream re-reads the upstream lists of the given kinds with the
// sidecar's own identity; it returns the kinds that failed.
func (o *Overlay) fetchUpstream(ctx context.Context, kinds protocol.Kind) protocol.Kind {
	info, err := o.opts.Upstream.Discover(ctx)
	if err != nil {
		o.log.Debug("Overlay: upstream discover failed", "err", err)
		return kinds
	}
	var failed protocol.Kind
	for _, l := range Lists {
		method := l.Method
		if kinds&l.Kind == 0 {
			continue
		}
		if !l.Capability(info) {
			o.upLists[method] = []json.RawMessage{}
			continue
		}
		items, _, pass, err := o.opts.Upstream.List(method, l.Member, func(cursor string) (*http.Request, error) {
			extra := ""
			if cursor != "" {
				extra = `,"cursor":` + string(wire.JSONString(cursor))
			}
			return upstream.ModernRequest(ctx, o.opts.Upstream.URL(), "switchboard-overlay", method, extra)
		})
		if err == nil && pass != nil {
			err = fmt.Errorf("upstream answered %s", wire.Truncate(pass.Msg, 200))
		}
		if err != nil {
			o.log.Debug("Overlay: reading upstream list failed", "method", method, "err", err)
			failed |= l.Kind
			continue
		}
		o.upLists[method] = items
	}
	return failed
}

// snapshot is what the overlay compares between two computations.
type snapshot struct {
	// cat and rev are the catalog the snapshot was computed from (its Access decides what
	// each caller sees).
	cat *catalog.Catalog
	rev string
	// entries are the effective lists by access kind (resources and templates together),
	// each entry with the hash of its content; views memoises callers' fingerprints of them
	// (by access.Key). Both are used by Run's goroutine only.
	entries [3][]access.Entry
	views   map[string][3]uint64
	lists   map[string]string // list method -> hash of the effective list
	content map[string]string // URI of a declared resource -> hash of its content
	missing []string
	// withheld are the tools pinning withholds (client names, sorted).
	withheld []string
	// sourcesRead: the ConfigMap and Secret sources had been listed when content was read.
	sourcesRead bool
}

func hashEntries(es []rules.Entry) string {
	h := sha256.New()
	for _, e := range es {
		h.Write(e.Raw)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// accessEntries are a list's entries as package access fingerprints them.
func accessEntries(es []rules.Entry, templates bool) []access.Entry {
	out := make([]access.Entry, len(es))
	for i, e := range es {
		out[i] = access.Entry{Key: e.Key, Template: templates, Hash: maphash.Bytes(entrySeed, e.Raw)}
	}
	return out
}

// entrySeed seeds the entries' hashes (compared within the process only).
var entrySeed = maphash.MakeSeed()

// view is what a caller may see of the snapshot's lists, one fingerprint per access kind,
// memoised: a fan-out weighs each caller once per computation.
func (o *Overlay) view(s *snapshot, id *authn.Identity) [3]uint64 {
	key := access.Key(id)
	if v, ok := s.views[key]; ok {
		return v
	}
	g := o.grants.Get(s.rev, s.cat.Access, id)
	var v [3]uint64
	for k := range v {
		v[k] = g.Fingerprint(access.Kind(k), s.entries[k])
	}
	if s.views == nil {
		s.views = map[string][3]uint64{}
	}
	s.views[key] = v
	return v
}

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// compute derives the snapshot of the current catalog over the upstream
// lists the overlay last read.
func (o *Overlay) compute() *snapshot {
	c, rev := o.Catalog()
	upTools := o.upLists["tools/list"]
	tools, missing, withheld := rules.MergeToolsWithheld(c, upTools)
	if upTools == nil {
		missing = nil // the server's list was never read: nothing is known to be missing
	}
	pins := o.observeDigests(c, upTools)
	s := &snapshot{
		cat:     c,
		rev:     rev,
		lists:   map[string]string{"tools/list": hashEntries(tools)},
		content: map[string]string{},
		missing: missing,
		// Asked before any content is read: a source listed after this is read by the
		// computation its informer's event asks for.
		sourcesRead: o.opts.Contents == nil || o.opts.Contents.Synced(),
	}
	s.entries[access.Tools] = accessEntries(tools, false)
	for _, l := range Lists[1:] {
		method := l.Method
		list := l.Merge(c, o.upLists[method])
		s.lists[method] = hashEntries(list)
		k := access.Resources
		if method == "prompts/list" {
			k = access.Prompts
		}
		s.entries[k] = append(s.entries[k], accessEntries(list, method == "resources/templates/list")...)
	}
	for i := range c.Resources {
		r := &c.Resources[i]
		if r.URI == "" {
			continue
		}
		body, mime, err := o.Content(r)
		switch {
		case r.Source.Upstream:
			s.content[r.URI] = "upstream"
		case err != nil:
			s.content[r.URI] = "absent"
		default:
			s.content[r.URI] = hashBytes(append([]byte(mime+"\x00"), body...))
		}
	}
	s.withheld = withheld
	if !slices.Equal(missing, o.lastMissing()) {
		o.m.MissingTools(len(missing))
		if len(missing) > 0 {
			o.log.Warn("Declared tools are missing upstream; they are not listed", "tools", missing)
		}
	}
	if o.last == nil || !slices.Equal(withheld, o.last.withheld) {
		o.m.WithheldTools(len(withheld))
		if len(withheld) > 0 {
			o.log.Warn("Tool pinning withholds tools from clients (toolPinning Enforce)", "tools", withheld)
		}
	}
	up := o.opts.Upstream.Report()
	if up != nil && upTools != nil {
		// What the upstream serves, before the catalog's rules: replicas whose servers differ
		// are told apart by the controller (the Verified condition).
		up.ToolsDigest = catalog.ToolsDigest(upTools)
	}
	pins.withheld = withheld
	o.reportMissing(rev, upTools != nil, missing, up, pins)
	return s
}

// pinReport is the part of the report tool pinning reads.
type pinReport struct {
	digests  map[string]string // declared name -> upstream digest
	withheld []string
}

// observeDigests records the digest of every upstream tool (for tools/call)
// and returns those of the declared tools (for the report), the first
// catalog.MaxReportedToolDigests by name.
func (o *Overlay) observeDigests(c *catalog.Catalog, upTools []json.RawMessage) pinReport {
	if upTools == nil {
		o.digests.Store(nil)
		return pinReport{}
	}
	byUpstream := make(map[string]string, len(upTools))
	for _, raw := range upTools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) == nil && named.Name != "" {
			byUpstream[named.Name] = rules.ObservedDigest(raw)
		}
	}
	o.digests.Store(&byUpstream)
	var r pinReport
	for i := range c.Tools { // sorted by name
		t := &c.Tools[i]
		if d := byUpstream[rules.UpstreamNameOf(t)]; d != "" && len(r.digests) < catalog.MaxReportedToolDigests {
			if r.digests == nil {
				r.digests = map[string]string{}
			}
			r.digests[t.Name] = d
		}
	}
	return r
}

// CheckDigests compares the pinned tools of a tools/list a client's request
// read from the upstream with the overlay's last read: when one differs (the
// upstream changed a tool without notifying), the overlay re-reads the list,
// so tools/call, the report and listeners catch up with what the list showed.
func (o *Overlay) CheckDigests(c *catalog.Catalog, up []json.RawMessage) {
	known := o.digests.Load()
	if known == nil {
		return // the overlay's own read is pending or failing and retried
	}
	pinned := map[string]bool{}
	for i := range c.Tools {
		if c.Tools[i].UpstreamDigest != "" {
			pinned[rules.UpstreamNameOf(&c.Tools[i])] = true
		}
	}
	for _, raw := range up {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) != nil || !pinned[named.Name] {
			continue
		}
		if rules.ObservedDigest(raw) != (*known)[named.Name] {
			o.Publish(protocol.KindTools, "")
			return
		}
	}
}

// ObservedDigestOf is the digest of the upstream tool called name, as the
// overlay last read it ("" when unknown).
func (o *Overlay) ObservedDigestOf(name string) string {
	if m := o.digests.Load(); m != nil {
		return (*m)[name]
	}
	return ""
}

// reportMissing puts the declared tools of revision rev that the upstream
// does not list into the propagation report (checked: the upstream's list
// has been read) when that changed; Run hands it over once the computation
// published its changes (handOverReport). A list computed for a
// revision that is no longer the reported one is dropped (the next
// computation, which Apply asked for, covers the new one).
func (o *Overlay) reportMissing(rev string, checked bool, missing []string, up *catalog.UpstreamReport, pins pinReport) {
	names := missing[:min(len(missing), catalog.MaxReportedMissingTools)]
	withheld := pins.withheld[:min(len(pins.withheld), catalog.MaxReportedMissingTools)]
	o.pendMu.Lock()
	r := &o.report
	if up == nil {
		up = r.Upstream // not known right now (unreachable): keep what was reported
	}
	if rev != r.Revision || (checked == r.ToolsChecked && slices.Equal(names, r.MissingTools) && len(missing) == r.MissingToolCount && up.Equal(r.Upstream) &&
		maps.Equal(pins.digests, r.ToolDigests) && slices.Equal(withheld, r.WithheldTools) && len(pins.withheld) == r.WithheldToolCount) {
		o.pendMu.Unlock()
		return
	}
	r.ToolsChecked, r.MissingTools, r.MissingToolCount, r.Upstream = checked, slices.Clone(names), len(missing), up
	r.ToolDigests, r.WithheldTools, r.WithheldToolCount = pins.digests, slices.Clone(withheld), len(pins.withheld)
	o.reportDue = true // handed over once the computation published (Run)
	o.pendMu.Unlock()
}

func (o *Overlay) lastMissing() []string {
	if o.last == nil {
		return nil
	}
	return o.last.missing
}

var errNoContent = errors.New("resource content not found")

// Content returns the bytes a declared, sidecar-served resource has now.
func (o *Overlay) Content(r *catalog.Resource) ([]byte, string, error) {
	switch {
	case r.Source.Inline != nil:
		return []byte(r.Source.Inline.Text), r.MimeType, nil
	case r.Source.ConfigMap != nil && o.opts.Contents != nil:
		if b, ok := o.opts.Contents.Content(false, r.Source.ConfigMap.Name, r.Source.ConfigMap.Key); ok {
			return b, r.MimeType, nil
		}
	case r.Source.Secret != nil && o.opts.Contents != nil:
		if b, ok := o.opts.Contents.Content(true, r.Source.Secret.Name, r.Source.Secret.Key); ok {
			return b, r.MimeType, nil
		}
	}
	return nil, "", errNoContent
}

// publishDiff sends one notification per changed list and one update per
// changed URI (the hub delivers it only to its subscribers). conservative
// lists were announced by the upstream but could not be re-read: they are
// published as they came.
func (o *Overlay) publishDiff(prev, next *snapshot, upURIs []string, conservative protocol.Kind) {
	var kinds protocol.Kind
	for _, l := range Lists {
		if prev.lists[l.Method] != next.lists[l.Method] {
			kinds |= l.Kind
		}
	}
	kinds |= conservative
	vp, perCaller := o.opts.Hub.(viewPublisher)
	switch {
	case !perCaller:
		for _, k := range protocol.ListKinds {
			if kinds&k != 0 {
				o.opts.Hub.Publish(k, "")
			}
		}
	case prev.cat.Access == nil && next.cat.Access == nil:
		// Every caller sees the whole lists: the global diff is everyone's.
		if kinds != 0 {
			vp.PublishViews(kinds&protocol.KindTools != 0, func(*authn.Identity) protocol.Kind { return kinds })
		}
	case kinds != 0 || !reflect.DeepEqual(prev.cat.Access, next.cat.Access):
		// Each caller is told what changed in its own view, and nobody else is woken.
		vp.PublishViews(kinds&protocol.KindTools != 0, func(id *authn.Identity) protocol.Kind {
			a, b := o.view(prev, id), o.view(next, id)
			g := o.grants.Get(next.rev, next.cat.Access, id)
			var changed protocol.Kind
			for i, k := range [...]protocol.Kind{protocol.KindTools, protocol.KindPrompts, protocol.KindResources} {
				// A list that could not be re-read is announced to whoever may see any of it.
				if a[i] != b[i] || conservative&k != 0 && g.Any(access.Kind(i)) {
					changed |= k
				}
			}
			return changed
		})
	}
	changed := map[string]bool{}
	for u, h := range next.content {
		if prev.content[u] != h {
			changed[u] = true
		}
	}
	for u := range prev.content {
		if _, ok := next.content[u]; !ok {
			changed[u] = true
		}
	}
	c, _ := o.Catalog()
	for _, u := range upURIs {
		// The upstream's update is visible only where the upstream serves
		// the URI.
		if r := rules.FindResource(c, u); r == nil || r.Source.Upstream {
			changed[u] = true
		}
	}
	for _, u := range slices.Sorted(maps.Keys(changed)) {
		if vp != nil && next.cat.Access != nil {
			// Only to callers who may read it now.
			vp.PublishUpdate(u, func(id *authn.Identity) bool {
				return o.grants.Get(next.rev, next.cat.Access, id).Resource(u)
			})
			continue
		}
		o.opts.Hub.Publish(protocol.KindResourceUpdated, u)
	}
	if kinds != 0 || len(changed) > 0 {
		o.log.Debug("Overlay published changes", "kinds", kinds, "uris", len(changed))
	}
}
