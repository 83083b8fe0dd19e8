package audit

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf16"
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
	// MaxRedactPaths bounds the paths of one Redactor (spec.audit.redact has at most 64).
	MaxRedactPaths = 64
	// maxPathSegments bounds one redaction path.
	maxPathSegments = 16
	// maxNesting is the deepest JSON encoding/json accepts; deeper arguments are not JSON to
	// it, nor to the Redactor.
	maxNesting = 10000
)

// The quoted markers, as they are written.
const (
	quotedRedacted  = `"` + Redacted + `"`
	quotedTruncated = `"` + Truncated + `"`
)

// Redactor turns a call's arguments into what its record keeps. It is immutable and safe for
// concurrent use.
type Redactor struct {
	mode     Mode
	paths    [][]string
	maxBytes int
	// Per segment index: the paths whose segment there is "*", and the paths that end there.
	// A path is a bit of a uint64 (at most MaxRedactPaths).
	wild, end [maxPathSegments]uint64
	all       uint64
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
	if len(paths) > MaxRedactPaths {
		return nil, fmt.Errorf("audit redaction paths: %d, at most %d", len(paths), MaxRedactPaths)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxArgumentBytes
	}
	r := &Redactor{mode: mode, maxBytes: maxBytes}
	for i, p := range paths {
		segs := strings.Split(strings.TrimPrefix(p, "$."), ".")
		if len(segs) > maxPathSegments || slices.Contains(segs, "") {
			return nil, fmt.Errorf("audit redaction path %q: want member names separated by dots (\"auth.token\", \"items.*.secret\"), at most %d", p, maxPathSegments)
		}
		r.paths = append(r.paths, segs)
		bit := uint64(1) << i
		r.all |= bit
		r.end[len(segs)-1] |= bit
		for d, s := range segs {
			if s == "*" {
				r.wild[d] |= bit
			}
		}
	}
	return r, nil
}

// Keeps reports whether records keep arguments at all.
func (r *Redactor) Keeps() bool { return r != nil && (r.mode == ModeRedacted || r.mode == ModeFull) }

// Arguments returns what a record keeps of args (a JSON value) and whether it was cut to the
// bound. Without arguments to keep it returns nil. Members keep the client's order and
// spelling. The input is read once, byte by byte, checked as it is copied: arguments that are
// not JSON become one Truncated marker.
func (r *Redactor) Arguments(args json.RawMessage) (json.RawMessage, bool) {
	if !r.Keeps() || len(args) == 0 {
		return nil, false
	}
	w := writer{r: r, in: args, buf: make([]byte, 0, min(len(args), r.maxBytes)+64)}
	w.ws()
	w.value(r.all, 0)
	w.ws()
	if w.bad || w.pos != len(w.in) {
		// The sidecar checked the request before; a record stays valid JSON regardless.
		return json.RawMessage(quotedTruncated), true
	}
	return w.buf, w.truncated
}

// Characters, by what the walk needs to know of them.
const (
	cStop  = 1 << iota // ends a string's plain run: '"', '\\' or a control character
	cUpper             // A-Z
	cLower             // a-z
	cDigit             // 0-9
	cOther             // outside the token alphabet of secretValue (A-Z a-z 0-9 + / = _ -)
)

var class = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			t[c] = cStop | cOther
		case c >= 'A' && c <= 'Z':
			t[c] = cUpper
		case c >= 'a' && c <= 'z':
			t[c] = cLower
		case c >= '0' && c <= '9':
			t[c] = cDigit
		case c == '+' || c == '/' || c == '=' || c == '_' || c == '-':
		default:
			t[c] = cOther
		}
	}
	return t
}()

// writer copies a JSON value from in to buf, value by value, replacing what the Redactor does
// not keep, and checks the grammar on the way (bad: in is not one JSON value).
type writer struct {
	r         *Redactor
	in        []byte
	pos       int
	buf       []byte
	truncated bool
	bad       bool
	spaced    bool // white space was skipped
	// scratch holds the decoding of an escaped key or string, reused.
	scratch []byte
}

