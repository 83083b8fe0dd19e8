package sampleserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSampleServerWithSDKClient talks to the sample server over Streamable HTTP with the
// official Go SDK client: it lists the tools, calls one, and reads the resource.
func TestSampleServerWithSDKClient(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"convert_temperature", "get_alerts", "get_forecast"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_forecast", Arguments: map[string]any{"city": "Lisbon", "days": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("get_forecast failed: %+v", res.Content)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out ForecastOutput
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.City != "Lisbon" || len(out.Days) != 2 || out.Days[0].HighC-out.Days[0].LowC != 8 {
		t.Errorf("unexpected forecast: %s", raw)
	}

	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: StationsURI})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || read.Contents[0].Text == "" {
		t.Errorf("unexpected stations resource: %+v", read.Contents)
	}
}
