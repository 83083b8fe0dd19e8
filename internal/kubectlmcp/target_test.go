package kubectlmcp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// TestSelectPod (F18): the plugin sends the caller's credential to the pod it picks, so it
// picks what the MCPServer's Service sends traffic to (a ready endpoint of its EndpointSlices)
// and only a pod that runs the injected sidecar of that server; a pod that merely carries the
// server's label (anyone who can create pods in the namespace can make one) is not picked.
func TestSelectPod(t *testing.T) {
	const server = "weather"
	pod := func(name string, injected bool, label string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels: map[string]string{inject.LabelServer: label}}}
		if injected {
			p.Annotations = map[string]string{inject.InjectedAnnotation: "h"}
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	endpoint := func(name string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
	}
	slice := func(eps ...discoveryv1.Endpoint) []discoveryv1.EndpointSlice {
		return []discoveryv1.EndpointSlice{{ObjectMeta: metav1.ObjectMeta{Name: server + "-x", Namespace: "ns",
			Labels: map[string]string{discoveryv1.LabelServiceName: server}}, Endpoints: eps}}
	}
	for _, tc := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		pods   []corev1.Pod
		want   string
	}{
		{"a labelled pod the Service does not select is not picked",
			slice(endpoint("b-good", true)), []corev1.Pod{pod("a-evil", true, server), pod("b-good", true, server)}, "b-good"},
		{"a pod without the injected sidecar is not picked",
			slice(endpoint("a-plain", true), endpoint("b-good", true)), []corev1.Pod{pod("a-plain", false, server), pod("b-good", true, server)}, "b-good"},
		{"a pod of another server is not picked",
			slice(endpoint("a-other", true), endpoint("b-good", true)), []corev1.Pod{pod("a-other", true, "other"), pod("b-good", true, server)}, "b-good"},
		{"a not-ready endpoint is not picked",
			slice(endpoint("a-starting", false), endpoint("b-good", true)), []corev1.Pod{pod("a-starting", true, server), pod("b-good", true, server)}, "b-good"},
		{"first by name among the good ones",
			slice(endpoint("c", true), endpoint("b", true)), []corev1.Pod{pod("c", true, server), pod("b", true, server)}, "b"},
		{"none", slice(endpoint("a-plain", true)), []corev1.Pod{pod("a-plain", false, server)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := selectPod(server, tc.slices, tc.pods)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("picked %s, want an error", p.Name)
			case tc.want != "" && (err != nil || p.Name != tc.want):
				t.Fatalf("picked %v (%v), want %s", name(p), err, tc.want)
			}
		})
	}
}

func name(p *corev1.Pod) string {
	if p == nil {
		return "nothing"
	}
	return p.Name
}

// TestAuthorizationOffArgv (F18): the credential can come from a file or the environment, so
// it need not be on the command line (visible in ps and shell history).
func TestAuthorizationOffArgv(t *testing.T) {
	srv, _ := newServer(t)
	var mu sync.Mutex
	var got []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	ts := hs.URL
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("Bearer from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(want string, args ...string) {
		t.Helper()
		mu.Lock()
		got = nil
		mu.Unlock()
		if _, errOut, code := runCmd(t, append([]string{"tools", "--url", ts}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range got {
			if a != want {
				t.Fatalf("%v: the server got Authorization %q, want %q", args, a, want)
			}
		}
		if len(got) == 0 {
			t.Fatal("no request")
		}
	}
	check("Bearer from-file", "--authorization-file", file)
	t.Setenv(AuthorizationEnv, "Bearer from-env")
	check("Bearer from-env")
	check("Bearer from-file", "--authorization-file", file) // a flag wins over the environment
	if _, _, code := runCmd(t, "tools", "--url", ts, "--authorization", "x", "--authorization-file", file); code != 2 {
		t.Errorf("--authorization with --authorization-file: exit %d, want 2", code)
	}
}
