package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Ports the injected sidecar uses inside the pod; the MCP server container must not use them.
const (
	// SidecarMCPPort serves MCP Streamable HTTP to clients (the Service targets it).
	SidecarMCPPort = 8800
	// SidecarAdminPort serves /healthz, /readyz, /metrics and the drain endpoint.
	SidecarAdminPort = 8801
)

// WorkloadMode says who runs the MCP server's pods.
// +kubebuilder:validation:Enum=Managed;External
type WorkloadMode string

const (
	// WorkloadManaged means Switchboard runs a Deployment of spec.container with the sidecar.
	WorkloadManaged WorkloadMode = "Managed"
	// WorkloadExternal means the user's own workload runs the pods; pods labelled
	// mcp.switchboard.dev/server=<name> get the sidecar from the injection webhook.
	WorkloadExternal WorkloadMode = "External"
)

// ToolPolicy decides which tools the server exposes.
// +kubebuilder:validation:Enum=All;Declared
type ToolPolicy string

const (
	// ToolPolicyAll exposes every upstream tool, with MCPTools overriding, renaming or disabling them.
	ToolPolicyAll ToolPolicy = "All"
	// ToolPolicyDeclared exposes only the tools that have an MCPTool.
	ToolPolicyDeclared ToolPolicy = "Declared"
)

// ToolPinning decides what the sidecar does when a tool's definition on the MCP server no
// longer matches the digest its MCPTool pins (spec.upstreamDigest): the rug-pull defence.
// +kubebuilder:validation:Enum=Off;Warn;Enforce
type ToolPinning string

const (
	// ToolPinningOff checks nothing: no ToolsDrifted condition, no Events. MCPTool status still
	// shows the observed digest and whether it matches the pin.
	ToolPinningOff ToolPinning = "Off"
	// ToolPinningWarn serves every tool; a pinned tool whose definition drifted is flagged
	// (ToolsDrifted=True, a Warning Event, MCPTool status.pin Drifted). A tool without a pin is
	// simply Unpinned: no condition, no Event.
	ToolPinningWarn ToolPinning = "Warn"
	// ToolPinningEnforce withholds a pinned tool whose definition drifted from tools/list and
	// refuses calls to it, live, with notifications/tools/list_changed; with toolPolicy All, a
	// tool without a pin is withheld too.
	ToolPinningEnforce ToolPinning = "Enforce"
)

// MCPServerSpec declares one MCP server workload and how its sidecar serves it.
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.upstreamCredentials) || !has(self.container) || !has(self.container.transport) || self.container.transport != 'Stdio'",message="auth.upstreamCredentials cannot be used with container.transport Stdio: one child process serves every caller, so no request can carry one caller's credential to it; serve the server over StreamableHTTP, or run one MCPServer per credential with the key in container.env"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Managed' || (has(self.container) && has(self.container.image))",message="spec.container.image is required when mode is Managed"
// +kubebuilder:validation:XValidation:rule="self.mode != 'External' || !has(self.container) || !has(self.container.image)",message="spec.container.image must be empty when mode is External: the pods come from your own workload"
// +kubebuilder:validation:XValidation:rule="self.mode != 'External' || !has(self.replicas)",message="spec.replicas must be empty when mode is External: scale your own workload instead"
type MCPServerSpec struct {
	// mode is Managed (Switchboard runs a Deployment of spec.container) or External (your own
	// workload runs the pods and opts them into sidecar injection with the label
	// mcp.switchboard.dev/server=<name>).
	// +optional
	// +kubebuilder:default=Managed
	Mode WorkloadMode `json:"mode,omitempty"`

	// container is the MCP server container. In External mode only port and path are used.
	// +optional
	Container *ServerContainer `json:"container,omitempty"`

	// replicas is the number of pods (Managed mode). Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// rollout tunes the Deployment's rolling update. Defaults: maxSurge 1, maxUnavailable 0, so
	// a rollout never lowers capacity.
	// +optional
	Rollout *Rollout `json:"rollout,omitempty"`

	// pod sets pod-level fields of the workload (Managed mode).
	// +optional
	Pod *PodOverrides `json:"pod,omitempty"`

	// sidecar tunes the Switchboard sidecar that fronts the MCP server.
	// +optional
	Sidecar *SidecarSpec `json:"sidecar,omitempty"`

	// toolPolicy is All (upstream tools plus MCPTool overrides) or Declared (only tools that have
	// an MCPTool).
	// +optional
	// +kubebuilder:default=All
	ToolPolicy ToolPolicy `json:"toolPolicy,omitempty"`

	// toolPinning is Off, Warn (the default) or Enforce. A tool's upstream digest is the SHA-256
	// of its canonical definition as the MCP server serves it (name, title, description, input
	// and output schema, annotations; docs/security.md); an MCPTool pins it with
	// spec.upstreamDigest. Warn serves a tool whose definition drifted from its pin and flags it
	// (the ToolsDrifted condition and a Warning Event). Enforce withholds it from tools/list and
	// refuses calls to it, live; with toolPolicy All it also withholds every tool without a pin.
	// To accept a new definition, set the MCPTool's spec.upstreamDigest to its
	// status.observedUpstreamDigest.
	// +optional
	// +kubebuilder:default=Warn
	ToolPinning ToolPinning `json:"toolPinning,omitempty"`

	// caching sets the default cache hints per result kind. MCPResource.spec.caching overrides
	// resourceRead for one resource.
	// +optional
	Caching *CachingSpec `json:"caching,omitempty"`

	// networkPolicy makes the sidecar the only way into the pods: a NetworkPolicy that admits
	// ingress on the sidecar's MCP port (8800) and, from the adminFrom peers only, on its admin
	// port (8801). Every other port, the MCP server container's included, gets no ingress.
	// On by default in Managed mode; opt-in (enabled: true) in External mode.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// auth makes the sidecar authenticate every caller (an OAuth 2.1 resource server, as the MCP
	// authorization spec describes): with mode Required, every MCP request needs a bearer token
	// of a ServiceAccount of this cluster (serviceAccountTokens) or of an OIDC issuer (jwt).
	// MCPAccessPolicies that target the server then decide what each caller may use. Off (the
	// default, or auth unset): no caller is authenticated and MCPAccessPolicies are not enforced.
	// Changes apply live, without restarting pods.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// audit makes the sidecar write one JSON record per audited request (docs/audit.md): who
	// called which tool, resource or prompt, the decision (allowed, or denied and why) and the
	// outcome. Off when unset. Changes apply live, without restarting pods, except turning a
	// file sink on or off, which adds or removes the sidecar's audit volume and so rolls them.
	// +optional
	Audit *AuditSpec `json:"audit,omitempty"`
}

