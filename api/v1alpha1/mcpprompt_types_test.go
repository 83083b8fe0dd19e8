package v1alpha1

import (
	"slices"
	"testing"
)

func TestUndeclaredPlaceholders(t *testing.T) {
	msgs := func(texts ...string) []PromptMessage {
		var out []PromptMessage
		for _, tx := range texts {
			out = append(out, PromptMessage{Role: "user", Text: tx})
		}
		return out
	}
	cases := []struct {
		name string
		spec MCPPromptSpec
		want []string
	}{
		{"no placeholders", MCPPromptSpec{Messages: msgs("hello")}, nil},
		{"all declared", MCPPromptSpec{
			Arguments: []PromptArgument{{Name: "city"}, {Name: "days"}},
			Messages:  msgs("{{city}} for {{days}} days", "again {{city}}"),
		}, nil},
		{"undeclared once each, in order", MCPPromptSpec{
			Arguments: []PromptArgument{{Name: "city"}},
			Messages:  msgs("{{town}} {{city}} {{town}}", "{{ city }} {{}}"),
		}, []string{"town", " city ", ""}},
		{"single braces are text", MCPPromptSpec{Messages: msgs("{city} {{ and }")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.UndeclaredPlaceholders(); !slices.Equal(got, tc.want) {
				t.Errorf("UndeclaredPlaceholders() = %q, want %q", got, tc.want)
			}
		})
	}
}
