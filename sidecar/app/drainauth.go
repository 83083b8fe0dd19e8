package app

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// DrainTokenEnv is the environment variable the sidecar reads its drain token from when it has
// no --drain-token-file (outside Kubernetes; tests). In a pod the token is never in the pod
// spec: the Secret <server>-drain-token is mounted into the sidecar container only, and its
// exec preStop hook (`sidecar drain`) reads it there.
const DrainTokenEnv = "SWITCHBOARD_DRAIN_TOKEN"

// maxDrainTokenBytes bounds what is read from the drain token file.
const maxDrainTokenBytes = 4096

// ReadDrainToken reads a drain token file (a mounted Secret key), trimmed. A missing file is an
// empty token: draining over HTTP is then refused until the Secret is mounted.
func ReadDrainToken(path string) (string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDrainTokenBytes+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxDrainTokenBytes {
		return "", fmt.Errorf("%s holds more than %d bytes: not a drain token", path, maxDrainTokenBytes)
	}
	return strings.TrimSpace(string(b)), nil
}

// Reasons a drain request is refused (the label of switchboard_sidecar_drain_refused_total).
const (
	drainRefusedMissing  = "missing"  // no bearer token: 401
	drainRefusedInvalid  = "invalid"  // a token that does not match: 403
	drainRefusedDisabled = "disabled" // the sidecar has no token, so HTTP cannot drain it: 403
)

// drainAuth guards the drain endpoint: only a request carrying the pod's drain token starts a
// drain. A client that can reach the admin port, and the MCP server container next to the
// sidecar, cannot take the replica out of service. SIGTERM drains regardless. Immutable after
// construction.
type drainAuth struct {
	// token returns the current token: the file is re-read on every drain request (drains are
	// rare), so a Secret mounted or rotated after start is honoured without a restart.
	token   func() string
	refused *prometheus.CounterVec
}

func newDrainAuth(token func() string, reg prometheus.Registerer) *drainAuth {
	a := &drainAuth{token: token, refused: prometheus.NewCounterVec(prometheus.CounterOpts{
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
		token := a.token()
		if token == "" {
			a.refused.WithLabelValues(drainRefusedDisabled).Inc()
			http.Error(w, "draining over HTTP is disabled: the sidecar has no drain token (--drain-token-file or "+DrainTokenEnv+"); send SIGTERM", http.StatusForbidden)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || got == "" {
			a.refused.WithLabelValues(drainRefusedMissing).Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard-drain"`)
			http.Error(w, "drain needs the pod's drain token: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			a.refused.WithLabelValues(drainRefusedInvalid).Inc()
			http.Error(w, "wrong drain token", http.StatusForbidden)
			return
		}
		next(w, r)
	}
}
