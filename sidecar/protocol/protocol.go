// Package protocol is the vocabulary that the sidecar's rooms share: of MCP
// revision 2026-07-28, the revision, the Mcp-* headers, the method and
// notification names the sidecar itself speaks, the _meta keys it sets and
// the kinds of change a listen stream asks for; of Switchboard, the
// X-Switchboard-* headers that tell the upstream who the caller is.
//
// It holds names only: no parsing, no decision, no I/O, and it imports
// nothing of the module.
package protocol

// Names the sidecar speaks. The go-sdk keeps the revision name unexported,
// so it is spelled out here.
const (
	// Version is the one modern revision the sidecar serves itself.
	Version = "2026-07-28"

	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderParamPrefix     = "Mcp-Param-"

	MethodDiscover = "server/discover"
	MethodListen   = "subscriptions/listen"

	NotifAcknowledged         = "notifications/subscriptions/acknowledged"
	NotifToolsListChanged     = "notifications/tools/list_changed"
	NotifPromptsListChanged   = "notifications/prompts/list_changed"
	NotifResourcesListChanged = "notifications/resources/list_changed"
	NotifResourcesUpdated     = "notifications/resources/updated"

	ResultComplete      = "complete"
	ResultInputRequired = "input_required"

	// MetaSubscriptionID names the listen stream a notification belongs to.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// MetaLogLevel carries a request's log level (go-sdk's MetaKeyLogLevel,
	// set by sidecar/legacy's translation).
	MetaLogLevel = "io.modelcontextprotocol/logLevel"
)

// The headers that tell the upstream who the verified caller is (docs/sidecar.md). Every
// header starting with IdentityHeaderPrefix that a client sends is removed, whatever the auth
// mode, so an upstream can trust them.
const (
	IdentityHeaderPrefix = "X-Switchboard-"
	HeaderSubject        = "X-Switchboard-Subject"
	HeaderGroups         = "X-Switchboard-Groups" // one field per group
	HeaderServiceAccount = "X-Switchboard-Service-Account"
	HeaderSPIFFE         = "X-Switchboard-Spiffe-Id"
	HeaderIssuer         = "X-Switchboard-Issuer"
)

// Kind is a kind of change a listen stream can ask for.
type Kind uint8

const (
	// KindTools is notifications/tools/list_changed.
	KindTools Kind = 1 << iota
	// KindPrompts is notifications/prompts/list_changed.
	KindPrompts
	// KindResources is notifications/resources/list_changed.
	KindResources
	// KindResourceUpdated is notifications/resources/updated for one URI.
	KindResourceUpdated
)

// ListKinds are the kinds a stream selects with a boolean filter field.
var ListKinds = [...]Kind{KindTools, KindPrompts, KindResources}

// Method is the notification of a single change kind ("" for none or a
// combination).
func (k Kind) Method() string {
	switch k {
	case KindTools:
		return NotifToolsListChanged
	case KindPrompts:
		return NotifPromptsListChanged
	case KindResources:
		return NotifResourcesListChanged
	case KindResourceUpdated:
		return NotifResourcesUpdated
	}
	return ""
}
