//go:build e2e

package v1alpha1_test

import (
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// env is the real API server every validation test in this package talks to.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e }, nil))
}
