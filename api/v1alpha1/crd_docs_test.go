//go:build e2e

package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchboard-mcp/switchboard/internal/eventually"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestEveryFieldDocumented walks the generated CRD schemas: every field a user can set or read
// must carry a description (that is what `kubectl explain` shows).
func TestEveryFieldDocumented(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) != 5 {
		t.Fatalf("want 5 CRDs in config/crd/bases, got %d (%v)", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description == "" {
			t.Errorf("%s: the kind has no description", crd.Name)
		}
		var missing []string
		walkSchema(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "", &missing)
		sort.Strings(missing)
		for _, m := range missing {
			t.Errorf("%s: field %s has no description", crd.Spec.Names.Kind, m)
		}
	}
}

func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, missing *[]string) {
	for name, p := range s.Properties {
		fieldPath := path + "." + name
		// apiVersion, kind and metadata are documented by Kubernetes itself.
		if path == "" && (name == "apiVersion" || name == "kind" || name == "metadata") {
			continue
		}
		if p.Description == "" {
			*missing = append(*missing, fieldPath)
		}
		walkSchema(&p, fieldPath, missing)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walkSchema(s.Items.Schema, path+"[]", missing)
	}
}

// TestKubectlExplain runs the control plane's kubectl against the API server: the published
// schema explains MCPServer's fields.
func TestKubectlExplain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The API server publishes new CRDs' OpenAPI a moment after they are established.
	var out []byte
	eventually.Succeeds(t, "kubectl explain mcpserver.spec", func() (err error) {
		if out, err = env.Kubectl(ctx, "explain", "mcpserver.spec").CombinedOutput(); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		return nil
	})
	// kubectl wraps descriptions: compare with white space folded.
	text := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"spec declares the server.",
		"container <Object>", "mode <string>", "toolPolicy <string>", "caching <Object>",
		"sidecar <Object>", "replicas <integer>",
		"toolPolicy is All (upstream tools plus MCPTool overrides)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("kubectl explain mcpserver.spec lacks %q:\n%s", want, text)
		}
	}
	out, err := env.Kubectl(ctx, "explain", "mcpresource.spec.source.secretKeyRef").CombinedOutput()
	if err != nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "always cacheScope private") {
		t.Errorf("kubectl explain mcpresource.spec.source.secretKeyRef: %v\n%s", err, out)
	}
}
