package client

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CacheScope is a cached answer's scope: who else may be served it.
type CacheScope string

const (
	// ScopePublic answers are served to every credential.
	ScopePublic CacheScope = "public"
	// ScopePrivate answers are served only to the credential that read them.
	ScopePrivate CacheScope = "private"
)

// listSpec is one kind of list: its method and result member at 2026-07-28, and at 2025-11-25
// the session call that reads one page and whether the server announces changes of it.
type listSpec[T any] struct {
	method, member string
	legacy         func(ctx context.Context, s *mcp.ClientSession, cursor string) ([]T, string, error)
	listChanged    func(*mcp.ServerCapabilities) bool
}

var (
	toolsList = listSpec[*mcp.Tool]{
		method: "tools/list", member: "tools",
		legacy: func(ctx context.Context, s *mcp.ClientSession, cursor string) ([]*mcp.Tool, string, error) {
			r, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		},
		listChanged: func(c *mcp.ServerCapabilities) bool { return c.Tools != nil && c.Tools.ListChanged },
	}
	promptsList = listSpec[*mcp.Prompt]{
		method: "prompts/list", member: "prompts",
		legacy: func(ctx context.Context, s *mcp.ClientSession, cursor string) ([]*mcp.Prompt, string, error) {
			r, err := s.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		},
		listChanged: func(c *mcp.ServerCapabilities) bool { return c.Prompts != nil && c.Prompts.ListChanged },
	}
	resourcesList = listSpec[*mcp.Resource]{
		method: "resources/list", member: "resources",
		legacy: func(ctx context.Context, s *mcp.ClientSession, cursor string) ([]*mcp.Resource, string, error) {
			r, err := s.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		},
		listChanged: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil && c.Resources.ListChanged },
	}
	templatesList = listSpec[*mcp.ResourceTemplate]{
		method: "resources/templates/list", member: "resourceTemplates",
		legacy: func(ctx context.Context, s *mcp.ClientSession, cursor string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := s.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		},
		listChanged: func(c *mcp.ServerCapabilities) bool { return c.Resources != nil && c.Resources.ListChanged },
	}
)
