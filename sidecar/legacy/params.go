package legacy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/upstream"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file gives a translated 2025-era tools/call the Mcp-Param-{Name}
// headers a 2026-07-28 client would have sent (SEP-2243): one for each
// argument whose property in the tool's inputSchema carries
// "x-mcp-header": "Name", when the argument is present and not null, with
// its value as the spec formats it (a string as is, true/false, an integer
// in decimal; base64-wrapped as =?base64?…?= when it is not plain visible
// ASCII, has leading or trailing space or tab, or looks like that wrapper).
// A 2026 upstream refuses a call that lacks them (400 -32020), and 2025-era
// clients do not know them. The annotations come from the upstream's own
// tools/list, read by the sidecar and kept until the tools change (the
// hub's tools generation) or paramToolsTTL passes.

const (
	// paramToolsTTL bounds how long the upstream's tool annotations are
	// trusted without a tools/list_changed (an upstream may not send one).
	paramToolsTTL = 60 * time.Second
	// paramToolsRetry is the wait before reading the tool list again
	// after a failed read.
	paramToolsRetry = time.Second
	// maxParamDepth bounds the nesting of annotated properties followed.
	maxParamDepth = 8
)

// Binding is one annotated property: its path in the arguments and the
// header it travels in.
type Binding struct {
	Path   []string
	Header string // canonical "Mcp-Param-{Name}"
	Label  string // "Mcp-Param-{Name}" as annotated (error messages)
}

// paramTools is the upstream's annotated tools as last read.
type paramTools struct {
	mu      sync.Mutex
	fetch   sync.Mutex // one tools/list read at a time
	byTool  map[string][]Binding
	gen     uint64    // the hub's tools generation they were read at
	read    time.Time // when they were read (zero: never)
	failed  time.Time // the last failed read
	known   bool
	fetcher func(ctx context.Context) (map[string][]Binding, error)
}

