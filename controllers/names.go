package controllers

// FieldOwner is the server-side apply field manager of everything the controller writes.
const FieldOwner = "switchboard"

// serverRefIndex is the field index on MCPTool, MCPResource and MCPPrompt by spec.serverRef.name.
const serverRefIndex = "spec.serverRef.name"
