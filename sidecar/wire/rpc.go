package wire

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// JSON-RPC error codes the sidecar answers with (spec §8).
const (
	CodeParseError                 = jsonrpc.CodeParseError
	CodeInvalidRequest             = jsonrpc.CodeInvalidRequest
	CodeMethodNotFound             = jsonrpc.CodeMethodNotFound
	CodeInvalidParams              = jsonrpc.CodeInvalidParams
	CodeInternalError              = jsonrpc.CodeInternalError
	CodeHeaderMismatch             = mcp.CodeHeaderMismatch
	CodeUnsupportedProtocolVersion = mcp.CodeUnsupportedProtocolVersion
)

// CodeAuthorizationEnded is the JSON-RPC error code that ends a listen stream whose caller's
// authorization ended. Provisional: the MCP draft "Authorization lifetime for subscription
// streams" names the error AuthorizationEnded but allocates no code yet, and the spec reserves
// -32020..-32099 for codes it defines (and discourages -32000..-32019), so this one sits outside
// the JSON-RPC reserved range until the spec gives it a number.
const CodeAuthorizationEnded = -31001

// Error is an error the sidecar answers itself: an HTTP status and a
// JSON-RPC error object.
type Error struct {
	Status  int
	Code    int64
	Message string
	Data    any
}

// Error is the message.
func (e *Error) Error() string { return e.Message }

// NewError returns an Error without data.
func NewError(status int, code int64, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

// NullID is the id of an error response to a request whose id is unknown.
var NullID = json.RawMessage("null")

// ErrorBody renders a JSON-RPC error response carrying id (null when the
// request id is unknown).
func ErrorBody(id json.RawMessage, e *Error) []byte {
	if len(id) == 0 {
		id = NullID
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
	}{"2.0", id, errObj{e.Code, e.Message, e.Data}})
	if err != nil { // only if data does not marshal; keep the code and id
		b, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   errObj          `json:"error"`
		}{"2.0", id, errObj{Code: e.Code, Message: e.Message}})
	}
	return b
}

// WriteError answers with e as a JSON body, its status the HTTP status.
func WriteError(w http.ResponseWriter, id json.RawMessage, e *Error) {
	b := ErrorBody(id, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// ValidID reports whether a JSON-RPC id is usable: a string or a number.
func ValidID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	switch c := id[0]; {
	case c == '"':
		return true
	case c == '-' || (c >= '0' && c <= '9'):
		return true
	}
	return false
}
