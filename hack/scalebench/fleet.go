package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/benchkit"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
	"github.com/switchboard-mcp/switchboard/internal/managerproc"
)

func serverName(i int) string { return fmt.Sprintf("s%04d", i) }

// editedTool is the MCPTool the edit phases change on every server.
func editedTool(server string) string { return server + "-t00" }

const editedToolName = "tool_00"

// fleetObjects are one server and its tools, resource and prompt.
func fleetObjects(i, tools int) []client.Object {
	name := serverName(i)
	ref := mcpv1alpha1.ServerReference{Name: name}
	objs := []client.Object{&mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: mcpv1alpha1.MCPServerSpec{
			Container: &mcpv1alpha1.ServerContainer{Image: "example/mcp-server:1", Port: 8080, Path: "/mcp"},
		},
	}}
	for t := range tools {
		objs = append(objs, &mcpv1alpha1.MCPTool{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-t%02d", name, t), Namespace: namespace},
			Spec: mcpv1alpha1.MCPToolSpec{ServerRef: ref, Name: fmt.Sprintf("tool_%02d", t),
				Description: fmt.Sprintf("Tool %d of server %s, described for the fleet benchmark.", t, name)},
		})
	}
	objs = append(objs,
		&mcpv1alpha1.MCPResource{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-r", Namespace: namespace},
			Spec: mcpv1alpha1.MCPResourceSpec{ServerRef: ref, URI: "docs://" + name + "/readme", Name: "readme",
				MimeType: "text/markdown",
				Source:   mcpv1alpha1.ResourceSource{Inline: &mcpv1alpha1.InlineSource{Text: "# " + name + "\nA server of the fleet."}}},
		},
		&mcpv1alpha1.MCPPrompt{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-p", Namespace: namespace},
			Spec: mcpv1alpha1.MCPPromptSpec{ServerRef: ref, Name: "brief", Description: "Brief the user.",
				Messages: []mcpv1alpha1.PromptMessage{{Role: "user", Text: "Tell me about " + name + "."}}},
		})
	return objs
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// fleetWatch follows the catalogs and Deployments of the fleet through the bench's own cache.
type fleetWatch struct {
	cache  cache.Cache
	ctx    context.Context // until stop
	cancel context.CancelFunc
	o      options
	// readiness follows every server's and item's Ready condition (tracksReady).
	readiness *readiness

	mu      sync.Mutex
	decoded map[string]catalogSummary // catalog ConfigMap uid/resourceVersion -> summary
}

type catalogSummary struct {
	tools, resources, prompts int
	edited                    string // description of editedToolName
}

func startFleetWatch(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o options) (*fleetWatch, error) {
	hasServer, err := labels.NewRequirement(inject.LabelServer, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*hasServer)},
			&corev1.Pod{}:       {Label: labels.NewSelector().Add(*hasServer), Transform: kube.TrimPod},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	watched := []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}}
	if o.tracksReady() {
		// Each server's and item's Ready condition, which only reports (or the floor) make True.
		watched = append(watched, &corev1.Pod{}, &mcpv1alpha1.MCPServer{}, &mcpv1alpha1.MCPTool{}, &mcpv1alpha1.MCPResource{}, &mcpv1alpha1.MCPPrompt{})
	}
	r := &readiness{servers: map[string]string{}, items: map[string]itemReadiness{}}
	for _, obj := range watched {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		switch obj.(type) {
		case *mcpv1alpha1.MCPServer, mcpv1alpha1.CatalogItem:
			if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc: r.set, UpdateFunc: func(_, o any) { r.set(o) }, DeleteFunc: r.gone,
			}); err != nil {
				return nil, err
			}
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	go func() { _ = c.Start(wctx) }()
	if !c.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the benchmark's cache did not sync")
	}
	return &fleetWatch{cache: c, ctx: wctx, cancel: cancel, o: o, readiness: r, decoded: map[string]catalogSummary{}}, nil
}

// readiness follows the Ready condition of every server and item as the bench's cache sees it,
// through the informers' event handlers: the benchmark runs on the machine it measures, and
// listing the fleet's 13,000 objects four times a second was most of its CPU in a cold phase,
// about as much as the manager's (docs/performance.md). mu guards the maps.
type readiness struct {
	mu sync.Mutex
	// servers holds, by name, "" for a server Ready for its generation and why it is not for the
	// others.
	servers map[string]string
	// items, by kind and name: the server each references and whether it is Ready for its
	// generation.
	items map[string]itemReadiness
}

type itemReadiness struct {
	server string
	ready  bool
}

func (r *readiness) set(obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *mcpv1alpha1.MCPServer:
		why := ""
		if !readyNow(o.Generation, o.Status.Conditions) {
			why = o.Name + ": no Ready condition for its generation yet"
			if c := meta.FindStatusCondition(o.Status.Conditions, string(mcpv1alpha1.ConditionReady)); c != nil {
				why = fmt.Sprintf("%s: Ready=%s %s: %s", o.Name, c.Status, c.Reason, c.Message)
			}
		}
		r.servers[o.Name] = why
	case mcpv1alpha1.CatalogItem:
		r.items[itemKey(o)] = itemReadiness{server: o.GetServerRef().Name, ready: readyNow(o.GetGeneration(), o.GetConditions())}
	}
}

