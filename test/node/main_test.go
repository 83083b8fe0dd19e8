//go:build node

// Package node holds the end-to-end tests on real pods: a real kubelet, containerd and runc on
// this machine (hack/node), Switchboard installed with its Helm chart from images built offline
// (hack/node/images), and MCP clients on the host talking to pod and Service IPs. Run them with
// `make test-node`, which brings the node up and tears it down. They build only with the
// `node` tag (never in `make test`), and fail without a node (SWITCHBOARD_NODE_KUBECONFIG).
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// Images written by hack/node/images and imported into the node's containerd.
const (
	imageRepo          = "localhost/switchboard"
	imageTag           = "node"
	sampleServerImage  = imageRepo + "/sample-server:" + imageTag
	releaseNamespace   = "switchboard-system"
	managerLabel       = "app.kubernetes.io/name=switchboard"
	sampleNamespace    = "default"
	sampleServer       = "weather"
	sampleServerHost   = "weather.default.svc"
	sampleForecastTool = "weather-forecast"
)

// hang bounds any single wait: it only catches hangs (timings are reported, not asserted).
const hang = 3 * time.Minute

var (
	kubeconfig string
	kubectlBin string
	helmBin    string
	cs         *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	kubeconfig = os.Getenv("SWITCHBOARD_NODE_KUBECONFIG")
	if kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "test/node: no real node (SWITCHBOARD_NODE_KUBECONFIG unset): `make test-node` brings one up and runs these tests")
		os.Exit(1)
	}
	kubectlBin, helmBin = os.Getenv("KUBECTL"), os.Getenv("HELM")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err == nil {
		cs, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test/node:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// run runs a command with the node's kubeconfig and returns its stdout; stdin may be empty.
func run(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

func runErr(stdin string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s", err, errb.String())
	}
	return out.String(), nil
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return run(t, "", kubectlBin, args...)
}

// waitFor polls check until it returns nil, failing the test with its last error after limit.
func waitFor(t *testing.T, limit time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %v", what, limit, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mcpServer reads an MCPServer through kubectl (the test needs no scheme or cache).
func mcpServer(t *testing.T, ns, name string) (*mcpv1alpha1.MCPServer, error) {
	t.Helper()
	out, err := runErr("", kubectlBin, "-n", ns, "get", "mcpserver", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var s mcpv1alpha1.MCPServer
	return &s, json.Unmarshal([]byte(out), &s)
}

// condition returns the status and reason of condition typ.
func condition(conds []metav1.Condition, typ string) (metav1.ConditionStatus, string) {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// serverReady waits for MCPServer ns/name to be Ready=True with its current generation and
// returns it.
func serverReady(t *testing.T, ns, name string) *mcpv1alpha1.MCPServer {
	t.Helper()
	var s *mcpv1alpha1.MCPServer
	waitFor(t, hang, "MCPServer "+ns+"/"+name+" Ready", func() error {
		var err error
		if s, err = mcpServer(t, ns, name); err != nil {
			return err
		}
		st, reason := condition(s.Status.Conditions, string(mcpv1alpha1.ConditionReady))
		if st != metav1.ConditionTrue || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("Ready=%s (%s), observedGeneration %d of %d", st, reason, s.Status.ObservedGeneration, s.Generation)
		}
		return nil
	})
	return s
}

// serverConditions waits for MCPServer ns/name to be Ready with its current generation and every
// condition in conds True, and returns it. Ready does not wait for the conditions decided from
// the sidecars' later reports (Verified: what the upstream announced), so a test that needs
// them waits for them too.
func serverConditions(t *testing.T, ns, name string, conds ...mcpv1alpha1.ConditionType) *mcpv1alpha1.MCPServer {
	t.Helper()
	var s *mcpv1alpha1.MCPServer
	waitFor(t, hang, fmt.Sprintf("MCPServer %s/%s Ready with %v", ns, name, conds), func() error {
		var err error
		if s, err = mcpServer(t, ns, name); err != nil {
			return err
		}
		var not []string
		for _, c := range append([]mcpv1alpha1.ConditionType{mcpv1alpha1.ConditionReady}, conds...) {
			if st, reason := condition(s.Status.Conditions, string(c)); st != metav1.ConditionTrue {
				not = append(not, fmt.Sprintf("%s=%s (%s)", c, st, reason))
			}
		}
		if len(not) > 0 || s.Status.ObservedGeneration != s.Generation {
			return fmt.Errorf("%v, observedGeneration %d of %d", not, s.Status.ObservedGeneration, s.Generation)
		}
		return nil
	})
	return s
}

// runningPods lists the pods of MCPServer name that are Running and not being deleted.
func runningPods(t *testing.T, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}
