package v1alpha1

import (
	"regexp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PromptRole is the speaker of a prompt message.
// +kubebuilder:validation:Enum=user;assistant
type PromptRole string

const (
	// PromptRoleUser marks a message of the user.
	PromptRoleUser PromptRole = "user"
	// PromptRoleAssistant marks a message of the assistant.
	PromptRoleAssistant PromptRole = "assistant"
)

// MCPPromptSpec declares one prompt the sidecar serves.
// +kubebuilder:validation:XValidation:rule="has(self.arguments) || self.messages.all(m, !m.text.contains('{{'))",message="messages use {{placeholders}} but spec.arguments declares none: declare every argument the messages reference"
type MCPPromptSpec struct {
	// serverRef names the MCPServer in this namespace that serves the prompt.
	// +required
	ServerRef ServerReference `json:"serverRef"`

	// name is the prompt name clients pass to prompts/get.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	Name string `json:"name"`

	// title is a short human-readable name.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Title string `json:"title,omitempty"`

	// description says what the prompt is for.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Description string `json:"description,omitempty"`

	// arguments the prompt takes; messages reference them as {{name}}.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Arguments []PromptArgument `json:"arguments,omitempty"`

	// messages are rendered in order by prompts/get, with {{name}} replaced by the argument's value.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Messages []PromptMessage `json:"messages"`
}

// PromptArgument is one argument of a prompt.
type PromptArgument struct {
	// name of the argument: a letter or _, then letters, digits or _.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	Name string `json:"name"`

	// description of the argument.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// required arguments must be passed to prompts/get.
	// +optional
	Required bool `json:"required,omitempty"`
}

// MaxPromptPlaceholders bounds the {{placeholders}} in one prompt message.
const MaxPromptPlaceholders = 16

// PromptMessage is one message of a prompt.
// +kubebuilder:validation:XValidation:rule="self.text.findAll('\\\\{\\\\{[^}]*\\\\}\\\\}', 17).size() <= 16",message="a message may hold at most 16 {{placeholders}}"
type PromptMessage struct {
	// role is user or assistant.
	// +required
	Role PromptRole `json:"role"`

	// text of the message, with {{argument}} placeholders.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Text string `json:"text"`
}

// MCPPrompt declares one prompt of an MCPServer, rendered by the sidecar.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcpp,categories=mcp
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef.name`
// +kubebuilder:printcolumn:name="Prompt",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`,priority=1
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.status.conditions[?(@.type=="Published")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPPrompt struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the prompt.
	// +required
	Spec MCPPromptSpec `json:"spec"`

	// status is the prompt's observed state.
	// The API server fills in status.observedGeneration -1 until the controller writes status,
	// so GitOps tools wait for the controller instead of taking an object without status as
	// done (kstatus computes such an object as Current).
	// +optional
	// +kubebuilder:default={}
	Status CatalogItemStatus `json:"status,omitempty"`
}

// MCPPromptList is a list of MCPPrompts.
// +kubebuilder:object:root=true
type MCPPromptList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPPrompt `json:"items"`
}

// placeholderRE matches a {{name}} placeholder in a prompt message.
var placeholderRE = regexp.MustCompile(`\{\{([^}]*)\}\}`)

// UndeclaredPlaceholders returns, in order of first use, the {{placeholders}} in the messages
// that name no declared argument. The API server checks only that arguments exist when
// placeholders do (a full check exceeds the CEL cost budget), so the controller reports these.
func (s *MCPPromptSpec) UndeclaredPlaceholders() []string {
	var out []string
	for _, m := range s.Messages {
		for _, match := range placeholderRE.FindAllStringSubmatch(m.Text, -1) {
			name := match[1]
			declared := slices.ContainsFunc(s.Arguments, func(a PromptArgument) bool { return a.Name == name })
			if !declared && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}
