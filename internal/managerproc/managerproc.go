// Package managerproc runs the manager binary (cmd/manager) as a real process against a test
// control plane, on 127.0.0.1 only, and reads what an operator of it would: its Prometheus
// metrics (reconciles, leadership), its RSS and CPU time from /proc, and its webhook's answers.
// hack/scalebench and the high-availability test use it.
package managerproc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchboard-mcp/switchboard/internal/webhook"
)

// Namespace is the manager's own namespace (--namespace): it holds the leader-election Lease.
const Namespace = "switchboard-system"

// Manager is one running manager process.
type Manager struct {
	Name string
	// MetricsAddr, HealthAddr and WebhookAddr are host:port on 127.0.0.1.
	MetricsAddr, HealthAddr, WebhookAddr string
	Log                                  string

	cmd  *exec.Cmd
	done chan struct{}
}

// Options configure a manager process.
type Options struct {
	// Bin is the built cmd/manager.
	Bin string
	// Kubeconfig is the API server's kubeconfig file.
	Kubeconfig string
	// Dir receives the log (<Name>.log) and, with Webhook, the serving certificate.
	Dir string
	// Name names the log file and the process in messages.
	Name string
	// LeaderElect runs with --leader-elect.
	LeaderElect bool
	// Webhook serves the injection webhook with a self-signed certificate for 127.0.0.1
	// (--webhook-cert-mode=cert-manager: the certificate is read from a folder).
	Webhook bool
	// Args are extra flags.
	Args []string
	// Env are extra environment variables (NAME=value), e.g. GOMEMLIMIT.
	Env []string
}

// Start starts a manager process and returns once its health endpoint answers.
func Start(ctx context.Context, o Options) (*Manager, error) {
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	m := &Manager{Name: o.Name, MetricsAddr: ports[0], HealthAddr: ports[1], WebhookAddr: ports[2],
		Log: filepath.Join(o.Dir, o.Name+".log"), done: make(chan struct{})}
	args := []string{
		"--metrics-bind-address=" + m.MetricsAddr, "--health-probe-bind-address=" + m.HealthAddr,
		"--namespace=" + Namespace, "--sidecar-image=switchboard-sidecar:bench",
		fmt.Sprintf("--leader-elect=%t", o.LeaderElect),
	}
	if o.Webhook {
		certDir := filepath.Join(o.Dir, o.Name+"-certs")
		if err := WriteServingCert(certDir); err != nil {
			return nil, err
		}
		_, port, _ := net.SplitHostPort(m.WebhookAddr)
		args = append(args, "--webhook-cert-mode=cert-manager", "--webhook-cert-dir="+certDir,
			"--webhook-host=127.0.0.1", "--webhook-port="+port)
	} else {
		args = append(args, "--webhook-cert-mode=none")
		m.WebhookAddr = ""
	}
	args = append(args, o.Args...)
	f, err := os.Create(m.Log)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(o.Bin, args...)
	m.cmd.Env = append(append(os.Environ(), o.Env...), "KUBECONFIG="+o.Kubeconfig)
	m.cmd.Stdout, m.cmd.Stderr = f, f
	// The manager dies with its parent, even when the parent is killed.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Name, err)
	}
	go func() { _ = m.cmd.Wait(); _ = f.Close(); close(m.done) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if resp, err := http.Get("http://" + m.HealthAddr + "/healthz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			m.Kill()
			return nil, fmt.Errorf("%s did not become healthy: %s", o.Name, m.Tail(20))
		case <-m.done:
			return nil, fmt.Errorf("%s exited: %s", o.Name, m.Tail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Pid is the process id.
func (m *Manager) Pid() int { return m.cmd.Process.Pid }

// Done is closed when the process has exited.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Stop sends SIGTERM (the manager releases its Lease) and waits up to 20 s, then kills.
func (m *Manager) Stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		m.Kill()
	}
}

// Kill sends SIGKILL (a crash: the Lease stays held until it expires) and waits.
func (m *Manager) Kill() {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Tail returns the last n lines of the log.
func (m *Manager) Tail(n int) string {
	b, err := os.ReadFile(m.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return m.Name + " log tail:\n" + strings.Join(lines, "\n")
}

// Metrics returns the samples of the manager's /metrics whose name starts with prefix, keyed
// by the sample's name and labels as exposed (e.g. `controller_runtime_reconcile_total{controller="mcpserver",result="success"}`).
func (m *Manager) Metrics(prefix string) (map[string]float64, error) {
	return ScrapeMetrics("http://"+m.MetricsAddr+"/metrics", prefix)
}

// Sum adds the samples of a metric whose labels contain every one of labels (`name="value"`).
func Sum(samples map[string]float64, metric string, labels ...string) float64 {
	var total float64
	for k, v := range samples {
		name, rest, _ := strings.Cut(k, "{")
		if name != metric {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// IsLeader reports whether the manager holds the leader-election Lease
// (controller-runtime's leader_election_master_status gauge).
func (m *Manager) IsLeader() bool {
	s, err := m.Metrics("leader_election_master_status")
	return err == nil && Sum(s, "leader_election_master_status") == 1
}

// ScrapeMetrics reads a Prometheus text endpoint.
func ScrapeMetrics(url, prefix string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// Usage is a process's memory and CPU time from /proc.
type Usage struct {
	RSS, PeakRSS int64 // bytes (VmRSS, VmHWM)
	CPU          time.Duration
}

// ReadUsage reads /proc/<pid>/status and /proc/<pid>/stat.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			u.RSS = kb << 10
		case "VmHWM:":
			u.PeakRSS = kb << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name (which may hold spaces) start at state (field 3).
	rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return u, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	u.CPU = time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
	return u, nil
}

// ProbeWebhook sends one AdmissionReview for a pod that asks for no injection to the webhook
// at addr and checks the answer allows it and echoes the request's uid.
func ProbeWebhook(ctx context.Context, addr string, uid string) error {
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example/c:1"}}},
	}
	raw, _ := json.Marshal(pod)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "default", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	}
	body, _ := json.Marshal(review)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+webhook.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webhook answered %s: %s", resp.Status, b)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("webhook answer: %w", err)
	}
	if out.Response == nil || string(out.Response.UID) != uid || !out.Response.Allowed {
		return fmt.Errorf("webhook answer does not allow request %s: %s", uid, b)
	}
	return nil
}

// The probe trusts the self-signed serving certificate: it checks the webhook answers, not PKI.
var probeClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, //nolint:gosec // local probe of a self-signed server
}

// WriteServingCert writes a self-signed tls.crt and tls.key for 127.0.0.1 into dir.
func WriteServingCert(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// FreePorts returns n distinct free 127.0.0.1 ports as host:port.
func FreePorts(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// Cmd is the running command (to send signals).
func (m *Manager) Cmd() *exec.Cmd { return m.cmd }