func (r *readiness) gone(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch o := obj.(type) {
	case *mcpv1alpha1.MCPServer:
		delete(r.servers, o.Name)
	case mcpv1alpha1.CatalogItem:
		delete(r.items, itemKey(o))
	}
}

func itemKey(o mcpv1alpha1.CatalogItem) string {
	return fmt.Sprintf("%T/%s", o, o.GetName())
}

// ready counts the servers and the items (tools, resources, prompts) that are Ready=True for
// their current generation, and returns the servers that are Ready with every one of their items
// (done).
func (w *fleetWatch) ready() (servers, items int, done map[string]bool) {
	r := w.readiness
	r.mu.Lock()
	defer r.mu.Unlock()
	readyItems := map[string]int{}
	for _, it := range r.items {
		if it.ready {
			items++
			readyItems[it.server]++
		}
	}
	done = map[string]bool{}
	for name, why := range r.servers {
		if why == "" {
			servers++
			if readyItems[name] >= w.o.tools+2 {
				done[name] = true
			}
		}
	}
	return servers, items, done
}

// notReady says why one server, the first by name, is not Ready ("" when all are).
func (w *fleetWatch) notReady() string {
	r := w.readiness
	r.mu.Lock()
	defer r.mu.Unlock()
	first := ""
	for name, why := range r.servers {
		if why != "" && (first == "" || name < first) {
			first = name
		}
	}
	return r.servers[first]
}

// readyTracker polls ready every 250 ms in the background and remembers when each server was
// first seen Ready with all its items. mu guards the fields below it.
type readyTracker struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu             sync.Mutex
	servers, items int
	first          map[string]time.Time
}

// trackReady starts a readyTracker; with on false it tracks nothing (no reports: nothing is
// ever Ready).
func (w *fleetWatch) trackReady(ctx context.Context, on bool) *readyTracker {
	ctx, cancel := context.WithCancel(ctx)
	t := &readyTracker{cancel: cancel, done: make(chan struct{}), first: map[string]time.Time{}}
	go func() {
		defer close(t.done)
		for on {
			servers, items, ready := w.ready()
			now := time.Now()
			t.mu.Lock()
			t.servers, t.items = servers, items
			for name := range ready {
				if _, seen := t.first[name]; !seen {
					t.first[name] = now
				}
			}
			t.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return t
}

// counts returns the last counts of ready servers and items.
func (t *readyTracker) counts() (servers, items int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.servers, t.items
}

// firstReady returns when each server was first seen ready with its items.
func (t *readyTracker) firstReady() map[string]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.first)
}

func (t *readyTracker) stop() {
	t.cancel()
	<-t.done
}

// latency summarises, over the fleet's servers, the time from each server's last create to its
// being Ready with all its items.
type latency struct {
	P50     float64 `json:"p50Seconds"`
	P99     float64 `json:"p99Seconds"`
	Max     float64 `json:"maxSeconds"`
	Servers int     `json:"servers"`
}

// serverReadyLatency computes latency from the declaration times (by server index) and the
// first-ready times (by server name); a server never seen ready is left out (Servers says how
// many count).
func serverReadyLatency(declared []time.Time, ready map[string]time.Time) latency {
	var secs []float64
	for i, at := range declared {
		if r, ok := ready[serverName(i)]; ok {
			// A server seen ready before its last create finished returned counts as 0.
			secs = append(secs, max(r.Sub(at).Seconds(), 0))
		}
	}
	if len(secs) == 0 {
		return latency{}
	}
	slices.Sort(secs)
	return latency{P50: benchkit.Quantile(secs, 0.50), P99: benchkit.Quantile(secs, 0.99), Max: secs[len(secs)-1], Servers: len(secs)}
}

func readyNow(generation int64, conds []metav1.Condition) bool {
	c := meta.FindStatusCondition(conds, string(mcpv1alpha1.ConditionReady))
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation
}

func (w *fleetWatch) stop() { w.cancel() }

// state counts the servers whose catalog is complete (all items, and the tool edit wanted,
// if any) and whose Deployment is available.
func (w *fleetWatch) state(ctx context.Context, wantEdit string) (catalogs, available int, err error) {
	// The lists are only read: no deep copies of the fleet four times a second.
	var cms corev1.ConfigMapList
	if err := w.cache.List(ctx, &cms, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]catalogSummary{}
	for i := range cms.Items {
		cm := &cms.Items[i]
		data, ok := cm.Data[catalog.Key]
		if !ok {
			continue
		}
		key := string(cm.UID) + "/" + cm.ResourceVersion
		sum, ok := w.decoded[key]
		if !ok {
			c, err := catalog.Decode([]byte(data))
			if err != nil {
				return 0, 0, fmt.Errorf("catalog ConfigMap %s: %w", cm.Name, err)
			}
			sum = catalogSummary{tools: len(c.Tools), resources: len(c.Resources), prompts: len(c.Prompts)}
			for _, t := range c.Tools {
				if t.Name == editedToolName {
					sum.edited = t.Description
				}
			}
		}
		seen[key] = sum
		if sum.tools == w.o.tools && sum.resources == 1 && sum.prompts == 1 &&
			(wantEdit == "" || sum.edited == wantEdit) {
			catalogs++
		}
	}
	w.decoded = seen
	var ds appsv1.DeploymentList
	if err := w.cache.List(ctx, &ds, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, err
	}
	for i := range ds.Items {
		if deploymentAvailable(&ds.Items[i]) {
			available++
		}
	}
	return catalogs, available, nil
}

