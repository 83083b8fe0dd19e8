package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/rules"
)

// When a simulated sidecar reports (-sidecar-reports). kwok pods run no containers, so without
// a simulation no replica ever reports and no server's catalog is ever propagated.
const (
	// reportsBefore is the real sidecar's order: it applies the catalog and writes its report
	// when its container starts, and its readiness probe fails until the catalog is applied,
	// so the report comes before the pod turns Ready. Simulated from the pod's start (bound to
	// a node: PodScheduled); kwok then marks it Ready at once, whatever the sidecar does.
	reportsBefore = "before"
	// reportsAfter reports once the pod is Ready (a slower sidecar than the real one).
	reportsAfter = "after"
	// reportsNone reports nothing: every replica stays unreported (the benchmark before
	// simulated sidecars; items stay Reconciling).
	reportsNone = "none"
)

// sidecarSim writes, for every pod of the fleet, the propagation reports its sidecar would
// write: with the sidecar's own Reporter (same object, same server-side apply body, same field
// manager switchboard-sidecar-<pod>, same client limits and user agent). Like the real sidecar
// (sidecar/overlay: a report is handed over once the revision's changes are published, or before
// the upstream's lists are read) it reports its first catalog revision twice: once applied,
// before it reads its MCP server's tools/list, then once it compared the revision's tools with
// that list (ToolsChecked, upstream digests), which the Reporter coalesces when the first write
// is still in flight. A later revision, whose tools are compared with the list already read, is
// reported once, checked. The first revision a started pod reports is reported after lag, its
// tool check checkLag later; a later one after lag; each unless the pod has a newer revision to
// report by then (a real sidecar never reports a revision older than the one it serves). mu
// guards pods and servers.
type sidecarSim struct {
	mode     string
	lag      time.Duration
	checkLag time.Duration
	// after runs f in its own goroutine once d has passed (time.AfterFunc; tests fire them in
	// the order they choose).
	after func(d time.Duration, f func())
	cfg   *rest.Config
	ctx   context.Context
	log   *slog.Logger

	reports atomic.Int64 // reports Set (not writes: the Reporter coalesces and skips repeats)

	mu      sync.Mutex
	pods    map[types.NamespacedName]*simPod
	servers map[string]*simServer // by server name
}

type simPod struct {
	server   string
	started  bool // scheduled to a node
	ready    bool
	reporter reportSetter
	cancel   context.CancelFunc
	reported string // the last revision scheduled for a report
	// scheduled counts the revisions scheduled for a report; a report is set only while its
	// revision is still the newest scheduled.
	scheduled int
	// anySet: a report was set (the sidecar's first computation, which reads the upstream's
	// lists, is over).
	anySet bool
}

// reportSetter is what the simulation needs of the sidecar's Reporter.
type reportSetter interface{ Set(catalog.Report) }

type simServer struct {
	revision string
	tools    []catalog.Tool
	status   bool // the status ConfigMap exists
}

// startSidecarSim registers the simulation's handlers on the bench's cache (pods, catalog and
// status ConfigMaps); it does nothing for reportsNone.
func startSidecarSim(ctx context.Context, c cache.Cache, cfg *rest.Config, o options) error {
	switch o.sidecarReports {
	case reportsNone:
		return nil
	case reportsBefore, reportsAfter:
	default:
		return fmt.Errorf("-sidecar-reports %q: want %s, %s or %s", o.sidecarReports, reportsBefore, reportsAfter, reportsNone)
	}
	s := &sidecarSim{mode: o.sidecarReports, lag: o.reportLag, checkLag: o.checkLag, cfg: cfg, ctx: ctx,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		log:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		pods:  map[types.NamespacedName]*simPod{}, servers: map[string]*simServer{}}
	pods, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.pod,
		UpdateFunc: func(_, o any) { s.pod(o) },
		DeleteFunc: s.podGone,
	}); err != nil {
		return err
	}
	cms, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return err
	}
	_, err = cms.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    s.configMap,
		UpdateFunc: func(_, o any) { s.configMap(o) },
	})
	return err
}

func (s *sidecarSim) pod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[inject.LabelServer] == "" {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.pods[key]
	if sp == nil {
		sp = &simPod{server: p.Labels[inject.LabelServer]}
		s.pods[key] = sp
	}
	sp.started = scheduled(p) && p.DeletionTimestamp == nil
	sp.ready = kube.PodReady(p)
	s.maybeReport(key, sp)
}

func (s *sidecarSim) podGone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp := s.pods[key]; sp != nil && sp.cancel != nil {
		sp.cancel()
	}
	delete(s.pods, key)
}

