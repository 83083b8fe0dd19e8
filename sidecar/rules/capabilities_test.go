package rules

import (
	"strings"
	"testing"
)

func TestMergedCapabilities(t *testing.T) {
	got, err := MergedCapabilities([]byte(`{"tools":{},"resources":{"subscribe":false},"logging":{}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"tools":{"listChanged":true}`, `"resources":{"listChanged":true,"subscribe":true}`, `"logging":{}`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("%s lacks %s", got, want)
		}
	}
	if strings.Contains(string(got), "prompts") {
		t.Errorf("added a capability for a list the upstream does not serve: %s", got)
	}
}
