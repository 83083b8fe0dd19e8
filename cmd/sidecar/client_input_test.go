//go:build e2e

package main_test

// A 2026-07-28 upstream's input requests (SEP-2322 input_required:
// elicitation, sampling, roots) reach 2025-era clients as the server-to-
// client requests of their revision, through a real sidecar process in front
// of go-sdk v1.8.0's everything-server, with go-sdk clients pinned to each
// 2025-era revision; and a 2025-era client's notifications/cancelled closes
// the upstream call.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// inputClient connects a go-sdk client pinned to version with handlers for
// every input kind its revision has: elicitation (2025-06-18 on) answers
// name "Ada" or color "teal", sampling answers "Paris", roots lists one
// root. asked counts the requests the handlers saw.
func inputClient(t *testing.T, url, version string, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), asked *atomic.Int32) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{
		//nolint:staticcheck // sampling is what 2025-era clients do; deprecated only from 2026-07-28
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked.Add(1)
			if len(req.Params.Messages) == 0 {
				return nil, errors.New("no messages")
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "Paris"}}, nil //nolint:staticcheck // as above
		},
	}
	if version >= "2025-06-18" {
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked.Add(1)
			if elicit != nil {
				return elicit(ctx, req)
			}
			if strings.Contains(req.Params.Message, "color") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"color": "teal"}}, nil
			}
			if strings.Contains(req.Params.Message, "context for the prompt") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"context": "the catalog"}}, nil
			}
			if strings.Contains(req.Params.Message, "confirm") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy-input-test", Version: "1"}, opts)
	c.AddRoots(&mcp.Root{URI: "file:///srv/switchboard-root", Name: "root"}) //nolint:staticcheck // roots, as 2025-era clients have them
	return connectClient(t, c, url, version)
}

func callText(t *testing.T, cs *mcp.ClientSession, tool string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", errors.New("tool error: " + b.String())
	}
	return b.String(), nil
}

// TestLegacyClientsAnswerUpstreamInput: for each 2025-era revision, the
// everything-server's input_required tools complete with what the client's
// handlers answered (single input of each kind, several at once, several
// rounds, requestState echoed); a client that lacks a capability is not
// asked for it (its real capabilities reach the upstream).
func TestLegacyClientsAnswerUpstreamInput(t *testing.T) {
	e := newEnv(t)
	type call struct{ tool, want string }
	all := []call{
		{"test_input_required_result_sampling", "Sampling response: Paris"},
		{"test_input_required_result_list_roots", "Client exposed 1 root(s): file:///srv/switchboard-root"},
	}
	elicits := []call{
		{"test_input_required_result_elicitation", "Hello, Ada!"},
		{"test_input_required_result_request_state", "state-ok: requestState received and confirmation accepted"},
		{"test_input_required_result_multi_round", "Multi-round complete: Ada likes teal"},
		{"test_input_required_result_multiple_inputs", "Paris Ada — 1 root(s) visible"},
		{"test_input_required_result_capabilities", "Capability-aware input requests fulfilled"},
	}
	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(v, func(t *testing.T) {
			var asked atomic.Int32
			cs := inputClient(t, e.mcp, v, nil, &asked)
			calls := all
			if v >= "2025-06-18" {
				calls = append(append([]call{}, all...), elicits...)
			} else {
				// No elicitation in 2025-03-26: the upstream hears the
				// client's real capabilities and asks only for the others.
				calls = append(calls, call{"test_input_required_result_capabilities", "Capability-aware input requests fulfilled"})
			}
			for _, c := range calls {
				before := asked.Load()
				got, err := callText(t, cs, c.tool)
				if err != nil {
					t.Fatalf("%s: %v", c.tool, err)
				}
				if got != c.want {
					t.Errorf("%s = %q, want %q", c.tool, got, c.want)
				}
				if asked.Load() == before && !strings.Contains(c.tool, "roots") { // roots are answered by the go-sdk client itself
					t.Errorf("%s: the client's handlers were never asked", c.tool)
				}
			}
			if v >= "2025-06-18" {
				// prompts/get asks too (SEP-2322 allows it on prompts/get
				// and resources/read as well as tools/call).
				ctx, cancel := context.WithTimeout(context.Background(), hang)
				defer cancel()
				before := asked.Load()
				p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt"})
				if err != nil {
					t.Fatalf("prompts/get: %v", err)
				}
				if len(p.Messages) != 1 || p.Messages[0].Content.(*mcp.TextContent).Text != "Context: the catalog" || asked.Load() == before {
					t.Errorf("prompts/get = %+v", p.Messages)
				}
			}
			if v == "2025-11-25" {
				// Eight calls at once in one session, each asking twice
				// (multi-round): every answer reaches its own call.
				errs := make(chan error, 8)
				for range 8 {
					go func() {
						got, err := callText(t, cs, "test_input_required_result_multi_round")
						if err == nil && got != "Multi-round complete: Ada likes teal" {
							err = errors.New("got " + got)
						}
						errs <- err
					}()
				}
				for range 8 {
					if err := <-errs; err != nil {
						t.Errorf("concurrent multi-round call: %v", err)
					}
				}
			}
			// A plain call still answers as before, on the same session.
			if got, err := callText(t, cs, "test_simple_text"); err != nil || got == "" {
				t.Errorf("test_simple_text after input calls: %q, %v", got, err)
			}
		})
	}
}

