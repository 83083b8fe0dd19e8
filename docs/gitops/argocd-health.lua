-- Argo CD health for Switchboard's kinds: MCPServer, MCPTool, MCPResource, MCPPrompt and
-- MCPAccessPolicy (group mcp.switchboard.dev). Install it with argocd-cm.yaml beside this file.
--
-- Order (the first rule that applies wins):
--   1. no status yet, or only conditions of an older generation       -> Progressing
--   2. Stalled=True: the controller cannot go on without a change     -> Degraded
--   3. Reconciling=True: a change is being rolled out or propagated   -> Progressing
--   4. Ready=True (an MCPServer scaled to zero is Ready, reason ScaledToZero,
--      as a Deployment scaled to zero is; older controllers wrote it False) -> Healthy
--   5. Ready not True: reasons a person has to act on                 -> Degraded
--                      anything else (rollout, propagation)           -> Progressing
--   6. item kinds without Ready (written by an older controller):
--      Accepted=False -> Degraded; Published=True -> Healthy; otherwise as in 5.
-- The controller sets Stalled and Reconciling (present only while True), so with a current
-- controller rules 1-4 decide; 5 and 6 read status written by older controllers.
-- Messages carry the condition's reason and message, which say what to fix.

local degradedReasons = {
  InvalidSpec = true, ReconcileFailed = true, DeploymentUnavailable = true,
  CatalogRejected = true, CatalogTooLarge = true,
  ServerNotFound = true, NameConflict = true, NotAccepted = true, SourceNotFound = true,
  SourceNotExposed = true, SourceRefused = true, SecretNotOwned = true,
  TargetNotFound = true, AuthenticationOff = true, Invalid = true,
}

local function health(status, c)
  local msg = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    msg = msg .. ": " .. c.message
  end
  return {status = status, message = msg}
end

local function notReady(c)
  if degradedReasons[c.reason] then
    return health("Degraded", c)
  end
  return health("Progressing", c)
end

if obj.status == nil or obj.status.conditions == nil then
  return {status = "Progressing", message = "Waiting for the controller to report status"}
end
-- A condition describes the current spec when its observedGeneration (or, without one,
-- status.observedGeneration) has reached metadata.generation; older ones are ignored.
local generation = obj.metadata.generation
local function current(c)
  local observed = c.observedGeneration
  if observed == nil then
    observed = obj.status.observedGeneration
  end
  return generation == nil or (observed ~= nil and observed >= generation)
end

local byType = {}
for _, c in ipairs(obj.status.conditions) do
  if current(c) then
    byType[c.type] = c
  end
end
if next(byType) == nil then
  return {status = "Progressing", message = "Waiting for the controller to observe generation " .. (generation or 0)}
end

if byType.Stalled ~= nil and byType.Stalled.status == "True" then
  return health("Degraded", byType.Stalled)
end
if byType.Reconciling ~= nil and byType.Reconciling.status == "True" then
  return health("Progressing", byType.Reconciling)
end

local ready = byType.Ready
if ready ~= nil then
  if ready.status == "True" or ready.reason == "ScaledToZero" then
    return health("Healthy", ready)
  end
  return notReady(ready)
end

if byType.Accepted ~= nil and byType.Accepted.status == "False" then
  return health("Degraded", byType.Accepted)
end
if byType.Published ~= nil then
  if byType.Published.status == "True" then
    return health("Healthy", byType.Published)
  end
  return notReady(byType.Published)
end
return {status = "Progressing", message = "Waiting for the controller to report Ready for generation " .. (generation or 0)}
