//go:build e2e

package main_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/internal/otlptest"
)

// otlpReceiver is the test's OTLP/HTTP traces endpoint.
type otlpReceiver struct{ otlptest.TraceReceiver }

// startTraceReceiver serves an otlpReceiver on a free port until the test ends and returns it
// with its traces URL (for --otlp-endpoint); spans are exported every 100 ms.
func startTraceReceiver(t *testing.T) (*otlpReceiver, string) {
	t.Helper()
	rc := &otlpReceiver{}
	addr := freePort(t)
	recv := &http.Server{Addr: addr, Handler: rc}
	go recv.ListenAndServe()
	t.Cleanup(func() { recv.Close() })
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export batches every 100 ms instead of 5 s
	return rc, "http://" + addr + "/v1/traces"
}

// span waits for a span of that name.
func (rc *otlpReceiver) span(t *testing.T, name string) *tracepb.Span {
	t.Helper()
	var found *tracepb.Span
	eventually.True(t, "a span named "+name, func() bool {
		for _, s := range rc.Spans() {
			if s.GetName() == name {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

var spanAttrs = otlptest.SpanAttrs

// TestTracesOverOTLP runs the real sidecar with --otlp-endpoint pointed at a receiver this test
// serves (decoding OTLP protobuf with go.opentelemetry.io/proto/otlp), in front of a go-sdk MCP
// server, and follows one request, one fan-out and the drain: the request span is the child of
// the client's traceparent (params._meta), carries the MCP semantic-convention attributes, and
// is the parent the upstream receives.
func TestTracesOverOTLP(t *testing.T) {
	rc, traces := startTraceReceiver(t)

	srv := mcp.NewServer(&mcp.Implementation{Name: "traced-upstream", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var upMu sync.Mutex
	var upTraceparents []string
	upAddr := freePort(t)
	up := &http.Server{Addr: upAddr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			upMu.Lock()
			upTraceparents = append(upTraceparents, r.Header.Get("traceparent"))
			upMu.Unlock()
		}
		sdk.ServeHTTP(w, r)
	})}
	go up.ListenAndServe()
	t.Cleanup(func() { up.Close() })

	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, encodeCatalog(t, catalog.Tool{Name: "echo", Description: "Echo v1."}))
	e := &env{upAddr: upAddr}
	// The flags the injection gives the sidecar for spec.sidecar.tracing.
	e.startSidecar(t, "--catalog-file", path, "--"+inject.FlagOTLPEndpoint, traces,
		"--"+inject.FlagTraceSampling, "1000000", "--drain-delay", "0s", "--drain-jitter", "0s")

	// One tools/call with the client's trace context in params._meta.
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-` + traceID + `-` + parentID + `-01"},"name":"echo","arguments":{"text":"hi"}}}`
	req, _ := http.NewRequest(http.MethodPost, e.mcp, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	if st, _, msg := do(t, req); st != 200 || !strings.Contains(fmt.Sprint(msg["result"]), "hi") {
		t.Fatalf("tools/call: HTTP %d %v", st, msg)
	}
	s := rc.span(t, "tools/call echo")
	if hex.EncodeToString(s.GetTraceId()) != traceID || hex.EncodeToString(s.GetParentSpanId()) != parentID ||
		s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span trace %x parent %x kind %v: not the client's child", s.GetTraceId(), s.GetParentSpanId(), s.GetKind())
	}
	a := spanAttrs(s)
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
		"jsonrpc.request.id": "5", "mcp.protocol.version": "2026-07-28", "gen_ai.operation.name": "execute_tool"} {
		if a[k] != want {
			t.Errorf("%s = %q, want %q", k, a[k], want)
		}
	}
	upMu.Lock()
	want := "00-" + traceID + "-" + hex.EncodeToString(s.GetSpanId()) + "-01"
	if len(upTraceparents) == 0 || upTraceparents[len(upTraceparents)-1] != want {
		t.Errorf("upstream traceparents %q, want the sidecar span's context %q last", upTraceparents, want)
	}
	upMu.Unlock()

	// A catalog change fanned out to one listen stream.
	ls := listen(t, e.mcp, 1, `{"toolsListChanged":true}`)
	ls.nextMethod(t, "notifications/subscriptions/acknowledged")
	writeFile(t, path, encodeCatalog(t, catalog.Tool{Name: "echo", Description: "Echo v2."}))
	ls.nextMethod(t, "notifications/tools/list_changed")
	if f := rc.span(t, "notifications/tools/list_changed fan-out"); spanAttrs(f)["switchboard.listen.streams"] != "1" {
		t.Errorf("fan-out span attributes %v", spanAttrs(f))
	}

	// The drain.
	resp, err := http.DefaultClient.Do(drainRequest(http.MethodGet, e.admin, testDrainToken))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /drain: HTTP %d", resp.StatusCode)
	}
	if d := rc.span(t, "switchboard.drain"); spanAttrs(d)["switchboard.drain.streams_ended"] != "1" {
		t.Errorf("drain span attributes %v", spanAttrs(d))
	}
	if services := rc.Services(); len(services) == 0 || services[0] != "switchboard-sidecar" {
		t.Errorf("service.name %v", services)
	}
}
