// Command catalogbench measures catalog propagation end to end (docs/performance.md): the test
// API server, the manager's controllers, one real sidecar process watching its catalog ConfigMap
// as its own ServiceAccount, and -clients listening clients. It applies an MCPTool change -n
// times and measures, for each, the time from the moment the apply call returns to the moment
// the last client receives notifications/tools/list_changed, and where that time went: the
// watch events of the MCPTool and of the catalog ConfigMap as a watcher of its own sees them,
// and the sidecar's stages as its propagation log records them ("Catalog revision published").
// It also reports the sidecar's RSS per idle stream once every client's stream is open.
//
// The clients read their subscriptions/listen streams as internal/mcptest does (-reader decode),
// or only count the notification's method name in the bytes that arrive (-reader scan): the
// clients share this machine's cores with the sidecar, and decoding 10,000 notifications takes
// them longer than the sidecar takes to write them. With -reader legacy (or -legacy) they are
// 2025-era sessions (initialize, then the session's GET stream). With -client-procs N they run in
// N child processes of this program, apart from the controllers (clients.go). Quantiles are
// by nearest rank.
//
//	go build -o bin/sidecar ./cmd/sidecar && go run ./hack/catalogbench -sidecar bin/sidecar [-reader scan|legacy]
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/benchkit"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

// Bounds of the benchmark's waits.
const (
	// notifyWait is how long a change may take to reach every client.
	notifyWait = 10 * time.Second
	// settle is the pause after the streams are open before the sidecar's RSS is read
	// (the method of docs/performance.md "Memory per idle listen stream").
	settle = 2 * time.Second
	// openers is how many streams are opened at a time.
	openers = 64
	// slowest is how many of the slowest changes are broken down one by one.
	slowest = 3
)

type options struct {
	sidecarBin string
	clients, n int
	gap        time.Duration
	reader     string
	clientProc int
	extraArgs  []string
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == childFlag {
		n, err := strconv.Atoi(os.Args[3])
		if err == nil {
			err = runChild(os.Args[2], n, os.Args[4])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "catalogbench clients process:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.sidecarBin, "sidecar", "bin/sidecar", "built cmd/sidecar")
	flag.IntVar(&o.clients, "clients", 100, "listening clients")
	flag.IntVar(&o.n, "n", 100, "MCPTool changes to apply")
	flag.DurationVar(&o.gap, "gap", 200*time.Millisecond, "pause between changes")
	flag.StringVar(&o.reader, "reader", readerDecode, "how clients read their streams: decode (SSE and JSON, as internal/mcptest), scan (count the method name in the bytes) or legacy (2025-era sessions with GET streams, scanned by line)")
	flag.IntVar(&o.clientProc, "client-procs", 0, "run the clients in this many child processes of this program, not in the process that holds the controllers (0: in it)")
	legacy := flag.Bool("legacy", false, "the same as -reader legacy")
	sidecarArgs := flag.String("sidecar-args", "", "more sidecar arguments, space-separated (e.g. --max-procs=2)")
	flag.Parse()
	o.extraArgs = strings.Fields(*sidecarArgs)
	if *legacy {
		o.reader = readerLegacy
	}
	if !slices.Contains([]string{readerDecode, readerScan, readerLegacy}, o.reader) {
		fmt.Fprintf(os.Stderr, "catalogbench: -reader %q: want decode, scan or legacy\n", o.reader)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "catalogbench:", err)
		os.Exit(1)
	}
}

// change is what one MCPTool change was seen to do, in the order it happened.
type change struct {
	sent    time.Time // the update request was sent (its last attempt, after a conflict)
	applied time.Time // the update call returned
	tool    time.Time // a watcher saw the MCPTool's new description
	cm      time.Time // a watcher saw the catalog ConfigMap's next revision
	rev     string
	first   time.Time // the first client read its notification
	last    time.Time // the last client did
}

func run(o options) error {
	ctx := context.Background()
	fmt.Println("load average at start:", loadavg())
	fmt.Println("Starting the control plane, the controllers and the sidecar…")
	st, err := framework.StartStack(ctx, framework.StackOptions{SidecarBin: o.sidecarBin, Namespace: "bench", ExtraArgs: o.extraArgs})
	if err != nil {
		return err
	}
	defer st.Stop()

	rssBefore, err := sidecarRSS(st.AdminURL)
	if err != nil {
		return err
	}
	opened := time.Now()
	var ls audience
	if o.clientProc > 0 {
		ls, err = startClientProcs(st.MCPURL, o.clients, o.clientProc, o.reader)
		if err != nil {
			return err
		}
	} else {
		ls, err = openStreams(ctx, st.MCPURL, o.clients, o.reader)
	}
	defer ls.close()
	if err != nil {
		return err
	}
	openTook := time.Since(opened)
	time.Sleep(settle)
	rssAfter, err := sidecarRSS(st.AdminURL)
	if err != nil {
		return err
	}
	fmt.Printf("streams=%d (%s, %s) opened in %v; sidecar RSS %.1f MB → %.1f MB: %.2f KB per idle stream\n",
		ls.len(), o.reader, where(o.clientProc), openTook.Round(time.Millisecond), float64(rssBefore)/1e6, float64(rssAfter)/1e6,
		float64(rssAfter-rssBefore)/float64(ls.len())/1e3)

	w, err := startWatches(ctx, st)
	if err != nil {
		return err
	}
	var tool mcpv1alpha1.MCPTool
	key := client.ObjectKey{Namespace: st.Namespace, Name: toolName}
	var changes []change
	for i := range o.n + 1 { // the first change warms up and is not counted
		toolMark, cmMark := w.tools.len(), w.catalogs.len()
		desc := fmt.Sprintf("Daily forecast, revision %d.", i)
		var c change
		// The controller writes the MCPTool's status meanwhile: retry on a conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := st.Env.Client.Get(ctx, key, &tool); err != nil {
				return err
			}
			tool.Spec.Description = desc
			c.sent = time.Now()
			return st.Env.Client.Update(ctx, &tool)
		}); err != nil {
			return err
		}
		c.applied = time.Now()
		// Every stream heard exactly i+1 notifications: none is missing, none came twice.
		arrived, err := ls.wait(i)
		if err != nil {
			return fmt.Errorf("change %d: %w\n%s", i, err, st.SidecarLog(20))
		}
		c.first = slices.MinFunc(arrived, time.Time.Compare)
		c.last = slices.MaxFunc(arrived, time.Time.Compare)
		c.tool, _ = w.tools.find(toolMark, func(k string) bool { return k == desc })
		c.cm, c.rev = w.catalogs.find(cmMark, func(k string) bool { return k != w.served })
		if c.rev != "" {
			w.served = c.rev
		}
		if i > 0 {
			changes = append(changes, c)
		}
		time.Sleep(o.gap)
	}
	published, err := publishedLog(filepath.Join(st.Dir, "sidecar.log"))
	if err != nil {
		return err
	}
	report(o, changes, published)
	fmt.Println("load average at end:", loadavg())
	return nil
}

