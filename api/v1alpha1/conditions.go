package v1alpha1

// ConditionType names a condition in the status.conditions of a Switchboard object (and in each
// status.ancestors entry of an MCPAccessPolicy). Each constant lists the reasons it carries.
type ConditionType string

// ConditionReason is the reason of a condition, and of the Event that reports the same change.
// Each constant says which conditions carry it.
type ConditionReason string

// Condition types and reasons. Every reason says what happened and, where something is wrong,
// points at what to fix; Events the controller emits use the same reason strings. Each condition
// type lists the reasons it carries; Ready, Stalled and Reconciling repeat the reason of the
// condition they summarise.

// Condition types of every kind, read by GitOps tools: Flux and kstatus
// (sigs.k8s.io/cli-utils/pkg/kstatus) read Stalled, then Reconciling, then Ready; Argo CD reads
// them through docs/gitops/argocd-health.lua. Stalled and Reconciling have abnormal-true
// polarity: they are present only while True and removed when the object is back to normal.
const (
	// ConditionReady summarises the object. An MCPServer is Ready when the workload is
	// Available and every ready replica serves the current catalog revision, or when it is
	// scaled to zero (reason ScaledToZero: nothing is asked to run). An MCPTool, MCPResource or
	// MCPPrompt is Ready when it is Accepted and Published and the server's ready replicas serve
	// it (a revision that added or changed it, or a later one).
	ConditionReady ConditionType = "Ready"

	// ConditionStalled is True when the controller cannot make progress without a change by a
	// person: an invalid spec, a child object the API server refuses, a catalog too large or
	// rejected, a rollout past its progress deadline, or (item kinds) a missing server, a name
	// conflict, a tool withheld by its pin (toolPinning Enforce) or a missing resource source. A
	// missing server or source is Stalled only 30 s after the object's creation: before, it may
	// be on its way, and the object is Reconciling. The message says what to fix. kstatus
	// computes Failed with that message, so a pipeline waiting on the object fails at once.
	ConditionStalled ConditionType = "Stalled"

	// ConditionReconciling is True while a change is being rolled out or propagated and the
	// controller expects to finish without help; its reason names the phase (for example
	// DeploymentProgressing, RollingOut, PropagationPending, NoReadyReplicas). kstatus computes
	// InProgress.
	ConditionReconciling ConditionType = "Reconciling"
)

// MCPServer condition types.
const (

	// ConditionAvailable mirrors the Deployment's availability (at least the desired replicas
	// minus maxUnavailable are ready). Reasons: DeploymentAvailable or ExternalWorkload (True);
	// DeploymentProgressing, DeploymentUnavailable, ScaledToZero or ExternalWorkload (False).
	ConditionAvailable ConditionType = "Available"

	// ConditionCatalogPropagated is True when every ready replica has applied the current catalog
	// revision (status.catalogRevision). Reasons: AllReplicasUpToDate (True); PropagationPending,
	// CatalogRejected, CatalogTooLarge or NoReadyReplicas (False).
	ConditionCatalogPropagated ConditionType = "CatalogPropagated"

	// ConditionSidecarsUpToDate (External mode only) is True when every pod of the user's
	// workload runs the sidecar the MCPServer's current settings give. Switchboard never restarts
	// user workloads: when it is False, the message says which workloads to roll. Reasons:
	// SidecarsUpToDate (True), StaleSidecars (False).
	ConditionSidecarsUpToDate ConditionType = "SidecarsUpToDate"

	// ConditionToolsServed is True when the MCP server container of every ready replica lists
	// every enabled MCPTool of the current catalog revision. A declared tool the server does not
	// list is not shown to clients; the message names it. It is advisory: it does not change
	// Ready. Reasons: AllToolsServed (True), ToolsMissingUpstream (False), NotYetReported
	// (Unknown).
	ConditionToolsServed ConditionType = "ToolsServed"

	// ConditionVerified is True when every ready replica reports the same upstream identity:
	// protocol revision, serverInfo (name, version), capabilities and tool-list digest. False
	// names the pods and what differs (half the replicas on a new image during a rollout, or a
	// replica whose MCP server answers as a different server). Advisory: it does not change
	// Ready. Reasons: UpstreamVerified (True), UpstreamMismatch (False), NotYetReported
	// (Unknown).
	ConditionVerified ConditionType = "Verified"

	// ConditionToolsDrifted (unless spec.toolPinning is Off) is True when a ready replica's MCP
	// server serves a tool whose definition no longer matches its MCPTool's spec.upstreamDigest.
	// The message names the tools and the digest to pin to accept each new definition. Under
	// Warn they are still served; under Enforce they are withheld. Advisory: it does not change
	// Ready. Reasons: PinnedToolsDrifted (True), ToolsMatchPins (False), NotYetReported
	// (Unknown).
	ConditionToolsDrifted ConditionType = "ToolsDrifted"

	// ConditionUpstreamCredentials (only with spec.auth.upstreamCredentials) is True when the
	// credentials Secret is exposed to the server and holds every key the mapping names, each a
	// valid header value. False names what to fix; the callers it concerns get an error naming
	// the same, other callers keep working. The message names Secret keys and callers, never a
	// value. Advisory: it does not change Ready. Reasons: CredentialsResolved (True);
	// CredentialsSecretNotExposed, CredentialsSecretRefused, CredentialsKeyMissing or
	// CredentialsValueInvalid (False).
	ConditionUpstreamCredentials ConditionType = "UpstreamCredentials"
)