// deploymentAvailable: the Deployment's rollout is complete and its replicas available.
func deploymentAvailable(d *appsv1.Deployment) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want && d.Status.AvailableReplicas >= want
}

// cold creates the fleet and waits until every server has its catalog and an available
// Deployment, then until the manager is idle.
func (b *bench) cold(ctx context.Context) error {
	var m *managerproc.Manager // nil with the floor
	if len(b.managers) > 0 {
		m = b.managers[0]
	}
	p := b.beginPhase("cold", m)
	start := time.Now()
	// Each server's readiness is followed from the first create on, every 250 ms.
	tracker := b.watch.trackReady(ctx, b.o.tracksReady())
	defer tracker.stop()
	var lastCreate atomic.Int64
	// declared[i]: when server i's last object was created (the server is then fully declared).
	declared := make([]time.Time, b.o.servers)
	err := parallel(b.o.servers, b.o.workers, func(i int) error {
		if b.o.createRate > 0 { // server i's turn: i/rate after the start
			at := start.Add(time.Duration(float64(i) / b.o.createRate * float64(time.Second)))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(at)):
			}
		}
		objs := fleetObjects(i, b.o.tools)
		for _, obj := range objs {
			if err := b.c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		declared[i] = time.Now()
		lastCreate.Store(max(lastCreate.Load(), declared[i].UnixNano()))
		if b.floor != nil {
			b.floor.declare(i, objs[0].GetUID()) // objs[0]: the MCPServer
		}
		return nil
	})
	if err != nil {
		return err
	}
	last := time.Unix(0, lastCreate.Load())
	b.res.Objects = b.o.servers * (b.o.tools + 3)
	b.res.CreateSeconds = last.Sub(start).Seconds()
	say("Created %d objects in %.1f s", b.res.Objects, b.res.CreateSeconds)

	var catalogsAt, availableAt, readyAt time.Time
	reports := b.o.tracksReady()

	progress := time.Now()
	err = waitFor(ctx, b.o.timeout, "every catalog and Deployment", func() (bool, error) {
		catalogs, available, err := b.watch.state(ctx, "")
		if err != nil {
			return false, err
		}
		if b.floor != nil {
			if err := b.floor.err(); err != nil {
				return false, err
			}
			catalogs = b.o.servers // the floor compiles no catalog
		}
		var servers, items int
		if reports {
			servers, items = tracker.counts()
		}
		now := time.Now()
		if catalogs == b.o.servers && catalogsAt.IsZero() {
			catalogsAt = now
		}
		if available == b.o.servers && availableAt.IsZero() {
			availableAt = now
		}
		if reports && servers == b.o.servers && items == b.items() && readyAt.IsZero() {
			readyAt = now
		}
		if now.Sub(progress) > 5*time.Second {
			progress = now
			msg := fmt.Sprintf("  %.0f s after the last create: %d/%d catalogs complete, %d/%d Deployments available",
				now.Sub(last).Seconds(), catalogs, b.o.servers, available, b.o.servers)
			if reports {
				msg += fmt.Sprintf(", %d/%d servers and %d/%d items Ready", servers, b.o.servers, items, b.items())
			}
			say("%s", msg)
			if reports && servers < b.o.servers {
				say("    e.g. %s", b.watch.notReady())
			}
		}
		return !catalogsAt.IsZero() && !availableAt.IsZero() && (!reports || !readyAt.IsZero()), nil
	})
	if err != nil && m != nil {
		return fmt.Errorf("%w\n%s", err, m.Tail(10))
	}
	if err != nil {
		return err
	}
	b.res.ColdCatalogsSeconds = catalogsAt.Sub(last).Seconds()
	b.res.ColdAvailableSeconds = availableAt.Sub(last).Seconds()
	b.res.ColdSeconds = max(b.res.ColdCatalogsSeconds, b.res.ColdAvailableSeconds)
	if reports {
		b.res.ColdReadySeconds = readyAt.Sub(last).Seconds()
		b.res.ColdSeconds = max(b.res.ColdSeconds, b.res.ColdReadySeconds)
	}
	say("Last create → every catalog complete %.1f s, every Deployment available %.1f s, every server and item Ready %.1f s",
		b.res.ColdCatalogsSeconds, b.res.ColdAvailableSeconds, b.res.ColdReadySeconds)
	if reports {
		b.res.ServerReady = serverReadyLatency(declared, tracker.firstReady())
		say("Each server's last create → it and its items Ready: p50 %.1f s, p99 %.1f s, max %.1f s",
			b.res.ServerReady.P50, b.res.ServerReady.P99, b.res.ServerReady.Max)
	}
	if m == nil {
		return b.endPhase(p)
	}
	idle, err := b.waitIdle(ctx, m)
	if err != nil {
		return err
	}
	b.res.ColdIdleSeconds = idle.Sub(last).Seconds()
	say("Manager idle %.1f s after the last create", b.res.ColdIdleSeconds)
	return b.endPhase(p)
}