// lookup returns the bindings of tool (nil when it has none), reading the
// upstream's tool list when what is kept is stale.
func (p *paramTools) lookup(ctx context.Context, tool string, gen uint64) []Binding {
	p.mu.Lock()
	if p.known && p.gen == gen && time.Since(p.read) < paramToolsTTL {
		b := p.byTool[tool]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	p.fetch.Lock()
	defer p.fetch.Unlock()
	p.mu.Lock()
	fresh := p.known && p.gen == gen && time.Since(p.read) < paramToolsTTL
	recentFail := time.Since(p.failed) < paramToolsRetry
	if fresh || recentFail {
		b := p.byTool[tool]
		p.mu.Unlock()
		return b
	}
	p.mu.Unlock()
	m, err := p.fetcher(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed = time.Now()
		return p.byTool[tool] // what was known before, if anything
	}
	p.byTool, p.gen, p.read, p.known = m, gen, time.Now(), true
	return m[tool]
}

// readParamTools reads the upstream's tool list (every page) and keeps the
// annotated tools.
func (rm *Room) readParamTools(ctx context.Context) (map[string][]Binding, error) {
	ctx, cancel := context.WithTimeout(ctx, upstream.DiscoverTimeout)
	defer cancel()
	items, _, pass, err := rm.up.List("tools/list", "tools", func(cursor string) (*http.Request, error) {
		extra := ""
		if cursor != "" {
			extra = `,"cursor":` + string(wire.JSONString(cursor))
		}
		return upstream.ModernRequest(ctx, rm.up.URL(), "switchboard-param-headers", "tools/list", extra)
	})
	if err != nil {
		return nil, err
	}
	if pass != nil {
		return nil, errUpstreamToolList
	}
	out := map[string][]Binding{}
	for _, raw := range items {
		var t struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil || t.Name == "" {
			continue
		}
		if b := schemaBindings(t.InputSchema, nil, nil, 0); len(b) > 0 {
			out[t.Name] = b
		}
	}
	return out, nil
}

var errUpstreamToolList = errors.New("upstream tools/list answered with an error")

// schemaBindings collects the x-mcp-header annotations of a schema's
// properties (nested objects included, up to maxParamDepth), as the spec
// allows them: on string, integer and boolean properties, a header-name
// token, each name once (case-insensitive). Anything else is skipped.
func schemaBindings(schema json.RawMessage, prefix []string, out []Binding, depth int) []Binding {
	if depth >= maxParamDepth {
		return out
	}
	var s struct {
		Properties map[string]struct {
			Type       json.RawMessage `json:"type"`
			XMCPHeader json.RawMessage `json:"x-mcp-header"`
			Properties json.RawMessage `json:"properties"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return out
	}
	for name, prop := range s.Properties {
		path := append(append([]string(nil), prefix...), name)
		if prop.XMCPHeader != nil {
			var h, typ string
			_ = json.Unmarshal(prop.Type, &typ)
			if json.Unmarshal(prop.XMCPHeader, &h) == nil && isToken(h) && (typ == "string" || typ == "integer" || typ == "boolean") {
				canon := http.CanonicalHeaderKey(protocol.HeaderParamPrefix + h)
				dup := false
				for _, b := range out {
					dup = dup || strings.EqualFold(b.Header, canon)
				}
				if !dup {
					out = append(out, Binding{Path: path, Header: canon, Label: protocol.HeaderParamPrefix + h})
				}
			}
		}
		if len(prop.Properties) > 0 {
			out = schemaBindings(json.RawMessage(`{"properties":`+string(prop.Properties)+`}`), path, out, depth+1)
		}
	}
	return out
}

// isToken reports whether h is an HTTP field-name token (1*tchar).
func isToken(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// SetParamHeaders replaces whatever Mcp-Param-* headers a translated
// tools/call (r, whose body is body) carries with those its arguments call
// for. It refuses arguments in which a bound member is ambiguous
// (BoundArgsErr).
func (rm *Room) SetParamHeaders(r *http.Request, body []byte) *wire.Error {
	h := r.Header
	for k := range h {
		if len(k) > len(protocol.HeaderParamPrefix) && strings.EqualFold(k[:len(protocol.HeaderParamPrefix)], protocol.HeaderParamPrefix) {
			delete(h, k)
		}
	}
	args, bindings := rm.boundArgs(r, body)
	if e := BoundArgsErr(args, bindings); e != nil {
		return e
	}
	for _, b := range bindings {
		v, ok := args, true
		for _, p := range b.Path {
			if v, ok, _ = wire.Field(v, p); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		if hv, ok := paramHeaderValue(v); ok {
			h[b.Header] = []string{hv}
		}
	}
	return nil
}

// CheckBoundArgs refuses a 2026 tools/call that carries Mcp-Param-*
// headers when a bound member of its arguments is ambiguous (BoundArgsErr):
// whoever trusts the header must find the same value in the body as the
// upstream reads. Calls without such headers skip the tool lookup.
func (rm *Room) CheckBoundArgs(r *http.Request, body []byte) *wire.Error {
	for k := range r.Header {
		if len(k) > len(protocol.HeaderParamPrefix) && strings.EqualFold(k[:len(protocol.HeaderParamPrefix)], protocol.HeaderParamPrefix) {
			return BoundArgsErr(rm.boundArgs(r, body))
		}
	}
	return nil
}

// boundArgs returns the arguments of a tools/call as it goes upstream (a
// catalog rename is already in its body) and the upstream tool's bindings.
func (rm *Room) boundArgs(r *http.Request, body []byte) ([]byte, []Binding) {
	params, _, _ := wire.Field(body, "params")
	name, ok := wire.StringField(params, "name")
	if !ok {
		return nil, nil
	}
	args, ok, _ := wire.Field(params, "arguments")
	if !ok || !wire.IsObject(args) {
		return nil, nil
	}
	return args, rm.params.lookup(r.Context(), name, rm.hub.ToolsGeneration())
}

// BoundArgsErr refuses arguments in which a member on the path of a bound
// property is given twice or in another case (wire/strictjson.go): the
// Mcp-Param-* header would then carry one value while a case-insensitive
// or last-duplicate-wins upstream reads another.
func BoundArgsErr(args []byte, bindings []Binding) *wire.Error {
	for _, b := range bindings {
		v := args
		for _, p := range b.Path {
			if !wire.IsObject(v) {
				break
			}
			if k := wire.AmbiguousMember(v, []string{p}); k != "" {
				return wire.AmbiguousParam("params.arguments", k)
			}
			var ok bool
			if v, ok, _ = wire.Field(v, p); !ok {
				break
			}
		}
	}
	return nil
}

// paramHeaderValue formats an argument for its header: strings, booleans
// and integers (within ±2^53-1) only.
func paramHeaderValue(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var s string
	switch c := raw[0]; {
	case c == '"':
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
	case string(raw) == "true", string(raw) == "false":
		return string(raw), true
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f > 1<<53-1 || f < -(1<<53-1) || f != float64(int64(f)) {
			return "", false
		}
		return strconv.FormatInt(int64(f), 10), true
	default:
		return "", false // null, objects, arrays
	}
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
	}
	return s, true
}

// needsBase64 is SEP-2243's rule for wrapping a header value.
func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, "=?base64?") && strings.HasSuffix(s, "?=")
}

// CheckParamHeaders validates a 2026-07-28 client's Mcp-Param-* headers
// against the arguments of its tools/call, as a 2026-07-28 server must
// (spec §2.2: any server that processes the body) and with go-sdk's
// answers, so that a client gets the same 400 -32020 whichever upstream is
// behind the sidecar: each annotated argument that is present and not null
// needs its header, with the value the spec's formatting gives (decoded
// from =?base64?…?=); an absent or null one must have none. The
// annotations are the upstream tool's (the body already names it, after a
// catalog rename), as for SetParamHeaders.
func (rm *Room) CheckParamHeaders(r *http.Request, body []byte) *wire.Error {
	params, _, _ := wire.Field(body, "params")
	name, ok := wire.StringField(params, "name")
	if !ok {
		return nil
	}
	bindings := rm.params.lookup(r.Context(), name, rm.hub.ToolsGeneration())
	if len(bindings) == 0 {
		return nil
	}
	args, hasArgs, dup := wire.Field(params, "arguments")
	if dup || (hasArgs && !wire.IsObject(args) && string(args) != "null") {
		// go-sdk validates nothing when it cannot read the arguments;
		// the call is then the upstream's to refuse.
		return nil
	}
	mismatch := func(format string, a ...any) *wire.Error {
		return wire.NewError(http.StatusBadRequest, wire.CodeHeaderMismatch, "header mismatch: "+fmt.Sprintf(format, a...))
	}
	for _, b := range bindings {
		hv := r.Header.Get(b.Header)
		v, present, ambiguous := args, hasArgs && wire.IsObject(args), false
		for _, p := range b.Path {
			if !present || !wire.IsObject(v) {
				present = false
				break
			}
			var d bool
			v, present, d = wire.Field(v, p)
			ambiguous = ambiguous || d
		}
		path := strings.Join(b.Path, ".")
		if ambiguous {
			// A member given twice: parsers differ on which one counts.
			return mismatch("%s header value '%s' does not match body value", b.Label, hv)
		}
		if !present || string(v) == "null" {
			if hv != "" {
				return mismatch("unexpected %s header for absent or null parameter %q", b.Label, path)
			}
			continue
		}
		if hv == "" {
			return mismatch("missing %s header for parameter %q", b.Label, path)
		}
		got, ok := wire.DecodeHeaderValue(hv)
		if !ok {
			return mismatch("%s header contains invalid Base64 encoding", b.Label)
		}
		want, isInt, ok := primitiveValue(v)
		if !ok {
			return mismatch("%s header present but body parameter %q is not a primitive type", b.Label, path)
		}
		if isInt {
			f, err := strconv.ParseFloat(got, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger ||
				strconv.FormatInt(int64(f), 10) != want {
				return mismatch("%s header value '%s' does not match body value", b.Label, hv)
			}
			continue
		}
		if got != want {
			return mismatch("%s header value '%s' does not match body value", b.Label, hv)
		}
	}
	return nil
}

// maxSafeInteger is the largest integer an x-mcp-header argument may carry
// (SEP-2243: JSON numbers as IEEE-754 doubles represent them exactly).
const maxSafeInteger = 1<<53 - 1

// primitiveValue reads an x-mcp-header argument as SEP-2243 formats it: a
// string as is, true/false, an integer (within ±maxSafeInteger) in decimal
// (isInt: compared as a number). Anything else is no primitive.
func primitiveValue(raw []byte) (v string, isInt, ok bool) {
	switch {
	case len(raw) == 0:
		return "", false, false
	case raw[0] == '"':
		if json.Unmarshal(raw, &v) != nil {
			return "", false, false
		}
		return v, false, true
	case string(raw) == "true", string(raw) == "false":
		return string(raw), false, true
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
			return "", false, false
		}
		return strconv.FormatInt(int64(f), 10), true, true
	}
	return "", false, false
}
