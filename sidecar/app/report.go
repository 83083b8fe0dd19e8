package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar"
)

// Reporter writes the propagation report (catalog.Report) into the status ConfigMap under the
// pod's name, by server-side apply with the field manager switchboard-sidecar-<pod>. The newest
// report wins; failures are retried with backoff. The sidecar runs one (--report-configmap);
// the fleet benchmark runs one per simulated pod, so its writes are the sidecar's own.
// mu guards latest.
type Reporter struct {
	client rest.Interface
	ref    kubeObjectRef
	pod    string
	log    *slog.Logger
	m      *sidecar.Metrics // nil: failures are not counted
	kick   chan struct{}

	mu     sync.Mutex
	latest *catalog.Report
}

// NewReporter returns the Reporter of pod into the status ConfigMap configMap
// ("NAMESPACE/NAME"), writing through client (NewKubeClient). m may be nil.
func NewReporter(client rest.Interface, configMap, pod string, log *slog.Logger, m *sidecar.Metrics) (*Reporter, error) {
	ref, err := parseNamespacedName(configMap)
	if err != nil {
		return nil, err
	}
	return newReporter(client, *ref, pod, log, m), nil
}

func newReporter(client rest.Interface, ref kubeObjectRef, pod string, log *slog.Logger, m *sidecar.Metrics) *Reporter {
	return &Reporter{client: client, ref: ref, pod: pod, log: log, m: m, kick: make(chan struct{}, 1)}
}

// Set makes rep the report to write; Run writes it unless it equals the last one written.
func (r *Reporter) Set(rep catalog.Report) {
	r.mu.Lock()
	r.latest = &rep
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run writes the newest report whenever one is Set, until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	var sent *catalog.Report
	backoff := reportBackoffFloor
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry:
		}
		retry = nil
		r.mu.Lock()
		rep := r.latest
		r.mu.Unlock()
		if rep == nil || (sent != nil && sent.Equal(*rep)) {
			continue
		}
		if err := r.write(ctx, *rep); err != nil {
			if r.m != nil {
				r.m.ReportFailed()
			}
			r.log.Warn("Writing the catalog report failed; retrying", "configMap", r.ref.namespace+"/"+r.ref.name, "err", err, "backoff", backoff)
			retry = time.After(backoff)
			backoff = min(backoff*2, reportBackoffCeiling)
			continue
		}
		backoff = reportBackoffFloor
		sent = rep
		r.log.Debug("Catalog report written", "revision", rep.Revision, "rejectedRevision", rep.RejectedRevision)
	}
}

func (r *Reporter) write(ctx context.Context, rep catalog.Report) error {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	body, err := json.Marshal(reportApply{
		APIVersion: "v1", Kind: "ConfigMap",
		Metadata: reportMeta{Name: r.ref.name, Namespace: r.ref.namespace},
		Data:     map[string]string{r.pod: rep.String()},
	})
	if err != nil {
		return err
	}
	return r.client.Patch(types.ApplyPatchType).Namespace(r.ref.namespace).Resource("configmaps").Name(r.ref.name).
		VersionedParams(&metav1.PatchOptions{FieldManager: catalog.ReportFieldManagerPrefix + r.pod, Force: ptr.To(true)}, metav1.ParameterCodec).
		Body(body).Do(ctx).Error()
}

// reportApply is the apply configuration of the report: only this pod's
// key in the status ConfigMap's data.
type reportApply struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   reportMeta        `json:"metadata"`
	Data       map[string]string `json:"data"`
}

type reportMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}
