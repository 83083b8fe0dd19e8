package kubectlmcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/kube"
)

// endpoint is where the MCP client talks to, and the cluster it belongs to (if any).
type endpoint struct {
	url       string
	describe  string // "port-forward to pod NS/NAME" or the URL
	namespace string
	cfg       *rest.Config // nil: no cluster (--url without SERVER)
	stop      chan struct{}
}

func (e *endpoint) close() {
	if e.stop != nil {
		close(e.stop)
	}
}

// target resolves the endpoint: --url as given, else a port-forward to a ready pod of the
// MCPServer (its sidecar's MCP port), chosen as selectPod says.
func target(ctx context.Context, o options, server string, stderr io.Writer) (*endpoint, error) {
	e := &endpoint{}
	if server != "" {
		kc := clientcmdConfig(o)
		ns, _, err := kc.Namespace()
		if err != nil {
			return nil, err
		}
		e.namespace = ns
		if e.cfg, err = kc.ClientConfig(); err != nil {
			if o.url == "" {
				return nil, fmt.Errorf("reading the kubeconfig: %w", err)
			}
			fmt.Fprintf(stderr, "warning: no cluster (%v): entries are not matched with their objects\n", err)
			e.cfg = nil
		}
	}
	if o.url != "" {
		e.url, e.describe = o.url, o.url
		return e, nil
	}
	cs, err := kubernetes.NewForConfig(e.cfg)
	if err != nil {
		return nil, err
	}
	pod, err := serverPod(ctx, e.cfg, cs, e.namespace, server)
	if err != nil {
		return nil, fmt.Errorf("MCPServer %s/%s: %w", e.namespace, server, err)
	}
	local, stop, err := forward(e.cfg, cs, pod, mcpv1alpha1.SidecarMCPPort, stderr)
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e.stop = stop
	e.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", local)
	e.describe = fmt.Sprintf("port-forward to pod %s/%s", pod.Namespace, pod.Name)
	return e, nil
}

// serverPod finds the pod to port-forward to: one behind the MCPServer's own Service (the
// Service it controls), as selectPod chooses among the Service's EndpointSlices.
func serverPod(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, server string) (*corev1.Pod, error) {
	scheme := runtime.NewScheme()
	if err := mcpv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := ctrlclient.New(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	var s mcpv1alpha1.MCPServer
	if err := c.Get(ctx, ctrlclient.ObjectKey{Namespace: ns, Name: server}, &s); err != nil {
		return nil, fmt.Errorf("MCPServer %s/%s: %w", ns, server, err)
	}
	names := inject.NamesFor(&s)
	svc, err := cs.CoreV1().Services(ns).Get(ctx, names.Service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the Service of MCPServer %s/%s: %w", ns, server, err)
	}
	if !metav1.IsControlledBy(svc, &s) {
		return nil, fmt.Errorf("service %s/%s is not controlled by MCPServer %s: refusing to send it a credential", ns, svc.Name, server)
	}
	es, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
	if err != nil {
		return nil, fmt.Errorf("listing the EndpointSlices of Service %s/%s: %w", ns, svc.Name, err)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: inject.LabelServer + "=" + server})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of MCPServer %s/%s: %w", ns, server, err)
	}
	return selectPod(server, es.Items, pods.Items)
}

// selectPod chooses the pod the plugin sends the caller's credential to: a ready endpoint of the
// MCPServer's Service (what the Service itself sends traffic to), labelled with the server and
// running its injected sidecar (the injected annotation), ready and not terminating; the first
// by name of those. A pod that merely carries the server's label is not enough: anyone who may
// create pods in the namespace can label one.
func selectPod(server string, slices []discoveryv1.EndpointSlice, pods []corev1.Pod) (*corev1.Pod, error) {
	ready := map[string]types.UID{} // pod name -> UID ("" when the slice gives none)
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			// A nil ready condition means ready (discovery/v1).
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			ready[ep.TargetRef.Name] = ep.TargetRef.UID
		}
	}
	var ok []corev1.Pod
	for _, p := range pods {
		uid, behind := ready[p.Name]
		if !behind || uid != "" && uid != p.UID || p.Labels[inject.LabelServer] != server || p.Annotations[inject.InjectedAnnotation] == "" {
			continue
		}
		ok = append(ok, p)
	}
	p, err := pickPod(ok)
	if err != nil {
		return nil, fmt.Errorf("no ready pod with the injected sidecar behind the server's Service (%d pods labelled, %d ready endpoints)", len(pods), len(ready))
	}
	return p, nil
}