// waitIdle waits until the manager's work queues are empty and no reconcile ran for 3 s.
func (b *bench) waitIdle(ctx context.Context, m *managerproc.Manager) (time.Time, error) {
	var lastCount float64 = -1
	var since time.Time
	var idleAt time.Time
	err := waitFor(ctx, b.o.timeout, "the manager to go idle", func() (bool, error) {
		s, err := m.Metrics("")
		if err != nil {
			return false, err
		}
		count := managerproc.Sum(s, "controller_runtime_reconcile_total")
		depth := managerproc.Sum(s, "workqueue_depth")
		now := time.Now()
		if count != lastCount || depth > 0 {
			lastCount, since, idleAt = count, now, now
			return false, nil
		}
		return now.Sub(since) >= 3*time.Second, nil
	})
	return idleAt, err
}

// steadyState watches a quiet fleet: nothing changes, so the manager should write nothing.
func (b *bench) steadyState(ctx context.Context) error {
	m := b.managers[0]
	p := b.beginPhase("steady", m)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(b.o.steady):
	}
	if err := b.endPhase(p); err != nil {
		return err
	}
	ph := b.res.Phases[len(b.res.Phases)-1]
	b.res.SteadyWrites = ph.ManagerWrites
	b.res.SteadySeconds = b.o.steady.Seconds()
	say("Steady %v: %d writes by the manager (and %d Lease renewals), %.0f reconciles", b.o.steady, ph.ManagerWrites, ph.LeaseWrites, ph.ReconcilesTotal)
	return nil
}

// edit changes one MCPTool of every server and waits until every catalog has the change.
func (b *bench) edit(ctx context.Context) error {
	m := b.leader()
	p := b.beginPhase("edit", m)
	want := "Edited at " + time.Now().UTC().Format(time.RFC3339Nano)
	var lastEdit atomic.Int64
	err := parallel(b.o.servers, b.o.workers, func(i int) error {
		if err := b.editTool(ctx, serverName(i), want); err != nil {
			return err
		}
		lastEdit.Store(max(lastEdit.Load(), time.Now().UnixNano()))
		return nil
	})
	if err != nil {
		return err
	}
	last := time.Unix(0, lastEdit.Load())
	progress := time.Now()
	err = waitFor(ctx, b.o.timeout, "every catalog to have the edit", func() (bool, error) {
		catalogs, _, err := b.watch.state(ctx, want)
		if time.Since(progress) > 5*time.Second {
			progress = time.Now()
			say("  %.0f s after the last edit: %d/%d catalogs have it", time.Since(last).Seconds(), catalogs, b.o.servers)
		}
		return catalogs == b.o.servers, err
	})
	if err != nil {
		return err
	}
	b.res.EditSeconds = time.Since(last).Seconds()
	say("Last edit → every catalog has it: %.1f s", b.res.EditSeconds)
	if b.o.sidecarReports != reportsNone {
		err = waitFor(ctx, b.o.timeout, "every server and item Ready after the edit", func() (bool, error) {
			servers, items, _ := b.watch.ready()
			return servers == b.o.servers && items == b.items(), nil
		})
		if err != nil {
			return err
		}
		b.res.EditReadySeconds = time.Since(last).Seconds()
		say("Last edit → every server and item Ready again: %.1f s", b.res.EditReadySeconds)
	}
	if _, err := b.waitIdle(ctx, m); err != nil {
		return err
	}
	return b.endPhase(p)
}

func (b *bench) editTool(ctx context.Context, server, description string) error {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"description": description}})
	tool := &mcpv1alpha1.MCPTool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: editedTool(server)}}
	return b.c.Patch(ctx, tool, client.RawPatch(types.MergePatchType, patch))
}

