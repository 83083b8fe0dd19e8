//go:build node

package node

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The server container listens on every address of the pod, not only 127.0.0.1, so that only
// the NetworkPolicy can keep other pods from it; two client pods (the pause image: they only
// hold a network namespace the test dials from), one labelled as the adminFrom peer.
const netpolYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: netpol
---
apiVersion: mcp.switchboard.dev/v1alpha1
kind: MCPServer
metadata:
  name: open
  namespace: netpol
spec:
  replicas: 1
  container:
    image: %[1]s
    command: ["/sample-server", "--listen=0.0.0.0:8080"]
    port: 8080
  sidecar:
    drain: {propagationDelaySeconds: 1, jitterMilliseconds: 100, budgetSeconds: 10}
  networkPolicy: {enabled: false}
---
apiVersion: v1
kind: Pod
metadata:
  name: metrics
  namespace: netpol
  labels: {role: metrics}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: client, image: %[2]s, imagePullPolicy: Never}
---
apiVersion: v1
kind: Pod
metadata:
  name: other
  namespace: netpol
  labels: {role: other}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: client, image: %[2]s, imagePullPolicy: Never}
`

// TestNetworkPolicyEnforced: the NetworkPolicy the controller writes, enforced on the real node
// (kube-router): the MCP server container's own port is closed to other pods, the sidecar's
// MCP port is open to them, and its admin port only to the adminFrom peers. The same ports
// are first shown open from the same pods with the policy disabled, so that what closes them
// is the policy.
func TestNetworkPolicyEnforced(t *testing.T) {
	installed(t)
	run(t, fmt.Sprintf(netpolYAML, sampleServerImage, imageRepo+"/pause:"+imageTag), kubectlBin, "apply", "-f", "-")
	defer func() { _, _ = runErr("", kubectlBin, "delete", "namespace", "netpol", "--wait=false") }()
	serverReady(t, "netpol", "open")
	clients := map[string]corev1.Pod{}
	waitFor(t, hang, "client pods running", func() error {
		for _, name := range []string{"metrics", "other"} {
			p, err := cs.CoreV1().Pods("netpol").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || containerID(*p, "client") == "" {
				return fmt.Errorf("pod %s %s", name, p.Status.Phase)
			}
			clients[name] = *p
		}
		return nil
	})
	metrics, other := clients["metrics"], clients["other"]
	const host = "open.netpol.svc"
	pods := runningPods(t, "netpol", "mcp.switchboard.dev/server=open")
	if len(pods) != 1 {
		t.Fatalf("%d running pods, want 1", len(pods))
	}
	ip := pods[0].Status.PodIP
	server, mcp, admin := ip+":8080", ip+":8800", ip+":8801"

	// Without the policy every port answers every pod.
	if _, err := cs.NetworkingV1().NetworkPolicies("netpol").Get(context.Background(), "open", metav1.GetOptions{}); err == nil {
		t.Fatal("a NetworkPolicy exists with networkPolicy.enabled false")
	}
	for _, from := range []corev1.Pod{metrics, other} {
		for _, addr := range []string{server, mcp, admin} {
			if err := reach(t, from, addr); err != nil {
				t.Fatalf("policy disabled: pod %s cannot reach %s: %v (the control case must connect)", from.Name, addr, err)
			}
		}
	}

	// The policy, with the metrics pod as the admin port's peer.
	enabled := time.Now()
	kubectl(t, "-n", "netpol", "patch", "mcpserver", "open", "--type=merge", "-p",
		`{"spec":{"networkPolicy":{"enabled":true,"adminFrom":[{"podSelector":{"matchLabels":{"role":"metrics"}}}]}}}`)
	serverReady(t, "netpol", "open")
	waitFor(t, time.Minute, "the NetworkPolicy enforced (server port closed to pod other)", func() error {
		if err := reach(t, other, server); err == nil {
			return fmt.Errorf("pod other still connects to %s", server)
		}
		return nil
	})
	fig("networkPolicy enabled -> enforced on the node", time.Since(enabled))
	if now := runningPods(t, "netpol", "mcp.switchboard.dev/server=open"); len(now) != 1 || now[0].UID != pods[0].UID {
		t.Fatalf("the pod changed when the policy was enabled; the test dials the old pod's IP")
	}

	for _, c := range []struct {
		from  corev1.Pod
		addr  string
		allow bool
	}{
		{other, server, false}, {other, mcp, true}, {other, admin, false},
		{metrics, server, false}, {metrics, mcp, true}, {metrics, admin, true},
	} {
		err := reach(t, c.from, c.addr)
		if c.allow && err != nil {
			t.Errorf("pod %s -> %s: %v, want open", c.from.Name, c.addr, err)
		}
		if !c.allow && err == nil {
			t.Errorf("pod %s -> %s: connected, want closed by the NetworkPolicy", c.from.Name, c.addr)
		}
	}
	// What answers on the open ports is the sidecar: MCP for any pod, /readyz for the peer.
	if names := toolNames(t, clientFrom(t, other, mcp, host)); len(names) != 3 {
		t.Errorf("tools/list from pod other through the sidecar: %v, want the sample server's 3 tools", names)
	}
	if code, err := getFrom(t, metrics, "http://"+admin+"/readyz"); err != nil || code != http.StatusOK {
		t.Errorf("GET /readyz from pod metrics: %d %v, want 200", code, err)
	}
	// The node itself (the kubelet's probes and preStop hook) always reaches the admin port.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + admin + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz from the node: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}
