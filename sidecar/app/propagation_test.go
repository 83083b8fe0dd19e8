package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/overlay"
)

// TestPropagationLog: the first computation that covers the revision last delivered is logged
// once, with its stages; computations of other revisions, and later ones of the same, are not.
func TestPropagationLog(t *testing.T) {
	var buf bytes.Buffer
	p := &propagationLog{log: slog.New(slog.NewJSONHandler(&buf, nil))}
	t0 := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	times := func(rev string, applied int) overlay.PublishTimes {
		return overlay.PublishTimes{Revision: rev, Applied: at(applied), Coalesced: at(applied + 10), Computed: at(applied + 11), Published: at(applied + 14)}
	}

	p.published(times("r0", 0)) // nothing arrived yet
	p.arrived("r1", at(100))
	p.published(times("r0", 100)) // a computation of the old revision (the upstream changed)
	p.published(times("r1", 101))
	p.published(times("r1", 200)) // a later computation of the same revision

	var lines []map[string]any
	for line := range bytes.Lines(buf.Bytes()) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 1 {
		t.Fatalf("want one line, got %d:\n%s", len(lines), buf.String())
	}
	want := map[string]float64{"decode": 1e6, "coalesce": 10e6, "compute": 1e6, "publish": 3e6, "total": 15e6}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v ns", k, lines[0][k], v)
		}
	}
	if lines[0]["revision"] != "r1" || lines[0]["received"] != at(100).Format(time.RFC3339Nano) {
		t.Errorf("logged %v", lines[0])
	}
}
