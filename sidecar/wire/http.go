package wire

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// IsEventStream reports whether h says Content-Type: text/event-stream.
func IsEventStream(h http.Header) bool {
	return MediaTypeIs(HeaderValue(h, "Content-Type"), "text/event-stream")
}

// IsJSON reports whether h says Content-Type: application/json.
func IsJSON(h http.Header) bool {
	return MediaTypeIs(HeaderValue(h, "Content-Type"), "application/json")
}

// HeaderValue is h.Get for a key already in canonical form: the forwarding
// path looks up a handful of fixed headers on every request, and skipping
// the canonicalisation that Get does on each call is measurable there.
func HeaderValue(h http.Header, canonicalKey string) string {
	if vs := h[canonicalKey]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// MediaTypeIs compares the media type of a Content-Type value, ignoring
// parameters and case.
func MediaTypeIs(ct, want string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.EqualFold(strings.TrimSpace(mt), want)
}

const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// DecodeHeaderValue undoes the =?base64?…?= wrapping of an MCP header value.
func DecodeHeaderValue(v string) (string, bool) {
	if enc, ok := strings.CutPrefix(v, base64Prefix); ok {
		if enc, ok = strings.CutSuffix(enc, base64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return "", false
			}
			return string(b), true
		}
	}
	return v, true
}