// scheduled reports whether the pod is bound to a node (PodScheduled; the cache's trimmed pods
// keep their conditions, not their spec).
func scheduled(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// configMap follows a server's catalog revision and whether its status ConfigMap exists.
func (s *sidecarSim) configMap(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	server := ""
	if ok {
		server = cm.Labels[inject.LabelServer]
	}
	if server == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	srv := s.servers[server]
	if srv == nil {
		srv = &simServer{}
		s.servers[server] = srv
	}
	if cm.Name == statusConfigMapOf(server) {
		srv.status = true
	} else if data, ok := cm.Data[catalog.Key]; ok {
		rev := cm.Annotations[catalog.RevisionAnnotation]
		if rev == "" {
			rev = catalog.Revision([]byte(data))
		}
		if rev == srv.revision {
			return
		}
		c, err := catalog.Decode([]byte(data))
		if err != nil {
			return // the real sidecar would report a rejection; the fleet's catalogs are valid
		}
		srv.revision, srv.tools = rev, c.Tools
	} else {
		return
	}
	for key, sp := range s.pods {
		if sp.server == server {
			s.maybeReport(key, sp)
		}
	}
}

// maybeReport schedules the reports of the server's current revision when the pod has not
// reported it and its sidecar would now: started (reportsBefore) or Ready (reportsAfter), with
// the status ConfigMap in place (the sidecar's Role names it; before it exists the real write
// fails and is retried). Called with mu held.
func (s *sidecarSim) maybeReport(key types.NamespacedName, sp *simPod) {
	srv := s.servers[sp.server]
	due := sp.started
	if s.mode == reportsAfter {
		due = sp.ready
	}
	if !due || srv == nil || srv.revision == "" || !srv.status || sp.reported == srv.revision {
		return
	}
	if sp.reporter == nil {
		client, err := app.NewKubeClient(s.cfg)
		if err != nil {
			s.log.Error("client", "err", err)
			return
		}
		r, err := app.NewReporter(client, key.Namespace+"/"+statusConfigMapOf(sp.server), key.Name, s.log, nil)
		if err != nil {
			return
		}
		ctx, cancel := context.WithCancel(s.ctx)
		sp.reporter, sp.cancel = r, cancel
		go r.Run(ctx)
	}
	first := !sp.anySet
	sp.reported = srv.revision
	sp.scheduled++
	applied, checked := simulatedReports(srv.revision, srv.tools)
	// Timers that expire together run in no set order (in practice the newest first): a report
	// is set only while its revision is still the pod's newest, and the check is scheduled once
	// the applied report is set. Else a revision that came moments after another could be
	// followed by the older one's report, which its server then waited on in PropagationPending
	// for good.
	seq, r := sp.scheduled, sp.reporter
	set := func(rep catalog.Report) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sp.scheduled != seq {
			return false // a newer revision's reports follow
		}
		s.reports.Add(1)
		r.Set(rep)
		sp.anySet = true
		return true
	}
	if !first {
		s.after(s.lag, func() { set(checked) })
		return
	}
	s.after(s.lag, func() {
		if set(applied) {
			s.after(s.checkLag, func() { set(checked) })
		}
	})
}

// statusConfigMapOf is the status ConfigMap of a server.
func statusConfigMapOf(server string) string {
	return inject.NamesFor(&mcpv1alpha1.MCPServer{ObjectMeta: metav1.ObjectMeta{Name: server}}).StatusConfigMap
}

// simulatedReports are the two reports a sidecar writes for a revision whose every declared tool
// its MCP server lists (as the fleet's server would): applied (its first revision only), then checked, with the upstream
// digests computed by the sidecar's own functions from the tool list such a server serves.
func simulatedReports(revision string, tools []catalog.Tool) (applied, checked catalog.Report) {
	applied = catalog.Report{Revision: revision}
	var upTools []json.RawMessage
	digests := map[string]string{}
	for i := range tools {
		t := &tools[i]
		raw, _ := json.Marshal(map[string]any{"name": rules.UpstreamNameOf(t), "description": "upstream " + t.Name,
			"inputSchema": map[string]any{"type": "object"}})
		upTools = append(upTools, raw)
		if len(digests) < catalog.MaxReportedToolDigests {
			digests[t.Name] = rules.ObservedDigest(raw)
		}
	}
	checked = catalog.Report{Revision: revision, ToolsChecked: true, ToolDigests: digests,
		Upstream: &catalog.UpstreamReport{ProtocolVersion: protocol.Version, ServerName: "fleet-server", ServerVersion: "1.0.0",
			Capabilities: []string{"tools"}, ToolsDigest: catalog.ToolsDigest(upTools)}}
	if len(digests) == 0 {
		checked.ToolDigests = nil
	}
	return applied, checked
}