// Condition types shared by MCPTool, MCPResource and MCPPrompt.
const (
	// ConditionAccepted is True when the referenced MCPServer exists and no other object of the
	// same kind exposes the same name on it. Reasons: Accepted (True); ServerNotFound,
	// NameConflict or InvalidSpec (False). On an MCPAccessPolicy's ancestors: Accepted (True);
	// TargetNotFound, AuthenticationOff or Invalid (False).
	ConditionAccepted ConditionType = "Accepted"

	// ConditionPublished is True when the object is part of the server's current catalog
	// revision; status.catalogRevision names the revision it was first published in. Reasons:
	// Published (True); NotAccepted, CatalogTooLarge, SourceNotFound, SourceNotExposed or
	// SourceRefused (False).
	ConditionPublished ConditionType = "Published"
)

// Reasons for MCPServer conditions.
const (
	// Of Ready (MCPServer), and of Stalled or Reconciling, which repeat the reason of the
	// condition they summarise or name their own.

	// ReasonReady: the server is available and every ready replica serves the current catalog.
	ReasonReady ConditionReason = "Ready"
	// ReasonInvalidSpec: the spec cannot be turned into a workload; the message says which field to fix.
	ReasonInvalidSpec ConditionReason = "InvalidSpec"
	// ReasonReconcileFailed: applying a child object failed; the message carries the API error.
	// Stalled when the API server refused the child (invalid, forbidden, over quota, denied by
	// an admission policy); Reconciling while the controller retries an error that passes by
	// itself (a conflict, an overloaded API server).
	ReasonReconcileFailed ConditionReason = "ReconcileFailed"
	// ReasonRollingOut (Reconciling): the server is Ready, but the Deployment is still
	// replacing old pods with pods of the current spec.
	ReasonRollingOut ConditionReason = "RollingOut"
	// ReasonProgressDeadlineExceeded (Stalled): the Deployment made no progress within its
	// progress deadline; check the pods' events and the MCP server container's logs.
	ReasonProgressDeadlineExceeded ConditionReason = "ProgressDeadlineExceeded"

	// Of Available.

	// ReasonDeploymentAvailable: the Deployment reports Available=True.
	ReasonDeploymentAvailable ConditionReason = "DeploymentAvailable"
	// ReasonDeploymentUnavailable: fewer replicas are ready than the rollout strategy allows;
	// check the pods' events and the MCP server container's logs.
	ReasonDeploymentUnavailable ConditionReason = "DeploymentUnavailable"
	// ReasonDeploymentProgressing: a rollout is in progress.
	ReasonDeploymentProgressing ConditionReason = "DeploymentProgressing"
	// ReasonScaledToZero: spec.replicas is 0, so nothing serves clients. Available is False,
	// Ready is True: the server is as asked (as a Deployment scaled to zero is, for kstatus).
	ReasonScaledToZero ConditionReason = "ScaledToZero"
	// ReasonExternalWorkload: spec.mode is External; pods come from the user's own workload.
	ReasonExternalWorkload ConditionReason = "ExternalWorkload"
	// ReasonSecretNotOwned (Stalled): a Secret Switchboard creates for the server
	// (<server>-drain-token, <server>-sidecar-session) already exists and is not controlled by
	// this MCPServer. It is not adopted: whoever created it would know the token or key. The
	// message names the Secret to delete; the controller then creates its own.
	ReasonSecretNotOwned ConditionReason = "SecretNotOwned"

	// Of CatalogPropagated.

	// ReasonAllReplicasUpToDate (CatalogPropagated=True): every ready replica has applied the
	// current catalog revision.
	ReasonAllReplicasUpToDate ConditionReason = "AllReplicasUpToDate"
	// ReasonPropagationPending: some ready replicas still serve an older catalog revision.
	ReasonPropagationPending ConditionReason = "PropagationPending"
	// ReasonCatalogRejected: a sidecar refused the current catalog revision and keeps serving the
	// last good one; the message carries the sidecar's reason.
	ReasonCatalogRejected ConditionReason = "CatalogRejected"
	// ReasonCatalogTooLarge: the compiled catalog exceeds the ConfigMap size limit; move large
	// resource contents to ConfigMap- or Secret-backed MCPResources.
	ReasonCatalogTooLarge ConditionReason = "CatalogTooLarge"
	// ReasonNoReadyReplicas: no replica is ready, so no replica can serve the catalog.
	ReasonNoReadyReplicas ConditionReason = "NoReadyReplicas"

	// Of SidecarsUpToDate (External mode).

	// ReasonSidecarsUpToDate: every pod runs the sidecar of the current settings.
	ReasonSidecarsUpToDate ConditionReason = "SidecarsUpToDate"
	// ReasonStaleSidecars: some pods run a sidecar injected with older settings, or none; roll
	// the workloads the message names (kubectl rollout restart) to re-inject them.
	ReasonStaleSidecars ConditionReason = "StaleSidecars"

	// Of Verified.

	// ReasonUpstreamVerified: every ready replica reports the same upstream identity.
	ReasonUpstreamVerified ConditionReason = "UpstreamVerified"
	// ReasonUpstreamMismatch: ready replicas report different upstream identities; the message
	// names the pods and the fields. Expected while a rollout replaces the image; otherwise check
	// which image each pod runs.
	ReasonUpstreamMismatch ConditionReason = "UpstreamMismatch"

	// Of ToolsDrifted.

	// ReasonPinnedToolsDrifted: pinned tools' definitions changed on the MCP server; review each
	// new definition and set the MCPTool's spec.upstreamDigest to its
	// status.observedUpstreamDigest to accept it (or roll the image back).
	ReasonPinnedToolsDrifted ConditionReason = "PinnedToolsDrifted"
	// ReasonToolsMatchPins: every pinned tool's definition matches its pin.
	ReasonToolsMatchPins ConditionReason = "ToolsMatchPins"

	// Of ToolsServed (NotYetReported also of Verified and ToolsDrifted).

	// ReasonAllToolsServed: the server lists every enabled MCPTool.
	ReasonAllToolsServed ConditionReason = "AllToolsServed"
	// ReasonToolsMissingUpstream: the MCP server container does not list some enabled MCPTools,
	// so clients do not see them; fix spec.upstreamName (or spec.name) of the MCPTools the
	// message names, or the server's image.
	ReasonToolsMissingUpstream ConditionReason = "ToolsMissingUpstream"
	// ReasonNotYetReported (Unknown) is the reason of three conditions while no ready replica
	// has reported what they are decided from (or its sidecar predates the report): ToolsServed
	// (the current revision's tools checked against the MCP server), Verified (what the MCP
	// server announced) and ToolsDrifted (the current revision's tool definitions).
	ReasonNotYetReported ConditionReason = "NotYetReported"

	// Of UpstreamCredentials.

	// ReasonCredentialsResolved: the credentials Secret is exposed and holds every mapped key.
	ReasonCredentialsResolved ConditionReason = "CredentialsResolved"
	// ReasonCredentialsSecretNotExposed: the Secret spec.auth.upstreamCredentials.secretName does
	// not exist or does not carry the label mcp.switchboard.dev/expose-to naming the server (the
	// two are not told apart); every caller is refused until it is; the message gives the
	// kubectl label command.
	ReasonCredentialsSecretNotExposed ConditionReason = "CredentialsSecretNotExposed"
	// ReasonCredentialsSecretRefused: the Secret is one Switchboard never reads for credentials
	// (a ServiceAccount token, or Switchboard's own); name a Secret of your own.
	ReasonCredentialsSecretRefused ConditionReason = "CredentialsSecretRefused"
	// ReasonCredentialsKeyMissing: keys the mapping names are missing from the Secret; the
	// callers mapped to them are refused until they are added.
	ReasonCredentialsKeyMissing ConditionReason = "CredentialsKeyMissing"
	// ReasonCredentialsValueInvalid: values of the Secret cannot be sent in a header (empty, or
	// with a control character such as a trailing newline); the message names the keys.
	ReasonCredentialsValueInvalid ConditionReason = "CredentialsValueInvalid"
)

