// Package catalog defines the compiled catalog: the one document the controller writes into a
// ConfigMap per MCPServer and the sidecar reads and serves live. It is the only contract between
// the two processes, together with the propagation Report the sidecar writes back.
//
// The controller builds a Catalog with a pure function, encodes it with Encode (deterministic
// bytes) and names it by Revision (content hash). The sidecar decodes it with Decode, which is
// strict and validates, so a bad catalog is rejected whole and the last good one keeps serving.
package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SchemaVersion is the version of the catalog document this package reads and writes. A sidecar
// rejects a catalog with any other version and keeps serving its last good one.
const SchemaVersion = 1

// Where the catalog lives and how the sidecar reports back.
const (
	// Key is the ConfigMap data key holding the encoded catalog.
	Key = "catalog.json"
	// RevisionAnnotation on the catalog ConfigMap holds Revision(encoded catalog).
	RevisionAnnotation = "mcp.switchboard.dev/catalog-revision"
	// ReportFieldManagerPrefix + pod name is the field manager a sidecar uses when it
	// server-side-applies its Report into the status ConfigMap.
	ReportFieldManagerPrefix = "switchboard-sidecar-"
	// MaxBytes is the largest encoded catalog the controller stores: a ConfigMap holds at most
	// 1 MiB including its metadata, so keep 64 KiB of headroom.
	MaxBytes = 1<<20 - 64<<10
)

// Cache scopes on the wire.
const (
	ScopePublic  = "public"
	ScopePrivate = "private"
)

// Catalog is the compiled catalog of one MCPServer.
type Catalog struct {
	SchemaVersion int        `json:"schemaVersion"`
	Server        Server     `json:"server"`
	Tools         []Tool     `json:"tools"`
	Resources     []Resource `json:"resources"`
	Prompts       []Prompt   `json:"prompts"`
	// Auth is set when the server requires callers to authenticate (access.go).
	Auth *Auth `json:"auth,omitempty"`
	// Access is set when MCPAccessPolicies target the server (access.go).
	Access *Access `json:"access,omitempty"`
	// Audit is set when the server audits requests (audit.go).
	Audit *Audit `json:"audit,omitempty"`
}

// Server holds server-wide settings.
type Server struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ToolPolicy is "All" (upstream tools plus overrides) or "Declared" (only listed tools).
	ToolPolicy string        `json:"toolPolicy"`
	Caching    CacheDefaults `json:"caching"`
	// ToolPinning is ToolPinningEnforce when the sidecar withholds tools whose upstream digest
	// differs from their pin (Tool.UpstreamDigest) and, with ToolPolicyAll, tools without one.
	// The controller writes it, and the pins, only under Enforce: Warn and Off need nothing of
	// the sidecar beyond the digests it reports, and older catalogs keep their bytes.
	ToolPinning string `json:"toolPinning,omitempty"`
}

// ToolPinningEnforce is the one Server.ToolPinning the sidecar acts on.
const ToolPinningEnforce = "Enforce"

// ToolPolicy values.
const (
	ToolPolicyAll      = "All"
	ToolPolicyDeclared = "Declared"
)

// CacheDefaults are the cache hints per result kind, always all set.
type CacheDefaults struct {
	Discover          CacheHint `json:"discover"`
	Tools             CacheHint `json:"tools"`
	Prompts           CacheHint `json:"prompts"`
	Resources         CacheHint `json:"resources"`
	ResourceTemplates CacheHint `json:"resourceTemplates"`
	ResourceRead      CacheHint `json:"resourceRead"`
}

// CacheHint is stamped on results as ttlMs and cacheScope.
type CacheHint struct {
	TTLMs      int64  `json:"ttlMs"`
	CacheScope string `json:"cacheScope"`
}