// AuditArguments is what an audit record keeps of a call's arguments.
// +kubebuilder:validation:Enum=Off;Redacted;Full
type AuditArguments string

const (
	// AuditArgumentsOff keeps no arguments.
	AuditArgumentsOff AuditArguments = "Off"
	// AuditArgumentsRedacted keeps them with the redact paths and every secret-looking member
	// or value (password, token, api_key, a bearer credential, a JWT, a private key) masked.
	AuditArgumentsRedacted AuditArguments = "Redacted"
	// AuditArgumentsFull keeps them with the redact paths masked only.
	AuditArgumentsFull AuditArguments = "Full"
)

// AuditMethod names what is audited.
// +kubebuilder:validation:Enum=tools/call;resources/read;prompts/get;completion/complete;tools/list;resources/list;resources/templates/list;prompts/list;Denials
type AuditMethod string

// AuditDenials audits every request the sidecar refuses on access grounds (not granted,
// undeclared, withheld), whatever its method.
const AuditDenials AuditMethod = "Denials"

// Limits of spec.audit.
const (
	// MaxAuditRedactPaths bounds spec.audit.redact.
	MaxAuditRedactPaths = 64
	// MaxAuditRedactPathLength bounds one redact path.
	MaxAuditRedactPathLength = 256
)

// AuditDir is the sidecar container's directory for an audit file: an emptyDir mounted there
// only when spec.audit.sink.file is set.
const AuditDir = "/var/log/switchboard"

// AuditSpec is what the sidecar audits and where the records go.
type AuditSpec struct {
	// arguments is what a record keeps of a call's arguments (tools/call arguments, prompts/get
	// arguments): Off (the default), Redacted or Full. Either way at most 4 KiB and 16 levels
	// deep are kept; the rest is replaced by "[TRUNCATED]" and argumentsTruncated is set.
	// +optional
	// +kubebuilder:default=Off
	Arguments AuditArguments `json:"arguments,omitempty"`

	// redact lists members of the arguments replaced by "[REDACTED]" (in Redacted and Full
	// mode): dotted paths from the arguments object down, "*" for any member or array element,
	// e.g. password, auth.token, items.*.secret. A leading "$." is allowed.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:XValidation:rule="self.matches('^([$][.])?[^.]+([.][^.]+){0,15}$')",message="audit.redact entries are dotted member paths such as auth.token or items.*.secret (no empty segment, at most 16 segments)"
	Redact []string `json:"redact,omitempty"`

	// methods lists what is audited. Default (unset or empty): tools/call, resources/read,
	// prompts/get and Denials (every request refused on access grounds, whatever its method).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=9
	Methods []AuditMethod `json:"methods,omitempty"`

	// sink is where the records go: the sidecar's stdout (the default), one JSON line each,
	// which the node's log agent collects with the container's logs, or a file.
	// +optional
	Sink *AuditSink `json:"sink,omitempty"`
}

// AuditSink is where audit records are written.
type AuditSink struct {
	// file, when set, is the file the sidecar appends records to instead of stdout: a path
	// under /var/log/switchboard/, an emptyDir volume (switchboard-audit) mounted into the
	// sidecar container only while a file is set. A log agent reads it from a container of its
	// own that mounts the same volume (External mode), or from the node's pod volume directory.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/var/log/switchboard/') && !self.endsWith('/') && !self.endsWith('/.') && !self.endsWith('/..') && !self.contains('/../') && !self.contains('/./') && !self.contains('//')",message="audit.sink.file must be a file path under /var/log/switchboard/ (the sidecar's audit volume), e.g. /var/log/switchboard/audit.jsonl"
	File string `json:"file,omitempty"`

	// otlp, when set, also exports the records as OTLP log records (http/protobuf) to a
	// collector. With otlp and no file, the records go to the collector only, not to stdout.
	// The export never delays a call: records wait in a bounded queue and are dropped (and
	// counted) when the collector is slow or down.
	// +optional
	OTLP *AuditOTLPSink `json:"otlp,omitempty"`
}

