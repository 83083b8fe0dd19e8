package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const (
	resultInjected = "injected"
	resultSkipped  = "skipped"
	resultDenied   = "denied"
)

// injections counts the webhook's decisions: result is injected, skipped or denied, reason is Injected
// or the skip reason code. Dry-run requests are not counted.
var injections = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "switchboard_injections_total",
	Help: "Pods the injection webhook decided on, by result (injected, skipped, denied) and reason code.",
}, []string{"result", "reason"})

func init() {
	metrics.Registry.MustRegister(injections)
}