func (w *writer) full() bool { return len(w.buf) >= w.r.maxBytes }

// ws skips white space.
func (w *writer) ws() {
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
			w.spaced = true
		default:
			return
		}
	}
}

// at reports whether the byte at pos is c.
func (w *writer) at(c byte) bool { return w.pos < len(w.in) && w.in[w.pos] == c }

// step returns the paths still matching after descending into member key (or an array
// element) at segment index depth, and whether one of them ends there: the value is redacted.
func (w *writer) step(alive uint64, key []byte, element bool, depth int) (uint64, bool) {
	if alive == 0 || depth >= maxPathSegments {
		return 0, false
	}
	next := alive & w.r.wild[depth]
	if !element {
		for named := alive &^ next; named != 0; named &= named - 1 {
			if i := bits.TrailingZeros64(named); w.r.paths[i][depth] == string(key) {
				next |= 1 << i
			}
		}
	}
	if next&w.r.end[depth] != 0 {
		return 0, true
	}
	return next, false
}

// value copies the value at pos.
func (w *writer) value(alive uint64, depth int) {
	if w.pos >= len(w.in) {
		w.bad = true
		return
	}
	switch w.in[w.pos] {
	case '{', '[':
		if depth >= MaxArgumentDepth {
			w.buf = append(w.buf, quotedTruncated...)
			w.truncated = true
			w.skip(depth)
			return
		}
		w.container(alive, depth)
	case '"':
		start := w.pos
		seen := w.str()
		if !w.bad {
			w.string(w.in[start:w.pos], seen)
		}
	default:
		start := w.pos
		w.scalar()
		w.buf = append(w.buf, w.in[start:w.pos]...)
	}
}

// container copies the object or array at pos, member by member: past the bound the rest
// becomes one Truncated marker (a member "[TRUNCATED]": null in an object).
func (w *writer) container(alive uint64, depth int) {
	isObject := w.in[w.pos] == '{'
	closing := byte(']')
	if isObject {
		closing = '}'
	}
	w.buf = append(w.buf, w.in[w.pos])
	w.pos++
	w.ws()
	if w.at(closing) {
		w.pos++
		w.buf = append(w.buf, closing)
		return
	}
	for first, cut := true, false; ; first = false {
		var rawKey []byte
		var keySeen uint8
		if isObject {
			rawKey, keySeen = w.key()
			if w.bad {
				return
			}
		}
		switch {
		case cut:
			w.skip(depth + 1)
		case w.full():
			if !first {
				w.buf = append(w.buf, ',')
			}
			w.truncated, cut = true, true
			if isObject {
				w.buf = append(w.buf, quotedTruncated+`:null`...)
			} else {
				w.buf = append(w.buf, quotedTruncated...)
			}
			w.skip(depth + 1)
		default:
			if !first {
				w.buf = append(w.buf, ',')
			}
			w.member(alive, rawKey, keySeen, isObject, depth)
		}
		if w.bad {
			return
		}
		if !w.next(closing) {
			if !w.bad {
				w.buf = append(w.buf, closing)
			}
			return
		}
	}
}

// next moves past what follows a member: a comma (true: another member comes) or the
// container's closing bracket (false); anything else is not JSON (false, bad).
func (w *writer) next(closing byte) bool {
	w.ws()
	if w.pos >= len(w.in) {
		w.bad = true
		return false
	}
	c := w.in[w.pos]
	w.pos++
	switch c {
	case ',':
		w.ws()
		return true
	case closing:
		return false
	}
	w.bad = true
	return false
}

// key reads a member's key and its colon; seen is the key's characters' classes.
func (w *writer) key() (raw []byte, seen uint8) {
	if !w.at('"') {
		w.bad = true
		return nil, 0
	}
	start := w.pos
	seen = w.str()
	raw = w.in[start:w.pos]
	w.ws()
	if !w.at(':') {
		w.bad = true
		return nil, 0
	}
	w.pos++
	w.ws()
	return raw, seen
}