// where says where the clients ran.
func where(procs int) string {
	if procs == 0 {
		return "in the benchmark's process"
	}
	return fmt.Sprintf("in %d child processes", procs)
}

// toolName is the sample MCPTool the benchmark edits.
const toolName = "weather-forecast"

// listeners are the benchmark's clients: when each of their streams heard
// notifications/tools/list_changed.
type listeners struct {
	streams []heardBy
	closers []func()
	heard   atomic.Int64  // notifications heard by all streams together
	want    atomic.Int64  // heard at which all is signalled
	all     chan struct{} // signalled when heard reaches want
}

// heardBy is one stream's notifications, in order. mu guards at.
type heardBy struct {
	mu sync.Mutex
	at []time.Time
}

func (l *listeners) len() int { return len(l.streams) }

func (l *listeners) hit(j int, at time.Time) {
	s := &l.streams[j]
	s.mu.Lock()
	s.at = append(s.at, at)
	s.mu.Unlock()
	if l.heard.Add(1) == l.want.Load() {
		select {
		case l.all <- struct{}{}:
		default:
		}
	}
}

// expect returns a channel signalled once every stream has heard k notifications in all.
func (l *listeners) expect(k int) <-chan struct{} {
	select {
	case <-l.all:
	default:
	}
	l.want.Store(int64(k * len(l.streams)))
	if l.heard.Load() >= l.want.Load() {
		select { // hit may have signalled it already
		case l.all <- struct{}{}:
		default:
		}
	}
	return l.all
}

// heardNth returns when each stream heard its notification number i (from 0), and an error
// unless every stream heard exactly i+1.
func (l *listeners) heardNth(i int) ([]time.Time, error) {
	out := make([]time.Time, len(l.streams))
	for j := range l.streams {
		s := &l.streams[j]
		s.mu.Lock()
		n := len(s.at)
		if n > i {
			out[j] = s.at[i]
		}
		s.mu.Unlock()
		switch {
		case n <= i:
			return nil, fmt.Errorf("client %d got no notification within %v", j, notifyWait)
		case n > i+1:
			return nil, fmt.Errorf("client %d got %d notifications, want %d", j, n, i+1)
		}
	}
	return out, nil
}

