package sidecar

// Protocol constants the sidecar speaks. The go-sdk keeps the revision name
// unexported, so it is spelled out here.
const (
	// ProtocolVersion is the one modern revision the sidecar serves itself.
	ProtocolVersion = "2026-07-28"

	headerProtocolVersion = "Mcp-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
	headerParamPrefix     = "Mcp-Param-"

	methodDiscover = "server/discover"
	methodListen   = "subscriptions/listen"

	notifAcknowledged        = "notifications/subscriptions/acknowledged"
	notifToolsListChanged    = "notifications/tools/list_changed"
	notifPromptsListChanged  = "notifications/prompts/list_changed"
	notifResourcesListChange = "notifications/resources/list_changed"
	notifResourcesUpdated    = "notifications/resources/updated"

	resultComplete      = "complete"
	resultInputRequired = "input_required"
)
