package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
)

// JSONSchema is a JSON Schema object for a tool's input or output, kept byte for byte as the
// user wrote it. MCP requires these schemas to describe an object, so `type: object` is the one
// keyword the API server checks; everything else is preserved unchanged.
// +kubebuilder:pruning:PreserveUnknownFields
type JSONSchema struct {
	// type must be "object": MCP tool arguments and structured results are JSON objects.
	// +required
	// +kubebuilder:validation:Enum=object
	Type string `json:"type"`

	// raw is the whole schema as given; it is what MarshalJSON writes.
	raw []byte `json:"-"`
}

// NewJSONSchema wraps a JSON object.
func NewJSONSchema(raw []byte) (*JSONSchema, error) {
	s := &JSONSchema{}
	if err := s.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return s, nil
}

// Raw returns the schema as given (nil for a zero JSONSchema).
func (s *JSONSchema) Raw() json.RawMessage { return s.raw }

// UnmarshalJSON keeps the whole object and reads its type keyword.
func (s *JSONSchema) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("a JSON Schema must be a JSON object")
	}
	var head struct {
		Type string `json:"type"`
	}
	// A non-string type keyword (e.g. ["object","null"]) leaves Type empty; the API server
	// rejects such a schema with the enum message.
	_ = json.Unmarshal(b, &head)
	s.Type = head.Type
	s.raw = append([]byte(nil), b...)
	return nil
}

// MarshalJSON writes the schema as given, or {"type":…} for a schema built in Go.
func (s JSONSchema) MarshalJSON() ([]byte, error) {
	if s.raw != nil {
		return s.raw, nil
	}
	return json.Marshal(struct {
		Type string `json:"type"`
	}{s.Type})
}

// DeepCopyInto copies the schema, including the raw bytes.
func (s *JSONSchema) DeepCopyInto(out *JSONSchema) {
	out.Type = s.Type
	out.raw = append([]byte(nil), s.raw...)
	if s.raw == nil {
		out.raw = nil
	}
}
