// Command server2025 is a 2025-era MCP server for the client package's fallback test: go-sdk
// v1.4.1 (which knows protocol revisions up to 2025-11-25 and nothing of 2026-07-28), stateful
// Streamable HTTP with its GET stream. POST /add?name=N on the admin address adds a tool, so the
// server pushes notifications/tools/list_changed on the GET stream.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "127.0.0.1:0", "MCP address (path /mcp)")
	admin := flag.String("admin", "127.0.0.1:0", "admin address (POST /add?name=N)")
	flag.Parse()

	s := mcp.NewServer(&mcp.Implementation{Name: "server2025", Version: "v1.4.1"}, nil)
	add := func(name string) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Echoes its name."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
			})
	}
	add("alpha")

	a := http.NewServeMux()
	a.HandleFunc("POST /add", func(w http.ResponseWriter, r *http.Request) { add(r.URL.Query().Get("name")) })
	go func() { log.Fatal(http.ListenAndServe(*admin, a)) }()

	m := http.NewServeMux()
	m.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	log.Fatal(http.ListenAndServe(*addr, m))
}
