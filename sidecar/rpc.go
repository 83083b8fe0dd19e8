package sidecar

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol constants the sidecar speaks. The go-sdk keeps the revision name
// unexported, so it is spelled out here.
const (
	// ProtocolVersion is the one modern revision the sidecar serves itself.
	ProtocolVersion = "2026-07-28"

	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerParamPrefix     = "Mcp-Param-"

	methodDiscover = "server/discover"
	methodListen   = "subscriptions/listen"

	notifAcknowledged        = "notifications/subscriptions/acknowledged"
	notifToolsListChanged    = "notifications/tools/list_changed"
	notifPromptsListChanged  = "notifications/prompts/list_changed"
	notifResourcesListChange = "notifications/resources/list_changed"
	notifResourcesUpdated    = "notifications/resources/updated"

	resultComplete      = "complete"
	resultInputRequired = "input_required"
)

// JSON-RPC error codes used by the sidecar (spec §8).
const (
	codeParseError       = jsonrpc.CodeParseError
	codeInvalidRequest   = jsonrpc.CodeInvalidRequest
	codeMethodNotFound   = jsonrpc.CodeMethodNotFound
	codeInvalidParams    = jsonrpc.CodeInvalidParams
	codeInternalError    = jsonrpc.CodeInternalError
	codeHeaderMismatch   = mcp.CodeHeaderMismatch
	codeUnsupportedProto = mcp.CodeUnsupportedProtocolVersion
)

// rpcError is an error the sidecar answers itself: an HTTP status and a
// JSON-RPC error object.
type rpcError struct {
	status  int
	code    int64
	message string
	data    any
}

func (e *rpcError) Error() string { return e.message }

func newErr(status int, code int64, msg string) *rpcError {
	return &rpcError{status: status, code: code, message: msg}
}

var nullID = json.RawMessage("null")

// errorBody renders a JSON-RPC error response carrying id (null when the
// request id is unknown).
func errorBody(id json.RawMessage, e *rpcError) []byte {
	if len(id) == 0 {
		id = nullID
	}
	type errObj struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errObj          `json:"error"`
	}{"2.0", id, errObj{e.code, e.message, e.data}})
	if err != nil { // only if data does not marshal; keep the code and id
		b, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   errObj          `json:"error"`
		}{"2.0", id, errObj{Code: e.code, Message: e.message}})
	}
	return b
}

func writeRPCError(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	b := errorBody(id, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}
