package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
)

// args1KB is a 1 KB tool-call arguments object of the usual shapes: strings, numbers, a nested
// object, a list, and two values Redacted mode masks.
func args1KB() json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"query":"weather forecast for the next five days","city":"Paris","units":"metric","days":5,"include":["temperature","wind","precipitation","humidity"],"auth":{"token":"Q2hhbmdlTWU3N1pYcXdlcnR5VUlPUA9z"},"filters":{`)
	for i := range 16 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"f%02d":{"min":%d,"max":%d,"label":"filter number %d"}`, i, i, i*10, i)
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String())
}

func BenchmarkArguments(b *testing.B) {
	args := args1KB()
	for _, mode := range []Mode{ModeRedacted, ModeFull} {
		r, _ := NewRedactor(mode, []string{"auth.token"}, 0)
		b.Run(string(mode), func(b *testing.B) {
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				r.Arguments(args)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkEmit is the cost a call pays for its record: the queue hand-off (the writer's
// encoding runs on its own goroutine, measured in BenchmarkWrite).
func BenchmarkEmit(b *testing.B) {
	s := NewSink(io.Discard, 1<<16, nil)
	defer s.Close()
	r := &Record{Method: "tools/call", Name: "get_forecast", Decision: Decision{Allowed: true, Reason: ReasonAllowed}}
	b.ReportAllocs()
	for b.Loop() {
		s.Emit(r)
	}
}

func BenchmarkWrite(b *testing.B) {
	s := &Sink{}
	*s = *NewSink(io.Discard, 1, nil)
	r := Record{Server: Server{"team-a", "weather"}, Method: "tools/call", Name: "get_forecast", UpstreamName: "forecast",
		Caller:   &Caller{Subject: "system:serviceaccount:team-b:agent", ServiceAccount: "team-b/agent", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-b"}, Issuer: "kubernetes"},
		Decision: Decision{Allowed: true, Reason: ReasonAllowed}, Outcome: Outcome{Status: StatusResult}, RequestID: json.RawMessage(`42`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		rc := r
		s.write(&rc)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's CPU time so far: on a loaded machine, wall time per op says
// more of the other processes than of the code.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
