// Package eventually is the tests' one polling helper: it retries a check until it passes, and
// fails the test when a generous deadline runs out. The deadline only guards against hangs; it
// is not a timing assertion (timings belong in benchmarks).
package eventually

import (
	"fmt"
	"testing"
	"time"
)

const (
	// Timeout is the hang guard: long enough for a loaded 2-core machine running the real
	// control plane, kube-controller-manager and kwok.
	Timeout = 90 * time.Second
	// Interval is the pause between two checks.
	Interval = 50 * time.Millisecond
)

// Succeeds calls check until it returns nil. After Timeout it fails the test, naming what it
// waited for and the last error.
func Succeeds(t testing.TB, what string, check func() error) {
	t.Helper()
	if err := poll(Timeout, check); err != nil {
		t.Fatalf("%s: still failing after %s: %v", what, Timeout, err)
	}
}

// True calls cond until it returns true. After Timeout it fails the test, naming what it
// waited for.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Succeeds(t, what, func() error {
		if !cond() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// Within calls check until it returns nil or timeout passes, and returns the last error. It is
// for code that has no *testing.T (a TestMain) or that waits for less than the hang guard.
func Within(timeout time.Duration, check func() error) error {
	return poll(timeout, check)
}

func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(Interval)
	}
}
