// Package sampleserver is a small MCP server built with the official Go SDK: a weather desk with
// deterministic answers (no network). `make dev`, the samples in config/samples and end-to-end
// tests put it behind the Switchboard sidecar as the "MCP server container".
package sampleserver

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StationsURI is the one resource the server serves itself.
const StationsURI = "weather://stations"

// ForecastInput are the arguments of get_forecast.
type ForecastInput struct {
	City string `json:"city" jsonschema:"the city to forecast"`
	Days int    `json:"days,omitempty" jsonschema:"number of days, 1 to 7 (default 3)"`
}

// Day is one day of a forecast.
type Day struct {
	Day        int    `json:"day"`
	Conditions string `json:"conditions"`
	HighC      int    `json:"highC"`
	LowC       int    `json:"lowC"`
}

// ForecastOutput is the structured result of get_forecast.
type ForecastOutput struct {
	City string `json:"city"`
	Days []Day  `json:"days"`
}

// AlertsInput are the arguments of get_alerts.
type AlertsInput struct {
	Region string `json:"region" jsonschema:"a region code such as CA or NY"`
}

// AlertsOutput is the structured result of get_alerts.
type AlertsOutput struct {
	Region string   `json:"region"`
	Alerts []string `json:"alerts"`
}

// ConvertInput are the arguments of convert_temperature.
type ConvertInput struct {
	Celsius float64 `json:"celsius" jsonschema:"temperature in degrees Celsius"`
}

// ConvertOutput is the structured result of convert_temperature.
type ConvertOutput struct {
	Fahrenheit float64 `json:"fahrenheit"`
}

var conditions = []string{"sunny", "partly cloudy", "overcast", "light rain", "showers", "windy", "fog"}

// seed makes answers deterministic per input.
func seed(s string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.ToLower(s)))
	return int(h.Sum32() % 1000)
}

// New returns the sample server.
func New() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "switchboard-sample-weather", Version: "1.0.0"}, nil)

	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_forecast",
		Description: "Daily forecast for a city.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in ForecastInput) (*mcp.CallToolResult, ForecastOutput, error) {
		if in.City == "" {
			return nil, ForecastOutput{}, fmt.Errorf("city is required")
		}
		days := in.Days
		if days <= 0 {
			days = 3
		}
		days = min(days, 7)
		out := ForecastOutput{City: in.City}
		base := seed(in.City)
		for d := range days {
			high := 10 + (base+d*7)%20
			out.Days = append(out.Days, Day{Day: d + 1, Conditions: conditions[(base+d)%len(conditions)], HighC: high, LowC: high - 8})
		}
		return nil, out, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "get_alerts",
		Description: "Active weather alerts for a region.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in AlertsInput) (*mcp.CallToolResult, AlertsOutput, error) {
		out := AlertsOutput{Region: strings.ToUpper(in.Region), Alerts: []string{}}
		if seed(in.Region)%3 == 0 {
			out.Alerts = append(out.Alerts, "High wind warning until 18:00")
		}
		return nil, out, nil
	})

	mcp.AddTool(s, &mcp.Tool{
		Name:        "convert_temperature",
		Description: "Convert Celsius to Fahrenheit.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(_ context.Context, _ *mcp.CallToolRequest, in ConvertInput) (*mcp.CallToolResult, ConvertOutput, error) {
		return nil, ConvertOutput{Fahrenheit: in.Celsius*9/5 + 32}, nil
	})

	s.AddResource(&mcp.Resource{
		URI: StationsURI, Name: "stations", Title: "Weather stations", MIMEType: "text/plain",
		Description: "The stations the forecasts come from.",
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "text/plain", Text: "SFO San Francisco\nJFK New York\nLHR London\n",
		}}}, nil
	})
	return s
}

// Handler serves the sample server over stateless Streamable HTTP (protocol 2026-07-28).
func Handler() http.Handler {
	s := New()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
}