func (l *listeners) close() {
	for _, c := range l.closers {
		c()
	}
}

// Readers of the clients' streams (-reader).
const (
	// readerDecode reads each stream as internal/mcptest does: SSE events, each a JSON-RPC
	// message decoded with encoding/json.
	readerDecode = "decode"
	// readerScan reads each stream's bytes and counts the notification's method name in them,
	// as a client that only waits for a change can: no SSE parsing and no JSON decoding, whose
	// CPU the clients would take from the sidecar on this machine's cores.
	readerScan = "scan"
	// readerLegacy opens 2025-era sessions (initialize, then the session's GET stream).
	readerLegacy = "legacy"
)

// openStreams opens n streams, openers at a time.
func openStreams(ctx context.Context, url string, n int, reader string) (*listeners, error) {
	l := &listeners{streams: make([]heardBy, n), closers: make([]func(), n), all: make(chan struct{}, 1)}
	c := mcptest.New(url)
	forward := func(j int, s *mcptest.Stream, err error) (func(), error) {
		if err != nil {
			return nil, err
		}
		go func() {
			for nt := range s.C {
				l.hit(j, nt.At)
			}
		}()
		return s.Close, nil
	}
	open := func(j int) (func(), error) {
		switch reader {
		case readerScan:
			return scanStream(ctx, c, func(at time.Time) { l.hit(j, at) })
		case readerLegacy:
			s, err := legacyStream(ctx, url)
			return forward(j, s, err)
		default:
			s, err := c.Listen(ctx, map[string]any{"toolsListChanged": true})
			return forward(j, s, err)
		}
	}
	errs := make([]error, n)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(openers, n) {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= n {
					return
				}
				l.closers[j], errs[j] = open(j)
			}
		})
	}
	wg.Wait()
	l.closers = slices.DeleteFunc(l.closers, func(c func()) bool { return c == nil })
	return l, errors.Join(errs...)
}

var (
	ackMarker    = []byte("notifications/subscriptions/acknowledged")
	changeMarker = []byte("notifications/tools/list_changed")
)

// scanStream opens a subscriptions/listen stream for tools and calls heard with the time each
// read that completed a notifications/tools/list_changed returned. It returns once the stream
// is acknowledged.
func scanStream(ctx context.Context, c *mcptest.Client, heard func(time.Time)) (func(), error) {
	resp, cancel, err := c.OpenListen(ctx, map[string]any{"toolsListChanged": true}) //nolint:bodyclose // the reader goroutine closes it
	if err != nil {
		return nil, err
	}
	sc := &scanner{r: resp.Body, buf: make([]byte, 2048)}
	if _, err := sc.next(ackMarker); err != nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("listen: no acknowledgement: %w", err)
	}
	go func() {
		defer resp.Body.Close()
		for {
			at, err := sc.next(changeMarker)
			if err != nil {
				return
			}
			heard(at)
		}
	}()
	return cancel, nil
}

// scanner finds markers in what a reader returns, a marker split across two reads included.
type scanner struct {
	r    io.Reader
	buf  []byte
	data []byte    // read and not yet searched past
	at   time.Time // when the last read returned
}

// next returns when the read that completed the next occurrence of marker returned.
func (s *scanner) next(marker []byte) (time.Time, error) {
	for {
		if i := bytes.Index(s.data, marker); i >= 0 {
			s.data = s.data[i+len(marker):]
			return s.at, nil
		}
		k := copy(s.buf, s.data[max(0, len(s.data)-len(marker)+1):]) // what may begin a marker
		n, err := s.r.Read(s.buf[k:])
		s.at = time.Now()
		s.data = s.buf[:k+n]
		if n == 0 && err != nil {
			return time.Time{}, err
		}
	}
}

// events records what a watch saw: each event's key and when it arrived. mu guards list.
type events struct {
	mu   sync.Mutex
	list []seen
}

type seen struct {
	at  time.Time
	key string
}

func (e *events) add(key string) {
	now := time.Now()
	e.mu.Lock()
	e.list = append(e.list, seen{now, key})
	e.mu.Unlock()
}

func (e *events) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.list)
}

// find returns the first event from index from on whose key matches.
func (e *events) find(from int, match func(string) bool) (time.Time, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.list[from:] {
		if match(s.key) {
			return s.at, s.key
		}
	}
	return time.Time{}, ""
}

// watches are the benchmark's own watches of the edited MCPTool (its description) and of the
// catalog ConfigMap (its revision): they arrive from the API server's watch cache as the
// controller's and the sidecar's do.
type watches struct {
	tools, catalogs events
	served          string // the catalog revision before the next change
}