// Tool overrides, renames, declares or hides one tool.
type Tool struct {
	// Name is the tool name clients see.
	Name string `json:"name"`
	// UpstreamName is the tool's name on the MCP server; empty means Name.
	UpstreamName string           `json:"upstreamName,omitempty"`
	Title        string           `json:"title,omitempty"`
	Description  string           `json:"description,omitempty"`
	InputSchema  json.RawMessage  `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage  `json:"outputSchema,omitempty"`
	Annotations  *ToolAnnotations `json:"annotations,omitempty"`
	// Disabled tools are hidden from clients and calls to them are refused.
	Disabled bool `json:"disabled,omitempty"`
	// UpstreamDigest pins the upstream tool's definition (ToolDigest); set only under
	// ToolPinningEnforce.
	UpstreamDigest string `json:"upstreamDigest,omitempty"`
}

// ToolAnnotations are the MCP tool hints.
type ToolAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Resource is a resource (URI) or a resource template (URITemplate).
type Resource struct {
	URI         string `json:"uri,omitempty"`
	URITemplate string `json:"uriTemplate,omitempty"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Source      Source `json:"source"`
	// Cache overrides Server.Caching.ResourceRead for this resource.
	Cache *CacheHint `json:"cache,omitempty"`
}

// Key is the resource's identity on the server: its URI or URI template.
func (r Resource) Key() string {
	if r.URI != "" {
		return r.URI
	}
	return r.URITemplate
}

// Source says where a resource's content comes from; exactly one field is set. ConfigMap and
// Secret contents are referenced, never copied: the sidecar reads and watches them itself.
type Source struct {
	Upstream  bool    `json:"upstream,omitempty"`
	Inline    *Inline `json:"inline,omitempty"`
	ConfigMap *KeyRef `json:"configMap,omitempty"`
	Secret    *KeyRef `json:"secret,omitempty"`
}

// Inline content.
type Inline struct {
	Text string `json:"text"`
}

