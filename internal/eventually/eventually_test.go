package eventually

import (
	"errors"
	"testing"
	"time"
)

func TestWithinRetriesUntilSuccess(t *testing.T) {
	calls := 0
	err := Within(time.Minute, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
}

func TestWithinReturnsTheLastError(t *testing.T) {
	calls := 0
	err := Within(0, func() error { calls++; return errors.New("never") })
	if err == nil || err.Error() != "never" || calls != 1 {
		t.Fatalf("err %v after %d calls, want the check's error after 1", err, calls)
	}
}
