package catalog

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// Audit is what the sidecar audits and where the records go: MCPServer.spec.audit, compiled.
// Nil means no audit. A catalog without Audit keeps its bytes (and revision) across upgrades; a
// sidecar that predates Audit rejects a catalog carrying it (unknown field) and keeps its last
// good one, so a server never runs unaudited while its status says otherwise.
type Audit struct {
	// Arguments is AuditArgumentsOff, AuditArgumentsRedacted or AuditArgumentsFull.
	Arguments string `json:"arguments"`
	// Redact are dotted member paths of the arguments replaced by a marker ("*" any member).
	Redact []string `json:"redact,omitempty"`
	// Methods are the JSON-RPC methods audited (sorted, at least one unless Denials).
	Methods []string `json:"methods,omitempty"`
	// Denials audits every request refused on access grounds, whatever its method.
	Denials bool `json:"denials,omitempty"`
	// File is the file records are appended to; empty means the sidecar's stdout, unless
	// OTLPEndpoint is set.
	File string `json:"file,omitempty"`
	// OTLPEndpoint is the URL of a collector's OTLP/HTTP logs path the records are exported to.
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
}

// Stdout reports whether records go to the sidecar's stdout: no file and no OTLP endpoint.
func (a *Audit) Stdout() bool { return a.File == "" && a.OTLPEndpoint == "" }

// AuditDir is the only directory an audit file may be in: the sidecar container's audit
// volume. The sidecar refuses a file elsewhere (defence in depth: the API server's rules
// already do).
const AuditDir = "/var/log/switchboard"

// Audit arguments modes.
const (
	AuditArgumentsOff      = "Off"
	AuditArgumentsRedacted = "Redacted"
	AuditArgumentsFull     = "Full"
)

// DefaultAuditMethods are the methods audited when spec.audit.methods is empty (with Denials).
var DefaultAuditMethods = []string{"prompts/get", "resources/read", "tools/call"}

// Bounds of the redaction paths, as the sidecar's redactor has them.
const (
	maxRedactSegments = 16
	maxRedactPaths    = 64
)

// Audits reports whether a request of method is audited (a denial aside).
func (a *Audit) Audits(method string) bool {
	return a != nil && slices.Contains(a.Methods, method)
}

func validateAudit(a *Audit) []error {
	if a == nil {
		return nil
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch a.Arguments {
	case AuditArgumentsOff, AuditArgumentsRedacted, AuditArgumentsFull:
	default:
		add("audit.arguments %q is not Off, Redacted or Full", a.Arguments)
	}
	for _, p := range a.Redact {
		segs := strings.Split(strings.TrimPrefix(p, "$."), ".")
		if len(segs) > maxRedactSegments || slices.Contains(segs, "") {
			add("audit.redact %q is not a dotted member path of at most %d segments", p, maxRedactSegments)
		}
	}
	if len(a.Methods) == 0 && !a.Denials {
		add("audit audits nothing: set methods or denials")
	}
	for _, m := range a.Methods {
		if m == "" {
			add("audit.methods has an empty method")
		}
	}
	if a.File != "" && (!path.IsAbs(a.File) || path.Clean(a.File) != a.File || strings.HasSuffix(a.File, "/")) {
		add("audit.file %q is not an absolute, clean file path", a.File)
	}
	if len(a.Redact) > maxRedactPaths {
		add("audit.redact has %d paths, at most %d", len(a.Redact), maxRedactPaths)
	}
	if a.OTLPEndpoint != "" {
		if u, err := url.Parse(a.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			add("audit.otlpEndpoint %q is not an http:// or https:// URL without credentials, query or fragment", a.OTLPEndpoint)
		}
	}
	return errs
}