// member copies one member (rawKey set) or element, redacted as the paths and the mode say.
func (w *writer) member(alive uint64, rawKey []byte, keySeen uint8, isObject bool, depth int) {
	var key []byte
	if isObject {
		w.buf = append(w.buf, rawKey...)
		w.buf = append(w.buf, ':')
		if alive != 0 || w.r.mode == ModeRedacted {
			key = w.unquote(rawKey, keySeen)
		}
	}
	next, redact := w.step(alive, key, !isObject, depth)
	if !redact && isObject && w.r.mode == ModeRedacted && !w.scalarNext() && secretKey(key) {
		redact = true
	}
	if redact {
		w.buf = append(w.buf, quotedRedacted...)
		w.skip(depth + 1)
		return
	}
	w.value(next, depth+1)
}

// scalarNext reports whether the value at pos is a number, a boolean or null: kept under a
// secret-looking key (max_tokens: 100).
func (w *writer) scalarNext() bool {
	if w.pos >= len(w.in) {
		return true
	}
	c := w.in[w.pos]
	return c != '"' && c != '{' && c != '['
}

// str moves past the string at pos (its opening quote), checking it, and returns the classes
// of its characters (cStop when it has escapes).
func (w *writer) str() (seen uint8) {
	in := w.in
	for i := w.pos + 1; i < len(in); i++ {
		c := in[i]
		k := class[c]
		if k&cStop == 0 {
			seen |= k
			continue
		}
		switch {
		case c == '"':
			w.pos = i + 1
			return seen
		case c < 0x20:
			w.bad = true
			return seen
		}
		// An escape.
		seen |= cStop
		i++
		if i >= len(in) {
			break
		}
		switch in[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if i+4 >= len(in) || !isHex(in[i+1]) || !isHex(in[i+2]) || !isHex(in[i+3]) || !isHex(in[i+4]) {
				w.bad = true
				return seen
			}
			i += 4
		default:
			w.bad = true
			return seen
		}
	}
	w.bad = true
	return seen
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// scalar moves past the number, true, false or null at pos, checking it.
func (w *writer) scalar() {
	in := w.in
	for _, lit := range [...]string{"true", "false", "null"} {
		if in[w.pos] == lit[0] {
			if len(in)-w.pos < len(lit) || string(in[w.pos:w.pos+len(lit)]) != lit {
				w.bad = true
				return
			}
			w.pos += len(lit)
			return
		}
	}
	i := w.pos
	if in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && '1' <= in[i] && in[i] <= '9':
		i = digits(in, i)
	default:
		w.bad = true
		return
	}
	if i < len(in) && in[i] == '.' {
		if i+1 >= len(in) || !isDigit(in[i+1]) {
			w.bad = true
			return
		}
		i = digits(in, i+1)
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || !isDigit(in[i]) {
			w.bad = true
			return
		}
		i = digits(in, i)
	}
	w.pos = i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits returns the index past the digits from i.
func digits(in []byte, i int) int {
	for i < len(in) && isDigit(in[i]) {
		i++
	}
	return i
}

// skip moves past the value at pos, checking it, without copying it.
func (w *writer) skip(depth int) {
	if w.pos >= len(w.in) {
		w.bad = true
		return
	}
	switch w.in[w.pos] {
	case '"':
		w.str()
		return
	case '{', '[':
		if depth >= maxNesting {
			w.bad = true
			return
		}
	default:
		w.scalar()
		return
	}
	isObject := w.in[w.pos] == '{'
	closing := byte(']')
	if isObject {
		closing = '}'
	}
	w.pos++
	w.ws()
	if w.at(closing) {
		w.pos++
		return
	}
	for {
		if isObject {
			if w.key(); w.bad {
				return
			}
		}
		if w.skip(depth + 1); w.bad || !w.next(closing) {
			return
		}
	}
}

// string appends the quoted string raw (its characters' classes seen), masked or cut as the
// Redactor says.
func (w *writer) string(raw []byte, seen uint8) {
	if w.r.mode == ModeRedacted && secretValue(w.unquote(raw, seen), seen) {
		w.buf = append(w.buf, quotedRedacted...)
		return
	}
	room := max(w.r.maxBytes-len(w.buf), 0)
	if len(raw) <= room+2 { // the quotes are not counted
		w.buf = append(w.buf, raw...)
		return
	}
	v := w.unquote(raw, seen)
	if len(v) <= room {
		w.buf = append(w.buf, raw...)
		return
	}
	w.truncated = true
	cut := room
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	w.buf = append(w.buf, '"')
	w.buf = appendStringContent(w.buf, v[:cut])
	w.buf = append(w.buf, Truncated+`"`...)
}

// unquote returns the content of the checked, quoted JSON string raw: the bytes between the
// quotes when it has no escapes, else its decoding into scratch (valid until the next call).
func (w *writer) unquote(raw []byte, seen uint8) []byte {
	inner := raw[1 : len(raw)-1]
	if seen&cStop == 0 {
		return inner
	}
	w.scratch = unescape(w.scratch[:0], inner)
	return w.scratch
}

// unescape appends the decoding of a checked JSON string's content (no quotes) to dst: escapes
// decoded as encoding/json does (a lone surrogate becomes U+FFFD), other bytes as they are.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hex4(s[i+3 : i+7])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					i += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, s[i])
		}
	}
	return dst
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// secretKeyParts are the member names, lower-cased, whose string or structured values
// ModeRedacted replaces, by their first letter.
var secretKeyParts = byFirst([]string{"password", "passwd", "secret", "token", "apikey", "api_key", "api-key",
	"accesskey", "access_key", "privatekey", "private_key", "credential", "authorization", "cookie"})

