package v1alpha1

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// CatalogItem is what MCPTool, MCPResource and MCPPrompt share, and all the controller needs of
// one to decide its place in its server's catalog and to write its status: the server it
// belongs to, the name it exposes there, and the status every item kind has.
// +kubebuilder:object:generate=false
type CatalogItem interface {
	metav1.Object
	runtime.Object
	// GetServerRef is spec.serverRef: the MCPServer whose catalog the item is part of.
	GetServerRef() ServerReference
	// GetExposedName is what the item exposes on its server, which only one item of its kind
	// may: a tool's or prompt's spec.name, a resource's spec.uri or spec.uriTemplate.
	GetExposedName() string
	// GetCatalogItemStatus is the item's status as every item kind has it (an MCPTool's adds
	// its pin).
	GetCatalogItemStatus() *CatalogItemStatus
	// GetConditions and SetConditions are status.conditions.
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

var (
	_ CatalogItem = &MCPTool{}
	_ CatalogItem = &MCPResource{}
	_ CatalogItem = &MCPPrompt{}
)

// GetServerRef returns spec.serverRef.
func (t *MCPTool) GetServerRef() ServerReference { return t.Spec.ServerRef }

// GetExposedName returns spec.name, the tool's name for clients.
func (t *MCPTool) GetExposedName() string { return t.Spec.Name }

// GetCatalogItemStatus returns the status MCPTool shares with the other item kinds.
func (t *MCPTool) GetCatalogItemStatus() *CatalogItemStatus { return &t.Status.CatalogItemStatus }

// GetConditions returns status.conditions.
func (t *MCPTool) GetConditions() []metav1.Condition { return t.Status.Conditions }

// SetConditions sets status.conditions.
func (t *MCPTool) SetConditions(c []metav1.Condition) { t.Status.Conditions = c }

// GetServerRef returns spec.serverRef.
func (r *MCPResource) GetServerRef() ServerReference { return r.Spec.ServerRef }

// GetExposedName returns spec.uri, or spec.uriTemplate for a template.
func (r *MCPResource) GetExposedName() string { return cmp.Or(r.Spec.URI, r.Spec.URITemplate) }

// GetCatalogItemStatus returns status.
func (r *MCPResource) GetCatalogItemStatus() *CatalogItemStatus { return &r.Status }

// GetConditions returns status.conditions.
func (r *MCPResource) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions sets status.conditions.
func (r *MCPResource) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// GetServerRef returns spec.serverRef.
func (p *MCPPrompt) GetServerRef() ServerReference { return p.Spec.ServerRef }

// GetExposedName returns spec.name, the prompt's name for clients.
func (p *MCPPrompt) GetExposedName() string { return p.Spec.Name }

// GetCatalogItemStatus returns status.
func (p *MCPPrompt) GetCatalogItemStatus() *CatalogItemStatus { return &p.Status }

// GetConditions returns status.conditions.
func (p *MCPPrompt) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions sets status.conditions.
func (p *MCPPrompt) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }
