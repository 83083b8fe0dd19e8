package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mode is what of a call's arguments a record keeps.
type Mode string

const (
	// ModeOff keeps no arguments (the default).
	ModeOff Mode = "Off"
	// ModeRedacted keeps the arguments with the configured paths and every secret-looking
	// value replaced by Redacted.
	ModeRedacted Mode = "Redacted"
	// ModeFull keeps the arguments with the configured paths replaced only.
	ModeFull Mode = "Full"
)

// Markers written in place of what a record does not keep.
const (
	Redacted  = "[REDACTED]"
	Truncated = "[TRUNCATED]"
)

// Bounds of the arguments a record keeps.
const (
	// DefaultMaxArgumentBytes bounds the arguments' JSON in one record; past it, members and
	// elements are replaced by one Truncated marker and long strings are cut.
	DefaultMaxArgumentBytes = 4096
	// MaxArgumentDepth is how deep arguments are kept; deeper values become Truncated.
	MaxArgumentDepth = 16
	// maxPathSegments bounds one redaction path.
	maxPathSegments = 16
)

// Redactor turns a call's arguments into what its record keeps. It is immutable and safe for
// concurrent use.
type Redactor struct {
	mode     Mode
	paths    [][]string
	maxBytes int
}

// NewRedactor returns a Redactor for mode, replacing the values at paths by Redacted.
//
// A path names members from the arguments object down, separated by dots; "*" matches any
// member or any array element: "password", "auth.token", "items.*.secret". A leading "$." is
// allowed. maxBytes <= 0 means DefaultMaxArgumentBytes.
func NewRedactor(mode Mode, paths []string, maxBytes int) (*Redactor, error) {
	switch mode {
	case "", ModeOff, ModeRedacted, ModeFull:
	default:
		return nil, fmt.Errorf("audit arguments mode %q: want Off, Redacted or Full", mode)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxArgumentBytes
	}
	r := &Redactor{mode: mode, maxBytes: maxBytes}
	for _, p := range paths {
		segs := strings.Split(strings.TrimPrefix(p, "$."), ".")
		if len(segs) > maxPathSegments || slices.Contains(segs, "") {
			return nil, fmt.Errorf("audit redaction path %q: want member names separated by dots (\"auth.token\", \"items.*.secret\"), at most %d", p, maxPathSegments)
		}
		r.paths = append(r.paths, segs)
	}
	return r, nil
}

// Keeps reports whether records keep arguments at all.
func (r *Redactor) Keeps() bool { return r != nil && (r.mode == ModeRedacted || r.mode == ModeFull) }

// Arguments returns what a record keeps of args (a JSON value) and whether it was cut to the
// bound. Without arguments to keep it returns nil. Members keep the client's order and
// spelling; the input is read once, without decoding it into Go values.
func (r *Redactor) Arguments(args json.RawMessage) (json.RawMessage, bool) {
	if !r.Keeps() || len(args) == 0 {
		return nil, false
	}
	if !json.Valid(args) {
		// The sidecar checked the request before; a record stays valid JSON regardless.
		return json.RawMessage(`"` + Truncated + `"`), true
	}
	w := writer{r: r, in: args, buf: make([]byte, 0, min(len(args), r.maxBytes)+64)}
	var states []pathState
	for i := range r.paths {
		states = append(states, pathState{path: i})
	}
	w.ws()
	if !w.value(states, 0) || (w.ws() && w.pos != len(w.in)) {
		return json.RawMessage(`"` + Truncated + `"`), true
	}
	return w.buf, w.truncated
}

// pathState is a redaction path matched up to seg.
type pathState struct{ path, seg int }

// writer copies a JSON value from in to buf, value by value, replacing what the Redactor
// does not keep. Its methods return false on malformed input.
type writer struct {
	r         *Redactor
	in        []byte
	pos       int
	buf       []byte
	truncated bool
}

func (w *writer) full() bool { return len(w.buf) >= w.r.maxBytes }

