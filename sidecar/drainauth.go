package sidecar

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// DrainTokenEnv is the environment variable the sidecar reads its drain token from. The
// controller generates one token per MCPServer (kept in the Secret <server>-drain-token), sets
// it here, and sends it from both containers' preStop hooks (Authorization: Bearer <token>).
const DrainTokenEnv = "SWITCHBOARD_DRAIN_TOKEN"

// Reasons a drain request is refused (the label of switchboard_sidecar_drain_refused_total).
const (
	drainRefusedMissing  = "missing"  // no bearer token: 401
	drainRefusedInvalid  = "invalid"  // a token that does not match: 403
	drainRefusedDisabled = "disabled" // the sidecar has no token, so HTTP cannot drain it: 403
)

// drainAuth guards the drain endpoint: only a request carrying the pod's drain token starts a
// drain. A client that can reach the admin port but cannot read the pod's spec cannot take the
// replica out of service. SIGTERM drains regardless. Immutable after construction.
type drainAuth struct {
	token   []byte
	refused *prometheus.CounterVec
}

func newDrainAuth(token string, reg prometheus.Registerer) *drainAuth {
	a := &drainAuth{token: []byte(token), refused: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchboard_sidecar_drain_refused_total",
		Help: "Drain requests refused for want of the pod's drain token, by reason (missing, invalid, disabled).",
	}, []string{"reason"})}
	for _, r := range []string{drainRefusedMissing, drainRefusedInvalid, drainRefusedDisabled} {
		a.refused.WithLabelValues(r)
	}
	reg.MustRegister(a.refused)
	return a
}

// wrap answers 401 without a bearer token and 403 with a wrong one (or when no token is
// configured), and calls next otherwise.
func (a *drainAuth) wrap(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(a.token) == 0 {
			a.refused.WithLabelValues(drainRefusedDisabled).Inc()
			http.Error(w, "draining over HTTP is disabled: the sidecar has no drain token ("+DrainTokenEnv+"); send SIGTERM", http.StatusForbidden)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || got == "" {
			a.refused.WithLabelValues(drainRefusedMissing).Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard-drain"`)
			http.Error(w, "drain needs the pod's drain token: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), a.token) != 1 {
			a.refused.WithLabelValues(drainRefusedInvalid).Inc()
			http.Error(w, "wrong drain token", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}