// Former names of reasons whose names did not say their values; the values are unchanged.
const (
	// Deprecated: use ReasonAllReplicasUpToDate (the value, "AllReplicasUpToDate", is the same).
	ReasonCatalogPropagated = ReasonAllReplicasUpToDate
	// Deprecated: use ReasonNotYetReported; it is the reason of ToolsServed, Verified and
	// ToolsDrifted alike.
	ReasonToolsNotYetReported = ReasonNotYetReported
	// Deprecated: use ReasonInvalid (the value, "Invalid", is the same).
	ReasonInvalidPolicy = ReasonInvalid
)

// Reasons for MCPTool, MCPResource and MCPPrompt conditions.
const (
	// Of Accepted.

	// ReasonAccepted: the server exists and the name is unique on it.
	ReasonAccepted ConditionReason = "Accepted"
	// ReasonServerNotFound: spec.serverRef names no MCPServer in this namespace; create it or fix
	// the reference. Resolved automatically when the server appears.
	ReasonServerNotFound ConditionReason = "ServerNotFound"
	// ReasonNameConflict: another object of the same kind exposes the same name on the server
	// and wins (oldest creation, then object name); the message names the winner.
	ReasonNameConflict ConditionReason = "NameConflict"

	// Of Stalled (MCPTool).

	// ReasonToolWithheld (MCPTool, Stalled): under spec.toolPinning Enforce the sidecars
	// withhold the tool, because its MCP server serves a definition other than the pinned one
	// (or, under toolPolicy All, it has no pin); review the definition, then set
	// spec.upstreamDigest to the digest the message names.
	ReasonToolWithheld ConditionReason = "ToolWithheld"

	// Of Published.

	// ReasonPublished: the object is part of the server's current catalog revision.
	ReasonPublished ConditionReason = "Published"
	// ReasonNotAccepted: the object is not published because it is not accepted.
	ReasonNotAccepted ConditionReason = "NotAccepted"
	// ReasonSourceNotFound: the key behind an MCPResource is missing from its exposed ConfigMap or
	// Secret; reads succeed once it is added.
	ReasonSourceNotFound ConditionReason = "SourceNotFound"
	// ReasonSourceNotExposed: the ConfigMap or Secret behind an MCPResource does not carry the
	// label mcp.switchboard.dev/expose-to naming the server (or does not exist: the two are not
	// told apart, so the status reveals nothing about objects not exposed). The sidecar gets no
	// access to it and the resource is not in the catalog; the message gives the kubectl label
	// command that exposes it.
	ReasonSourceNotExposed ConditionReason = "SourceNotExposed"
	// ReasonSourceRefused: the Secret or ConfigMap behind an MCPResource is one Switchboard never
	// serves, whatever its labels: a ServiceAccount token, or Switchboard's own (a server's drain
	// token or session key, or an object an MCPServer controls). Point spec.source elsewhere.
	ReasonSourceRefused ConditionReason = "SourceRefused"
)

// Reasons of MCPAccessPolicy conditions: Accepted in each status.ancestors entry, and Ready,
// Stalled and Reconciling in status.conditions, which summarise them.
const (
	// ReasonPolicyAccepted (Accepted=True) is ReasonAccepted: the policy is compiled into the
	// target's catalog and enforced by its sidecars.

	// ReasonTargetNotFound: spec.targetRefs names an MCPServer that does not exist in the
	// policy's namespace; create it or fix the reference. Resolved automatically when the server
	// appears.
	ReasonTargetNotFound ConditionReason = "TargetNotFound"
	// ReasonAuthenticationOff: the target's spec.auth.mode is not Required, so its sidecars know
	// no caller and cannot enforce the policy; set spec.auth.mode: Required (with
	// serviceAccountTokens or jwt) on the MCPServer.
	ReasonAuthenticationOff ConditionReason = "AuthenticationOff"
	// ReasonInvalid (MCPAccessPolicy, Accepted=False): an entry of the policy can never match a
	// caller of the target (an identity in another trust domain than the cluster's); the message
	// names it. The policy grants nothing on the target, which stays isolated (default deny),
	// until it is fixed.
	ReasonInvalid ConditionReason = "Invalid"
)
