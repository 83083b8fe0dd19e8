package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode"
	"unicode/utf8"
)

// This file makes every upstream read a request the way the sidecar read it
// (security review F2). The sidecar decides on the members it reads with
// exact keys (jsonscan.go) and forwards the bytes unchanged; re-encoding
// would cost the hot path a decode and an encode. So instead it refuses any
// body that two JSON decoders could read differently where the sidecar
// decides:
//
//   - invalid UTF-8 or a lone surrogate escape (\ud800) anywhere: decoders
//     replace them with U+FFFD, keep them, or fail (CheckText);
//   - at each level the sidecar reads, a member it knows given twice (after
//     unescaping: "\u006eame" is "name"), or spelt in another case as a
//     case-insensitive decoder folds it (ScanKnown, AmbiguousMember): Go's
//     encoding/json matches "Method", "\u004eame" or "paramſ" (U+017F folds
//     to s) to the member it wants and keeps the last one, while the
//     sidecar and JSON.parse keep "method".
//
// Members the sidecar does not know are not its decision and pass as they
// are. Which members it knows at which level is the caller's list (the
// sidecar's request parser names the params, _meta and ref members).

// EnvelopeMembers are the JSON-RPC members of a message, in the order
// the sidecar's request parser relies on.
var EnvelopeMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// CheckText refuses a body that is not valid UTF-8 or has a lone surrogate
// escape. body must be valid JSON.
func CheckText(body []byte) *Error {
	if !utf8.Valid(body) {
		return NewError(http.StatusBadRequest, CodeParseError, "Parse error: body is not valid UTF-8")
	}
	if loneSurrogate(body) {
		return NewError(http.StatusBadRequest, CodeParseError, "Parse error: body has an unpaired surrogate escape")
	}
	return nil
}

// loneSurrogate reports whether valid JSON holds a \uD800–\uDFFF escape
// that is not a high surrogate followed by a low one. In valid JSON every
// backslash starts an escape inside a string, so a scan that skips each
// escape whole never misreads one.
func loneSurrogate(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\\')
		if j < 0 {
			return false
		}
		i += j
		if i+1 >= len(b) || b[i+1] != 'u' {
			i += 2
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return false // not valid JSON; json.Valid said otherwise
		}
		i += 6
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true
		case r >= 0xD800 && r <= 0xDBFF:
			if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
				return true
			}
			lo, ok := hex4(b, i+2)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
}

// hex4 decodes the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// MemberIndex returns the index in known of the name a raw (quoted) key
// matches under any case folding a decoder applies, or -1; exact reports
// that the key is that name exactly once unescaped.
func MemberIndex(raw []byte, known []string) (i int, exact bool) {
	if len(raw) < 2 {
		return -1, false
	}
	k := raw[1 : len(raw)-1]
	if bytes.IndexByte(k, '\\') >= 0 {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return -1, false
		}
		k = []byte(s)
	}
	for i, name := range known {
		if string(k) == name {
			return i, true
		}
		// Most keys differ from most names in their first or last ASCII
		// letter: no need to fold them.
		if len(k) == 0 || len(name) == 0 ||
			k[0]|name[0] < utf8.RuneSelf && lowerASCII(k[0]) != lowerASCII(name[0]) ||
			k[len(k)-1]|name[len(name)-1] < utf8.RuneSelf && lowerASCII(k[len(k)-1]) != lowerASCII(name[len(name)-1]) {
			continue
		}
		if FoldEqual(k, name) {
			return i, false
		}
	}
	return -1, false
}

// AmbiguousMember returns the first member of obj that names one of known
// (at most 32 names) in another case, or a second time; "" when every known
// member is given at most once and exactly.
func AmbiguousMember(obj []byte, known []string) string {
	return ScanKnown(obj, known, nil)
}

// ScanKnown is AmbiguousMember calling found (when not nil) with the index
// and value of each known member, in the same pass.
func ScanKnown(obj []byte, known []string, found func(i int, v []byte)) string {
	var seen uint32
	bad := ""
	_ = EachMember(obj, func(m Member) bool {
		i, exact := MemberIndex(m.Key, known)
		if i < 0 {
			return true
		}
		if !exact || seen&(1<<i) != 0 {
			bad = string(m.Key)
			return false
		}
		seen |= 1 << i
		if found != nil {
			found(i, obj[m.Start:m.End])
		}
		return true
	})
	return bad
}

// FoldEqual reports whether key (unescaped) equals name under the case
// folding of any decoder in use: Unicode simple folding (Go's encoding/json
// since 1.21, strings.EqualFold) and ToUpper(ToLower(r)) (older
// encoding/json). Besides ASCII case, four non-ASCII runes fold to ASCII
// letters: U+017F (s), U+212A Kelvin (k), U+0130 and U+0131 (i).
func FoldEqual(key []byte, name string) bool {
	i, j := 0, 0
	for j < len(name) {
		if i >= len(key) {
			return false
		}
		if kc, nc := key[i], name[j]; kc < utf8.RuneSelf && nc < utf8.RuneSelf {
			if lowerASCII(kc) != lowerASCII(nc) {
				return false
			}
			i, j = i+1, j+1
			continue
		}
		kr, kn := utf8.DecodeRune(key[i:])
		nr, nn := utf8.DecodeRuneInString(name[j:])
		if kr != nr && foldClass(kr) != foldClass(nr) {
			return false
		}
		i, j = i+kn, j+nn
	}
	return i == len(key)
}

// foldClass maps a rune to one representative of the runes that some
// decoder's case folding matches with it.
func foldClass(r rune) rune {
	r = unicode.ToUpper(unicode.ToLower(r))
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < r {
			r = f
		}
	}
	return r
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// AmbiguousParam refuses a request whose member key of where (a path such
// as params.arguments) AmbiguousMember found.
func AmbiguousParam(where, key string) *Error {
	return NewError(http.StatusBadRequest, CodeInvalidParams,
		"Invalid params: member "+key+" of "+where+" repeats a member or differs from its name only in case")
}