// ws skips white space; it reports whether input remains... or ended cleanly (always true).
func (w *writer) ws() bool {
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return true
		}
	}
	return true
}

func (w *writer) peek() byte {
	if w.pos < len(w.in) {
		return w.in[w.pos]
	}
	return 0
}

// step returns the states after descending into member key (or an array element), and
// whether one of them ends there: the value is redacted.
func (w *writer) step(states []pathState, key []byte, element bool) ([]pathState, bool) {
	var next []pathState
	for _, s := range states {
		seg := w.r.paths[s.path][s.seg]
		if seg != "*" && (element || seg != string(key)) {
			continue
		}
		if s.seg+1 == len(w.r.paths[s.path]) {
			return nil, true
		}
		next = append(next, pathState{s.path, s.seg + 1})
	}
	return next, false
}

// value copies the value at pos (white space skipped).
func (w *writer) value(states []pathState, depth int) bool {
	switch c := w.peek(); c {
	case '{', '[':
		if depth >= MaxArgumentDepth {
			w.marker(Truncated)
			w.truncated = true
			return w.skip()
		}
		if c == '{' {
			return w.object(states, depth)
		}
		return w.array(states, depth)
	case '"':
		start := w.pos
		if !w.str() {
			return false
		}
		w.string(w.in[start:w.pos])
		return true
	default: // a number, true, false or null: copied as it is
		start := w.pos
		for w.pos < len(w.in) && !strings.ContainsRune(",]} \t\n\r", rune(w.in[w.pos])) {
			w.pos++
		}
		if w.pos == start {
			return false
		}
		w.buf = append(w.buf, w.in[start:w.pos]...)
		return true
	}
}

func (w *writer) object(states []pathState, depth int) bool {
	w.pos++ // {
	w.buf = append(w.buf, '{')
	first, cut := true, false
	for w.ws(); w.peek() != '}'; w.ws() {
		if !first {
			if w.peek() != ',' {
				return false
			}
			w.pos++
			w.ws()
		}
		kstart := w.pos
		if w.peek() != '"' || !w.str() {
			return false
		}
		rawKey := w.in[kstart:w.pos]
		if w.ws(); w.peek() != ':' {
			return false
		}
		w.pos++
		w.ws()
		if cut {
			if !w.skip() {
				return false
			}
			first = false
			continue
		}
		if !first {
			w.buf = append(w.buf, ',')
		}
		first = false
		if w.full() {
			w.truncated, cut = true, true
			w.buf = append(w.buf, `"`+Truncated+`":null`...)
			if !w.skip() {
				return false
			}
			continue
		}
		w.buf = append(w.buf, rawKey...)
		w.buf = append(w.buf, ':')
		key := unquote(rawKey)
		next, redact := w.step(states, key, false)
		if redact || (w.r.mode == ModeRedacted && secretKey(key) && !w.scalarNext()) {
			w.marker(Redacted)
			if !w.skip() {
				return false
			}
			continue
		}
		if !w.value(next, depth+1) {
			return false
		}
	}
	w.pos++ // }
	w.buf = append(w.buf, '}')
	return true
}

func (w *writer) array(states []pathState, depth int) bool {
	w.pos++ // [
	w.buf = append(w.buf, '[')
	first, cut := true, false
	for w.ws(); w.peek() != ']'; w.ws() {
		if !first {
			if w.peek() != ',' {
				return false
			}
			w.pos++
			w.ws()
		}
		if cut {
			if !w.skip() {
				return false
			}
			first = false
			continue
		}
		if !first {
			w.buf = append(w.buf, ',')
		}
		first = false
		if w.full() {
			w.truncated, cut = true, true
			w.marker(Truncated)
			if !w.skip() {
				return false
			}
			continue
		}
		next, redact := w.step(states, nil, true)
		if redact {
			w.marker(Redacted)
			if !w.skip() {
				return false
			}
			continue
		}
		if !w.value(next, depth+1) {
			return false
		}
	}
	w.pos++ // ]
	w.buf = append(w.buf, ']')
	return true
}

