package controllers

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	mcpv1alpha1 "github.com/switchboard-mcp/switchboard/api/v1alpha1"
)

// conditionIs checks one condition of a list.
func conditionIs(conds []metav1.Condition, typ mcpv1alpha1.ConditionType, status metav1.ConditionStatus, reason mcpv1alpha1.ConditionReason) error {
	for _, c := range conds {
		if c.Type == string(typ) {
			if c.Status != status || c.Reason != string(reason) {
				return fmt.Errorf("%s is %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s condition in %+v", typ, conds)
}

func newServer(ns, name string, replicas int32) *mcpv1alpha1.MCPServer {
	return &mcpv1alpha1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mcpv1alpha1.MCPServerSpec{
			Replicas:  ptr.To(replicas),
			Container: &mcpv1alpha1.ServerContainer{Image: "example/weather:1", Port: 9000, Path: "/mcp"},
		},
	}
}

func newTool(ns, name, server, exposed string) *mcpv1alpha1.MCPTool {
	schema, _ := mcpv1alpha1.NewJSONSchema([]byte(`{"type":"object","properties":{"city":{"type":"string"}}}`))
	return &mcpv1alpha1.MCPTool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mcpv1alpha1.MCPToolSpec{ServerRef: mcpv1alpha1.ServerReference{Name: server}, Name: exposed,
			Description: "Forecast for a city", InputSchema: schema},
	}
}

func newResource(ns, name, server, uri string, src mcpv1alpha1.ResourceSource) *mcpv1alpha1.MCPResource {
	return &mcpv1alpha1.MCPResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       mcpv1alpha1.MCPResourceSpec{ServerRef: mcpv1alpha1.ServerReference{Name: server}, URI: uri, Name: name, Source: src},
	}
}

func newPrompt(ns, name, server string, args []string, text string) *mcpv1alpha1.MCPPrompt {
	p := &mcpv1alpha1.MCPPrompt{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mcpv1alpha1.MCPPromptSpec{ServerRef: mcpv1alpha1.ServerReference{Name: server}, Name: name,
			Messages: []mcpv1alpha1.PromptMessage{{Role: "user", Text: text}}},
	}
	for _, a := range args {
		p.Spec.Arguments = append(p.Spec.Arguments, mcpv1alpha1.PromptArgument{Name: a})
	}
	return p
}

func findConditionIn(conds []metav1.Condition, typ mcpv1alpha1.ConditionType) metav1.Condition {
	for _, c := range conds {
		if c.Type == string(typ) {
			return c
		}
	}
	return metav1.Condition{}
}
