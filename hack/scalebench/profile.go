package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/freeport"
)

// profiler takes the manager's CPU and heap profiles through its /debug/pprof endpoints
// (--pprof-bind-address on 127.0.0.1) into -profile DIR: during each phase, CPU profiles of
// cpuSlice each (cpu-<phase>-<n>.pb.gz; `go tool pprof -proto` merges them), and at its end
// the heap (heap-<phase>.pb.gz: in-use and allocated).
type profiler struct {
	dir   string
	addrs map[string]string // manager name -> pprof address

	stop atomic.Bool
	wg   sync.WaitGroup
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

// begin starts CPU profiling of manager name for the phase.
func (p *profiler) begin(phase, name string) {
	if p == nil || p.addrs[name] == "" {
		return
	}
	p.stop.Store(false)
	p.wg.Go(func() {
		for n := 0; !p.stop.Load(); n++ {
			file := filepath.Join(p.dir, fmt.Sprintf("cpu-%s-%02d.pb.gz", phase, n))
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addrs[name], int(cpuSlice.Seconds()))
			ctx, cancel := context.WithTimeout(context.Background(), 2*cpuSlice)
			err := fetchTo(ctx, url, file)
			cancel()
			if err != nil {
				say("CPU profile: %v", err)
				return
			}
		}
	})
}

// end waits for the phase's last CPU profile slice (at most cpuSlice) and saves the heap.
func (p *profiler) end(phase, name string) {
	if p == nil || p.addrs[name] == "" {
		return
	}
	p.stop.Store(true)
	p.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// gc=1: the in-use figures are of live objects, right after a collection.
	if err := fetchTo(ctx, "http://"+p.addrs[name]+"/debug/pprof/heap?gc=1", filepath.Join(p.dir, "heap-"+phase+".pb.gz")); err != nil {
		say("Heap profile: %v", err)
	}
}

func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
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