// TestLegacyInputFailures: the client's error, and a client that does not
// answer within --input-timeout, end the call with an error that says so;
// the session keeps working.
func TestLegacyInputFailures(t *testing.T) {
	e := newEnv(t, "--input-timeout", "1s")
	var asked atomic.Int32
	var mode atomic.Value
	mode.Store("refuse")
	told := make(chan struct{}, 1)
	cs := inputClient(t, e.mcp, "2025-11-25", func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if mode.Load() == "refuse" {
			return nil, errors.New("the user closed the dialog")
		}
		<-ctx.Done() // never answers; the sidecar's notifications/cancelled ends this
		told <- struct{}{}
		return nil, ctx.Err()
	}, &asked)

	_, err := callText(t, cs, "test_input_required_result_elicitation")
	if err == nil || !strings.Contains(err.Error(), "answered the MCP server's elicitation/create request with an error") ||
		!strings.Contains(err.Error(), "the user closed the dialog") {
		t.Fatalf("client error: got %v", err)
	}
	mode.Store("silent")
	start := time.Now()
	_, err = callText(t, cs, "test_input_required_result_elicitation")
	if err == nil || !strings.Contains(err.Error(), "did not answer the MCP server's elicitation/create request within 1s") {
		t.Fatalf("timeout: got %v", err)
	}
	if d := time.Since(start); d > hang {
		t.Fatalf("timeout took %v", d)
	}
	select {
	case <-told:
	case <-time.After(hang):
		t.Fatal("the client was not told (notifications/cancelled) that its elicitation is no longer awaited")
	}
	if got, err := callText(t, cs, "test_input_required_result_sampling"); err != nil || got != "Sampling response: Paris" {
		t.Fatalf("after failures: %q, %v", got, err)
	}
	// The late answers above were accepted (the session still works); a
	// response to a request this replica never sent is refused.
	sid := legacyInit(t, e.mcp, "2025-11-25")
	req := legacyResponse(t, e.mcp, sid, `"switchboard-input-elsewhere-1"`, `{"action":"accept","content":{"name":"x"}}`)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unexpected response: HTTP %d, want 400", resp.StatusCode)
	}
}

func legacyResponse(t *testing.T, url, sid, id, result string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":`+id+`,"result":`+result+`}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	return req
}

// blockingUpstream is a go-sdk v1.8.0 server (2026-07-28, stateless, the
// request's context tied to its HTTP stream) on 127.0.0.1 with one tool
// that waits until its context ends and reports that on ended.
func blockingUpstream(t *testing.T) (addr string, entered, ended chan struct{}) {
	t.Helper()
	entered, ended = make(chan struct{}, 4), make(chan struct{}, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "blocking", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "waits until cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			entered <- struct{}{}
			select {
			case <-ctx.Done():
				ended <- struct{}{}
				return nil, nil, ctx.Err()
			case <-time.After(2 * hang):
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not cancelled"}}}, nil, nil
			}
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: hang}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String(), entered, ended
}

