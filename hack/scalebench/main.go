// Command scalebench is `make bench-scale` (docs/performance.md): Switchboard with a fleet of
// MCPServers on the local control plane (etcd, kube-apiserver with an audit log,
// kube-controller-manager, kube-scheduler and kwok nodes), the manager running as a real
// process (bin/manager) with leader election and its webhook, everything on 127.0.0.1.
//
// Phases, each bounded by -timeout:
//
//	cold      create -servers MCPServers with -tools MCPTools, one MCPResource and one MCPPrompt
//	          each; time from the last create until every server has its complete compiled
//	          catalog and an available Deployment, and (with -sidecar-reports) every server and
//	          item is Ready: each pod's sidecar reports are simulated with the sidecar's own
//	          Reporter (reports.go), since kwok pods run no containers
//	steady    -steady of quiet: the manager's writes (audit log) and reconciles
//	edit      one MCPTool edited on every server: time until every catalog has the edit
//	sidecars  -sidecars sidecars (the sidecar package's own code, in one child process) watch
//	          their catalog ConfigMaps: the API server's RSS and CPU with and without them
//	ha        a second manager replica; the leader stopped (SIGTERM), then killed (SIGKILL):
//	          time until the new leader reconciles an edit; both webhooks probed throughout
//	delete    every MCPServer, MCPTool, MCPResource and MCPPrompt deleted: time until garbage
//	          collection leaves no child, ReplicaSet or pod behind
//
// With -manager none, the cold phase runs the floor instead of Switchboard (floor.go): an
// operator that costs nothing, the least work it can make the control plane do per server
// (-floor-objects least), or the same with every object Switchboard creates for a server (all).
//
// Reconciles come from the manager's controller_runtime_reconcile_total, RSS and CPU from
// /proc/<pid>, writes from the API server's audit log (user agent of the manager binary).
//
//	make bench-scale                                   # 1,000 servers (long on 2 cores)
//	go run ./hack/scalebench -manager bin/manager -servers 50 -sidecars 100 -steady 10s   # quick
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/switchboard-mcp/switchboard/internal/managerproc"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

type options struct {
	manager     string
	servers     int
	tools       int
	nodes       int
	podsPerNode int
	workers     int
	createRate  float64
	steady      time.Duration
	sidecars    int
	ha          bool
	timeout     time.Duration
	managerArgs string
	jsonOut     string
	keep        bool
	profile     string
	phases      string
	managerEnv  string

	leaseDuration time.Duration

	floorObjects   string
	sidecarReports string
	reportLag      time.Duration
	checkLag       time.Duration
}

// floor: the cold phase runs with the floor (floor.go), not the manager.
func (o options) floor() bool { return o.manager == floorManager }

// tracksReady: something makes servers and items Ready (the manager on simulated reports, or the
// floor), so the cold phase waits for it.
func (o options) tracksReady() bool { return o.floor() || o.sidecarReports != reportsNone }