// deleteFleet deletes every server and item and waits until nothing they made is left.
func (b *bench) deleteFleet(ctx context.Context) error {
	m := b.leader()
	p := b.beginPhase("delete", m)
	// As a GitOps prune does: every kind at once.
	deleted := time.Now()
	kinds := []client.Object{&mcpv1alpha1.MCPServer{}, &mcpv1alpha1.MCPTool{}, &mcpv1alpha1.MCPResource{}, &mcpv1alpha1.MCPPrompt{}}
	if err := parallel(len(kinds), len(kinds), func(i int) error {
		// A deletecollection of 10,000 objects can outlast the API server's request timeout
		// (it keeps deleting); ask again until one call finishes.
		var err error
		for range 10 {
			if err = b.c.DeleteAllOf(ctx, kinds[i], client.InNamespace(namespace)); err == nil {
				return nil
			}
			say("  deletecollection %T: %v; again", kinds[i], err)
		}
		return err
	}); err != nil {
		return err
	}
	say("deletecollection of the four kinds returned after %.1f s", time.Since(deleted).Seconds())
	lists := []client.ObjectList{
		&appsv1.DeploymentList{}, &appsv1.ReplicaSetList{}, &corev1.PodList{},
		&corev1.ServiceList{}, &corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
		&policyv1.PodDisruptionBudgetList{},
	}
	progress := time.Now()
	err := waitFor(ctx, b.o.timeout, "garbage collection", func() (bool, error) {
		left := map[string]int{}
		for _, l := range lists {
			// Children, ReplicaSets and pods all carry the server label (the namespace's own
			// default ServiceAccount and root CA ConfigMap do not).
			if err := b.c.List(ctx, l, client.InNamespace(namespace), client.HasLabels{inject.LabelServer}); err != nil {
				return false, err
			}
			if n := len(mustItems(l)); n > 0 {
				kind := fmt.Sprintf("%T", l)
				left[strings.TrimSuffix(kind[strings.LastIndexByte(kind, '.')+1:], "List")] = n
			}
		}
		var cms corev1.ConfigMapList
		if err := b.c.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{inject.LabelServer}); err != nil {
			return false, err
		}
		if len(cms.Items) > 0 {
			left["ConfigMap"] = len(cms.Items)
		}
		var servers mcpv1alpha1.MCPServerList
		if err := b.c.List(ctx, &servers, client.InNamespace(namespace)); err != nil {
			return false, err
		}
		if len(servers.Items) > 0 {
			left["MCPServer"] = len(servers.Items)
		}
		if time.Since(progress) > 5*time.Second {
			progress = time.Now()
			say("  %.0f s after the delete: left %v", time.Since(deleted).Seconds(), left)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return err
	}
	b.res.DeleteSeconds = time.Since(deleted).Seconds()
	say("Delete → nothing left: %.1f s", b.res.DeleteSeconds)
	return b.endPhase(p)
}

func mustItems(l client.ObjectList) []runtime.Object {
	items, err := meta.ExtractList(l)
	if err != nil {
		panic(err)
	}
	return items
}

// auditLog reads the API server's audit log (JSON lines) from where the last read stopped.
type auditLog struct {
	path   string
	offset int64
}

type auditEvent struct {
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	RequestURI string `json:"requestURI"`
	ObjectRef  struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// managerUserAgent prefixes the user agent of the manager binary (client-go's default).
const managerUserAgent = "manager/"

// writer names who wrote, for the count by field manager: the request's fieldManager
// parameter, else the client's program (the user agent's first word: client-go defaults the
// field manager to it). Sidecars (switchboard-sidecar-<pod>) count as one writer.
func (e *auditEvent) writer() string {
	if u, err := url.Parse(e.RequestURI); err == nil {
		if fm := u.Query().Get("fieldManager"); fm != "" {
			if strings.HasPrefix(fm, catalog.ReportFieldManagerPrefix) {
				return catalog.ReportFieldManagerPrefix + "*"
			}
			return fm
		}
	}
	prog, _, _ := strings.Cut(e.UserAgent, " ")
	prog, _, _ = strings.Cut(prog, "/")
	return prog
}

// since counts the manager's writes, by "verb resource[/subresource]", and every client's
// writes, by writer, since the last call.
func (a *auditLog) since() (map[string]int, error) {
	out, _, err := a.sinceAll()
	return out, err
}

func (a *auditLog) sinceAll() (manager, byWriter map[string]int, err error) {
	f, err := os.Open(a.path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return nil, nil, err
	}
	manager, byWriter = map[string]int{}, map[string]int{}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // an unfinished line is read next time
		}
		if err != nil {
			return nil, nil, err
		}
		a.offset += int64(len(line))
		var e auditEvent
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		if res != "leases" {
			byWriter[e.writer()]++
		}
		if strings.HasPrefix(e.UserAgent, managerUserAgent) {
			manager[e.Verb+" "+res]++
		}
	}
	return manager, byWriter, nil
}

// phase is what one phase cost the manager (the replica that led during it).
type phase struct {
	Name            string             `json:"name"`
	Seconds         float64            `json:"seconds"`
	Reconciles      map[string]float64 `json:"reconciles"` // controller -> count
	ReconcilesTotal float64            `json:"reconcilesTotal"`
	ManagerWrites   int                `json:"managerWrites"` // without Lease renewals
	LeaseWrites     int                `json:"leaseWrites"`
	Writes          map[string]int     `json:"writes"` // "verb resource" -> count
	// WritesByWriter are every client's writes but Lease renewals, by field manager (writer).
	WritesByWriter map[string]int `json:"writesByWriter"`
	// EventsByReason are the fleet namespace's Events recorded during the phase (a repeat of an
	// Event counts again), by type and reason.
	EventsByReason map[string]int `json:"eventsByReason"`
	ManagerCPU     float64        `json:"managerCpuSeconds"`
	ManagerRSSMB   float64        `json:"managerRssMB"`
	ManagerPeakMB  float64        `json:"managerPeakRssMB"`
	APIServerCPU   float64        `json:"apiserverCpuSeconds"`
	APIServerRSSMB float64        `json:"apiserverRssMB"`
	// CPUByProcess is the CPU seconds of every process the run started (the control plane's,
	// the manager's, the benchmark's own: cpuByProcess) during the phase, by name.
	CPUByProcess map[string]float64 `json:"cpuSecondsByProcess"`
	// ManagerRequests are the manager's requests to the API server during the phase, reads
	// included, by HTTP method (requestsByMethod).
	ManagerRequests map[string]float64 `json:"managerRequests,omitempty"`

	m         *managerproc.Manager
	usage     map[string]managerproc.Usage // by process, at the phase's start
	start     time.Time
	recBefore map[string]float64
	reqBefore map[string]float64
}

