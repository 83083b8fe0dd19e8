package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/freeport"
)

// profiler takes the manager's CPU and heap profiles through its /debug/pprof endpoints
// (--pprof-bind-address on 127.0.0.1) into -profile DIR: during each phase, CPU profiles of
// cpuSlice each (cpu-<phase>-<n>.pb.gz; `go tool pprof -proto` merges them), and at its end
// the heap (heap-<phase>.pb.gz: in-use and allocated). It takes the API server's CPU profiles
// of the same slices too (apiserver-cpu-<phase>-<n>.pb.gz, read with the kube-apiserver binary
// of KUBEBUILDER_ASSETS), through the API server's own /debug/pprof as the admin, and the
// benchmark's own CPU profile of the whole phase (scalebench-cpu-<phase>.pb.gz): its watches,
// simulated sidecars and audit-log reading run on the same machine as what it measures.
type profiler struct {
	dir   string
	addrs map[string]string // manager name -> pprof address
	// api and apiHost reach the API server as the admin (set once it runs).
	api     *http.Client
	apiHost string

	stop atomic.Bool
	wg   sync.WaitGroup
	self *os.File // the benchmark's own CPU profile of the phase, while it runs
}

const cpuSlice = 20 * time.Second

// managerArgs returns the flags that open a manager's pprof endpoint, and remembers where.
func (p *profiler) managerArgs(name string) ([]string, error) {
	if p == nil {
		return nil, nil
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	p.addrs[name] = addr
	return []string{"--pprof-bind-address=" + addr}, nil
}

// begin starts CPU profiling of manager name (none: "", the floor) and of the API server for
// the phase.
func (p *profiler) begin(phase, name string) {
	if p == nil {
		return
	}
	p.stop.Store(false)
	collect := func(c *http.Client, base, prefix, what string) {
		for n := 0; !p.stop.Load(); n++ {
			file := filepath.Join(p.dir, fmt.Sprintf("%s-%s-%02d.pb.gz", prefix, phase, n))
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, int(cpuSlice.Seconds()))
			ctx, cancel := context.WithTimeout(context.Background(), 2*cpuSlice)
			err := fetchTo(ctx, c, url, file)
			cancel()
			if err != nil {
				say("%s CPU profile: %v", what, err)
				return
			}
		}
	}
	if p.addrs[name] != "" {
		p.wg.Go(func() { collect(http.DefaultClient, "http://"+p.addrs[name], "cpu", "Manager") })
	}
	if p.api != nil {
		p.wg.Go(func() { collect(p.api, p.apiHost, "apiserver-cpu", "API server") })
	}
	f, err := os.Create(filepath.Join(p.dir, "scalebench-cpu-"+phase+".pb.gz"))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		say("The benchmark's CPU profile: %v", err)
		if f != nil {
			_ = f.Close()
		}
		return
	}
	p.self = f
}

// end waits for the phase's last CPU profile slice (at most cpuSlice) and saves the manager's
// heap.
func (p *profiler) end(phase, name string) {
	if p == nil {
		return
	}
	p.stop.Store(true)
	p.wg.Wait()
	if p.self != nil {
		pprof.StopCPUProfile()
		if err := p.self.Close(); err != nil {
			say("The benchmark's CPU profile: %v", err)
		}
		p.self = nil
	}
	if p.addrs[name] == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// gc=1: the in-use figures are of live objects, right after a collection.
	if err := fetchTo(ctx, http.DefaultClient, "http://"+p.addrs[name]+"/debug/pprof/heap?gc=1", filepath.Join(p.dir, "heap-"+phase+".pb.gz")); err != nil {
		say("Heap profile: %v", err)
	}
}

func fetchTo(ctx context.Context, c *http.Client, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}
