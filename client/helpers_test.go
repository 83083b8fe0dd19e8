package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/client"
)

// hang bounds every wait; it only catches hangs and never decides an outcome.
const hang = 30 * time.Second

// events collects listen events and changes for a test to wait on.
type events struct {
	mu      sync.Mutex
	all     []client.Event
	changes []client.Change
	wake    chan struct{}
}

func newEvents() *events { return &events{wake: make(chan struct{}, 1)} }

func (e *events) hooks() client.Hooks {
	return client.Hooks{
		OnEvent: func(ev client.Event) {
			e.mu.Lock()
			e.all = append(e.all, ev)
			e.mu.Unlock()
			e.poke()
		},
		OnChange: func(c client.Change) {
			e.mu.Lock()
			e.changes = append(e.changes, c)
			e.mu.Unlock()
			e.poke()
		},
	}
}

func (e *events) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// waitEvent waits until an event after index from satisfies match and returns its index.
func (e *events) waitEvent(t *testing.T, from int, what string, match func(client.Event) bool) int {
	t.Helper()
	deadline := time.After(hang)
	for {
		e.mu.Lock()
		for i := from; i < len(e.all); i++ {
			if match(e.all[i]) {
				e.mu.Unlock()
				return i
			}
		}
		e.mu.Unlock()
		select {
		case <-e.wake:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; events: %v", what, e.snapshot())
		}
	}
}

func (e *events) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.all)
}

func (e *events) snapshot() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var s []string
	for _, ev := range e.all {
		d := string(ev.Type)
		if ev.Method != "" {
			d += " " + ev.Method
		}
		if ev.Err != nil {
			d += " (" + ev.Err.Error() + ")"
		}
		s = append(s, d)
	}
	return s
}

func isType(ty client.EventType) func(client.Event) bool {
	return func(e client.Event) bool { return e.Type == ty }
}

func isNotification(method string) func(client.Event) bool {
	return func(e client.Event) bool { return e.Type == client.EventNotification && e.Method == method }
}

func connect(t *testing.T, url string, o *client.Options) *client.Client {
	t.Helper()
	if o == nil {
		o = &client.Options{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	c, err := client.Connect(ctx, url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func description(t *testing.T, tools []*mcp.Tool, name string) string {
	t.Helper()
	for _, tl := range tools {
		if tl.Name == name {
			return tl.Description
		}
	}
	t.Fatalf("no tool %s in %d tools", name, len(tools))
	return ""
}

// tctx is the test's context, bounded by hang.
func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hang)
	t.Cleanup(cancel)
	return ctx
}
