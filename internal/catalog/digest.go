package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"
)

// Tool pinning (docs/security.md, "Tool pinning"): a tool's upstream digest names its
// definition exactly as the MCP server serves it, so an MCPTool can pin it and a changed
// description, schema, _meta or any other member (a "rug pull") is noticed.
//
// The canonical definition of a tool is the tool object the upstream lists, every member
// present and not null except those in UndigestedToolMembers, serialised with the JSON
// Canonicalization Scheme (RFC 8785: members sorted by their UTF-16 code units, no
// insignificant whitespace, ECMAScript number formatting, minimal string escapes). The digest
// is "sha256:" followed by the lowercase hex SHA-256 of those bytes.
//
// Every member counts because the sidecar serves every member (sidecar/rules/merge.go): _meta (MCP
// Apps ui links), icons, execution, members a later revision adds, and members spelled like a
// known one in another case ("Description"), which case-insensitive parsers read.
//
// Earlier releases (before security review F14) digested only name, title, description,
// inputSchema, outputSchema and annotations. For a tool made of those members only, both forms are the
// same bytes, so its pin still matches; a tool with other members gets a new digest, and its
// pin shows Drifted (Enforce withholds it) until the new definition is reviewed and its digest
// copied into the MCPTool (README, "Upgrading").

// UndigestedToolMembers are the members of a tool object that may vary while the tool stays
// the same, and so are left out of its digest. None today: a member joins this list only when
// a protocol revision defines it as changing between reads of an unchanged tool.
var UndigestedToolMembers = []string{}

// DigestPrefix starts every digest; DigestPattern is the whole form (for API validation).
const (
	DigestPrefix  = "sha256:"
	DigestPattern = `^sha256:[0-9a-f]{64}$`
)

var digestRE = regexp.MustCompile(DigestPattern)

// ValidDigest reports whether d has the form of an upstream digest.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// ToolDigest returns the upstream digest of one tool object as an upstream lists it.
func ToolDigest(tool json.RawMessage) (string, error) {
	canon, err := CanonicalTool(tool)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return DigestPrefix + hex.EncodeToString(sum[:]), nil
}

// CanonicalTool returns the canonical definition ToolDigest hashes.
func CanonicalTool(tool json.RawMessage) ([]byte, error) {
	// JCS parses strictly first: a member given twice is an error, not "the last one wins".
	whole, err := jcs.Transform(tool)
	if err != nil {
		return nil, fmt.Errorf("a tool must be valid JSON: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(whole, &members); err != nil || members == nil {
		return nil, fmt.Errorf("a tool must be a JSON object")
	}
	kept := make(map[string]json.RawMessage, len(members))
	for k, v := range members {
		if string(v) != "null" && !slices.Contains(UndigestedToolMembers, k) {
			kept[k] = v
		}
	}
	if _, ok := kept["name"]; !ok {
		return nil, fmt.Errorf("a tool has no name")
	}
	// encoding/json re-encodes the members losslessly (RawMessage); JCS then fixes the order,
	// the whitespace, the numbers and the escapes.
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(b)
}

// ToolsDigest summarises a whole tool list: SHA-256 over the lines "<name> <digest>\n" of every
// tool, sorted by name, so the upstream's order and formatting do not matter. Tools that cannot
// be digested count under their raw bytes' hash, so they still make lists differ.
func ToolsDigest(tools []json.RawMessage) string {
	lines := make([]string, 0, len(tools))
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &named)
		d, err := ToolDigest(t)
		if err != nil {
			sum := sha256.Sum256(t)
			d = "raw:" + hex.EncodeToString(sum[:])
		}
		lines = append(lines, named.Name+" "+d+"\n")
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	return DigestPrefix + hex.EncodeToString(sum[:])
}