func main() {
	if len(os.Args) > 1 && os.Args[1] == sidecarsCommand {
		if err := runSidecars(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "scalebench sidecars:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.manager, "manager", "bin/manager", "The built cmd/manager; "+floorManager+" runs the cold phase with the floor instead "+
		"(no Switchboard: the least work any operator can cause, floor.go).")
	flag.StringVar(&o.floorObjects, "floor-objects", floorObjectsLeast, "With -manager "+floorManager+": "+floorObjectsLeast+
		" (a Deployment and a Service per server), "+floorObjectsAll+" (also the other objects Switchboard creates for one) or "+
		floorObjectsApplied+" (all, written with server-side apply as Switchboard writes them).")
	flag.IntVar(&o.servers, "servers", 1000, "MCPServers in the fleet.")
	flag.IntVar(&o.tools, "tools", 10, "MCPTools per server (plus one MCPResource and one MCPPrompt).")
	flag.IntVar(&o.nodes, "nodes", 0, "kwok nodes; 0 means enough for one pod per server with 10% spare.")
	flag.IntVar(&o.podsPerNode, "pods-per-node", testenv.DefaultPodsPerNode, "Pod capacity of each kwok node.")
	flag.IntVar(&o.workers, "workers", 16, "Concurrent creates, edits and deletes.")
	flag.Float64Var(&o.createRate, "create-rate", 0, "Servers declared per second in the cold phase (each server's objects are created from its turn on); "+
		"0 creates as fast as -workers allow.")
	flag.DurationVar(&o.steady, "steady", 60*time.Second, "Length of the steady-state window.")
	flag.IntVar(&o.sidecars, "sidecars", -1, "Sidecars watching their catalog ConfigMap (spread over the servers); -1 means 2 per server, 0 skips.")
	flag.BoolVar(&o.ha, "ha", true, "Run the high-availability phase (a second manager replica).")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "Upper bound of each wait (a phase: four of them).")
	flag.StringVar(&o.managerArgs, "manager-args", "", "Extra manager flags, space-separated.")
	flag.DurationVar(&o.leaseDuration, "lease-duration", time.Minute, "The managers' --leader-elect-lease-duration; their renew deadline is two thirds of it. "+
		"Longer than the manager's default (15 s, renew deadline 10 s): on a loaded 2-core machine the control plane can leave a Lease renewal "+
		"unanswered for more than 10 s, and the leader then gives up and exits. The ha phase's SIGKILL failover waits for it to expire.")
	flag.StringVar(&o.managerEnv, "manager-env", "", "Extra environment of the manager processes, space-separated NAME=value (e.g. GOMEMLIMIT=180MiB).")
	flag.StringVar(&o.jsonOut, "json", "", "Append the results as one JSON line to this file.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the logs and the audit log (their folder is printed).")
	flag.StringVar(&o.phases, "phases", "cold,steady,edit,sidecars,ha,delete", "The phases to run, in their order (cold always runs).")
	flag.StringVar(&o.profile, "profile", "", "Save the manager's, the API server's and the benchmark's own CPU profiles of each phase and the manager's heap at each phase's end in this folder "+
		"(the manager's --pprof-bind-address on 127.0.0.1).")
	flag.StringVar(&o.sidecarReports, "sidecar-reports", reportsBefore, "When each pod's simulated sidecar writes its propagation reports "+
		"(the sidecar package's Reporter, as the real sidecar does): before (from the pod's start, as the real sidecar, whose readiness waits "+
		"for the catalog), after (once the pod is Ready), or none (no replica ever reports: items stay Reconciling).")
	flag.DurationVar(&o.reportLag, "report-lag", 100*time.Millisecond, "Simulated sidecars: from the pod's start (or readiness) or a new catalog revision to the report.")
	flag.DurationVar(&o.checkLag, "check-lag", 50*time.Millisecond, "Simulated sidecars: from the report to the second one, with the MCP server's tools checked.")
	flag.Parse()
	if o.sidecars < 0 {
		o.sidecars = 2 * o.servers
	}
	if !slices.Contains([]string{floorObjectsLeast, floorObjectsAll, floorObjectsApplied}, o.floorObjects) {
		fmt.Fprintf(os.Stderr, "scalebench: -floor-objects %q: want %s, %s or %s\n", o.floorObjects, floorObjectsLeast, floorObjectsAll, floorObjectsApplied)
		os.Exit(2)
	}
	if o.nodes == 0 {
		o.nodes = (o.servers*11/10 + o.podsPerNode - 1) / o.podsPerNode
	}
	ctrllog.SetLogger(logr.Discard())
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// bench is the running benchmark: the control plane, the manager replicas and the results.
type bench struct {
	o      options
	dir    string
	env    *testenv.Env
	c      client.Client
	cfg    *rest.Config
	apiPID int
	// pids are the processes whose CPU each phase records (usageByProcess): the control plane's and
	// the benchmark's own; the managers are added per phase.
	pids     map[string]int
	managers []*managerproc.Manager
	watch    *fleetWatch
	floor    *floor // with -manager none
	audit    *auditLog
	prof     *profiler // nil without -profile
	res      results
	events   map[string]int // Events by type/reason, as eventsSince last counted them
}

const namespace = "fleet"

func run(o options) (err error) {
	dir, err := os.MkdirTemp("", "switchboard-scalebench-")
	if err != nil {
		return err
	}
	b := &bench{o: o, dir: dir}
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
		b.prof = &profiler{dir: o.profile, addrs: map[string]string{}}
	}
	b.res.Started = time.Now().UTC().Format(time.RFC3339)
	b.res.Servers, b.res.ToolsPerServer, b.res.Nodes, b.res.PodsPerNode = o.servers, o.tools, o.nodes, o.podsPerNode
	b.res.CreateRate = o.createRate
	b.res.Sidecars = o.sidecars
	if b.res.Floor = o.floor(); b.res.Floor {
		b.res.Sidecars = 0 // only the cold phase
		b.res.FloorObjects = o.floorObjects
	}
	say("Folder %s", dir)
	defer func() {
		b.stop()
		if !o.keep {
			_ = os.RemoveAll(dir)
		}
	}()
	// SIGINT or SIGTERM ends the phase under way; the deferred stop then tears the control plane
	// and the managers down instead of leaving them running (a second signal kills at once).
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	go func() {
		<-sigCtx.Done()
		stopSignals() // the default action again, for a second signal
	}()
	if err := b.start(); err != nil {
		return err
	}
	phases := []struct {
		name string
		run  func(context.Context) error
		skip bool
	}{
		{"cold", b.cold, false},
		{"steady", b.steadyState, false},
		{"edit", b.edit, false},
		{"sidecars", b.sidecarWatches, o.sidecars == 0},
		{"ha", b.highAvailability, !o.ha},
		{"delete", b.deleteFleet, false},
	}
	wanted := strings.Split(o.phases, ",")
	for _, p := range phases {
		if p.name != "cold" && (p.skip || o.floor() || !slices.Contains(wanted, p.name)) { // the floor has only a cold phase
			continue
		}
		say("Phase %s", p.name)
		// Each wait inside a phase is bounded by -timeout; the phase as a whole by four of them.
		if sigCtx.Err() != nil {
			return fmt.Errorf("interrupted before phase %s", p.name)
		}
		ctx, cancel := context.WithTimeout(sigCtx, 4*o.timeout)
		err := p.run(ctx)
		cancel()
		if err != nil {
			b.report() // what the finished phases measured
			return fmt.Errorf("phase %s: %w", p.name, err)
		}
	}
	b.res.ForeignCPU = foreignCPU()
	b.report()
	if o.jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(o.jsonOut), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(o.jsonOut, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		line, _ := json.Marshal(b.res)
		_, err = fmt.Fprintf(f, "%s\n", line)
		return err
	}
	return nil
}