// KeyRef names one key of a ConfigMap or Secret in the server's namespace.
type KeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Prompt is a declared prompt; messages hold {{argument}} placeholders.
type Prompt struct {
	Name        string           `json:"name"`
	Title       string           `json:"title,omitempty"`
	Description string           `json:"description,omitempty"`
	Arguments   []PromptArgument `json:"arguments,omitempty"`
	Messages    []PromptMessage  `json:"messages"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
}

// PromptMessage is one message of a prompt; Role is "user" or "assistant".
type PromptMessage struct {
	Role string `json:"role"`
	Text string `json:"text"`
}

// Sort puts tools, resources and prompts in their canonical order (by exposed name; resources
// by URI or URI template).
func (c *Catalog) Sort() {
	slices.SortFunc(c.Tools, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.Resources, func(a, b Resource) int { return strings.Compare(a.Key(), b.Key()) })
	slices.SortFunc(c.Prompts, func(a, b Prompt) int { return strings.Compare(a.Name, b.Name) })
}

// Encode returns the canonical encoding of c: sorted lists, empty lists as [], JSON schemas with
// sorted keys, no insignificant white space. Equal catalogs encode to equal bytes.
func Encode(c *Catalog) ([]byte, error) {
	cp := *c
	cp.Tools = slices.Clone(c.Tools)
	cp.Resources = slices.Clone(c.Resources)
	cp.Prompts = slices.Clone(c.Prompts)
	if cp.Tools == nil {
		cp.Tools = []Tool{}
	}
	if cp.Resources == nil {
		cp.Resources = []Resource{}
	}
	if cp.Prompts == nil {
		cp.Prompts = []Prompt{}
	}
	for i := range cp.Tools {
		var err error
		if cp.Tools[i].InputSchema, err = canonicalJSON(cp.Tools[i].InputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: inputSchema: %w", cp.Tools[i].Name, err)
		}
		if cp.Tools[i].OutputSchema, err = canonicalJSON(cp.Tools[i].OutputSchema); err != nil {
			return nil, fmt.Errorf("tool %q: outputSchema: %w", cp.Tools[i].Name, err)
		}
	}
	cp.Sort()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&cp); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalJSON re-encodes raw JSON with sorted object keys, keeping numbers exactly.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Revision names an encoded catalog: the first 16 bytes of its SHA-256, in hex.
func Revision(encoded []byte) string {
	sum := sha256.Sum256(encoded)
	return hex.EncodeToString(sum[:16])
}

// Decode parses an encoded catalog strictly: an unknown schemaVersion or an unknown field is an
// error, and so is any Validate error.
func Decode(data []byte) (*Catalog, error) {
	var head struct {
		SchemaVersion *int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("catalog is not JSON: %w", err)
	}
	if head.SchemaVersion == nil {
		return nil, errors.New("catalog has no schemaVersion")
	}
	if *head.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("catalog schemaVersion %d is not supported (want %d)", *head.SchemaVersion, SchemaVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("decoding catalog: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decoding catalog: trailing data after the document")
	}
	if err := Validate(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks what the JSON types cannot: versions, required fields, unique names, exactly
// one resource source, known enum values and schemas that are JSON objects. All problems are
// reported together.
func Validate(c *Catalog) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.SchemaVersion != SchemaVersion {
		add("schemaVersion %d is not supported (want %d)", c.SchemaVersion, SchemaVersion)
	}
	if c.Server.Name == "" || c.Server.Namespace == "" {
		add("server.name and server.namespace are required")
	}
	if c.Server.ToolPolicy != ToolPolicyAll && c.Server.ToolPolicy != ToolPolicyDeclared {
		add("server.toolPolicy %q is not All or Declared", c.Server.ToolPolicy)
	}
	if p := c.Server.ToolPinning; p != "" && p != ToolPinningEnforce {
		add("server.toolPinning %q is not Enforce (or empty)", p)
	}
	d := c.Server.Caching
	for name, h := range map[string]CacheHint{"discover": d.Discover, "tools": d.Tools, "prompts": d.Prompts,
		"resources": d.Resources, "resourceTemplates": d.ResourceTemplates, "resourceRead": d.ResourceRead} {
		if err := validateHint(h); err != nil {
			add("server.caching.%s: %v", name, err)
		}
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		switch {
		case t.Name == "":
			add("a tool has no name")
		case seen[t.Name]:
			add("tool %q appears twice", t.Name)
		}
		seen[t.Name] = true
		if t.UpstreamDigest != "" && !digestRE.MatchString(t.UpstreamDigest) {
			add("tool %q: upstreamDigest %q is not sha256:<64 lowercase hex digits>", t.Name, t.UpstreamDigest)
		}
		for field, s := range map[string]json.RawMessage{"inputSchema": t.InputSchema, "outputSchema": t.OutputSchema} {
			if len(s) > 0 && !isJSONObject(s) {
				add("tool %q: %s is not a JSON object", t.Name, field)
			}
		}
	}
	seen = map[string]bool{}
	for _, r := range c.Resources {
		if (r.URI == "") == (r.URITemplate == "") {
			add("resource %q: set exactly one of uri and uriTemplate", r.Name)
		}
		if seen[r.Key()] {
			add("resource %q appears twice", r.Key())
		}
		seen[r.Key()] = true
		if r.Name == "" {
			add("resource %q has no name", r.Key())
		}
		n := 0
		for _, set := range []bool{r.Source.Upstream, r.Source.Inline != nil, r.Source.ConfigMap != nil, r.Source.Secret != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			add("resource %q: set exactly one source", r.Key())
		}
		for _, ref := range []*KeyRef{r.Source.ConfigMap, r.Source.Secret} {
			if ref != nil && (ref.Name == "" || ref.Key == "") {
				add("resource %q: source needs a name and a key", r.Key())
			}
		}
		if r.URITemplate != "" && !r.Source.Upstream {
			add("resource template %q can only be served by the upstream", r.Key())
		}
		if r.Cache != nil {
			if err := validateHint(*r.Cache); err != nil {
				add("resource %q: cache: %v", r.Key(), err)
			}
		}
	}
	seen = map[string]bool{}
	for _, p := range c.Prompts {
		switch {
		case p.Name == "":
			add("a prompt has no name")
		case seen[p.Name]:
			add("prompt %q appears twice", p.Name)
		}
		seen[p.Name] = true
		if len(p.Messages) == 0 {
			add("prompt %q has no messages", p.Name)
		}
		for _, m := range p.Messages {
			if m.Role != "user" && m.Role != "assistant" {
				add("prompt %q: role %q is not user or assistant", p.Name, m.Role)
			}
		}
	}
	errs = append(errs, validateAccess(c)...)
	errs = append(errs, validateAudit(c.Audit)...)
	return errors.Join(errs...)
}

func validateHint(h CacheHint) error {
	if h.TTLMs < 0 {
		return errors.New("ttlMs is negative")
	}
	if h.CacheScope != ScopePublic && h.CacheScope != ScopePrivate {
		return fmt.Errorf("cacheScope %q is not public or private", h.CacheScope)
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// Report is what one sidecar writes into the status ConfigMap, under the key of its pod name,
// after it applied or rejected a catalog revision.
type Report struct {
	// Revision is the catalog revision the sidecar serves.
	Revision string `json:"revision"`
	// RejectedRevision is the newest revision the sidecar refused, if any.
	RejectedRevision string `json:"rejectedRevision"`
	// Reason says why RejectedRevision was refused.
	Reason string `json:"reason"`
	// ToolsChecked is set once the sidecar has compared Revision's declared tools with the MCP
	// server container's tools/list; the two fields below mean something only then (and an
	// older sidecar never sets it).
	ToolsChecked bool `json:"toolsChecked,omitempty"`
	// MissingTools are declared, enabled tools of Revision that the MCP server container does
	// not list (so clients do not see them), at most MaxReportedMissingTools of them, in catalog
	// order; MissingToolCount is how many there are in all.
	MissingTools     []string `json:"missingTools,omitempty"`
	MissingToolCount int      `json:"missingToolCount,omitempty"`
	// Upstream is what the sidecar found the MCP server container to be (an older sidecar
	// never sets it).
	Upstream *UpstreamReport `json:"upstream,omitempty"`
	// ToolDigests are the upstream digests (ToolDigest) of Revision's declared tools, by the
	// name clients see, as the MCP server container serves them (set with ToolsChecked; a
	// declared tool the server does not list has none). At most MaxReportedToolDigests, the
	// first by name.
	ToolDigests map[string]string `json:"toolDigests,omitempty"`
	// WithheldTools are the tools the sidecar withholds under ToolPinningEnforce (drifted from
	// their pin, or without one under ToolPolicyAll), by the name clients would see, sorted, at
	// most MaxReportedMissingTools; WithheldToolCount is how many there are in all.
	WithheldTools     []string `json:"withheldTools,omitempty"`
	WithheldToolCount int      `json:"withheldToolCount,omitempty"`
}

// MaxReportedToolDigests bounds Report.ToolDigests (every replica's report shares one
// ConfigMap of at most 1 MiB; 256 digests take about 30 KiB).
const MaxReportedToolDigests = 256

// UpstreamReport describes the MCP server container as its sidecar sees it.
type UpstreamReport struct {
	// ProtocolVersion is the revision the sidecar speaks with it: 2026-07-28, or the 2025
	// revision it negotiated in initialize.
	ProtocolVersion string `json:"protocolVersion"`
	// ServerName and ServerVersion are its serverInfo.
	ServerName    string `json:"serverName,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
	// Capabilities are the names of the server capabilities it declares, sorted.
	Capabilities []string `json:"capabilities,omitempty"`
	// ToolsDigest is ToolsDigest over the tool list it serves (empty until the list was read).
	ToolsDigest string `json:"toolsDigest,omitempty"`
}

