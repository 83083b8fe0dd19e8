package upstream

import (
	"encoding/json"
	"testing"
)

func TestToLegacy(t *testing.T) {
	for _, tc := range []struct{ in, id, want string }{
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p"},"name":"x"}}`, "sb-1",
			`{"jsonrpc":"2.0","id":"sb-1","method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"x"}}`},
		{`{"id":"a","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientInfo":{}}}}`, "sb-2",
			`{"id":"sb-2","params":{"name":"x","_meta":{}}}`},
		{`{"params":{"_meta":{"k":1}},"id":1}`, "sb-3", `{"params":{"_meta":{"k":1}},"id":"sb-3"}`},
		{`{"method":"notifications/cancelled","params":{}}`, "", `{"method":"notifications/cancelled","params":{}}`},
	} {
		got, err := toLegacy([]byte(tc.in), tc.id)
		if err != nil || string(got) != tc.want {
			t.Errorf("toLegacy(%s, %q) = %s, %v; want %s", tc.in, tc.id, got, err, tc.want)
		}
	}
	if got := withID([]byte(`{"jsonrpc":"2.0","id":"sb-9","result":{"id":1}}`), []byte(`{"k":[1]}`)); string(got) != `{"jsonrpc":"2.0","id":{"k":[1]},"result":{"id":1}}` {
		t.Errorf("withID = %s", got)
	}
}

func TestRequestStateAndRetryInput(t *testing.T) {
	answers := map[string]json.RawMessage{"sb-a": json.RawMessage(`{"action":"accept"}`)}
	st := encodeState("tok", answers)
	tok, got := decodeState(st)
	if tok != "tok" || string(got["sb-a"]) != `{"action":"accept"}` {
		t.Fatalf("decodeState(%q) = %q %v", st, tok, got)
	}
	if tok, got := decodeState("not-ours"); tok != "" || got != nil {
		t.Errorf("foreign state decoded as %q %v", tok, got)
	}
	stJSON, _ := json.Marshal(st)
	body := `{"id":2,"params":{"name":"x","inputResponses":{"sb-b":{"action":"decline"}},"requestState":` + string(stJSON) + `}}`
	out, tok, all, err := retryInput([]byte(body))
	if err != nil || tok != "tok" || len(all) != 2 || string(all["sb-b"]) != `{"action":"decline"}` {
		t.Fatalf("retryInput: %q %v %v", tok, all, err)
	}
	if string(out) != `{"id":2,"params":{"name":"x"}}` {
		t.Errorf("retryInput body %s", out)
	}
	if _, _, _, err := retryInput([]byte(`{"params":{"inputResponses":{"k":1,}}}`)); err == nil {
		t.Errorf("malformed inputResponses accepted")
	}
	k1, k2 := inputKey("elicitation/create", []byte(`{"message":"a"}`)), inputKey("elicitation/create", []byte(`{"message":"a"}`))
	if k1 != k2 || k1 == inputKey("sampling/createMessage", []byte(`{"message":"a"}`)) || k1 == inputKey("elicitation/create", []byte(`{"message":"b"}`)) {
		t.Errorf("inputKey is not a function of method and params")
	}
}