// auditPolicy records every write at Metadata level and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func (b *bench) start() error {
	policy := filepath.Join(b.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	auditPath := filepath.Join(b.dir, "audit.log")
	say("Starting the control plane: %d kwok nodes of %d pods", b.o.nodes, b.o.podsPerNode)
	t := time.Now()
	env, err := testenv.Start(testenv.Options{
		Controllers: true, Nodes: b.o.nodes, PodsPerNode: b.o.podsPerNode,
		APIServerFlags: map[string]string{"audit-policy-file": policy, "audit-log-path": auditPath},
	})
	if err != nil {
		return err
	}
	b.env = env
	say("Control plane up in %v", time.Since(t).Round(time.Millisecond))
	if b.pids, err = env.ProcessPIDs(); err != nil {
		return err
	}
	b.apiPID = b.pids[apiServerProcess]
	b.pids[benchProcess] = os.Getpid()
	b.cfg = rest.CopyConfig(env.Config)
	b.cfg.QPS, b.cfg.Burst = 2000, 4000
	b.cfg.UserAgent = "scalebench"
	if b.c, err = client.New(b.cfg, client.Options{Scheme: env.Scheme}); err != nil {
		return err
	}
	if b.prof != nil {
		if b.prof.api, err = rest.HTTPClientFor(b.cfg); err != nil {
			return err
		}
		b.prof.apiHost = strings.TrimSuffix(b.cfg.Host, "/")
	}
	b.audit = &auditLog{path: auditPath}
	ctx := context.Background()
	for _, ns := range []string{managerproc.Namespace, namespace} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if b.watch, err = startFleetWatch(ctx, b.cfg, env.Scheme, b.o); err != nil {
		return err
	}
	if b.o.floor() {
		b.res.SidecarReports = "none (the floor)"
		b.floor, err = startFloor(b.watch.ctx, b.cfg, b.env.Scheme, b.watch.cache, b.o)
		return err
	}
	b.res.SidecarReports = b.o.sidecarReports
	if err := startSidecarSim(b.watch.ctx, b.watch.cache, b.cfg, b.o); err != nil {
		return err
	}
	m, err := b.startManager(ctx, "manager-0")
	if err != nil {
		return err
	}
	return waitFor(ctx, time.Minute, "manager-0 to lead", func() (bool, error) { return m.IsLeader(), nil })
}

func (b *bench) startManager(ctx context.Context, name string) (*managerproc.Manager, error) {
	args, err := b.prof.managerArgs(name)
	if err != nil {
		return nil, err
	}
	args = append(args, "--leader-elect-lease-duration="+b.o.leaseDuration.String(),
		"--leader-elect-renew-deadline="+(b.o.leaseDuration*2/3).String())
	m, err := managerproc.Start(ctx, managerproc.Options{
		Bin: b.o.manager, Kubeconfig: b.env.KubeconfigPath, Dir: b.dir, Name: name,
		LeaderElect: true, Webhook: true, Args: append(args, strings.Fields(b.o.managerArgs)...), // -manager-args win
		Env: strings.Fields(b.o.managerEnv),
	})
	if err != nil {
		return nil, err
	}
	b.managers = append(b.managers, m)
	return m, nil
}

// leader returns the running replica that holds the Lease.
func (b *bench) leader() *managerproc.Manager {
	for _, m := range b.managers {
		select {
		case <-m.Done():
			continue
		default:
		}
		if m.IsLeader() {
			return m
		}
	}
	return nil
}

func (b *bench) stop() {
	if b.watch != nil {
		b.watch.stop()
	}
	for _, m := range b.managers {
		select {
		case <-m.Done():
		default:
			m.Stop()
		}
	}
	if b.env != nil {
		if err := b.env.Stop(); err != nil {
			say("Stopping the control plane: %v", err)
		}
	}
}

func say(format string, args ...any) {
	fmt.Printf("%s scalebench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// waitFor polls cond every 250 ms until it holds, fails, or limit passes.
func waitFor(ctx context.Context, limit time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + what)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