func startWatches(ctx context.Context, st *framework.Stack) (*watches, error) {
	wc, err := client.NewWithWatch(st.Env.Config, client.Options{Scheme: st.Env.Scheme})
	if err != nil {
		return nil, err
	}
	w := &watches{}
	catalogName := st.Server + "-catalog"
	var cm corev1.ConfigMap
	if err := wc.Get(ctx, client.ObjectKey{Namespace: st.Namespace, Name: catalogName}, &cm); err != nil {
		return nil, err
	}
	w.served = cm.Annotations[catalog.RevisionAnnotation]
	tw, err := wc.Watch(ctx, &mcpv1alpha1.MCPToolList{}, client.InNamespace(st.Namespace),
		client.MatchingFields{"metadata.name": toolName})
	if err != nil {
		return nil, err
	}
	cw, err := wc.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(st.Namespace),
		client.MatchingFields{"metadata.name": catalogName})
	if err != nil {
		tw.Stop()
		return nil, err
	}
	go record(tw, &w.tools, func(o any) string {
		t, _ := o.(*mcpv1alpha1.MCPTool)
		return t.Spec.Description
	})
	go record(cw, &w.catalogs, func(o any) string {
		c, _ := o.(*corev1.ConfigMap)
		return c.Annotations[catalog.RevisionAnnotation]
	})
	return w, nil
}

func record(w watch.Interface, into *events, key func(any) string) {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added || ev.Type == watch.Modified {
			into.add(key(ev.Object))
		}
	}
}

// publishedLine is the sidecar's propagation log of one revision (sidecar/app/propagation.go).
type publishedLine struct {
	Msg      string        `json:"msg"`
	Revision string        `json:"revision"`
	Received time.Time     `json:"received"`
	Decode   time.Duration `json:"decode"`
	Coalesce time.Duration `json:"coalesce"`
	Compute  time.Duration `json:"compute"`
	Publish  time.Duration `json:"publish"`
}

// lastWrite is when the sidecar's fan-out of the revision had attempted every write.
func (p publishedLine) lastWrite() time.Time {
	return p.Received.Add(p.Decode + p.Coalesce + p.Compute + p.Publish)
}

// publishedLog reads the sidecar's propagation log by revision.
func publishedLog(path string) (map[string]publishedLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]publishedLine{}
	for line := range bytes.Lines(b) {
		var p publishedLine
		if json.Unmarshal(line, &p) == nil && p.Msg == "Catalog revision published" {
			out[p.Revision] = p
		}
	}
	return out, nil
}

// stage is one part of the path from the update call's return to the last client's read.
type stage struct {
	name string
	of   func(c change, p publishedLine) time.Duration
}

// stages split the path; each needs the sidecar's log line of the change's revision.
var stages = []stage{
	{"MCPTool event at a watcher (API server watch)", func(c change, _ publishedLine) time.Duration { return c.tool.Sub(c.applied) }},
	{"→ catalog ConfigMap event at a watcher (controller: queue, reconcile, compile, apply; watch)", func(c change, _ publishedLine) time.Duration { return c.cm.Sub(c.tool) }},
	{"→ the sidecar's watch event (against the watcher's)", func(c change, p publishedLine) time.Duration { return p.Received.Sub(c.cm) }},
	{"sidecar: decode, validate, store", func(_ change, p publishedLine) time.Duration { return p.Decode }},
	{"sidecar: coalescing window", func(_ change, p publishedLine) time.Duration { return p.Coalesce }},
	{"sidecar: effective catalog computed", func(_ change, p publishedLine) time.Duration { return p.Compute }},
	{"sidecar: diff and fan-out (every write attempted)", func(_ change, p publishedLine) time.Duration { return p.Publish }},
	{"first client's read (after the computation)", func(c change, p publishedLine) time.Duration {
		return c.first.Sub(p.Received.Add(p.Decode + p.Coalesce + p.Compute))
	}},
	{"last client's read (after the fan-out's last write)", func(c change, p publishedLine) time.Duration {
		return c.last.Sub(p.lastWrite())
	}},
}

