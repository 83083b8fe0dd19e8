package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// itemStatus is the status of a tool, resource or prompt held as a client.Object.
func itemStatus(o client.Object) *mcpv1alpha1.CatalogItemStatus {
	return o.(mcpv1alpha1.CatalogItem).GetCatalogItemStatus()
}
