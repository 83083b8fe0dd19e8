package kube

import (
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchboard-mcp/switchboard/internal/inject"
)

// DrainTokenKey is the key of the token in the Secret <server>-drain-token, which the controller
// creates once per MCPServer (docs/security.md).
const DrainTokenKey = inject.DrainTokenSecretKey

// drainTokenHexLen: 256 random bits, hex-encoded.
const drainTokenHexLen = 64

// ValidDrainToken returns the token of a drain-token Secret when it is one the controller could
// have generated (64 lowercase or uppercase hex digits).
func ValidDrainToken(sec *corev1.Secret) (string, bool) {
	t := string(sec.Data[DrainTokenKey])
	if len(t) != drainTokenHexLen {
		return "", false
	}
	if _, err := hex.DecodeString(t); err != nil {
		return "", false
	}
	return t, true
}
