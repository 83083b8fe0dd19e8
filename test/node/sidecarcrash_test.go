//go:build node

package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestSidecarCrashRestartedByKubelet: the sidecar process of a sample pod is killed (SIGKILL
// through containerd, as the kernel's OOM killer would): every listen stream its clients held
// ends, with its complete result or with an error the client sees, none is left hanging; the
// kubelet restarts the native sidecar in the same pod without touching the server container;
// the restarted sidecar serves listen streams and tools again and the MCPServer is Ready.
func TestSidecarCrashRestartedByKubelet(t *testing.T) {
	const streams = 20
	installed(t)
	ctx := context.Background()
	serverReady(t, sampleNamespace, sampleServer)
	pods := runningPods(t, sampleNamespace, sampleSelector)
	if len(pods) == 0 {
		t.Fatal("no running pod")
	}
	p := pods[0]
	sidecarRestarts, serverRestarts := restartsOf(p, inject.ContainerName), restartsOf(p, inject.ServerContainerName)
	var open []*stream
	for range streams {
		s, err := listen(podClient(p, sampleServerHost))
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		defer s.cancel()
		open = append(open, s)
	}

	kill := time.Now()
	if out, err := ctrCmd("tasks", "kill", "--signal", "SIGKILL", containerID(p, inject.ContainerName)); err != nil {
		t.Fatalf("ctr tasks kill the sidecar of %s: %v: %s", p.Name, err, out)
	}
	// Every stream ends, each either with its complete result or with an error its client sees.
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		completed, errored int
		hanging            int
		lastEnd            time.Duration
		endings            = map[string]int{}
	)
	for _, s := range open {
		wg.Go(func() {
			complete, ended := false, false
			limit := time.After(time.Minute)
			for !ended {
				select {
				case f, ok := <-s.frames:
					ended = !ok
					complete = complete || f.Complete
				case <-limit:
					mu.Lock()
					hanging++
					mu.Unlock()
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lastEnd = max(lastEnd, time.Since(kill))
			if complete {
				completed++
			} else {
				errored++
				endings[fmt.Sprint(s.end)]++
			}
		})
	}
	wg.Wait()
	fmt.Printf("FIGURE sidecar SIGKILL: %d streams: %d complete, %d ended with an error (%v), %d still open after 1 min; last ended %.2f s after the kill\n",
		streams, completed, errored, endings, hanging, lastEnd.Seconds())
	if hanging != 0 || completed+errored != streams {
		t.Errorf("%d of %d streams still open a minute after their sidecar was killed: silently dropped", hanging, streams)
	}

	// The kubelet restarts the sidecar container in the same pod; the server keeps running.
	var now corev1.Pod
	waitFor(t, hang, "the sidecar of "+p.Name+" restarted and Ready", func() error {
		q, err := cs.CoreV1().Pods(sampleNamespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now = *q
		if q.UID != p.UID {
			return fmt.Errorf("pod %s replaced", p.Name)
		}
		ready := false
		for _, c := range q.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if r := restartsOf(*q, inject.ContainerName); r != sidecarRestarts+1 || !ready {
			return fmt.Errorf("sidecar restarts %d (before %d), pod ready %v", r, sidecarRestarts, ready)
		}
		return nil
	})
	fig("sidecar SIGKILL -> restarted by the kubelet, pod Ready", time.Since(kill))
	if r := restartsOf(now, inject.ServerContainerName); r != serverRestarts {
		t.Errorf("server container restarts %d -> %d: only the sidecar crashed", serverRestarts, r)
	}
	for _, c := range now.Status.InitContainerStatuses {
		if c.Name == inject.ContainerName {
			if term := c.LastTerminationState.Terminated; term == nil || term.ExitCode != 137 {
				t.Errorf("the sidecar's last termination %+v, want exit code 137 (SIGKILL)", term)
			}
		}
	}
	s, err := listen(podClient(now, sampleServerHost))
	if err != nil {
		t.Fatalf("listen on the restarted sidecar: %v", err)
	}
	s.cancel()
	if names := toolNames(t, podClient(now, sampleServerHost)); len(names) != 2 {
		t.Errorf("tools/list on the restarted sidecar: %v, want the sample's 2 tools", names)
	}
	serverReady(t, sampleNamespace, sampleServer)
}

func restartsOf(p corev1.Pod, container string) int32 {
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if c.Name == container {
			return c.RestartCount
		}
	}
	return -1
}