// scalarNext reports whether the value at pos is a number, a boolean or null: kept under a
// secret-looking key (max_tokens: 100).
func (w *writer) scalarNext() bool {
	c := w.peek()
	return c != '"' && c != '{' && c != '['
}

// str moves past the string at pos (its opening quote), reporting false if it does not end.
func (w *writer) str() bool {
	for i := w.pos + 1; i < len(w.in); i++ {
		switch w.in[i] {
		case '\\':
			i++
		case '"':
			w.pos = i + 1
			return true
		}
	}
	return false
}

// skip moves past the value at pos, checking its brackets and strings.
func (w *writer) skip() bool {
	depth := 0
	for w.pos < len(w.in) {
		switch c := w.in[w.pos]; c {
		case '"':
			if !w.str() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return true // the end of the enclosing container: an empty value
			}
			depth--
			if depth == 0 {
				w.pos++
				return true
			}
		case ',':
			if depth == 0 {
				return true
			}
		}
		w.pos++
	}
	return depth == 0
}

// string appends the quoted string raw, masked or cut as the Redactor says.
func (w *writer) string(raw []byte) {
	if w.r.mode == ModeRedacted && secretValue(unquote(raw)) {
		w.marker(Redacted)
		return
	}
	room := max(w.r.maxBytes-len(w.buf), 0)
	if len(raw) <= room+2 { // the quotes are not counted
		w.buf = append(w.buf, raw...)
		return
	}
	v := string(unquote(raw))
	if len(v) <= room {
		w.buf = append(w.buf, raw...)
		return
	}
	w.truncated = true
	cut := room
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	w.buf = appendString(w.buf, v[:cut]+Truncated)
}

func (w *writer) marker(m string) { w.buf = strconv.AppendQuote(w.buf, m) }

// unquote returns the content of a quoted JSON string: the bytes between the quotes when it
// has no escapes, else its decoding.
func unquote(raw []byte) []byte {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return inner
	}
	return []byte(s)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// secretKeyParts are the member names, lower-cased, whose string or structured values
// ModeRedacted replaces.
var secretKeyParts = []string{"password", "passwd", "secret", "token", "apikey", "api_key", "api-key",
	"accesskey", "access_key", "privatekey", "private_key", "credential", "authorization", "cookie"}

func secretKey(k []byte) bool {
	for _, p := range secretKeyParts {
		if containsFold(k, p) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII lower, ignoring ASCII case.
func containsFold(s []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		j := 0
		for ; j < len(lower); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}

// secretValuePrefixes start values that are credentials whatever their member's name: HTTP
// credentials, PEM blocks, and the key formats of common providers.
var secretValuePrefixes = []string{"Bearer ", "bearer ", "Basic ", "basic ", "-----BEGIN",
	"AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
	"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "sk-", "sk_live_", "rk_live_", "AIza"}

// secretValue reports strings that look like credentials: a known prefix, a JWT, or a long
// random-looking token (24+ characters of a base64 alphabet, with upper case, lower case and
// digits, at 4 or more bits of entropy per character: hex digests and UUIDs stay).
func secretValue(s []byte) bool {
	for _, p := range secretValuePrefixes {
		if len(s) >= len(p)+8 && string(s[:len(p)]) == p {
			return true
		}
	}
	if len(s) > 3 && string(s[:3]) == "eyJ" && bytes.Count(s, []byte(".")) == 2 {
		return true
	}
	if len(s) < 24 || len(s) > 4096 {
		return false
	}
	var counts [256]int
	var upper, lower, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		case c == '+' || c == '/' || c == '=' || c == '_' || c == '-':
		default:
			return false
		}
		counts[c]++
	}
	if !upper || !lower || !digit {
		return false
	}
	n := float64(len(s))
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h >= 4
}