func (b *bench) beginPhase(name string, m *managerproc.Manager) *phase {
	p := &phase{Name: name, m: m, start: time.Now()}
	b.prof.begin(name, p.managerName())
	if m != nil { // nil: the floor, no manager
		p.recBefore, p.reqBefore = reconcilesByController(m), requestsByMethod(m)
	}
	if _, err := b.audit.since(); err != nil { // skip what came before
		say("Reading the audit log: %v", err)
	}
	p.usage = b.usageByProcess(m)
	return p
}

func (b *bench) endPhase(p *phase) error {
	p.Seconds = time.Since(p.start).Seconds()
	// CPU first: what follows (the metrics scrape, the Events list, reading the audit log) is the
	// benchmark's measuring, not the fleet's work.
	usage := b.usageByProcess(p.m)
	p.CPUByProcess = map[string]float64{}
	for name, u := range usage {
		if before, ok := p.usage[name]; ok {
			p.CPUByProcess[name] = (u.CPU - before.CPU).Seconds()
		}
	}
	p.ManagerCPU, p.APIServerCPU = p.CPUByProcess[managerProcess], p.CPUByProcess[apiServerProcess]
	if u, ok := usage[managerProcess]; ok {
		p.ManagerRSSMB, p.ManagerPeakMB = mb(u.RSS), mb(u.PeakRSS)
	}
	p.APIServerRSSMB = mb(usage[apiServerProcess].RSS)
	var after, requests map[string]float64
	if p.m != nil {
		after, requests = reconcilesByController(p.m), requestsByMethod(p.m)
	}
	for method, v := range requests {
		if d := v - p.reqBefore[method]; d > 0 {
			if p.ManagerRequests == nil {
				p.ManagerRequests = map[string]float64{}
			}
			p.ManagerRequests[method] = d
		}
	}
	p.Reconciles = map[string]float64{}
	for c, v := range after {
		if d := v - p.recBefore[c]; d > 0 {
			p.Reconciles[c] = d
			p.ReconcilesTotal += d
		}
	}
	p.EventsByReason = b.eventsSince()
	writes, byWriter, err := b.audit.sinceAll()
	if err != nil {
		return err
	}
	p.Writes, p.WritesByWriter = writes, byWriter
	for k, n := range writes {
		if strings.HasSuffix(k, " leases") {
			p.LeaseWrites += n // leader election renews its Lease every 2 s
			continue
		}
		p.ManagerWrites += n
	}
	b.res.Phases = append(b.res.Phases, *p)
	b.prof.end(p.Name, p.managerName())
	return nil
}

// The names of processes in usageByProcess: the benchmark's own (its creates and edits, its
// watches, the simulated sidecars, the floor), the phase's manager and the API server.
const (
	benchProcess     = "scalebench"
	managerProcess   = "manager"
	apiServerProcess = "kube-apiserver"
)

// usageByProcess reads the CPU time so far and the memory of the control plane's processes, the
// benchmark's own and the phase's manager m (none when nil: the floor), by name; a process it
// cannot read is left out. The machine runs nothing else of the benchmark, so their CPU is what
// a server costs it.
func (b *bench) usageByProcess(m *managerproc.Manager) map[string]managerproc.Usage {
	out := map[string]managerproc.Usage{}
	read := func(name string, pid int) {
		if u, err := managerproc.ReadUsage(pid); err == nil {
			out[name] = u
		}
	}
	for name, pid := range b.pids {
		read(name, pid)
	}
	if m != nil {
		read(managerProcess, m.Pid())
	}
	return out
}

// managerName is the phase's manager replica, or "" (the floor).
func (p *phase) managerName() string {
	if p.m == nil {
		return ""
	}
	return p.m.Name
}

func reconcilesByController(m *managerproc.Manager) map[string]float64 {
	return sumByLabel(m, "controller_runtime_reconcile_total", "controller")
}

// requestsByMethod counts the manager's requests to the API server by HTTP method (client-go's
// rest_client_requests_total: GET is a get, a list or the start of a watch; leader election's
// Lease renewals are in it, a PUT every 2 s).
func requestsByMethod(m *managerproc.Manager) map[string]float64 {
	return sumByLabel(m, "rest_client_requests_total", "method")
}

// sumByLabel sums a counter of the manager's metrics by the value of one of its labels.
func sumByLabel(m *managerproc.Manager, metric, label string) map[string]float64 {
	s, err := m.Metrics(metric)
	out := map[string]float64{}
	if err != nil {
		return out
	}
	for k, v := range s {
		_, rest, _ := strings.Cut(k, label+`="`)
		name, _, _ := strings.Cut(rest, `"`)
		out[name] += v
	}
	return out
}

// eventsSince counts the Events of the fleet's namespace by "type/reason", occurrences
// included (series.count), less what the last call counted.
func (b *bench) eventsSince() map[string]int {
	var list eventsv1.EventList
	if err := b.c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		say("Listing Events: %v", err)
		return nil
	}
	now := map[string]int{}
	for _, e := range list.Items {
		n := 1
		if e.Series != nil {
			n = int(e.Series.Count)
		}
		now[e.Type+"/"+e.Reason] += n
	}
	out := map[string]int{}
	for k, v := range now {
		if d := v - b.events[k]; d > 0 {
			out[k] = d
		}
	}
	b.events = now
	return out
}