// byFirst indexes words by their first byte.
func byFirst(words []string) (t [256][]string) {
	for _, w := range words {
		t[w[0]] = append(t[w[0]], w)
	}
	return t
}

// secretKey reports whether k contains one of secretKeyParts, ignoring ASCII case.
func secretKey(k []byte) bool {
	for i := range k {
		for _, p := range secretKeyParts[lower(k[i])] {
			if hasPrefixFold(k[i:], p) {
				return true
			}
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether s starts with the lower-case ASCII p, ignoring ASCII case.
func hasPrefixFold(s []byte, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for j := 1; j < len(p); j++ {
		if lower(s[j]) != p[j] {
			return false
		}
	}
	return true
}

// secretValuePrefixes start values that are credentials whatever their member's name: HTTP
// credentials, PEM blocks, and the key formats of common providers; by their first byte.
var secretValuePrefixes = byFirst([]string{"Bearer ", "bearer ", "Basic ", "basic ", "-----BEGIN",
	"AKIA", "ASIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
	"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-", "sk-", "sk_live_", "rk_live_", "AIza"})

// secretValue reports strings that look like credentials: a known prefix, a JWT, or a long
// random-looking token (24+ characters of a base64 alphabet, with upper case, lower case and
// digits, at 4 or more bits of entropy per character: hex digests and UUIDs stay). seen is the
// classes of the string's quoted characters: escapes (cStop) say nothing of the decoded ones.
func secretValue(s []byte, seen uint8) bool {
	if len(s) == 0 {
		return false
	}
	for _, p := range secretValuePrefixes[s[0]] {
		if len(s) >= len(p)+8 && string(s[:len(p)]) == p {
			return true
		}
	}
	if len(s) > 3 && string(s[:3]) == "eyJ" && countByte(s, '.') == 2 {
		return true
	}
	if len(s) < 24 || len(s) > 4096 {
		return false
	}
	if seen&cStop != 0 {
		seen = 0
		for _, c := range s {
			seen |= class[c]
		}
	}
	if seen&cOther != 0 || seen&(cUpper|cLower|cDigit) != cUpper|cLower|cDigit {
		return false
	}
	var counts [256]uint16 // len(s) <= 4096
	for _, c := range s {
		counts[c]++
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

func countByte(s []byte, c byte) (n int) {
	for _, b := range s {
		if b == c {
			n++
		}
	}
	return n
}
