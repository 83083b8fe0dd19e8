package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/managerproc"
)

type haResult struct {
	Signal string `json:"signal"`
	// LeaderSeconds: from the signal to the survivor reporting leadership.
	LeaderSeconds float64 `json:"leaderSeconds"`
	// EditSeconds: from the signal (the edit is made right after it) to the edit in the catalog.
	EditSeconds float64 `json:"editSeconds"`
	// Webhook probes of the surviving replica during the failover, and failures of the stopped
	// replica's webhook while it was down (expected: a killed process serves nothing).
	SurvivorOK, SurvivorFailed, StoppedFailed int
	// SurvivorErrors are the survivor's failed probes' errors (at most 5).
	SurvivorErrors []string `json:"survivorErrors,omitempty"`
}

// prober sends an AdmissionReview to every replica's webhook every 100 ms and counts answers.
type prober struct {
	mu     sync.Mutex
	ok     map[*managerproc.Manager]int
	failed map[*managerproc.Manager]int
	errs   map[*managerproc.Manager][]string
	seq    int
}

func (p *prober) probe(ctx context.Context, ms []*managerproc.Manager) {
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			p.mu.Lock()
			p.seq++
			uid := fmt.Sprintf("probe-%d", p.seq)
			p.mu.Unlock()
			err := managerproc.ProbeWebhook(ctx, m.WebhookAddr, uid)
			p.mu.Lock()
			switch {
			case err != nil && ctx.Err() != nil:
				// The prober stopped mid-request: no answer was due.
			case err != nil:
				p.failed[m]++
				if len(p.errs[m]) < 5 {
					p.errs[m] = append(p.errs[m], err.Error())
				}
			default:
				p.ok[m]++
			}
			p.mu.Unlock()
		})
	}
	wg.Wait()
}

// highAvailability starts a second replica, then stops the leader twice (SIGTERM, which
// releases the Lease, then SIGKILL, which does not) and restarts it as a kubelet would.
func (b *bench) highAvailability(ctx context.Context) error {
	if _, err := b.startManager(ctx, "manager-1"); err != nil {
		return err
	}
	for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		leader := b.leader()
		if leader == nil {
			return fmt.Errorf("no replica leads")
		}
		var survivor *managerproc.Manager
		for _, m := range b.managers {
			select {
			case <-m.Done():
				continue
			default:
			}
			if m != leader {
				survivor = m
			}
		}
		p := &prober{ok: map[*managerproc.Manager]int{}, failed: map[*managerproc.Manager]int{}, errs: map[*managerproc.Manager][]string{}}
		pctx, stopProbes := context.WithCancel(ctx)
		probesDone := make(chan struct{})
		go func() {
			defer close(probesDone)
			for pctx.Err() == nil {
				p.probe(pctx, []*managerproc.Manager{survivor, leader})
				select {
				case <-pctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		time.Sleep(time.Second) // both serve before the failover
		want := fmt.Sprintf("Edited during failover %d at %s", i, time.Now().UTC().Format(time.RFC3339Nano))
		t0 := time.Now()
		if err := leader.Cmd().Process.Signal(sig); err != nil {
			stopProbes()
			return err
		}
		server := serverName(0)
		if err := b.editTool(ctx, server, want); err != nil {
			stopProbes()
			return err
		}
		r := haResult{Signal: sig.String()}
		err := waitFor(ctx, 3*time.Minute, "the survivor to lead and publish the edit", func() (bool, error) {
			if r.LeaderSeconds == 0 && survivor.IsLeader() {
				r.LeaderSeconds = time.Since(t0).Seconds()
			}
			has, err := b.watch.hasEdit(ctx, server, want)
			if has {
				r.EditSeconds = time.Since(t0).Seconds()
			}
			return has && r.LeaderSeconds > 0, err
		})
		<-leader.Done()
		stopProbes()
		<-probesDone
		if err != nil {
			return fmt.Errorf("%w\n%s", err, survivor.Tail(15))
		}
		r.SurvivorOK, r.SurvivorFailed, r.StoppedFailed = p.ok[survivor], p.failed[survivor], p.failed[leader]
		r.SurvivorErrors = p.errs[survivor]
		b.res.HA = append(b.res.HA, r)
		say("%s the leader: survivor led after %.1f s, published the edit after %.1f s; survivor's webhook %d ok / %d failed %v",
			r.Signal, r.LeaderSeconds, r.EditSeconds, r.SurvivorOK, r.SurvivorFailed, r.SurvivorErrors)
		// The kubelet restarts the stopped replica; it joins as a standby.
		if _, err := b.startManager(ctx, fmt.Sprintf("manager-%d", len(b.managers))); err != nil {
			return err
		}
	}
	return nil
}