// items is how many tools, resources and prompts the fleet has.
func (b *bench) items() int { return b.o.servers * (b.o.tools + 2) }

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// perServer is "total T: k=v …" of counts by key, each divided by the number of servers, keys
// in order.
func perServer[V int | float64](counts map[string]V, servers int) string {
	var parts []string
	var total V
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%.2f", k, float64(counts[k])/float64(servers)))
		total += counts[k]
	}
	return fmt.Sprintf("total %.2f: %s", float64(total)/float64(servers), strings.Join(parts, " "))
}

// ratio is a/b, or 0 when b is (the floor has no manager).
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// results is the benchmark's outcome (one JSON line with -json).
type results struct {
	Started        string `json:"started"`
	Servers        int    `json:"servers"`
	SidecarReports string `json:"sidecarReports"`
	ToolsPerServer int    `json:"toolsPerServer"`
	Nodes          int    `json:"nodes"`
	PodsPerNode    int    `json:"podsPerNode"`
	Objects        int    `json:"objects"`
	// CreateRate: servers declared per second as asked (-create-rate); 0: as fast as the workers go.
	CreateRate float64 `json:"createRate,omitempty"`
	// Floor: the cold phase ran with the floor (floor.go), not Switchboard; FloorObjects: which.
	Floor                bool    `json:"floor,omitempty"`
	FloorObjects         string  `json:"floorObjects,omitempty"`
	CreateSeconds        float64 `json:"createSeconds"`
	ColdCatalogsSeconds  float64 `json:"coldCatalogsSeconds"`
	ColdAvailableSeconds float64 `json:"coldAvailableSeconds"`
	ColdSeconds          float64 `json:"coldSeconds"`
	ColdReadySeconds     float64 `json:"coldReadySeconds"`
	// ServerReady: each server's last create → it and its items Ready (cold phase).
	ServerReady      latency       `json:"serverReady"`
	ColdIdleSeconds  float64       `json:"coldIdleSeconds"`
	SteadySeconds    float64       `json:"steadySeconds"`
	SteadyWrites     int           `json:"steadyWrites"`
	EditSeconds      float64       `json:"editSeconds"`
	EditReadySeconds float64       `json:"editReadySeconds"`
	DeleteSeconds    float64       `json:"deleteSeconds"`
	Sidecars         int           `json:"sidecars"`
	SidecarWatches   sidecarResult `json:"sidecarWatches"`
	HA               []haResult    `json:"ha"`
	Phases           []phase       `json:"phases"`
	ForeignCPU       string        `json:"foreignCpu"`
}