// AuditOTLPSink is an OpenTelemetry collector receiving audit records as OTLP logs.
type AuditOTLPSink struct {
	// endpoint is the full URL of the collector's OTLP/HTTP logs path, e.g.
	// http://otel-collector.observability.svc:4318/v1/logs (https:// for TLS, verified against
	// the sidecar's system roots).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https') && url(self).getHostname() != ''",message="audit.sink.otlp.endpoint must be an http:// or https:// URL of the collector's OTLP/HTTP logs path, e.g. http://otel-collector.observability.svc:4318/v1/logs"
	// +kubebuilder:validation:XValidation:rule="!self.contains('@') && !self.contains('?') && !self.contains('#')",message="audit.sink.otlp.endpoint must not carry credentials, a query or a fragment: name the logs path only, e.g. http://otel-collector.observability.svc:4318/v1/logs"
	Endpoint string `json:"endpoint"`
}

// AuthMode says whether the sidecar authenticates callers.
// +kubebuilder:validation:Enum=Off;Required
type AuthMode string

const (
	// AuthOff authenticates no caller: anyone who reaches the Service may use the whole catalog.
	AuthOff AuthMode = "Off"
	// AuthRequired refuses every MCP request without a valid bearer token (HTTP 401 naming the
	// Protected Resource Metadata document).
	AuthRequired AuthMode = "Required"
)

// Limits of spec.auth.
const (
	// MaxAuthAudiences bounds spec.auth.audiences and each issuer's audiences.
	MaxAuthAudiences = 8
	// MaxJWTIssuers bounds spec.auth.jwt.
	MaxJWTIssuers = 8
)

// AuthSpec is how the sidecar authenticates callers.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Required' || has(self.serviceAccountTokens) || (has(self.jwt) && size(self.jwt) > 0)",message="auth.mode Required accepts no token: set auth.serviceAccountTokens: {} (this cluster's ServiceAccounts) or auth.jwt (OIDC issuers)"
// +kubebuilder:validation:XValidation:rule="!has(self.upstreamCredentials) || self.mode == 'Required'",message="auth.upstreamCredentials needs auth.mode Required: the sidecar picks each caller's credential by the verified caller; set auth.mode: Required (with serviceAccountTokens or jwt)"
// +kubebuilder:validation:XValidation:rule="!has(self.upstreamCredentials) || !has(self.forwardToken) || !self.forwardToken || self.upstreamCredentials.header.name.lowerAscii() != 'authorization'",message="auth.forwardToken and auth.upstreamCredentials.header.name Authorization both set the upstream's Authorization header; turn forwardToken off or put the credential in another header"
type AuthSpec struct {
	// mode is Off (the default: no caller is authenticated) or Required (every MCP request needs
	// a valid bearer token; MCPAccessPolicies are enforced).
	// +optional
	// +kubebuilder:default=Off
	Mode AuthMode `json:"mode,omitempty"`

	// audiences are the token audiences the server accepts (a token must carry one of them):
	// for ServiceAccount tokens, and for every issuer in jwt that lists none of its own.
	// Default: the server's URL, status.url (http://<name>.<namespace>.svc/mcp), which is also
	// the resource the Protected Resource Metadata document names.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Audiences []string `json:"audiences,omitempty"`

	// serviceAccountTokens, when present (serviceAccountTokens: {}), accepts projected
	// ServiceAccount tokens of this cluster whose audience is one of audiences. The sidecar
	// validates them with a TokenReview; the manager binds the ClusterRole
	// switchboard-sidecar-tokenreviewer to the sidecar's ServiceAccount for that. A caller is
	// then ServiceAccount <namespace>/<name> and spiffe://<trust domain>/ns/<namespace>/sa/<name>.
	// +optional
	ServiceAccountTokens *ServiceAccountTokens `json:"serviceAccountTokens,omitempty"`

	// jwt lists the OIDC issuers whose JWTs are accepted, in the shape of the API server's
	// structured authentication configuration (apiserver.config.k8s.io
	// AuthenticationConfiguration.jwt).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(j, self.filter(k, k.issuer.url == j.issuer.url).size() == 1)",message="auth.jwt lists an issuer url twice; merge the entries (an issuer takes several audiences)"
	JWT []JWTAuthenticator `json:"jwt,omitempty"`

	// forwardToken passes the caller's Authorization header on to the MCP server. Off by
	// default: the MCP server gets the verified identity as headers instead, never the token
	// (no token passthrough). Turn it on only for an MCP server that is the token's audience
	// itself.
	// +optional
	ForwardToken bool `json:"forwardToken,omitempty"`

	// upstreamCredentials gives each caller its own credential for the MCP server: the sidecar
	// reads it from a Secret of this namespace and sends it in a header on every request it
	// forwards for that caller (the caller's own header of that name never reaches the server).
	// A caller without a credential gets a JSON-RPC error naming what to configure and the
	// server is not called. Needs mode Required; not with container.transport Stdio (one child
	// process serves every caller). Edits of the mapping and of the Secret apply live
	// (docs/credentials.md).
	// +optional
	UpstreamCredentials *UpstreamCredentials `json:"upstreamCredentials,omitempty"`
}

