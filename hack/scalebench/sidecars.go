package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/managerproc"
	"github.com/switchboard-mcp/switchboard/internal/sampleserver"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
	"github.com/switchboard-mcp/switchboard/test/framework"
)

// sidecarsCommand is the child process mode: many sidecars (package sidecar's App, the code
// cmd/sidecar runs) in one process, so their RSS is apart from the benchmark's.
const sidecarsCommand = "sidecars"

// sidecarTarget is what one sidecar needs: its catalog ConfigMap and its ServiceAccount.
type sidecarTarget struct {
	Namespace      string `json:"namespace"`
	CatalogMap     string `json:"catalogConfigMap"`
	ServiceAccount string `json:"serviceAccount"`
}

type sidecarResult struct {
	Sidecars               int     `json:"sidecars"`
	Watches                float64 `json:"apiserverConfigMapWatches"`
	StartSeconds           float64 `json:"startSeconds"`
	APIServerRSSBeforeMB   float64 `json:"apiserverRssBeforeMB"`
	APIServerRSSAfterMB    float64 `json:"apiserverRssAfterMB"`
	APIServerIdleCPUBefore float64 `json:"apiserverIdleCpuBefore"` // cores
	APIServerIdleCPUAfter  float64 `json:"apiserverIdleCpuAfter"`
	SidecarProcessRSSMB    float64 `json:"sidecarProcessRssMB"`
}

// idleWindow is how long API server CPU is sampled with and without the watches.
const idleWindow = 20 * time.Second

