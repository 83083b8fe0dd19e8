//go:build node

package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDrainHonoursPDB: `kubectl drain` of the node (cordon, then an eviction per pod through
// the API, which honours the PodDisruptionBudget the controller writes: maxUnavailable 1) under
// steady calls and listen streams through the Service. The node is the only one, so it is
// drained of the sample server's pods only (--pod-selector): evicting the manager too would
// leave nothing to reconcile, as no other node can take it.
//
// The budget lets one pod go; its replacement cannot be scheduled on the cordoned node and
// stays Pending, so the budget then refuses the second eviction and the other pod keeps
// serving. Uncordoning lets the replacement run; once it is Ready the still-running drain
// evicts the second pod. Throughout: no call fails, every stream connection ends with exactly
// one `complete` and its client re-listens, at least one replica is available, and every
// container of the evicted pods exits 0.
func TestDrainHonoursPDB(t *testing.T) {
	const (
		listeners = 50
		callers   = 4
	)
	installed(t)
	ctx := context.Background()
	serverReady(t, sampleNamespace, sampleServer)
	pdb, err := cs.PolicyV1().PodDisruptionBudgets(sampleNamespace).Get(ctx, sampleServer, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the controller's PodDisruptionBudget: %v", err)
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
		t.Fatalf("PodDisruptionBudget maxUnavailable %v, want 1", mu)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v (%d), want the one test node", err, len(nodes.Items))
	}
	node := nodes.Items[0].Name
	t.Cleanup(func() { _, _ = runErr("", kubectlBin, "uncordon", node) })
	old := runningPods(t, sampleNamespace, sampleSelector)
	if len(old) != 2 {
		t.Fatalf("%d running pods, want 2", len(old))
	}
	isOld := map[string]bool{}
	direct := map[string]*stream{}
	for _, p := range old {
		isOld[p.Name] = true
		s, err := listen(podClient(p, sampleServerHost))
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		direct[p.Name] = s
	}
	ex, stopWatch := watchExits(t, sampleNamespace, sampleSelector)
	defer stopWatch()
	ld := startLoad(t, serviceClient(t), listeners, callers)
	time.Sleep(2 * time.Second) // steady state before the drain

	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 2*hang)
	defer cancel()
	drain := exec.CommandContext(dctx, kubectlBin, "drain", node, "--pod-selector="+sampleSelector,
		"--ignore-daemonsets", "--delete-emptydir-data", "--timeout="+(2*hang).String())
	drain.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var out syncBuffer
	drain.Stdout, drain.Stderr = &out, &out
	if err := drain.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- drain.Wait() }()

	// One pod evicted, its replacement Pending on the cordoned node, the other pod kept.
	var evicted, kept string
	waitFor(t, hang, "one pod evicted and its replacement Pending", func() error {
		l, err := cs.CoreV1().Pods(sampleNamespace).List(ctx, metav1.ListOptions{LabelSelector: sampleSelector})
		if err != nil {
			return err
		}
		var gone, pending []string
		left := map[string]bool{}
		for _, p := range l.Items {
			switch {
			case isOld[p.Name] && p.DeletionTimestamp == nil:
				left[p.Name] = true
			case !isOld[p.Name] && p.Status.Phase == corev1.PodPending && unschedulable(p):
				pending = append(pending, p.Name)
			}
		}
		for name := range isOld {
			if !left[name] {
				gone = append(gone, name)
			}
		}
		if len(gone) != 1 || len(pending) != 1 {
			return fmt.Errorf("old pods evicted %v, replacements Pending and unschedulable %v", gone, pending)
		}
		evicted = gone[0]
		for name := range left {
			kept = name
		}
		return nil
	})
	fig("drain -> first pod evicted, replacement Pending", time.Since(start))
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable {
		t.Fatalf("node %s not cordoned during the drain: %v", node, err)
	}
	// The budget holds the second pod: watch it for a while (the drain retries every 5 s).
	waitFor(t, hang, "the drain refused by the disruption budget", func() error {
		if !strings.Contains(out.String(), "disruption budget") {
			return fmt.Errorf("drain output so far: %q", out.String())
		}
		return nil
	})
	hold := time.Now()
	for time.Since(hold) < 10*time.Second {
		p, err := cs.CoreV1().Pods(sampleNamespace).Get(ctx, kept, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("pod %s evicted while its replacement cannot run: the disruption budget was not honoured (%v)", kept, err)
		}
		select {
		case err := <-drained:
			t.Fatalf("the drain ended (%v) while the budget must hold it:\n%s", err, out.String())
		case <-time.After(time.Second):
		}
	}
	if c := completeAt(direct[evicted]); c.IsZero() {
		t.Errorf("the stream on evicted pod %s ended without its complete result", evicted)
	} else {
		fig("drain -> complete on the first evicted pod", c.Sub(start))
	}

	// Uncordon: the replacement runs, and the still-running drain evicts the second pod.
	uncordon := time.Now()
	kubectl(t, "uncordon", node)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("kubectl drain: %v\n%s", err, out.String())
		}
	case <-time.After(2 * hang):
		t.Fatalf("kubectl drain did not finish after the uncordon:\n%s", out.String())
	}
	fig("uncordon -> drain finished (second pod evicted)", time.Since(uncordon))
	if c := completeAt(direct[kept]); c.IsZero() {
		t.Errorf("the stream on pod %s ended without its complete result", kept)
	} else {
		fig("uncordon -> complete on the second evicted pod", c.Sub(uncordon))
	}
	waitFor(t, hang, "2 new pods Ready, the old ones gone", func() error {
		s, err := mcpServer(t, sampleNamespace, sampleServer)
		if err != nil {
			return err
		}
		if s.Status.ReadyReplicas != 2 {
			return fmt.Errorf("%d ready replicas", s.Status.ReadyReplicas)
		}
		l, err := cs.CoreV1().Pods(sampleNamespace).List(ctx, metav1.ListOptions{LabelSelector: sampleSelector})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if isOld[p.Name] {
				return fmt.Errorf("old pod %s still exists", p.Name)
			}
		}
		return nil
	})
	fig("drain start -> 2 new pods Ready, old ones gone", time.Since(start))
	ld.finish(t, "drain under load")
	// maxUnavailable 1 in the budget: one replica at least was available all along.
	ld.requireNoLoss(t, 1)
	stopWatch()
	ex.requireZero(t, []string{evicted, kept})
	for _, p := range []string{evicted, kept} {
		if d, ok := ex.deletedToExit(p); ok {
			fig("drain: pod "+p+" evicted -> sidecar exit seen", d)
		}
	}
	serverReady(t, sampleNamespace, sampleServer)
	fmt.Printf("kubectl drain output:\n%s", out.String())
}

// unschedulable: the scheduler tried pod p and found no node for it.
func unschedulable(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
