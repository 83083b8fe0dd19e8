package v1alpha1_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// env is the real API server every validation test in this package talks to.
var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(testenv.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping testenv:", err)
	}
	os.Exit(code)
}
