package benchkit

import (
	"testing"
	"time"
)

// Quantiles by nearest rank: of 100 values p99 is the 99th, not the largest; a quantile of one
// value is that value.
func TestQuantileNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"p99 of 100", hundred, 0.99, 99},
		{"p90 of 100", hundred, 0.90, 90},
		{"p50 of 100", hundred, 0.50, 50},
		{"p100 of 100", hundred, 1, 100},
		{"p0 of 100", hundred, 0, 1},
		{"p99 of 3", []time.Duration{1, 2, 3}, 0.99, 3},
		{"p50 of 3", []time.Duration{1, 2, 3}, 0.50, 2},
		{"p99 of 1", []time.Duration{7}, 0.99, 7},
	} {
		if got := Quantile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: quantile = %d, want %d", tc.name, got, tc.want)
		}
	}
}