// CredentialCallerBy says which part of the verified caller selects its credential.
// +kubebuilder:validation:Enum=ServiceAccount;Username;Claim
type CredentialCallerBy string

const (
	// CredentialByServiceAccount selects by the caller's ServiceAccount, <namespace>/<name>.
	// Callers with an OIDC token have none.
	CredentialByServiceAccount CredentialCallerBy = "ServiceAccount"
	// CredentialByUsername selects by the caller's username: system:serviceaccount:<ns>:<name>
	// for a ServiceAccount token, the mapped username (prefix included) for an OIDC token.
	CredentialByUsername CredentialCallerBy = "Username"
	// CredentialByClaim selects by the string value of one claim of the caller's OIDC token.
	// ServiceAccount callers have no claim value.
	CredentialByClaim CredentialCallerBy = "Claim"
)

// Limits of spec.auth.upstreamCredentials.
const (
	// MaxCredentialCallers bounds spec.auth.upstreamCredentials.callers.
	MaxCredentialCallers = 256
)

// UpstreamCredentials maps verified callers to keys of a Secret, and says in which header the
// value goes to the MCP server.
// +kubebuilder:validation:XValidation:rule="self.by == 'Claim' ? has(self.claim) : !has(self.claim)",message="upstreamCredentials.claim names the token claim when by is Claim, and only then: set both or neither"
// +kubebuilder:validation:XValidation:rule="has(self.defaultKey) || (has(self.callers) && size(self.callers) > 0)",message="upstreamCredentials maps no caller to a key: list callers, set defaultKey, or both"
// +kubebuilder:validation:XValidation:rule="self.by != 'ServiceAccount' || !has(self.callers) || self.callers.all(c, c.caller.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'))",message="with by ServiceAccount, every upstreamCredentials.callers[].caller is <namespace>/<name> of a ServiceAccount, e.g. team-a/agent"
type UpstreamCredentials struct {
	// secretName is the Secret, in the server's namespace, holding the credentials, one per
	// key. Its owner exposes it to the server with the label
	// mcp.switchboard.dev/expose-to=<server> (as for Secret-backed MCPResources); the
	// controller then grants the server's sidecars get, list and watch on this Secret alone.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!(self.endsWith('-drain-token') || self.endsWith('-sidecar-session'))",message="upstreamCredentials.secretName names a Switchboard Secret (<server>-drain-token or <server>-sidecar-session); point it at a Secret of your own"
	SecretName string `json:"secretName"`

	// header is the request header the credential is sent in.
	// +required
	Header CredentialHeader `json:"header"`

	// by is what selects a caller's entry in callers: ServiceAccount (<namespace>/<name>, the
	// default), Username, or Claim (the value of the token claim named by claim).
	// +optional
	// +kubebuilder:default=ServiceAccount
	By CredentialCallerBy `json:"by,omitempty"`

	// claim is the OIDC token claim whose string value selects the caller's entry (by Claim).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim,omitempty"`

	// callers map callers to keys of the Secret.
	// +optional
	// +listType=map
	// +listMapKey=caller
	// +kubebuilder:validation:MaxItems=256
	Callers []CallerCredential `json:"callers,omitempty"`

	// defaultKey is the key of the Secret used for a caller that callers does not list. Without
	// it such a caller is refused.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	DefaultKey string `json:"defaultKey,omitempty"`
}

// CredentialHeader is the header a credential is sent in, and what is put before the value.
type CredentialHeader struct {
	// name of the header, e.g. Authorization or X-Api-Key. Not a header the sidecar or HTTP
	// itself owns: hop-by-hop and framing headers, Host, the Mcp-* protocol headers, the
	// X-Switchboard-* identity headers, forwarding and trace context headers.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`
	// +kubebuilder:validation:XValidation:rule="!(self.lowerAscii() in ['connection', 'proxy-connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length', 'content-type', 'content-encoding', 'accept', 'accept-encoding', 'origin', 'cookie', 'forwarded', 'x-real-ip', 'traceparent', 'tracestate', 'baggage'])",message="upstreamCredentials.header.name is a header HTTP or the sidecar itself sets (hop-by-hop, framing, Host, Origin, Cookie, forwarding or trace context); name the header the MCP server reads its credential from, e.g. Authorization or X-Api-Key"
	// +kubebuilder:validation:XValidation:rule="!self.lowerAscii().startsWith('x-switchboard-') && !self.lowerAscii().startsWith('mcp-') && !self.lowerAscii().startsWith('x-forwarded-')",message="upstreamCredentials.header.name must not start with X-Switchboard- (the verified identity headers), Mcp- (the MCP protocol headers) or X-Forwarded- (set by the sidecar); name the header the MCP server reads its credential from, e.g. X-Api-Key"
	Name string `json:"name"`

	// valuePrefix is put before the Secret's value, e.g. "Bearer " for Authorization.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[ -~]*$`
	ValuePrefix string `json:"valuePrefix,omitempty"`
}