func (b *bench) report() {
	r := &b.res
	items := float64(r.Servers * (r.ToolsPerServer + 2))
	fmt.Printf("\nscalebench: %d MCPServers × (%d MCPTools + 1 MCPResource + 1 MCPPrompt) = %d objects; %d kwok nodes × %d pods\n",
		r.Servers, r.ToolsPerServer, r.Objects, r.Nodes, r.PodsPerNode)
	if r.Floor {
		what := "a Deployment and a Service per server"
		switch r.FloorObjects {
		case floorObjectsAll:
			what = "the objects Switchboard creates for a server"
		case floorObjectsApplied:
			what = "the objects Switchboard creates for a server, each with server-side apply"
		}
		fmt.Printf("the floor, not Switchboard: %s, one status patch per server and item (writer \"floor\"); no catalog compiled\n", what)
	}
	fmt.Printf("create (first → last)                     %7.1f s (%.2f servers per second", r.CreateSeconds, float64(r.Servers)/r.CreateSeconds)
	if r.CreateRate > 0 {
		fmt.Printf(", %.2f asked", r.CreateRate)
	}
	fmt.Println(")")
	fmt.Printf("cold: last create → every catalog        %7.1f s\n", r.ColdCatalogsSeconds)
	fmt.Printf("cold: last create → every Deployment available %5.1f s\n", r.ColdAvailableSeconds)
	fmt.Printf("cold: last create → every server and item Ready %5.1f s (simulated sidecar reports: %s)\n", r.ColdReadySeconds, r.SidecarReports)
	fmt.Printf("cold: each server's last create → it and its items Ready: p50 %.1f s, p99 %.1f s, max %.1f s (%d servers)\n",
		r.ServerReady.P50, r.ServerReady.P99, r.ServerReady.Max, r.ServerReady.Servers)
	fmt.Printf("cold: last create → manager idle          %7.1f s\n", r.ColdIdleSeconds)
	fmt.Printf("steady: manager writes in %.0f s (no Lease) %7d\n", r.SteadySeconds, r.SteadyWrites)
	fmt.Printf("edit: last edit → every catalog has it    %7.1f s\n", r.EditSeconds)
	fmt.Printf("edit: last edit → every server and item Ready %6.1f s\n", r.EditReadySeconds)
	fmt.Printf("delete: → nothing left                    %7.1f s\n", r.DeleteSeconds)
	fmt.Printf("\n%-8s %8s %12s %12s %14s %10s %11s %10s %10s %10s %10s %9s %10s\n", "phase", "seconds", "srv rec/srv", "item rec/item", "manager writes",
		"mgr CPU s", "mgr ms/srv", "mgr RSS MB", "mgr peak", "api CPU s", "api cores", "api/mgr", "api RSS MB")
	for _, p := range r.Phases {
		srv := p.Reconciles["mcpserver"] / float64(r.Servers)
		it := (p.Reconciles["mcptool"] + p.Reconciles["mcpresource"] + p.Reconciles["mcpprompt"]) / items
		fmt.Printf("%-8s %8.1f %12.2f %12.2f %14d %10.1f %11.1f %10.0f %10.0f %10.1f %10.2f %9.1f %10.0f\n", p.Name, p.Seconds, srv, it,
			p.ManagerWrites, p.ManagerCPU, p.ManagerCPU*1000/float64(r.Servers), p.ManagerRSSMB, p.ManagerPeakMB,
			p.APIServerCPU, p.APIServerCPU/max(p.Seconds, 1e-9), ratio(p.APIServerCPU, p.ManagerCPU), p.APIServerRSSMB)
	}
	for _, p := range r.Phases {
		keys := slices.Sorted(maps.Keys(p.Writes))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, p.Writes[k]))
		}
		fmt.Printf("writes %-8s %s\n", p.Name+":", strings.Join(parts, " "))
	}
	fmt.Printf("\nwrites per server at the API server, by field manager (Events included, Lease renewals not):\n")
	for _, p := range r.Phases {
		fmt.Printf("  %-8s %s\n", p.Name+":", perServer(p.WritesByWriter, r.Servers))
	}
	fmt.Printf("\nthe manager's requests per server, by method (GET: gets, lists and watches; Lease renewals included):\n")
	for _, p := range r.Phases {
		if len(p.ManagerRequests) == 0 {
			continue // the floor: no manager
		}
		fmt.Printf("  %-8s %s\n", p.Name+":", perServer(p.ManagerRequests, r.Servers))
	}
	fmt.Printf("\nCPU seconds by process (the whole machine's work for the fleet):\n")
	for _, p := range r.Phases {
		names := slices.SortedFunc(maps.Keys(p.CPUByProcess), func(a, b string) int {
			return cmp.Compare(p.CPUByProcess[b], p.CPUByProcess[a])
		})
		var parts []string
		total := 0.0
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s=%.1f", n, p.CPUByProcess[n]))
			total += p.CPUByProcess[n]
		}
		fmt.Printf("  %-8s total %.1f s, %.3f core-seconds per server, %.2f cores: %s\n", p.Name+":", total, total/float64(r.Servers),
			total/max(p.Seconds, 1e-9), strings.Join(parts, " "))
	}
	for _, p := range r.Phases {
		keys := slices.Sorted(maps.Keys(p.EventsByReason))
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, p.EventsByReason[k]))
		}
		fmt.Printf("events %-8s %s\n", p.Name+":", strings.Join(parts, " "))
	}
	if r.Sidecars > 0 {
		s := r.SidecarWatches
		fmt.Printf("\nsidecar watches: %d sidecars (%d API server watches on configmaps): API server RSS %.0f → %.0f MB (+%.0f MB, %.1f KB per sidecar); API server CPU idle %.1f%% → %.1f%% of a core; sidecar process RSS %.0f MB (%.0f KB per sidecar); all watching after %.1f s\n",
			s.Sidecars, int(s.Watches), s.APIServerRSSBeforeMB, s.APIServerRSSAfterMB, s.APIServerRSSAfterMB-s.APIServerRSSBeforeMB,
			(s.APIServerRSSAfterMB-s.APIServerRSSBeforeMB)*1024/float64(max(s.Sidecars, 1)),
			s.APIServerIdleCPUBefore*100, s.APIServerIdleCPUAfter*100, s.SidecarProcessRSSMB, s.SidecarProcessRSSMB*1024/float64(max(s.Sidecars, 1)), s.StartSeconds)
	}
	for _, h := range r.HA {
		fmt.Printf("ha %-8s leader stopped → new leader reconciled an edit %.1f s (new leader elected after %.1f s); webhook probes: survivor %d ok / %d failed, stopped replica %d failed while down\n",
			h.Signal, h.EditSeconds, h.LeaderSeconds, h.SurvivorOK, h.SurvivorFailed, h.StoppedFailed)
	}
	fmt.Printf("foreign CPU (other processes) during the run: %s\n", r.ForeignCPU)
}

// hasEdit reports whether the server's catalog has the edited tool with the description want.
func (w *fleetWatch) hasEdit(ctx context.Context, server, want string) (bool, error) {
	var cms corev1.ConfigMapList
	if err := w.cache.List(ctx, &cms, client.MatchingLabels{inject.LabelServer: server}); err != nil {
		return false, err
	}
	for _, cm := range cms.Items {
		data, ok := cm.Data[catalog.Key]
		if !ok {
			continue
		}
		c, err := catalog.Decode([]byte(data))
		if err != nil {
			return false, err
		}
		for _, t := range c.Tools {
			if t.Name == editedToolName && t.Description == want {
				return true, nil
			}
		}
	}
	return false, nil
}

// foreignCPU describes the machine's load: this benchmark shares 2 cores with other work.
func foreignCPU() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	return fmt.Sprintf("load average at the end %s (1 min) %s (5 min) %s (15 min) on %d cores", f[0], f[1], f[2], goruntime.NumCPU())
}
