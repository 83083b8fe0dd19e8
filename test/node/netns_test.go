//go:build node

package node

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"golang.org/x/sys/unix"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// ctrCmd runs ctr against the node's containerd (namespace k8s.io, where the kubelet's
// containers live).
func ctrCmd(args ...string) ([]byte, error) {
	a := append([]string{"-a", os.Getenv("SWITCHBOARD_NODE_DIR") + "/run/containerd/containerd.sock", "-n", "k8s.io"}, args...)
	return exec.Command("ctr", a...).CombinedOutput()
}

// containerID is the containerd ID of a container of p ("" when it has none yet).
func containerID(p corev1.Pod, container string) string {
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if c.Name == container {
			return strings.TrimPrefix(c.ContainerID, "containerd://")
		}
	}
	return ""
}

// containerPID is the host PID of a container's main process, from containerd's task list.
func containerPID(p corev1.Pod, container string) (string, error) {
	id := containerID(p, container)
	if id == "" {
		return "", fmt.Errorf("pod %s: container %s has no ID", p.Name, container)
	}
	out, err := ctrCmd("tasks", "ls")
	if err != nil {
		return "", fmt.Errorf("ctr tasks ls: %w: %s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == id {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("pod %s: no containerd task %s for container %s", p.Name, id, container)
}

// podDialer opens TCP connections from inside the network namespace of pod p (the one of its
// container named container), so that they leave with the pod's IP through its veth and the
// bridge, exactly as the pod's own connections do, and meet the node's NetworkPolicy rules.
func podDialer(t *testing.T, p corev1.Pod, container string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	pid, err := containerPID(p, container)
	if err != nil {
		t.Fatal(err)
	}
	nsPath := "/proc/" + pid + "/ns/net"
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		res := make(chan result, 1)
		go func() {
			// The socket is made in the namespace of the thread that makes it: lock this
			// goroutine to its thread, move the thread into the pod's namespace and never
			// unlock it, so that the Go runtime ends the thread with the goroutine.
			runtime.LockOSThread()
			ns, err := os.Open(nsPath)
			if err != nil {
				res <- result{err: err}
				return
			}
			defer ns.Close()
			if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
				res <- result{err: fmt.Errorf("setns %s: %w", nsPath, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			res <- result{c, err}
		}()
		r := <-res
		return r.c, r.err
	}
}

// reach reports whether a TCP connection from pod `from` to addr opens within 3 s.
func reach(t *testing.T, from corev1.Pod, addr string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := podDialer(t, from, from.Spec.Containers[0].Name)(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// clientFrom is an MCP client of http://addr/mcp whose connections leave from pod `from`.
func clientFrom(t *testing.T, from corev1.Pod, addr, host string) *mcptest.Client {
	t.Helper()
	c := mcptest.New("http://" + addr + "/mcp")
	c.HTTP = &http.Client{Transport: hostHeader{host: host, base: &http.Transport{DialContext: podDialer(t, from, from.Spec.Containers[0].Name)}}}
	return c
}

// getFrom GETs url with connections from pod `from` and returns the status code.
func getFrom(t *testing.T, from corev1.Pod, url string) (int, error) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: podDialer(t, from, from.Spec.Containers[0].Name)}}
	resp, err := hc.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
