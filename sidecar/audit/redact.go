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
		// The sidecar checked the request before; a record stays valid JSON regardless. The
		// walk below relies on this check: it reads well-formed JSON only.
		return json.RawMessage(`"` + Truncated + `"`), true
	}
	w := writer{r: r, in: args, buf: make([]byte, 0, min(len(args), r.maxBytes)+64)}
	states := make([]pathState, len(r.paths))
	for i := range r.paths {
		states[i] = pathState{path: i}
	}
	w.ws()
	w.value(states, 0)
	return w.buf, w.truncated
}

// pathState is a redaction path matched up to seg.
type pathState struct{ path, seg int }

// writer copies a well-formed JSON value from in to buf, value by value, replacing what the
// Redactor does not keep.
type writer struct {
	r         *Redactor
	in        []byte
	pos       int
	buf       []byte
	truncated bool
}

func (w *writer) full() bool { return len(w.buf) >= w.r.maxBytes }

// ws skips white space.
func (w *writer) ws() {
	for w.pos < len(w.in) && (w.in[w.pos] == ' ' || w.in[w.pos] == '\t' || w.in[w.pos] == '\n' || w.in[w.pos] == '\r') {
		w.pos++
	}
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

// value copies the value at pos.
func (w *writer) value(states []pathState, depth int) {
	switch w.in[w.pos] {
	case '{', '[':
		if depth >= MaxArgumentDepth {
			w.marker(Truncated)
			w.truncated = true
			w.skip()
			return
		}
		w.container(states, depth)
	case '"':
		start := w.pos
		w.str()
		w.string(w.in[start:w.pos])
	default: // a number, true, false or null: copied as it is
		start := w.pos
		for w.pos < len(w.in) && !strings.ContainsRune(",]} \t\n\r", rune(w.in[w.pos])) {
			w.pos++
		}
		w.buf = append(w.buf, w.in[start:w.pos]...)
	}
}

// container copies the object or array at pos, member by member: past the bound the rest
// becomes one Truncated marker (a member "[TRUNCATED]": null in an object).
func (w *writer) container(states []pathState, depth int) {
	open := w.in[w.pos]
	isObject := open == '{'
	w.pos++
	w.buf = append(w.buf, open)
	first, cut := true, false
	for w.ws(); w.in[w.pos] != '}' && w.in[w.pos] != ']'; w.ws() {
		if w.in[w.pos] == ',' {
			w.pos++
			w.ws()
		}
		var rawKey []byte
		if isObject {
			kstart := w.pos
			w.str()
			rawKey = w.in[kstart:w.pos]
			w.ws()
			w.pos++ // :
			w.ws()
		}
		switch {
		case cut:
			w.skip()
			continue
		case !first:
			w.buf = append(w.buf, ',')
		}
		first = false
		if w.full() {
			w.truncated, cut = true, true
			if isObject {
				w.buf = append(w.buf, `"`+Truncated+`":null`...)
			} else {
				w.marker(Truncated)
			}
			w.skip()
			continue
		}
		var key []byte
		if isObject {
			w.buf = append(w.buf, rawKey...)
			w.buf = append(w.buf, ':')
			key = unquote(rawKey)
		}
		next, redact := w.step(states, key, !isObject)
		if redact || (isObject && w.r.mode == ModeRedacted && secretKey(key) && !w.scalarNext()) {
			w.marker(Redacted)
			w.skip()
			continue
		}
		w.value(next, depth+1)
	}
	w.buf = append(w.buf, w.in[w.pos])
	w.pos++
}

// scalarNext reports whether the value at pos is a number, a boolean or null: kept under a
// secret-looking key (max_tokens: 100).
func (w *writer) scalarNext() bool {
	c := w.in[w.pos]
	return c != '"' && c != '{' && c != '['
}

// str moves past the string at pos (its opening quote).
func (w *writer) str() {
	for i := w.pos + 1; i < len(w.in); i++ {
		switch w.in[i] {
		case '\\':
			i++
		case '"':
			w.pos = i + 1
			return
		}
	}
}

// skip moves past the value at pos.
func (w *writer) skip() {
	depth := 0
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case '"':
			w.str()
			if depth == 0 {
				return
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return // the end of the enclosing container
			}
			depth--
			if depth == 0 {
				w.pos++
				return
			}
		case ',':
			if depth == 0 {
				return
			}
		}
		w.pos++
	}
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
