package sidecar

import (
	"net/http"
	"slices"
	"testing"
)

func TestCopyHeadersDropsHopByHopHeaders(t *testing.T) {
	src := http.Header{}
	for k, v := range map[string]string{
		"Connection":          "X-Private, keep-alive",
		"X-Private":           "drop me: named by Connection",
		"Keep-Alive":          "timeout=5",
		"Proxy-Connection":    "keep-alive",
		"Proxy-Authenticate":  "Basic",
		"Proxy-Authorization": "Basic Zm9v",
		"Te":                  "trailers",
		"Trailer":             "X-Checksum",
		"Transfer-Encoding":   "chunked",
		"Upgrade":             "h2c",
		"Content-Length":      "12",
		"Accept-Encoding":     "gzip",
		"Host":                "example.test",
		"Authorization":       "Bearer t",
		"Mcp-Method":          "tools/call",
		"Mcp-Name":            "echo",
		"Mcp-Param-Region":    "eu",
		"Content-Type":        "application/json",
	} {
		src.Set(k, v)
	}
	src.Add("Accept", "application/json")
	src.Add("Accept", "text/event-stream")
	dst := http.Header{}
	copyHeaders(dst, src)
	var got []string
	for k := range dst {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"Accept", "Authorization", "Content-Type", "Mcp-Method", "Mcp-Name", "Mcp-Param-Region"}
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded headers = %v, want %v", got, want)
	}
	if v := dst["Accept"]; len(v) != 2 {
		t.Fatalf("Accept = %q, want both values", v)
	}
}

// The fast header lookups index the map directly, so every name they use
// must already be canonical.
func TestHeaderNamesAreCanonical(t *testing.T) {
	for _, k := range []string{headerProtocolVersion, headerMethod, headerName, "Content-Type", "Origin", "Accept", "Connection", "Content-Length"} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}
