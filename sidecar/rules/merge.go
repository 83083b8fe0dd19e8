package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
	"github.com/switchboard-mcp/switchboard/sidecar/protocol"
	"github.com/switchboard-mcp/switchboard/sidecar/wire"
)

// This file holds the pure rules of the catalog overlay: how the upstream's
// lists and the declared catalog merge into the effective lists, how tool
// calls are routed, how pages are cut and how prompts are rendered. Nothing
// here does I/O; merge_test.go tables every rule.

// DefaultPageSize is the number of entries on one page of a merged list.
const DefaultPageSize = 100

// Entry is one element of an effective list: its sort key (name, URI or URI
// template) and its JSON object.
type Entry struct {
	Key string
	Raw json.RawMessage
}

// decodeObject decodes a JSON object into its members (nil if it is not one).
func decodeObject(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func stringMember(m map[string]json.RawMessage, k string) string {
	var s string
	_ = json.Unmarshal(m[k], &s)
	return s
}

// encodeObject encodes members with sorted keys (encoding/json sorts maps),
// so equal lists have equal bytes and equal hashes.
func encodeObject(m map[string]json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func sortEntries(es []Entry) []Entry {
	slices.SortStableFunc(es, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return es
}

// UpstreamNameOf is the name a declared tool has on the MCP server.
func UpstreamNameOf(t *catalog.Tool) string {
	if t.UpstreamName != "" {
		return t.UpstreamName
	}
	return t.Name
}

// MergeTools returns the effective tool list: with policy All every upstream
// tool, declared ones overridden and renamed, disabled ones and those renamed
// away hidden; with policy Declared only the declared tools. A declared tool
// the upstream does not have is not listed; its name is returned in missing
// (only when the upstream list is known, up != nil). Under pinning Enforce,
// the tools pinWithheld refuses are left out too (MergeToolsWithheld names
// them).
func MergeTools(c *catalog.Catalog, up []json.RawMessage) (list []Entry, missing []string) {
	list, missing, _ = MergeToolsWithheld(c, up)
	return list, missing
}

// Why pinWithheld withholds a tool.
const (
	withheldUnpinned = "it has no pin (toolPinning Enforce with toolPolicy All)"
	withheldDrifted  = "its definition on the MCP server no longer matches its pin"
	withheldUnknown  = "its definition on the MCP server has not been verified against its pin yet"
)

// pinWithheld decides whether pinning withholds one upstream tool, and why
// (""; served). decl is its declared tool (nil: undeclared); observed is the
// upstream digest of its definition ("" when unknown). Only Enforce withholds:
// a pinned tool whose definition differs from its pin (or is not known), and
// with policy All a tool without a pin.
func pinWithheld(c *catalog.Catalog, decl *catalog.Tool, observed string) string {
	if c.Server.ToolPinning != catalog.ToolPinningEnforce {
		return ""
	}
	pin := ""
	if decl != nil {
		pin = decl.UpstreamDigest
	}
	switch {
	case pin == "" && c.Server.ToolPolicy == catalog.ToolPolicyAll:
		return withheldUnpinned
	case pin == "":
		return ""
	case observed == "":
		return withheldUnknown
	case observed != pin:
		return withheldDrifted
	}
	return ""
}

// ObservedDigest is the upstream digest of one upstream tool object ("" when
// it cannot be digested: then no pin matches it). Digests are memoised by the
// SHA-256 of the raw bytes: canonicalising (RFC 8785) costs some 40 times
// more than that hash, and every tools/list under Enforce digests every
// pinned tool again (docs/performance.md, "Tool pinning").
func ObservedDigest(raw json.RawMessage) string {
	key := sha256.Sum256(raw)
	digestMemo.Lock()
	d, ok := digestMemo.m[key]
	digestMemo.Unlock()
	if ok {
		return d
	}
	if d, _ = catalog.ToolDigest(raw); d == "" {
		return ""
	}
	digestMemo.Lock()
	if len(digestMemo.m) >= maxMemoDigests {
		clear(digestMemo.m) // bounded: at most maxMemoDigests entries (about 0.5 MiB)
	}
	digestMemo.m[key] = d
	digestMemo.Unlock()
	return d
}

// maxMemoDigests bounds the digest memo.
const maxMemoDigests = 4096

var digestMemo = struct {
	sync.Mutex
	m map[[sha256.Size]byte]string
}{m: map[[sha256.Size]byte]string{}}

// Disabled and pins are properties of the upstream tool, not of one
// declaration of it: a second MCPTool naming the same upstreamName must not
// re-expose a Disabled tool, nor serve an unpinned alias of a pinned tool
// that drifted (security review F14).

// declsOf returns the declarations of the upstream tool called upstream.
func declsOf(c *catalog.Catalog, upstream string) []*catalog.Tool {
	var out []*catalog.Tool
	for i := range c.Tools {
		if UpstreamNameOf(&c.Tools[i]) == upstream {
			out = append(out, &c.Tools[i])
		}
	}
	return out
}

// anyDisabled reports whether a declaration disables the upstream tool.
func anyDisabled(decls []*catalog.Tool) bool {
	return slices.ContainsFunc(decls, func(t *catalog.Tool) bool { return t.Disabled })
}

// upstreamWithheld is pinWithheld for an upstream tool with all its
// declarations: every pin any of them sets must match, whichever alias is
// served; without any pin the tool is as unpinned.
func upstreamWithheld(c *catalog.Catalog, decls []*catalog.Tool, observed string) string {
	pinned := false
	for _, t := range decls {
		if t.UpstreamDigest == "" {
			continue
		}
		pinned = true
		if why := pinWithheld(c, t, observed); why != "" {
			return why
		}
	}
	if pinned {
		return ""
	}
	return pinWithheld(c, nil, observed)
}

// ToolWithheld is upstreamWithheld for the upstream tool called upstream
// (tools/call).
func ToolWithheld(c *catalog.Catalog, upstream, observed string) string {
	return upstreamWithheld(c, declsOf(c, upstream), observed)
}

// needsDigest says whether upstreamWithheld looks at a tool's digest.
func needsDigest(c *catalog.Catalog, decls []*catalog.Tool) bool {
	return c.Server.ToolPinning == catalog.ToolPinningEnforce &&
		slices.ContainsFunc(decls, func(t *catalog.Tool) bool { return t.UpstreamDigest != "" })
}

// knownToolMembers are the members of a tool object the protocol defines.
// A member spelled like one of them in another case is not served: clients
// that match names case-insensitively (Go's encoding/json) could read it in
// place of the real (overridden) one.
var knownToolMembers = []string{"name", "title", "description", "inputSchema", "outputSchema",
	"annotations", "icons", "execution", "_meta"}

// dropCaseVariants deletes such members from m and reports whether it did.
func dropCaseVariants(m map[string]json.RawMessage) bool {
	dropped := false
	for k := range m {
		for _, known := range knownToolMembers {
			if k != known && strings.EqualFold(k, known) {
				delete(m, k)
				dropped = true
			}
		}
	}
	return dropped
}

// MergeToolsWithheld is MergeTools, and the names clients would see of the
// tools pinning withholds, sorted.
func MergeToolsWithheld(c *catalog.Catalog, up []json.RawMessage) (list []Entry, missing, withheld []string) {
	byUpstream := map[string][]*catalog.Tool{}
	declared := map[string]bool{}
	for i := range c.Tools {
		t := &c.Tools[i]
		byUpstream[UpstreamNameOf(t)] = append(byUpstream[UpstreamNameOf(t)], t)
		declared[t.Name] = true
	}
	seen := map[string]bool{}
	for _, raw := range up {
		m := decodeObject(raw)
		if m == nil {
			continue
		}
		name := stringMember(m, "name")
		seen[name] = true
		decl := byUpstream[name]
		if len(decl) == 0 {
			// An undeclared tool whose name a declared tool takes is hidden:
			// its name now means the declared one.
			if c.Server.ToolPolicy == catalog.ToolPolicyAll && !declared[name] {
				if pinWithheld(c, nil, "") != "" {
					withheld = append(withheld, name)
					continue
				}
				if dropCaseVariants(m) {
					raw = encodeObject(m)
				}
				list = append(list, Entry{name, raw})
			}
			continue
		}
		if anyDisabled(decl) {
			continue
		}
		digest := ""
		if needsDigest(c, decl) {
			digest = ObservedDigest(raw)
		}
		if upstreamWithheld(c, decl, digest) != "" {
			for _, t := range decl {
				withheld = append(withheld, t.Name)
			}
			continue
		}
		for _, t := range decl {
			list = append(list, Entry{t.Name, overrideTool(m, t)})
		}
	}
	slices.Sort(withheld)
	if up != nil {
		for i := range c.Tools {
			t := &c.Tools[i]
			if !t.Disabled && !seen[UpstreamNameOf(t)] {
				missing = append(missing, t.Name)
			}
		}
	}
	return sortEntries(list), missing, withheld
}

// overrideTool applies a declared tool to the upstream's definition.
func overrideTool(up map[string]json.RawMessage, t *catalog.Tool) json.RawMessage {
	m := make(map[string]json.RawMessage, len(up)+2)
	for k, v := range up {
		m[k] = v
	}
	dropCaseVariants(m)
	m["name"] = wire.JSONString(t.Name)
	if t.Title != "" {
		m["title"] = wire.JSONString(t.Title)
	}
	if t.Description != "" {
		m["description"] = wire.JSONString(t.Description)
	}
	if len(t.InputSchema) > 0 {
		m["inputSchema"] = t.InputSchema
	}
	if len(t.OutputSchema) > 0 {
		m["outputSchema"] = t.OutputSchema
	}
	if a := t.Annotations; a != nil {
		ann := decodeObject(m["annotations"])
		if ann == nil {
			ann = map[string]json.RawMessage{}
		}
		for k, v := range map[string]*bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
			"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint} {
			if v != nil {
				ann[k] = json.RawMessage(strconv.FormatBool(*v))
			}
		}
		m["annotations"] = encodeObject(ann)
	}
	return encodeObject(m)
}

// RouteTool decides where a tools/call for name goes: the upstream tool
// name to call, or ok=false when the name is unknown to clients (disabled,
// renamed away, or not declared under policy Declared). decl is the declared
// tool called (nil: an upstream tool served as it is).
func RouteTool(c *catalog.Catalog, name string) (upstream string, decl *catalog.Tool, ok bool) {
	for i := range c.Tools {
		if t := &c.Tools[i]; t.Name == name {
			up := UpstreamNameOf(t)
			return up, t, !anyDisabled(declsOf(c, up))
		}
	}
	for i := range c.Tools {
		if UpstreamNameOf(&c.Tools[i]) == name {
			return "", nil, false // renamed away or hidden
		}
	}
	return name, nil, c.Server.ToolPolicy == catalog.ToolPolicyAll
}

// MergeResources returns the effective resource list (kind "uri") or
// template list (kind "uriTemplate"): declared entries, overriding the
// upstream entry with the same key, then the upstream's other entries.
func MergeResources(c *catalog.Catalog, up []json.RawMessage, keyMember string) []Entry {
	declared := map[string]*catalog.Resource{}
	for i := range c.Resources {
		r := &c.Resources[i]
		if (keyMember == "uri") == (r.URI != "") {
			declared[r.Key()] = r
		}
	}
	var list []Entry
	for _, raw := range up {
		m := decodeObject(raw)
		if m == nil {
			continue
		}
		k := stringMember(m, keyMember)
		if r := declared[k]; r != nil {
			if r.Source.Upstream {
				list = append(list, Entry{k, declaredResource(m, r, keyMember)})
				delete(declared, k)
			}
			continue // a sidecar-served resource replaces the upstream's
		}
		list = append(list, Entry{k, raw})
	}
	for k, r := range declared {
		list = append(list, Entry{k, declaredResource(nil, r, keyMember)})
	}
	return sortEntries(list)
}

func declaredResource(up map[string]json.RawMessage, r *catalog.Resource, keyMember string) json.RawMessage {
	m := make(map[string]json.RawMessage, len(up)+5)
	for k, v := range up {
		m[k] = v
	}
	m[keyMember] = wire.JSONString(r.Key())
	m["name"] = wire.JSONString(r.Name)
	for k, v := range map[string]string{"title": r.Title, "description": r.Description, "mimeType": r.MimeType} {
		if v != "" {
			m[k] = wire.JSONString(v)
		}
	}
	return encodeObject(m)
}

// MergePrompts returns the effective prompt list: declared prompts, then
// the upstream's prompts whose names are not declared.
func MergePrompts(c *catalog.Catalog, up []json.RawMessage) []Entry {
	declared := map[string]bool{}
	list := make([]Entry, 0, len(c.Prompts)+len(up))
	for i := range c.Prompts {
		p := &c.Prompts[i]
		declared[p.Name] = true
		list = append(list, Entry{p.Name, declaredPrompt(p)})
	}
	for _, raw := range up {
		m := decodeObject(raw)
		if m == nil {
			continue
		}
		if n := stringMember(m, "name"); !declared[n] {
			list = append(list, Entry{n, raw})
		}
	}
	return sortEntries(list)
}

func declaredPrompt(p *catalog.Prompt) json.RawMessage {
	type arg struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		Required    bool   `json:"required,omitempty"`
	}
	out := struct {
		Name        string `json:"name"`
		Title       string `json:"title,omitempty"`
		Description string `json:"description,omitempty"`
		Arguments   []arg  `json:"arguments,omitempty"`
	}{Name: p.Name, Title: p.Title, Description: p.Description}
	for _, a := range p.Arguments {
		out.Arguments = append(out.Arguments, arg(a))
	}
	b, _ := json.Marshal(out)
	return b
}

// FindPrompt returns the declared prompt called name.
func FindPrompt(c *catalog.Catalog, name string) *catalog.Prompt {
	for i := range c.Prompts {
		if c.Prompts[i].Name == name {
			return &c.Prompts[i]
		}
	}
	return nil
}

// FindResource returns the declared resource with this exact URI.
func FindResource(c *catalog.Catalog, uri string) *catalog.Resource {
	for i := range c.Resources {
		if c.Resources[i].URI == uri {
			return &c.Resources[i]
		}
	}
	return nil
}

// RenderPrompt fills a declared prompt's {{argument}} placeholders. A
// missing required argument is an error naming it; an absent optional
// argument renders as the empty string; an argument the prompt does not
// declare is an error too.
func RenderPrompt(p *catalog.Prompt, args map[string]string) (json.RawMessage, *wire.Error) {
	known := map[string]bool{}
	for _, a := range p.Arguments {
		known[a.Name] = true
		if _, ok := args[a.Name]; a.Required && !ok {
			return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: missing required argument "+strconv.Quote(a.Name)+" of prompt "+strconv.Quote(p.Name))
		}
	}
	for k := range args {
		if !known[k] {
			return nil, wire.NewError(http.StatusBadRequest, wire.CodeInvalidParams, "Invalid params: prompt "+strconv.Quote(p.Name)+" has no argument "+strconv.Quote(k))
		}
	}
	pairs := make([]string, 0, 2*len(p.Arguments))
	for _, a := range p.Arguments {
		pairs = append(pairs, "{{"+a.Name+"}}", args[a.Name])
	}
	rep := strings.NewReplacer(pairs...)
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type message struct {
		Role    string  `json:"role"`
		Content content `json:"content"`
	}
	out := struct {
		ResultType  string    `json:"resultType"`
		Description string    `json:"description,omitempty"`
		Messages    []message `json:"messages"`
	}{ResultType: protocol.ResultComplete, Description: p.Description}
	for _, m := range p.Messages {
		out.Messages = append(out.Messages, message{Role: m.Role, Content: content{Type: "text", Text: rep.Replace(m.Text)}})
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// Cursors are minted by the sidecar: base64url("sb1|<method>|<offset>").
// The client never sees an upstream cursor.
const cursorPrefix = "sb1|"

// MintCursor is the cursor of offset in method's list.
func MintCursor(method string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + method + "|" + strconv.Itoa(offset)))
}

// ParseCursor returns the offset a cursor stands for; "" is the start.
func ParseCursor(method, cursor string) (int, bool) {
	if cursor == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return 0, false
	}
	rest, ok := strings.CutPrefix(string(b), cursorPrefix+method+"|")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// Page cuts one page out of list. An offset past the end (the list shrank
// between pages) gives an empty last page.
func Page(list []Entry, offset, size int) (items []Entry, next int, more bool) {
	if size <= 0 {
		size = DefaultPageSize
	}
	if offset >= len(list) {
		return nil, 0, false
	}
	end := min(offset+size, len(list))
	return list[offset:end], end, end < len(list)
}

// EmptyCatalog is what the overlay serves before its first revision: every
// upstream tool, immediately stale, private.
var EmptyCatalog = func() *catalog.Catalog {
	h := catalog.CacheHint{TTLMs: 0, CacheScope: catalog.ScopePrivate}
	return &catalog.Catalog{SchemaVersion: catalog.SchemaVersion, Server: catalog.Server{
		ToolPolicy: catalog.ToolPolicyAll,
		Caching:    catalog.CacheDefaults{Discover: h, Tools: h, Prompts: h, Resources: h, ResourceTemplates: h, ResourceRead: h},
	}}
}()
