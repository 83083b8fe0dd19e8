//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/managerproc"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestLeaderFailover runs two real manager processes (bin/manager, built here) with leader
// election and the injection webhook against a real API server. Exactly one leads; it is
// killed with SIGKILL (a crash: its Lease is not released); the other takes the Lease over and
// publishes an MCPTool edit made right after the kill, and its webhook answers every
// AdmissionReview sent to it throughout.
func TestLeaderFailover(t *testing.T) {
	bin := managerBin(t)
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := env.Client
	for _, ns := range []string{managerproc.Namespace, "ha"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	var managers []*managerproc.Manager
	for i := range 2 {
		m, err := managerproc.Start(ctx, managerproc.Options{Bin: bin, Kubeconfig: env.KubeconfigPath, Dir: dir,
			Name: fmt.Sprintf("manager-%d", i), LeaderElect: true, Webhook: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			select {
			case <-m.Done():
			default:
				m.Stop()
			}
		})
		managers = append(managers, m)
	}

	server := &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: "weather", Namespace: "ha"},
		Spec:       mcpv1alpha1.MCPServerSpec{Container: &mcpv1alpha1.ServerContainer{Image: "example/weather:1", Port: 8080, Path: "/mcp"}},
	}
	tool := &mcpv1alpha1.MCPTool{
		ObjectMeta: metav1.ObjectMeta{Name: "weather-forecast", Namespace: "ha"},
		Spec:       mcpv1alpha1.MCPToolSpec{ServerRef: mcpv1alpha1.ServerReference{Name: "weather"}, Name: "get_forecast", Description: "before"},
	}
	for _, obj := range []client.Object{server, tool} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	waitDescription := func(want string, limit time.Duration) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for {
			var cm corev1.ConfigMap
			err := c.Get(ctx, client.ObjectKey{Namespace: "ha", Name: "weather-catalog"}, &cm)
			if err == nil {
				if cat, err := catalog.Decode([]byte(cm.Data[catalog.Key])); err == nil &&
					len(cat.Tools) == 1 && cat.Tools[0].Description == want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the catalog never had description %q: %v\n%s\n%s", want, err, managers[0].Tail(10), managers[1].Tail(10))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitDescription("before", time.Minute)

	var leader, standby *managerproc.Manager
	switch {
	case managers[0].IsLeader() && !managers[1].IsLeader():
		leader, standby = managers[0], managers[1]
	case managers[1].IsLeader() && !managers[0].IsLeader():
		leader, standby = managers[1], managers[0]
	default:
		t.Fatalf("want exactly one leader, leadership is %t and %t", managers[0].IsLeader(), managers[1].IsLeader())
	}

	// Probe both webhooks every 50 ms until the end of the failover.
	var mu sync.Mutex
	ok, failed := map[*managerproc.Manager]int{}, map[*managerproc.Manager]int{}
	var lastErr error
	probeCtx, stopProbes := context.WithCancel(ctx)
	probesDone := make(chan struct{})
	go func() {
		defer close(probesDone)
		for seq := 0; probeCtx.Err() == nil; seq++ {
			for _, m := range []*managerproc.Manager{leader, standby} {
				err := managerproc.ProbeWebhook(probeCtx, m.WebhookAddr, fmt.Sprintf("probe-%d-%s", seq, m.Name))
				mu.Lock()
				if err == nil {
					ok[m]++
				} else if probeCtx.Err() == nil {
					failed[m]++
					if m == standby {
						lastErr = err
					}
				}
				mu.Unlock()
			}
			select {
			case <-probeCtx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)

	killed := time.Now()
	leader.Kill()
	before := tool.DeepCopy()
	tool.Spec.Description = "after the failover"
	if err := c.Patch(ctx, tool, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// The Lease is not released by a killed process: it expires (15 s) before the standby takes
	// over; a minute is a generous bound.
	waitDescription("after the failover", 90*time.Second)
	failover := time.Since(killed)
	if !standby.IsLeader() {
		t.Fatalf("the standby published the edit but does not report leadership")
	}
	stopProbes()
	<-probesDone
	mu.Lock()
	defer mu.Unlock()
	if ok[leader] == 0 {
		t.Errorf("the leader's webhook never answered before it was killed (%d failures)", failed[leader])
	}
	if failed[standby] > 0 || ok[standby] == 0 {
		t.Errorf("the standby's webhook must answer throughout: %d answered, %d failed (last: %v)", ok[standby], failed[standby], lastErr)
	}
	t.Logf("failover after SIGKILL: the edit was published %v after the kill; standby webhook answered %d probes, failed none",
		failover.Round(10*time.Millisecond), ok[standby])
}

// binDir holds the binaries TestMain and managerBin build, for the package's whole run.
var binDir string

var buildManager = sync.OnceValues(func() (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(binDir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, out)
	}
	return bin, nil
})

// managerBin is bin/manager built from this checkout, once per package run, for the tests that
// run real manager processes.
func managerBin(t *testing.T) string {
	t.Helper()
	bin, err := buildManager()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
