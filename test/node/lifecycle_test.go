//go:build node

package node

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

const sampleSelector = inject.LabelServer + "=" + sampleServer

// TestLiveToolEditNoRestart: an MCPTool edit reaches an open listen stream on each of the two
// pods as tools/list_changed and then tools/list, with no pod restarted or replaced.
func TestLiveToolEditNoRestart(t *testing.T) {
	installed(t)
	serverReady(t, sampleNamespace, sampleServer)
	before := runningPods(t, sampleNamespace, sampleSelector)
	if len(before) != 2 {
		t.Fatalf("%d running pods, want 2", len(before))
	}
	var streams []*stream
	for _, p := range before {
		s, err := listen(podClient(p, sampleServerHost))
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		defer s.cancel()
		streams = append(streams, s)
	}
	desc := fmt.Sprintf("Daily forecast for a city (edited live at %s).", time.Now().UTC().Format(time.RFC3339Nano))
	edit := time.Now()
	kubectl(t, "-n", sampleNamespace, "patch", "mcptool", sampleForecastTool, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"description":%q}}`, desc))
	for i, s := range streams {
		select {
		case f, ok := <-s.frames:
			if !ok || f.Method != "notifications/tools/list_changed" {
				t.Fatalf("pod %s: stream frame %+v (open %v), want tools/list_changed", before[i].Name, f, ok)
			}
			fig("MCPTool patch -> tools/list_changed on pod "+before[i].Name, f.At.Sub(edit))
		case <-time.After(hang):
			t.Fatalf("pod %s: no tools/list_changed", before[i].Name)
		}
		var got string
		for _, x := range tools(t, podClient(before[i], sampleServerHost)) {
			if x.Name == "get_forecast" {
				got = x.Description
			}
		}
		if got != desc {
			t.Errorf("pod %s: get_forecast description %q, want %q", before[i].Name, got, desc)
		}
	}
	after := runningPods(t, sampleNamespace, sampleSelector)
	if len(after) != 2 {
		t.Fatalf("%d running pods after the edit, want the same 2", len(after))
	}
	for _, a := range after {
		i := slices.IndexFunc(before, func(b corev1.Pod) bool { return b.UID == a.UID })
		if i < 0 {
			t.Errorf("pod %s is new: the edit replaced a pod", a.Name)
			continue
		}
		if restarts(a) != restarts(before[i]) {
			t.Errorf("pod %s: restarts %d -> %d", a.Name, restarts(before[i]), restarts(a))
		}
	}
}

func restarts(p corev1.Pod) int32 {
	var n int32
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		n += c.RestartCount
	}
	return n
}

// exits records how every container of the watched pods ended, from a pod watch.
type exits struct {
	mu      sync.Mutex           // guards the maps
	code    map[string]int32     // pod/container -> exit code
	at      map[string]time.Time // pod/container -> when the watch saw it end
	deleted map[string]time.Time // pod -> when the watch first saw it being deleted
}

func watchExits(t *testing.T, ns, selector string) (*exits, func()) {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	e := &exits{code: map[string]int32{}, at: map[string]time.Time{}, deleted: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Modified && ev.Type != watch.Deleted) {
				continue
			}
			e.mu.Lock()
			if _, seen := e.deleted[p.Name]; !seen && p.DeletionTimestamp != nil {
				e.deleted[p.Name] = time.Now()
			}
			for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				k := p.Name + "/" + c.Name
				if term := c.State.Terminated; term != nil {
					if _, seen := e.code[k]; !seen {
						e.at[k] = time.Now()
					}
					e.code[k] = term.ExitCode
				}
				if term := c.LastTerminationState.Terminated; term != nil {
					// A container that ended and was restarted (a crash) counts too.
					if _, seen := e.code[k+"#previous"]; !seen {
						e.code[k+"#previous"] = term.ExitCode
					}
				}
			}
			e.mu.Unlock()
		}
	}()
	return e, func() { w.Stop(); <-done }
}

// deletedToExit is how long after the watch saw pod being deleted it saw its sidecar end.
func (e *exits) deletedToExit(pod string) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	del, ok1 := e.deleted[pod]
	exit, ok2 := e.at[pod+"/"+inject.ContainerName]
	return exit.Sub(del), ok1 && ok2
}

// requireZero fails unless both containers of every pod in pods were seen ending, with 0.
func (e *exits) requireZero(t *testing.T, pods []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, code := range e.code {
		if code != 0 {
			t.Errorf("container %s ended with exit code %d, want 0", k, code)
		}
	}
	for _, p := range pods {
		for _, c := range []string{inject.ContainerName, inject.ServerContainerName} {
			if _, ok := e.code[p+"/"+c]; !ok {
				t.Errorf("container %s/%s: never seen terminated", p, c)
			}
		}
	}
}

// followLogs collects a container's log lines (with the kubelet's timestamps) until it ends.
func followLogs(ns, pod, container string) func() []string {
	var (
		mu    sync.Mutex
		lines []string
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rc, err := cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true, Timestamps: true}).
			Stream(context.Background())
		if err != nil {
			return
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	return func() []string {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}

// logTime is the timestamp of the first line containing what.
func logTime(lines []string, what string) (time.Time, bool) {
	for _, l := range lines {
		ts, msg, _ := strings.Cut(l, " ")
		if strings.Contains(msg, what) {
			at, err := time.Parse(time.RFC3339Nano, ts)
			return at, err == nil
		}
	}
	return time.Time{}, false
}

// TestRollingUpdateUnderLoad: a rollout of the 2-replica MCPServer under steady calls and 100
// listen streams through the Service: no call fails, every stream connection ends with exactly
// one `complete` and its client re-listens (on a pod still serving, finally a new one), the
// Deployment never has fewer than 2 available replicas (maxUnavailable 0), each old pod runs
// preStop drain -> complete -> SIGTERM to the server -> SIGTERM to the sidecar in that order
// (timestamps from the container logs and the clients), and every container of the old pods
// exits 0.
func TestRollingUpdateUnderLoad(t *testing.T) {
	const (
		listeners = 100
		callers   = 4
	)
	installed(t)
	serverReady(t, sampleNamespace, sampleServer)
	old := runningPods(t, sampleNamespace, sampleSelector)
	if len(old) != 2 {
		t.Fatalf("%d running pods, want 2", len(old))
	}
	ex, stopWatch := watchExits(t, sampleNamespace, sampleSelector)
	defer stopWatch()
	type podLogs struct{ sidecar, server func() []string }
	logs := map[string]podLogs{}
	direct := map[string]*stream{} // one stream straight to each old pod, to time its complete
	for _, p := range old {
		logs[p.Name] = podLogs{
			sidecar: followLogs(sampleNamespace, p.Name, inject.ContainerName),
			server:  followLogs(sampleNamespace, p.Name, inject.ServerContainerName),
		}
		s, err := listen(podClient(p, sampleServerHost))
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		direct[p.Name] = s
	}

	ld := startLoad(t, serviceClient(t), listeners, callers)
	ctx := context.Background()
	time.Sleep(2 * time.Second) // steady state before the rollout
	rollout := time.Now()
	kubectl(t, "-n", sampleNamespace, "patch", "mcpserver", sampleServer, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"container":{"env":[{"name":"ROLLOUT","value":%q}]}}}`, rollout.Format(time.RFC3339Nano)))
	waitFor(t, hang, "rollout to 2 new pods", func() error {
		s, err := mcpServer(t, sampleNamespace, sampleServer)
		if err != nil {
			return err
		}
		if st, r := condition(s.Status.Conditions, "Ready"); st != metav1.ConditionTrue || s.Status.ObservedGeneration != s.Generation ||
			s.Status.UpdatedReplicas != 2 || s.Status.ReadyReplicas != 2 {
			return fmt.Errorf("Ready=%s (%s) updated=%d ready=%d", st, r, s.Status.UpdatedReplicas, s.Status.ReadyReplicas)
		}
		l, err := cs.CoreV1().Pods(sampleNamespace).List(ctx, metav1.ListOptions{LabelSelector: sampleSelector})
		if err != nil {
			return err
		}
		for _, p := range l.Items {
			if _, isOld := logs[p.Name]; isOld {
				return fmt.Errorf("old pod %s still exists", p.Name)
			}
		}
		return nil
	})
	fig("rollout of 2 replicas (patch -> old pods gone, new Ready)", time.Since(rollout))
	ld.finish(t, "rollout under load")
	// maxUnavailable 0: never fewer than the 2 replicas available.
	ld.requireNoLoss(t, 2)

	// Order of events in each old pod.
	var oldNames []string
	for _, p := range old {
		oldNames = append(oldNames, p.Name)
		sidecar, server := logs[p.Name].sidecar(), logs[p.Name].server()
		drain, ok1 := logTime(sidecar, "Draining")
		serverTerm, ok2 := logTime(server, "Shutting down")
		sidecarTerm, ok3 := logTime(sidecar, "Shutting down: draining first")
		complete := completeAt(direct[p.Name])
		if !ok1 || !ok2 || !ok3 || complete.IsZero() {
			t.Errorf("pod %s: drain %v, server SIGTERM %v, sidecar SIGTERM %v, complete %v: an event is missing\nsidecar:\n%s\nserver:\n%s",
				p.Name, ok1, ok2, ok3, !complete.IsZero(), strings.Join(sidecar, "\n"), strings.Join(server, "\n"))
			continue
		}
		if !drain.Before(complete) || !complete.Before(serverTerm) || !serverTerm.Before(sidecarTerm) {
			t.Errorf("pod %s: order drain %s, complete %s, server SIGTERM %s, sidecar SIGTERM %s; want that order",
				p.Name, drain.Format(time.StampMicro), complete.Format(time.StampMicro), serverTerm.Format(time.StampMicro), sidecarTerm.Format(time.StampMicro))
		}
		ex.mu.Lock()
		exited := ex.at[p.Name+"/"+inject.ContainerName]
		ex.mu.Unlock()
		fmt.Printf("FIGURE pod %s: preStop drain -> complete %.2f s, -> server SIGTERM %.2f s, -> sidecar SIGTERM %.2f s, -> sidecar exit seen %.2f s\n",
			p.Name, complete.Sub(drain).Seconds(), serverTerm.Sub(drain).Seconds(), sidecarTerm.Sub(drain).Seconds(), exited.Sub(drain).Seconds())
	}
	stopWatch()
	ex.requireZero(t, oldNames)
}