// CallerCredential maps one caller to a key of the Secret.
type CallerCredential struct {
	// caller is the value that selects this entry: a ServiceAccount's <namespace>/<name>, a
	// username, or a claim value, as upstreamCredentials.by says.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Caller string `json:"caller"`

	// key of the Secret whose value is this caller's credential.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ServiceAccountTokens accepts this cluster's ServiceAccount tokens; it has no fields yet.
type ServiceAccountTokens struct{}

// JWTAuthenticator is one OIDC issuer whose JWTs are accepted.
type JWTAuthenticator struct {
	// issuer is the token issuer and the audiences its tokens must carry.
	// +required
	Issuer Issuer `json:"issuer"`

	// claimMappings maps the token's claims to the caller's username and groups, which
	// MCPAccessPolicies match (rules[].source.users and groups).
	// +optional
	ClaimMappings *ClaimMappings `json:"claimMappings,omitempty"`
}

// Issuer is an OIDC issuer.
type Issuer struct {
	// url is the issuer, https, exactly as the tokens' iss claim carries it; the sidecar finds
	// its keys through <url>/.well-known/openid-configuration.
	// +required
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') && isURL(self) && url(self).getHostname() != ''",message="auth.jwt[].issuer.url must be an https URL, e.g. https://issuer.example.com"
	URL string `json:"url"`

	// audiences the token's aud claim must contain one of. Default: spec.auth.audiences (and so
	// the server's URL).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	Audiences []string `json:"audiences,omitempty"`

	// certificateAuthority is the PEM bundle that verifies the issuer's TLS certificate (for
	// discovery and keys). Default: the system roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CertificateAuthority string `json:"certificateAuthority,omitempty"`
}

// ClaimMappings maps token claims to the caller's username and groups.
type ClaimMappings struct {
	// username is the claim that names the caller and the prefix put before it. Default: claim
	// sub with prefix "<issuer url>#", so no issuer's users can be mistaken for another's.
	// +optional
	Username *PrefixedClaim `json:"username,omitempty"`

	// groups is the claim (a string or a list of strings) holding the caller's groups and the
	// prefix put before each. Default: none.
	// +optional
	Groups *PrefixedClaim `json:"groups,omitempty"`
}

// PrefixedClaim is a claim and the prefix put before its value(s).
// +kubebuilder:validation:XValidation:rule="has(self.prefix)",message="claimMappings prefix is required when claim is set (as in the API server's authentication configuration): set a prefix such as \"oidc:\", or \"\" for none"
type PrefixedClaim struct {
	// claim is the name of the token claim.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Claim string `json:"claim"`

	// prefix is put before the claim's value. Required (an empty string means none), and never
	// system: (the prefix of this cluster's own users and groups): an OIDC caller must never be
	// able to look like a ServiceAccount or a system group.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('system:')",message="claimMappings prefix must not start with system: (reserved for this cluster's own users and groups); choose a prefix such as oidc:"
	Prefix *string `json:"prefix,omitempty"`
}

// NetworkPolicySpec shapes the NetworkPolicy the controller applies to the server's pods.
// +kubebuilder:validation:XValidation:rule="!has(self.enabled) || self.enabled || (!has(self.mcpFrom) && !has(self.adminFrom))",message="networkPolicy.mcpFrom and networkPolicy.adminFrom have no effect when networkPolicy.enabled is false; remove them or enable the policy"
type NetworkPolicySpec struct {
	// enabled applies the NetworkPolicy. Defaults to true in Managed mode and false in External
	// mode (your workload's pods may serve other ports you want reachable).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// mcpFrom are the peers that may reach the sidecar's MCP port (8800). Empty: any peer, as
	// a Service is meant to be reached; set it to admit only, e.g., your gateway's namespace.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MCPFrom []networkingv1.NetworkPolicyPeer `json:"mcpFrom,omitempty"`

	// adminFrom are the peers that may reach the sidecar's admin port (8801: /metrics,
	// /healthz, /readyz, /drain), typically your Prometheus. Empty: no pod may; the kubelet's
	// probes and preStop hooks still reach it, as NetworkPolicies never block a node's traffic
	// to its own pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	AdminFrom []networkingv1.NetworkPolicyPeer `json:"adminFrom,omitempty"`
}

// ServerTransport is how the MCP server container speaks MCP.
// +kubebuilder:validation:Enum=StreamableHTTP;Stdio
type ServerTransport string

const (
	// TransportStreamableHTTP means the server serves MCP over HTTP on spec.container.port and path,
	// at any protocol revision from 2025-03-26 to 2026-07-28 (the sidecar finds out which).
	TransportStreamableHTTP ServerTransport = "StreamableHTTP"
	// TransportStdio means the server speaks JSON-RPC on stdin/stdout (most npm and PyPI MCP
	// packages). Its container runs the Switchboard stdio bridge, copied into the pod by an init
	// container, which starts spec.container.command and args as its child and serves it on
	// 127.0.0.1:port for the sidecar.
	TransportStdio ServerTransport = "Stdio"
)

// ServerContainer is the MCP server container.
// +kubebuilder:validation:XValidation:rule="self.port != 8800 && self.port != 8801",message="port 8800 and 8801 are reserved for the Switchboard sidecar; serve MCP on another port"
// +kubebuilder:validation:XValidation:rule="!has(self.transport) || self.transport != 'Stdio' || !has(self.image) || (has(self.command) && size(self.command) > 0)",message="spec.container.command is required when transport is Stdio: Switchboard cannot read the image's entrypoint, and the stdio bridge must know what to start (e.g. command: [npx, -y, @modelcontextprotocol/server-everything])"
type ServerContainer struct {
	// transport is StreamableHTTP (the server serves MCP over HTTP on port and path) or Stdio
	// (the server speaks MCP on stdin/stdout; the stdio bridge serves it on 127.0.0.1:port).
	// +optional
	// +kubebuilder:default=StreamableHTTP
	Transport ServerTransport `json:"transport,omitempty"`

	// image of the MCP server.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// imagePullPolicy of the MCP server image.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// command overrides the image's entrypoint. Required with transport Stdio.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// args are the arguments to the entrypoint.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`

	// env sets environment variables in the MCP server container.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Env []corev1.EnvVar `json:"env,omitempty"`

	// envFrom fills environment variables from ConfigMaps and Secrets.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`

	// port the MCP server listens on inside the pod. Bind it to 127.0.0.1: the sidecar reaches
	// it there, and nothing outside the pod can (the NetworkPolicy closes it too).
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// path of the MCP endpoint on the server, e.g. /mcp.
	// +optional
	// +kubebuilder:default="/mcp"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$`
	Path string `json:"path,omitempty"`

	// resources of the MCP server container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// runAsUser runs the MCP server container as this user id (Managed mode). The pods run as
	// non-root, so an image whose USER is root or a name (node, python, ...) needs it, e.g. 1000
	// for the node user of the Node images.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`
}

// Rollout tunes the Deployment's rolling update.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && has(self.maxUnavailable) && (self.maxSurge == 0 || self.maxSurge == '0%') && (self.maxUnavailable == 0 || self.maxUnavailable == '0%'))",message="maxSurge and maxUnavailable cannot both be 0: the rollout could never progress"
type Rollout struct {
	// maxSurge is how many pods above replicas a rollout may create (number or percentage).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxSurge must be a non-negative integer or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// maxUnavailable is how many pods below replicas a rollout may take away (number or percentage).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable must be a non-negative integer or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// PodOverrides sets pod-level fields of the managed workload.
// +kubebuilder:validation:XValidation:rule="!has(self.labels) || self.labels.all(k, !k.startsWith('app.kubernetes.io/') && !k.startsWith('mcp.switchboard.dev/'))",message="pod.labels must not set app.kubernetes.io/* or mcp.switchboard.dev/* keys: Switchboard selects its pods by them"
// +kubebuilder:validation:XValidation:rule="!has(self.annotations) || self.annotations.all(k, !k.startsWith('mcp.switchboard.dev/'))",message="pod.annotations must not set mcp.switchboard.dev/* keys: they steer the sidecar's injection (inject, container, transport, injected), which Switchboard decides from the MCPServer's spec; remove them (spec.container.transport sets the transport)"
type PodOverrides struct {
	// serviceAccountName runs the pod as this ServiceAccount. Empty: Switchboard's per-server
	// ServiceAccount, which may read exactly this server's catalog.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// nodeSelector constrains the pods to nodes with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the pods schedule onto tainted nodes.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity holds the pods' scheduling constraints.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// imagePullSecrets are used to pull the MCP server and sidecar images.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// labels added to the pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to the pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Annotations map[string]string `json:"annotations,omitempty"`
}

// SidecarSpec tunes the Switchboard sidecar.
type SidecarSpec struct {
	// image overrides the sidecar image the manager was started with.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// maxListenStreams caps concurrent subscriptions/listen streams per replica; past it new
	// listens get a -32603 error.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxListenStreams *int32 `json:"maxListenStreams,omitempty"`

	// keepaliveSeconds is the interval of SSE keepalive comments on listen streams.
	// +optional
	// +kubebuilder:default=15
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=300
	KeepaliveSeconds *int32 `json:"keepaliveSeconds,omitempty"`

	// drain times the graceful shutdown of a pod; the pod's terminationGracePeriodSeconds is
	// derived from it.
	// +optional
	Drain *DrainSpec `json:"drain,omitempty"`

	// allowedHosts are extra Host header values the sidecar accepts, e.g. the host name of an
	// Ingress in front of the Service. The Service's own DNS names are always accepted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	AllowedHosts []string `json:"allowedHosts,omitempty"`

	// allowedOrigins are Origin header values the sidecar accepts from browsers, e.g.
	// https://app.example.com. Requests without an Origin header are not affected.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^https?://[A-Za-z0-9*]([-A-Za-z0-9.*]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`

	// resources of the sidecar container. The sidecar serves requests on one core, which costs
	// the least per request; a CPU limit of 2 or more lets it use that many whole cores. Large
	// notification fan-outs use all of the container's CPUs either way.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// legacyClients says what the sidecar does with clients that speak a 2025-era protocol
	// revision (2025-11-25, 2025-06-18, 2025-03-26): Serve answers their sessions itself, with
	// the same catalog, notifications and drain as 2026-07-28 clients (session ids are signed
	// with a key kept in the Secret <server>-sidecar-session and honoured by every replica);
	// Reject answers as a modern-only server (400 naming the supported versions; 405 for GET
	// and DELETE).
	// +optional
	// +kubebuilder:default=Serve
	// +kubebuilder:validation:Enum=Serve;Reject
	LegacyClients LegacyClients `json:"legacyClients,omitempty"`

	// tracing sends OpenTelemetry traces of MCP requests (one span per request, following the
	// OpenTelemetry MCP semantic conventions), of notification fan-outs and of the drain over
	// OTLP/HTTP. Off when unset. Changing it rolls the pods.
	// +optional
	Tracing *TracingSpec `json:"tracing,omitempty"`
}

// TracingSpec says where the sidecar sends traces and how many it samples.
type TracingSpec struct {
	// endpoint is the OTLP/HTTP traces URL of a collector, e.g.
	// http://otel-collector.observability:4318/v1/traces.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	Endpoint string `json:"endpoint"`

	// samplingPerMillion is how many of every million traces the sidecar starts itself are
	// sampled (10000 = 1%). A request whose client sent a trace context (traceparent in
	// params._meta or in the headers) follows the client's sampled flag; the drain is always
	// traced.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	SamplingPerMillion *int32 `json:"samplingPerMillion,omitempty"`
}

// LegacyClients is what the sidecar does with 2025-era clients.
type LegacyClients string

// LegacyClients values.
const (
	LegacyClientsServe  LegacyClients = "Serve"
	LegacyClientsReject LegacyClients = "Reject"
)

// DrainSpec times the graceful drain that runs when a pod is deleted: readiness fails at once,
// then after propagationDelaySeconds every listen stream receives its `complete` result (spread
// over jitterMilliseconds), then in-flight requests get up to budgetSeconds to finish.
type DrainSpec struct {
	// propagationDelaySeconds is the wait between failing readiness and ending listen streams, so
	// endpoints drop the pod before clients reconnect.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=120
	PropagationDelaySeconds *int32 `json:"propagationDelaySeconds,omitempty"`

	// jitterMilliseconds spreads the `complete` results so clients do not all reconnect at once.
	// +optional
	// +kubebuilder:default=1000
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=60000
	JitterMilliseconds *int32 `json:"jitterMilliseconds,omitempty"`

	// budgetSeconds is how long in-flight requests may run after the listen streams ended.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	BudgetSeconds *int32 `json:"budgetSeconds,omitempty"`
}

// CachingSpec holds the default cache hints per result kind.
type CachingSpec struct {
	// discover is the hint on server/discover results.
	// +optional
	Discover *CacheHint `json:"discover,omitempty"`
	// tools is the hint on every page of tools/list.
	// +optional
	Tools *CacheHint `json:"tools,omitempty"`
	// prompts is the hint on every page of prompts/list.
	// +optional
	Prompts *CacheHint `json:"prompts,omitempty"`
	// resources is the hint on every page of resources/list.
	// +optional
	Resources *CacheHint `json:"resources,omitempty"`
	// resourceTemplates is the hint on every page of resources/templates/list.
	// +optional
	ResourceTemplates *CacheHint `json:"resourceTemplates,omitempty"`
	// resourceRead is the default hint on resources/read results; an MCPResource's own caching
	// overrides it.
	// +optional
	ResourceRead *CacheHint `json:"resourceRead,omitempty"`
}

// UpstreamStatus describes the MCP server container as its sidecars see it.
type UpstreamStatus struct {
	// protocolVersions are the revisions the sidecars of the ready replicas speak with the MCP
	// server, sorted: 2026-07-28, or the 2025 revision it negotiated (a 2025-era HTTP server, or a
	// stdio server behind the bridge). More than one while replicas differ (during a rollout).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=32
	ProtocolVersions []string `json:"protocolVersions,omitempty"`

	// protocolVersion is protocolVersions joined with commas.
	// Deprecated: read protocolVersions; this field is still written in v1alpha1 and is removed in
	// the next API version.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ProtocolVersion string `json:"protocolVersion,omitempty"`

	// serverName is the MCP server's serverInfo.name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ServerName string `json:"serverName,omitempty"`

	// serverVersion is the MCP server's serverInfo.version.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ServerVersion string `json:"serverVersion,omitempty"`

	// capabilities are the server capabilities it declares (tools, prompts, resources, ...).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	Capabilities []string `json:"capabilities,omitempty"`

	// toolsDigest names the tool list the MCP server serves (SHA-256 over each tool's upstream
	// digest, docs/security.md), so two replicas serving different tools are told apart.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	ToolsDigest string `json:"toolsDigest,omitempty"`
}

// AuditStatus is the audit the sidecars of the server do.
type AuditStatus struct {
	// sink is where the records' JSON lines go: stdout, the file's path in the sidecar
	// container, or none when they are exported over OTLP only (otlpEndpoint).
	// +required
	// +kubebuilder:validation:MaxLength=256
	Sink string `json:"sink"`

	// arguments is what the records keep of call arguments: Off, Redacted or Full.
	// +required
	Arguments AuditArguments `json:"arguments"`

	// otlpEndpoint is the collector the records are also exported to as OTLP logs, when set.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	OTLPEndpoint string `json:"otlpEndpoint,omitempty"`
}

// MCPServerStatus is the observed state of an MCPServer.
type MCPServerStatus struct {
	// conditions: Ready, Available, CatalogPropagated, ToolsServed, Verified, ToolsDrifted
	// (unless toolPinning is Off), UpstreamCredentials (with auth.upstreamCredentials) and, in
	// External mode, SidecarsUpToDate; Stalled while only a
	// change by a person helps (an invalid spec, a child the API server refuses, a catalog too
	// large or rejected, a rollout past its progress deadline) and Reconciling while a change is
	// rolled out or propagated, present only while True (docs/gitops).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation this status describes; -1 until the controller
	// first writes status.
	// +optional
	// +kubebuilder:default=-1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// catalogRevision is the content hash of the current compiled catalog.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CatalogRevision string `json:"catalogRevision,omitempty"`

	// replicas is the number of pods of the workload.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// updatedReplicas is the number of pods with the current pod template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// catalogUpToDateReplicas is the number of ready pods whose sidecar has applied catalogRevision.
	// +optional
	CatalogUpToDateReplicas int32 `json:"catalogUpToDateReplicas,omitempty"`

	// staleSidecarReplicas (External mode) is the number of pods whose sidecar was injected
	// with older sidecar settings than the current ones, or not injected at all. Roll their
	// workload to re-inject them; the SidecarsUpToDate condition names them.
	// +optional
	StaleSidecarReplicas int32 `json:"staleSidecarReplicas,omitempty"`

	// url is the in-cluster MCP endpoint, http://<name>.<namespace>.svc/mcp.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	URL string `json:"url,omitempty"`

	// upstream is what the sidecars of the ready replicas found the MCP server container to be:
	// the protocol revision they speak with it, its serverInfo and capabilities.
	// +optional
	Upstream *UpstreamStatus `json:"upstream,omitempty"`

	// tools is the number of declared tools in the catalog (enabled and accepted).
	// +optional
	Tools int32 `json:"tools,omitempty"`

	// resources is the number of declared resources and resource templates in the catalog.
	// +optional
	Resources int32 `json:"resources,omitempty"`

	// prompts is the number of declared prompts in the catalog.
	// +optional
	Prompts int32 `json:"prompts,omitempty"`

	// audit says whether the sidecars audit requests and where the records go; absent when
	// spec.audit is unset.
	// +optional
	Audit *AuditStatus `json:"audit,omitempty"`

	// selector is the label selector of the pods, for the scale subresource.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`
}

// MCPServer runs one MCP server behind the Switchboard sidecar, which serves MCP Streamable
// HTTP (2026-07-28), holds listen streams, applies the catalog of MCPTools, MCPResources and
// MCPPrompts live, and drains gracefully.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=mcps,categories=mcp
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63",message="metadata.name must be a DNS-1035 label (at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit): it names the server's Service"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,description="Ready replicas"
// +kubebuilder:printcolumn:name="Tools",type=integer,JSONPath=`.status.tools`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.upstream.serverName`,priority=1,description="The MCP server's serverInfo.name"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.upstream.serverVersion`,priority=1,description="The MCP server's serverInfo.version"
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.upstream.protocolVersion`,priority=1,description="Protocol revision the sidecars speak with the MCP server"
// +kubebuilder:printcolumn:name="Auth",type=string,JSONPath=`.spec.auth.mode`,priority=1,description="Whether callers must authenticate (Off when empty)"
// +kubebuilder:printcolumn:name="Audit",type=string,JSONPath=`.status.audit.sink`,priority=1,description="Where the sidecars write audit records (none when empty)"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.catalogRevision`,priority=1
// +kubebuilder:printcolumn:name="Up-To-Date",type=integer,JSONPath=`.status.catalogUpToDateReplicas`,priority=1,description="Ready replicas serving the current catalog"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the server.
	// +required
	Spec MCPServerSpec `json:"spec"`

	// status is the server's observed state.
	// The API server fills in status.observedGeneration -1 until the controller writes status,
	// so GitOps tools wait for the controller instead of taking an object without status as
	// done (kstatus computes such an object as Current).
	// +optional
	// +kubebuilder:default={}
	Status MCPServerStatus `json:"status,omitempty"`
}

// MCPServerList is a list of MCPServers.
// +kubebuilder:object:root=true
type MCPServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPServer `json:"items"`
}
