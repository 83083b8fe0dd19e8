//go:build e2e

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Questions a 2025-era upstream asks during a call (elicitation, sampling)
// reach 2026-07-28 clients as input_required results, and their answers
// reach the upstream's pending request. Upstream: go-sdk v1.4.1's
// everything-server (test_elicitation, test_sampling), over HTTP and over
// stdio behind the real bridge.

const (
	elicitArgs = `,"name":"test_elicitation","arguments":{"message":"Your name?"}`
	// metaElicit declares the elicitation capability.
	metaElicit = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"}}`
)

// elicitReq is a tools/call of test_elicitation declaring elicitation, with
// extra params (inputResponses, requestState).
func elicitReq(t *testing.T, url string, id any, extra string) *http.Request {
	t.Helper()
	idj, _ := json.Marshal(id)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{%s%s%s}}`, idj, metaElicit, elicitArgs, extra)
	req := rpcReq(t, url, id, "tools/call", "test_elicitation", "")
	r2, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r2.Header = req.Header.Clone()
	return r2
}

// askInput sends req and checks its input_required answer (one
// elicitation request); it returns the key and the requestState.
func askInput(t *testing.T, req *http.Request) (key, state string) {
	t.Helper()
	st, _, msg := do(t, req)
	return inputRequired(t, st, msg)
}

// inputRequired checks an input_required answer with one elicitation
// request and returns its key and the requestState.
func inputRequired(t *testing.T, st int, msg map[string]any) (key, state string) {
	t.Helper()
	res, _ := msg["result"].(map[string]any)
	if st != http.StatusOK || res["resultType"] != "input_required" {
		t.Fatalf("want input_required, got HTTP %d %v", st, msg)
	}
	if _, has := res["ttlMs"]; has {
		t.Errorf("input_required must not carry cache hints: %v", res)
	}
	irs, _ := res["inputRequests"].(map[string]any)
	if len(irs) != 1 {
		t.Fatalf("inputRequests %v", res["inputRequests"])
	}
	for k, v := range irs {
		ir, _ := v.(map[string]any)
		p, _ := ir["params"].(map[string]any)
		if ir["method"] != "elicitation/create" || p["message"] != "Your name?" {
			t.Errorf("input request %v", ir)
		}
		key = k
	}
	state, _ = res["requestState"].(string)
	if state == "" {
		t.Fatalf("no requestState: %v", res)
	}
	return key, state
}

func answerParams(key, name, state string) string {
	return fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"username":%q}}},"requestState":%q`, key, name, state)
}

func TestLegacyUpstreamInputRequired(t *testing.T) {
	eachLegacyUpstream(t, func(t *testing.T, stdio bool) {
		e := legacyEnv(t, stdio)

		t.Run("go-sdk client answers elicitation and sampling", func(t *testing.T) {
			asked := 0
			c := mcp.NewClient(&mcp.Implementation{Name: "mrtr", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked++
					if r.Params.Message != "Your name?" {
						return nil, fmt.Errorf("unexpected question %q", r.Params.Message)
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice"}}, nil
				},
				//nolint:staticcheck // sampling is deprecated in 2026-07-28; 2025-era servers still ask for it
				CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					//nolint:staticcheck // as above
					return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "from the client"}}, nil
				},
			})
			ctx, cancel := context.WithTimeout(context.Background(), hang)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.mcp}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_elicitation", Arguments: map[string]any{"message": "Your name?"}})
			if err != nil || res.IsError {
				t.Fatalf("test_elicitation: %v %+v", err, res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "action=accept") || !strings.Contains(text, "alice") || asked != 1 {
				t.Errorf("test_elicitation answered %q after %d questions", text, asked)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			if err != nil || res.IsError {
				t.Fatalf("test_sampling: %v %+v", err, res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; text != "LLM response: from the client" {
				t.Errorf("test_sampling answered %q", text)
			}
		})

		t.Run("without the capability: -32021", func(t *testing.T) {
			st, _, msg := do(t, rpcReq(t, e.mcp, "nocap", "tools/call", "test_elicitation", elicitArgs))
			er, _ := msg["error"].(map[string]any)
			data, _ := er["data"].(map[string]any)
			rc, _ := data["requiredCapabilities"].(map[string]any)
			if st != http.StatusBadRequest || fmt.Sprint(er["code"]) != "-32021" || rc["elicitation"] == nil || msg["id"] != "nocap" {
				t.Fatalf("HTTP %d %v", st, msg)
			}
			// The upstream's session is free again: calls go on.
			callTool(t, e.mcp, "test_simple_text")
		})

		t.Run("retry resumes the held call; only its caller may", func(t *testing.T) {
			req := elicitReq(t, e.mcp, "ask", "")
			req.Header.Set("Authorization", "Bearer one")
			key, state := askInput(t, req)

			// Another caller's retry with the same requestState does not
			// reach the held call: the call runs again for it and asks it.
			other := elicitReq(t, e.mcp, "other", answerParams("sb-unrelated", "mallory", state))
			other.Header.Set("Authorization", "Bearer two")
			st, _, msg := do(t, other)
			if _, st2 := inputRequired(t, st, msg); st2 == state {
				t.Errorf("a second held call got the same requestState")
			}

			// A retry without the answer is refused; the call stays held.
			retry := elicitReq(t, e.mcp, "noanswer", fmt.Sprintf(`,"inputResponses":{},"requestState":%q`, state))
			retry.Header.Set("Authorization", "Bearer one")
			st, _, msg = do(t, retry)
			if er, _ := msg["error"].(map[string]any); st != http.StatusBadRequest || fmt.Sprint(er["code"]) != "-32602" || !strings.Contains(fmt.Sprint(er["message"]), key) {
				t.Errorf("retry without the answer: HTTP %d %v", st, msg)
			}

			retry = elicitReq(t, e.mcp, "answer", answerParams(key, "bob", state))
			retry.Header.Set("Authorization", "Bearer one")
			st, _, msg = do(t, retry)
			res, _ := msg["result"].(map[string]any)
			if st != http.StatusOK || msg["id"] != "answer" || res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "bob") {
				t.Fatalf("retry with the answer: HTTP %d %v", st, msg)
			}
		})

		t.Run("retry on another replica runs the call again with the answer", func(t *testing.T) {
			// A second sidecar in front of the same upstream: the held
			// call is not there, so the call runs again and the upstream's
			// same question is answered from inputResponses.
			other := &env{upAddr: e.upAddr}
			other.startSidecar(t)
			key, state := askInput(t, elicitReq(t, e.mcp, "a1", ""))
			st, _, msg := do(t, elicitReq(t, other.mcp, "a2", answerParams(key, "carol", state)))
			res, _ := msg["result"].(map[string]any)
			if st != http.StatusOK || res["resultType"] != "complete" || !strings.Contains(fmt.Sprint(res["content"]), "carol") {
				t.Fatalf("retry on the other replica: HTTP %d %v", st, msg)
			}
			// A requestState that is not the sidecar's runs the call anew.
			askInput(t, elicitReq(t, other.mcp, "a3", `,"requestState":"not-ours"`))
		})
	})
}