// TestLegacyCancelledClosesTheUpstreamCall: a 2025-11-25 client's
// notifications/cancelled (its POST still open, as 2025 allows) closes the
// upstream request, whose handler sees its context end; the POST ends with
// no JSON-RPC response. A notification for another session's id, or for an
// id not in flight, cancels nothing.
func TestLegacyCancelledClosesTheUpstreamCall(t *testing.T) {
	addr, entered, ended := blockingUpstream(t)
	e := &env{upAddr: addr}
	e.startSidecar(t)
	sid := legacyInit(t, e.mcp, "2025-11-25")
	other := legacyInit(t, e.mcp, "2025-11-25")
	hdr := func(s string) []string { return []string{"Mcp-Session-Id", s, "MCP-Protocol-Version", "2025-11-25"} }

	type answer struct {
		status int
		ct     string
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(legacyReq(t, e.mcp, 7, "tools/call", `{"name":"block","arguments":{}}`, hdr(sid)...))
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, err = io.Copy(&b, resp.Body)
		done <- answer{resp.StatusCode, resp.Header.Get("Content-Type"), b.String(), err}
	}()
	select {
	case <-entered:
	case <-time.After(hang):
		t.Fatal("the call never reached the upstream")
	}
	notify := func(s, id string) {
		resp, err := http.DefaultClient.Do(legacyReq(t, e.mcp, nil, "notifications/cancelled", `{"requestId":`+id+`,"reason":"user"}`, hdr(s)...))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: HTTP %d, want 202", resp.StatusCode)
		}
	}
	notify(other, "7") // the same id in another session
	notify(sid, "8")   // an id not in flight
	select {
	case <-ended:
		t.Fatal("a notification for another session or id cancelled the call")
	case a := <-done:
		t.Fatalf("the call ended early: %+v", a)
	case <-time.After(500 * time.Millisecond):
	}
	notify(sid, "7")
	select {
	case <-ended:
	case <-time.After(hang):
		t.Fatal("the upstream handler's context did not end after notifications/cancelled")
	}
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.status != http.StatusOK || !strings.HasPrefix(a.ct, "text/event-stream") || strings.Contains(a.body, `"id"`) {
			t.Fatalf("cancelled call's POST: HTTP %d %q %q; want 200 text/event-stream without a response", a.status, a.ct, a.body)
		}
	case <-time.After(hang):
		t.Fatal("the cancelled call's POST did not end")
	}
}

// TestLegacyClientInputThroughLegacyUpstream: both halves at once. A
// 2025-11-25 client and a 2025-era upstream (go-sdk v1.4.1's
// everything-server, over HTTP and behind the stdio bridge) with the
// 2026-07-28 sidecar between them: the upstream's elicitation and sampling
// requests become input_required on the sidecar's upstream side
// (sidecar/upstream/legacy_input.go) and the client's requests again on its client
// side (sidecar/legacy/input.go), and the call completes with the client's answers.
func TestLegacyClientInputThroughLegacyUpstream(t *testing.T) {
	eachLegacyUpstream(t, func(t *testing.T, stdio bool) {
		e := legacyEnv(t, stdio)
		var asked atomic.Int32
		cs := inputClient(t, e.mcp, "2025-11-25", func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if r.Params.Message != "Your name?" {
				return nil, errors.New("unexpected question " + r.Params.Message)
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice"}}, nil
		}, &asked)
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "Your name?"}})
		if err != nil || res.IsError {
			t.Fatalf("test_elicitation: %v %+v", err, res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "action=accept") || !strings.Contains(text, "alice") {
			t.Errorf("test_elicitation answered %q", text)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("test_sampling: %v %+v", err, res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; text != "LLM response: Paris" {
			t.Errorf("test_sampling answered %q", text)
		}
		if n := asked.Load(); n != 2 {
			t.Errorf("the client's handlers were asked %d times, want 2", n)
		}
	})
}
