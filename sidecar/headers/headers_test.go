package headers

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/sidecar/authn"
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
	Copy(dst, src)
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

// A request to the upstream carries the client's end-to-end headers and the sidecar's own
// forwarding and identity headers, never the client's spelling of those.
func TestUpstreamHeaders(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   *authn.Identity
		want map[string][]string
	}{
		{name: "anonymous", want: map[string][]string{
			"Accept": {"application/json", "text/event-stream"}, "Authorization": {"Bearer t"},
			"Content-Type": {"application/json"}, "Mcp-Method": {"tools/call"},
			"X-Forwarded-For": {"10.1.2.3"}, "X-Forwarded-Host": {"svc.example.test"}, "X-Forwarded-Proto": {"http"},
		}},
		{name: "verified caller", id: &authn.Identity{Subject: "system:serviceaccount:a:b", Groups: []string{"g1", "g2"}, ServiceAccount: "a/b", Issuer: "https://kubernetes.default.svc"}, want: map[string][]string{
			"Accept": {"application/json", "text/event-stream"}, "Authorization": {"Bearer t"},
			"Content-Type": {"application/json"}, "Mcp-Method": {"tools/call"},
			"X-Forwarded-For": {"10.1.2.3"}, "X-Forwarded-Host": {"svc.example.test"}, "X-Forwarded-Proto": {"http"},
			"X-Switchboard-Subject": {"system:serviceaccount:a:b"}, "X-Switchboard-Groups": {"g1", "g2"},
			"X-Switchboard-Service-Account": {"a/b"}, "X-Switchboard-Issuer": {"https://kubernetes.default.svc"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := httptest.NewRequest(http.MethodPost, "http://svc.example.test/mcp", nil)
			in.RemoteAddr = "10.1.2.3:4567"
			in.Header = http.Header{
				"Connection":            {"X-Private, keep-alive"},
				"X-Private":             {"named by Connection"},
				"Keep-Alive":            {"timeout=5"},
				"Transfer-Encoding":     {"chunked"},
				"Host":                  {"other.example.test"},
				"Authorization":         {"Bearer t"},
				"Mcp-Method":            {"tools/call"},
				"Content-Type":          {"application/json"},
				"Accept":                {"application/json", "text/event-stream"},
				"Forwarded":             {"for=1.1.1.1"},
				"X-Forwarded-For":       {"1.1.1.1"},
				"X-Forwarded-Host":      {"evil.example.test"},
				"X-Forwarded-Proto":     {"https"},
				"X-Real-Ip":             {"1.1.1.1"},
				"X-Switchboard-Subject": {"admin"},
				"x-switchboard-groups":  {"system:masters"},
			}
			if tc.id != nil {
				in = in.WithContext(authn.WithIdentity(in.Context(), tc.id))
			}
			out := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9/mcp", nil)
			out.Header = http.Header{}
			ForUpstream(out, in)
			if !maps.EqualFunc(out.Header, http.Header(tc.want), slices.Equal) {
				t.Fatalf("upstream headers:\n got %v\nwant %v", out.Header, tc.want)
			}
		})
	}
}