// Equal reports whether two upstream reports say the same (nil equals nil only).
func (u *UpstreamReport) Equal(o *UpstreamReport) bool {
	if u == nil || o == nil {
		return u == o
	}
	return u.ProtocolVersion == o.ProtocolVersion && u.ServerName == o.ServerName &&
		u.ServerVersion == o.ServerVersion && slices.Equal(u.Capabilities, o.Capabilities) && u.ToolsDigest == o.ToolsDigest
}

// MaxReportedMissingTools bounds Report.MissingTools (and with it the status ConfigMap).
const MaxReportedMissingTools = 20

// Equal reports whether two reports say the same.
func (r Report) Equal(o Report) bool {
	return r.Revision == o.Revision && r.RejectedRevision == o.RejectedRevision && r.Reason == o.Reason &&
		r.ToolsChecked == o.ToolsChecked && slices.Equal(r.MissingTools, o.MissingTools) && r.MissingToolCount == o.MissingToolCount &&
		r.Upstream.Equal(o.Upstream) && maps.Equal(r.ToolDigests, o.ToolDigests) &&
		slices.Equal(r.WithheldTools, o.WithheldTools) && r.WithheldToolCount == o.WithheldToolCount
}

// ParseReport decodes one status ConfigMap value.
func ParseReport(s string) (Report, error) {
	var r Report
	err := json.Unmarshal([]byte(s), &r)
	return r, err
}

// String encodes the report as the status ConfigMap value.
func (r Report) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}