// sidecarWatches measures the API server with and without -sidecars sidecars watching their
// catalog ConfigMaps, each as its server's sidecar ServiceAccount (impersonation).
func (b *bench) sidecarWatches(ctx context.Context) error {
	r := &b.res.SidecarWatches
	r.Sidecars = b.o.sidecars
	targets, err := b.sidecarTargets(ctx)
	if err != nil {
		return err
	}
	before, err := managerproc.ReadUsage(b.apiPID)
	if err != nil {
		return err
	}
	r.APIServerRSSBeforeMB = mb(before.RSS)
	if r.APIServerIdleCPUBefore, err = b.apiserverCPU(ctx, idleWindow); err != nil {
		return err
	}
	say("API server without sidecars: RSS %.0f MB, %.1f%% of a core", r.APIServerRSSBeforeMB, 100*r.APIServerIdleCPUBefore)

	spec := filepath.Join(b.dir, "sidecars.json")
	raw, _ := json.Marshal(targets)
	if err := os.WriteFile(spec, raw, 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, sidecarsCommand, "-kubeconfig="+b.env.KubeconfigPath, "-targets="+spec,
		"-dir="+filepath.Join(b.dir, "sidecars"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	sc := bufio.NewScanner(stdout)
	ready := false
	for sc.Scan() {
		line := sc.Text()
		say("  sidecars: %s", line)
		if strings.HasPrefix(line, "ready ") {
			ready = true
			break
		}
	}
	if !ready {
		return errors.New("the sidecars process ended before every sidecar was ready")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	r.StartSeconds = time.Since(start).Seconds()
	time.Sleep(5 * time.Second) // let the API server settle after the initial lists
	if r.Watches, err = b.apiserverWatches(ctx); err != nil {
		return err
	}
	if r.APIServerIdleCPUAfter, err = b.apiserverCPU(ctx, idleWindow); err != nil {
		return err
	}
	after, err := managerproc.ReadUsage(b.apiPID)
	if err != nil {
		return err
	}
	r.APIServerRSSAfterMB = mb(after.RSS)
	if u, err := managerproc.ReadUsage(cmd.Process.Pid); err == nil {
		r.SidecarProcessRSSMB = mb(u.RSS)
	}
	say("API server with %d sidecars (%.0f configmap watches): RSS %.0f MB, %.1f%% of a core; sidecars' process RSS %.0f MB",
		r.Sidecars, r.Watches, r.APIServerRSSAfterMB, 100*r.APIServerIdleCPUAfter, r.SidecarProcessRSSMB)
	return nil
}

// sidecarTargets spreads the sidecars over the servers: catalog ConfigMap and ServiceAccount
// as the controller made them (the Deployment's pod template names the ServiceAccount).
func (b *bench) sidecarTargets(ctx context.Context) ([]sidecarTarget, error) {
	var ds appsv1.DeploymentList
	if err := b.c.List(ctx, &ds, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var cms corev1.ConfigMapList
	if err := b.c.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{inject.LabelServer}); err != nil {
		return nil, err
	}
	catalogOf := map[string]string{}
	for _, cm := range cms.Items {
		if _, ok := cm.Data[catalog.Key]; ok {
			catalogOf[cm.Labels[inject.LabelServer]] = cm.Name
		}
	}
	var servers []sidecarTarget
	for _, d := range ds.Items {
		name := d.Labels[inject.LabelServer]
		if catalogOf[name] == "" || d.Spec.Template.Spec.ServiceAccountName == "" {
			continue
		}
		servers = append(servers, sidecarTarget{Namespace: namespace, CatalogMap: catalogOf[name], ServiceAccount: d.Spec.Template.Spec.ServiceAccountName})
	}
	if len(servers) == 0 {
		return nil, errors.New("no server has a catalog ConfigMap and a Deployment")
	}
	out := make([]sidecarTarget, b.o.sidecars)
	for i := range out {
		out[i] = servers[i%len(servers)]
	}
	return out, nil
}

// apiserverCPU is the API server's CPU use over window, in cores.
func (b *bench) apiserverCPU(ctx context.Context, window time.Duration) (float64, error) {
	u0, err := managerproc.ReadUsage(b.apiPID)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	u1, err := managerproc.ReadUsage(b.apiPID)
	if err != nil {
		return 0, err
	}
	return (u1.CPU - u0.CPU).Seconds() / time.Since(t0).Seconds(), nil
}

// apiserverWatches reads apiserver_longrunning_requests for WATCHes of configmaps.
func (b *bench) apiserverWatches(ctx context.Context) (float64, error) {
	body, err := b.env.Kubectl(ctx, "get", "--raw", "/metrics").Output()
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	var total float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `resource="configmaps"`) &&
			strings.Contains(line, `verb="WATCH"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total, nil
}

// runSidecars is the child process: it starts one sample MCP server and the sidecars in front
// of it, prints "ready N" once every sidecar is ready (catalog applied, upstream listen
// established), and runs until SIGTERM.
func runSidecars(args []string) error {
	fs := flag.NewFlagSet(sidecarsCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig")
	targetsFile := fs.String("targets", "", "JSON list of sidecar targets")
	dir := fs.String("dir", "", "folder for the impersonating kubeconfigs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	raw, err := os.ReadFile(*targetsFile)
	if err != nil {
		return err
	}
	var targets []sidecarTarget
	if err := json.Unmarshal(raw, &targets); err != nil {
		return err
	}
	admin, err := os.ReadFile(*kubeconfig)
	if err != nil {
		return err
	}
	upstream := httptest.NewServer(sampleserver.Handler())
	defer upstream.Close()
	kubeconfigs := map[string]string{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var apps []*app.App
	var wg sync.WaitGroup
	for _, t := range targets {
		sa := t.Namespace + "/" + t.ServiceAccount
		if kubeconfigs[sa] == "" {
			d := filepath.Join(*dir, t.Namespace, t.ServiceAccount)
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
			if kubeconfigs[sa], err = framework.ImpersonatingKubeconfig(admin, d, t.Namespace, t.ServiceAccount); err != nil {
				return err
			}
		}
		app, err := app.New(app.Config{
			Upstream: upstream.URL + "/mcp", Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
			Path: app.DefaultPath, Logger: log, DrainBudget: time.Second,
			CatalogConfigMap: t.Namespace + "/" + t.CatalogMap, Kubeconfig: kubeconfigs[sa],
		})
		if err != nil {
			return err
		}
		apps = append(apps, app)
		wg.Go(func() { _ = app.Run(ctx) })
	}
	start := time.Now()
	var ready atomic.Int64
	pending := apps
	hc := &http.Client{Timeout: 5 * time.Second}
	for len(pending) > 0 {
		var still []*app.App
		for _, a := range pending {
			_, admin := a.Addrs()
			resp, err := hc.Get("http://" + admin.String() + inject.ReadyzPath)
			if err == nil {
				_ = resp.Body.Close()
			}
			if err == nil && resp.StatusCode == http.StatusOK {
				ready.Add(1)
				continue
			}
			still = append(still, a)
		}
		pending = still
		if len(pending) > 0 {
			fmt.Printf("%d of %d ready after %.1f s\n", ready.Load(), len(apps), time.Since(start).Seconds())
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	fmt.Printf("ready %d %.1f\n", len(apps), time.Since(start).Seconds())
	<-ctx.Done()
	wg.Wait()
	return nil
}