func report(o options, changes []change, published map[string]publishedLine) {
	// From the update call's return (lat) and from its send (fromSent): the send's is never
	// shorter than the change took (the API server committed it after the send), longer by the
	// call's own time up to the commit; a return that comes late makes a change look short.
	lat, fromSent, call := make([]time.Duration, len(changes)), make([]time.Duration, len(changes)), make([]time.Duration, len(changes))
	for i, c := range changes {
		lat[i], fromSent[i], call[i] = c.last.Sub(c.applied), c.last.Sub(c.sent), c.applied.Sub(c.sent)
	}
	kind := "listen, " + o.reader
	if o.reader == readerLegacy {
		kind = "2025-era GET"
	}
	sorted := slices.Sorted(slices.Values(lat))
	fmt.Printf("clients=%d (%s streams) changes=%d  apply-return → last client's tools/list_changed: %s min=%v\n",
		o.clients, kind, len(lat), spread(sorted), ms(sorted[0]))
	slices.Sort(fromSent)
	slices.Sort(call)
	fmt.Printf("apply-sent → last client's tools/list_changed: %s min=%v (the update call: p50=%v max=%v)\n",
		spread(fromSent), ms(fromSent[0]), ms(quantile(call, 0.50)), ms(call[len(call)-1]))

	var have []int
	var written []time.Duration
	for i, c := range changes {
		if p, ok := published[c.rev]; ok && !c.tool.IsZero() && !c.cm.IsZero() {
			have = append(have, i)
			written = append(written, p.lastWrite().Sub(c.applied))
		}
	}
	if len(written) > 0 {
		// Without the clients' own reads, which share this machine's cores with the sidecar.
		slices.Sort(written)
		fmt.Printf("apply-return → the sidecar's last write (%d changes): %s\n", len(written), spread(written))
	}
	fmt.Printf("\nStages (%d of %d changes with every timestamp):\n", len(have), len(changes))
	fmt.Printf("%-92s %9s %9s %9s %9s\n", "stage", "mean", "p50", "p90", "p99")
	for _, s := range stages {
		d := make([]time.Duration, 0, len(have))
		var sum time.Duration
		for _, i := range have {
			v := s.of(changes[i], published[changes[i].rev])
			d = append(d, v)
			sum += v
		}
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Printf("%-92s %9v %9v %9v %9v\n", s.name, ms(sum/time.Duration(len(d))), ms(quantile(d, 0.5)), ms(quantile(d, 0.9)), ms(quantile(d, 0.99)))
	}
	// The slowest changes, stage by stage: where a tail latency went.
	slices.SortFunc(have, func(a, b int) int { return cmp.Compare(lat[b], lat[a]) })
	for _, i := range have[:min(slowest, len(have))] {
		parts := make([]string, len(stages))
		for k, s := range stages {
			parts[k] = ms(s.of(changes[i], published[changes[i].rev])).String()
		}
		fmt.Printf("slow change: %v = %s\n", ms(lat[i]), strings.Join(parts, " + "))
	}
}

// quantile is benchkit.Quantile, by nearest rank: of 100 changes, p99 is the 99th, the second
// slowest (before 2026-12-04 this tool took the 100th, the slowest, as p99).
var quantile = benchkit.Quantile[time.Duration]

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// spread is "p50=… p90=… p99=… max=…" of sorted (ascending, not empty).
func spread(sorted []time.Duration) string {
	return fmt.Sprintf("p50=%v p90=%v p99=%v max=%v", ms(quantile(sorted, 0.50)), ms(quantile(sorted, 0.90)),
		ms(quantile(sorted, 0.99)), ms(sorted[len(sorted)-1]))
}

// sidecarRSS reads the sidecar's resident memory from its metrics.
func sidecarRSS(adminURL string) (int64, error) {
	resp, err := http.Get(adminURL + "/metrics") //nolint:noctx // a local read in a benchmark
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, errors.Join(errors.New("no process_resident_memory_bytes in the sidecar's metrics"), sc.Err())
}

// loadavg is the machine's load average (1, 5, 15 minutes), as uptime prints it.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// legacyStream opens a 2025-11-25 session (initialize, notifications/initialized) and its GET
// stream, and returns once the stream's priming event arrived.
func legacyStream(ctx context.Context, url string) (*mcptest.Stream, error) {
	post := func(body, sid string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("%s: HTTP %d", body, resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id"), nil
	}
	sid, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"catalogbench","version":"1"}}}`, "")
	if err != nil {
		return nil, err
	}
	if _, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req) //nolint:bodyclose // the reader goroutine closes it
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET: HTTP %d", resp.StatusCode)
	}
	ch := make(chan mcptest.Notification, 64)
	primed := make(chan struct{})
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "id: ") {
				once.Do(func() { close(primed) })
				continue
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "notifications/tools/list_changed") {
				ch <- mcptest.Notification{Method: "notifications/tools/list_changed", At: time.Now()}
			}
		}
	}()
	select {
	case <-primed:
	case <-time.After(10 * time.Second):
		cancel()
		return nil, errors.New("no priming event on the GET stream")
	}
	return mcptest.NewStream(ch, cancel), nil
}
