module github.com/switchboard-mcp/switchboard

go 1.26.0