// pickPod returns the first ready, not terminating pod by name (deterministic).
func pickPod(pods []corev1.Pod) (*corev1.Pod, error) {
	var ready []*corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && kube.PodReady(&pods[i]) {
			ready = append(ready, &pods[i])
		}
	}
	if len(ready) == 0 {
		return nil, fmt.Errorf("no ready pod (of %d)", len(pods))
	}
	slices.SortFunc(ready, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return ready[0], nil
}

// forward opens a port-forward from a free 127.0.0.1 port to the pod's port, over WebSockets
// with a fallback to SPDY (as kubectl port-forward does).
func forward(cfg *rest.Config, cs kubernetes.Interface, pod *corev1.Pod, port int, stderr io.Writer) (uint16, chan struct{}, error) {
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return 0, nil, err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	if ws, err := portforward.NewSPDYOverWebsocketDialer(u, cfg); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, stderr)
	if err != nil {
		return 0, nil, err
	}
	failed := make(chan error, 1)
	go func() { failed <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-failed:
		if err == nil {
			err = errors.New("port-forward ended")
		}
		return 0, nil, err
	}
	ports, err := fw.GetPorts()
	if err != nil {
		close(stop)
		return 0, nil, fmt.Errorf("port-forward: %w", err)
	}
	if len(ports) != 1 {
		close(stop)
		return 0, nil, fmt.Errorf("port-forward: %d local ports, want 1", len(ports))
	}
	return ports[0].Local, stop, nil
}

// declared returns, per list kind, the client-visible names the MCPTool, MCPPrompt and
// MCPResource objects of the server declare, each with its object ("MCPTool/name").
func declared(ctx context.Context, e *endpoint, server string) (map[string]map[string]string, error) {
	if e.cfg == nil {
		return nil, errors.New("no cluster")
	}
	scheme := runtime.NewScheme()
	if err := mcpv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := ctrlclient.New(e.cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	in := ctrlclient.InNamespace(e.namespace)
	d := map[string]map[string]string{"tools": {}, "prompts": {}, "resources": {}, "resourceTemplates": {}}
	var tools mcpv1alpha1.MCPToolList
	if err := c.List(ctx, &tools, in); err != nil {
		return nil, err
	}
	for _, t := range tools.Items {
		if t.Spec.ServerRef.Name == server && t.Spec.State != mcpv1alpha1.ToolDisabled {
			d["tools"][t.Spec.Name] = "MCPTool/" + t.Name
		}
	}
	var prompts mcpv1alpha1.MCPPromptList
	if err := c.List(ctx, &prompts, in); err != nil {
		return nil, err
	}
	for _, p := range prompts.Items {
		if p.Spec.ServerRef.Name == server {
			d["prompts"][p.Spec.Name] = "MCPPrompt/" + p.Name
		}
	}
	var resources mcpv1alpha1.MCPResourceList
	if err := c.List(ctx, &resources, in); err != nil {
		return nil, err
	}
	for _, r := range resources.Items {
		if r.Spec.ServerRef.Name != server {
			continue
		}
		if r.Spec.URI != "" {
			d["resources"][r.Spec.URI] = "MCPResource/" + r.Name
		}
		if r.Spec.URITemplate != "" {
			d["resourceTemplates"][r.Spec.URITemplate] = "MCPResource/" + r.Name
		}
	}
	return d, nil
}

func clientcmdConfig(o options) clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, o.overrides)
}
