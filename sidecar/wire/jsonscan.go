package wire

import (
	"bytes"
	"encoding/json"
	"errors"
)

// This file holds a small scanner over the top level of a JSON object. The
// sidecar uses it to read the few envelope fields it needs (method, id, _meta,
// name) and to splice fields into results without decoding or re-encoding the
// rest: every member it does not touch is copied as the raw bytes it came in.
//
// Unlike encoding/json it matches keys exactly (case-sensitively). An
// upstream decoder may match them case-insensitively or keep another
// duplicate, so the sidecar refuses bodies that such a decoder could read
// differently (strictjson.go).

var errNotObject = errors.New("not a JSON object")

// Member is one top-level member of an object: the raw key (with quotes) and
// the byte offsets of its value in the scanned slice.
type Member struct {
	Key        []byte
	Start, End int
}

// EachMember calls fn for every top-level member of the object in data, in
// order. It stops early when fn returns false. It never panics on malformed
// input; it returns errNotObject for anything that is not a well-formed
// object at the top level (values themselves are only skipped, so callers that
// need full validity check json.Valid first).
func EachMember(data []byte, fn func(m Member) bool) error {
	i := SkipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return errNotObject
	}
	i = SkipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return errNotObject
		}
		kend := skipString(data, i)
		if kend < 0 {
			return errNotObject
		}
		key := data[i:kend]
		i = SkipWS(data, kend)
		if i >= len(data) || data[i] != ':' {
			return errNotObject
		}
		i = SkipWS(data, i+1)
		vend := skipValue(data, i)
		if vend < 0 {
			return errNotObject
		}
		if !fn(Member{Key: key, Start: i, End: vend}) {
			return nil
		}
		i = SkipWS(data, vend)
		if i >= len(data) {
			return errNotObject
		}
		switch data[i] {
		case ',':
			i = SkipWS(data, i+1)
		case '}':
			return nil
		default:
			return errNotObject
		}
	}
}

// KeyIs reports whether the raw (quoted) key equals name.
func KeyIs(raw []byte, name string) bool {
	if len(raw) < 2 {
		return false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == name
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	return s == name
}

// SkipWS returns the offset of the first non-whitespace byte of data at or after i.
func SkipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just past the string starting at data[i]
// (which must be '"'), or -1.
func skipString(data []byte, i int) int {
	j := i + 1
	for j <= len(data) {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for p := j - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// skipValue returns the offset just past the value starting at data[i], or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				e := skipString(data, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return -1
				}
				return j
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// Field returns the raw value of the top-level member named name, and
// whether it was present exactly once. A duplicated key counts as absent and
// sets dup, because two parsers could pick different copies.
func Field(obj []byte, name string) (val []byte, ok, dup bool) {
	n := 0
	_ = EachMember(obj, func(m Member) bool {
		if KeyIs(m.Key, name) {
			n++
			val = obj[m.Start:m.End]
		}
		return true
	})
	if n > 1 {
		return nil, false, true
	}
	return val, n == 1, false
}

// StringValue decodes a raw JSON string value.
func StringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// StringField returns the string value of the top-level member named name
// when it is present exactly once and a string.
func StringField(obj []byte, name string) (string, bool) {
	raw, ok, _ := Field(obj, name)
	if !ok {
		return "", false
	}
	return StringValue(raw)
}

// WithParams rewrites the params member of a JSON-RPC request body.
func WithParams(body []byte, edit func([]byte) ([]byte, error)) ([]byte, error) {
	ps, pe, ok := Span(body, "params")
	if !ok || !IsObject(body[ps:pe]) {
		return nil, errors.New("request has no params object")
	}
	np, err := edit(body[ps:pe])
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(np)-(pe-ps))
	out = append(out, body[:ps]...)
	out = append(out, np...)
	return append(out, body[pe:]...), nil
}

// IsObject reports whether raw starts (after whitespace) an object.
func IsObject(raw []byte) bool {
	i := SkipWS(raw, 0)
	return i < len(raw) && raw[i] == '{'
}

// SetMembers returns a copy of obj with the named members replaced by (or,
// when absent, appended as) the given raw values, and the members named in
// drop removed. Members it does not name are copied byte for byte. If
// KeepExisting is set for a key, an existing member is kept instead.
func SetMembers(obj []byte, sets []KV, drop []string) ([]byte, error) {
	out := make([]byte, 0, len(obj)+64)
	out = append(out, '{')
	first := true
	present := make([]bool, len(sets))
	err := EachMember(obj, func(m Member) bool {
		for _, d := range drop {
			if KeyIs(m.Key, d) {
				return true
			}
		}
		for k, s := range sets {
			if KeyIs(m.Key, s.Key) {
				if !s.KeepExisting {
					return true
				}
				present[k] = true
			}
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, m.Key...)
		out = append(out, ':')
		out = append(out, obj[m.Start:m.End]...)
		return true
	})
	if err != nil {
		return nil, err
	}
	for k, s := range sets {
		if present[k] {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, s.Key...)
		out = append(out, '"', ':')
		out = append(out, s.Val...)
	}
	return append(out, '}'), nil
}

// KV is one member for SetMembers. Key must not need escaping.
type KV struct {
	Key          string
	Val          []byte
	KeepExisting bool
}

// IsResponse reports whether msg is a JSON-RPC response (result or error).
func IsResponse(msg []byte) bool {
	isResp := false
	_ = EachMember(msg, func(m Member) bool {
		if KeyIs(m.Key, "result") || KeyIs(m.Key, "error") {
			isResp = true
			return false
		}
		return true
	})
	return isResp
}

// JSONString is s as a JSON string value.
func JSONString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Span returns the offsets of the value of the top-level member name.
func Span(obj []byte, name string) (start, end int, ok bool) {
	_ = EachMember(obj, func(m Member) bool {
		if KeyIs(m.Key, name) {
			start, end, ok = m.Start, m.End, true
			return false
		}
		return true
	})
	return
}

// Truncate is b as a string of at most n bytes and an ellipsis (for logs and errors).
func Truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