// completeAt waits for s to end and returns when its complete result arrived (zero if none).
func completeAt(s *stream) time.Time {
	defer s.cancel()
	limit := time.After(hang)
	for {
		select {
		case f, ok := <-s.frames:
			if !ok {
				return time.Time{}
			}
			if f.Complete {
				return f.At
			}
		case <-limit:
			return time.Time{}
		}
	}
}

// TestPodDeletionDrainsAndExitsZero: `kubectl delete pod` on a sample pod: its open listen stream
// gets its `complete`, and both of its containers (the server and the native sidecar) exit 0,
// so the stopped pod does not end in Error.
func TestPodDeletionDrainsAndExitsZero(t *testing.T) {
	installed(t)
	serverReady(t, sampleNamespace, sampleServer)
	pods := runningPods(t, sampleNamespace, sampleSelector)
	if len(pods) == 0 {
		t.Fatal("no running pod")
	}
	p := pods[0]
	ex, stopWatch := watchExits(t, sampleNamespace, sampleSelector)
	defer stopWatch()
	s, err := listen(podClient(p, sampleServerHost))
	if err != nil {
		t.Fatal(err)
	}
	del := time.Now()
	kubectl(t, "-n", sampleNamespace, "delete", "pod", p.Name, "--wait=false")
	complete := completeAt(s)
	if complete.IsZero() {
		t.Errorf("the stream on pod %s ended without its complete result", p.Name)
	}
	waitFor(t, hang, "pod "+p.Name+" gone", func() error {
		l, err := cs.CoreV1().Pods(sampleNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: sampleSelector})
		if err != nil {
			return err
		}
		for _, q := range l.Items {
			if q.UID == p.UID {
				return fmt.Errorf("still there (%s)", q.Status.Phase)
			}
		}
		return nil
	})
	stopWatch()
	ex.requireZero(t, []string{p.Name})
	ex.mu.Lock()
	exited := ex.at[p.Name+"/"+inject.ContainerName]
	ex.mu.Unlock()
	if !complete.IsZero() && !exited.IsZero() {
		fmt.Printf("FIGURE pod deletion %s: delete -> complete %.2f s, -> sidecar exit seen %.2f s\n",
			p.Name, complete.Sub(del).Seconds(), exited.Sub(del).Seconds())
	}
	serverReady(t, sampleNamespace, sampleServer)
}
