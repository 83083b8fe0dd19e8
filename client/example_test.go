package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/client"
)

func Example() {
	// An MCP server at 2026-07-28 (any server works; in a cluster, a Switchboard sidecar).
	srv := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "v1"}, &mcp.ServerOptions{
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.TTLMs, c.CacheScope = 60000, "public" },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "forecast", Description: "Tomorrow's weather."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sunny"}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	defer ts.Close()

	ctx := context.Background()
	c, err := client.Connect(ctx, ts.URL, &client.Options{
		Hooks: client.Hooks{OnChange: func(ch client.Change) {
			// An agent re-assembles its context here: the next read returns the new list.
		}},
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	tools, info, err := c.ListTools(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(c.ProtocolVersion(), tools[0].Name, info.TTL, info.Scope, info.Cached)
	_, info, _ = c.ListTools(ctx)
	fmt.Println("second read cached:", info.Cached)

	res, err := c.CallTool(ctx, "forecast", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// 2026-07-28 forecast 1m0s public false
	// second read cached: true
	// sunny
}
