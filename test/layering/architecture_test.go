package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureNamesTheCode checks that docs/architecture.md, the project map, names what the
// code has: every repository path and every `pkg.Name` it mentions exists, the reconcile phases
// are listed in the order the reconciler runs them, and every sidecar flag, skip reason and
// child object name the injector and the controller use is in it. A change to any of them is a
// change to the map.
func TestArchitectureNamesTheCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("paths", func(t *testing.T) {
		re := regexp.MustCompile(`\b(?:api|client|cmd|config|controllers|hack|internal|sidecar|test)/[A-Za-z0-9_./-]*[A-Za-z0-9_]`)
		seen := 0
		for _, loc := range re.FindAllStringIndex(doc, -1) {
			p := doc[loc[0]:loc[1]]
			if strings.HasPrefix(doc[loc[1]:], "...") || strings.HasSuffix(p, "...") {
				continue // a pattern of the import table, checked by TestImportsFollowTheMap
			}
			seen++
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", mapFile, p)
			}
		}
		if seen < 5 {
			t.Fatalf("found %d paths in %s; the pattern no longer matches the document", seen, mapFile)
		}
	})

	t.Run("identifiers", func(t *testing.T) {
		decls := declsByPackage(t, root)
		re := regexp.MustCompile("`([a-z][a-z0-9]*)\\.([A-Z][A-Za-z0-9]*)`")
		seen := 0
		for _, m := range re.FindAllStringSubmatch(doc, -1) {
			names, ok := decls[m[1]]
			if !ok {
				continue // not a package of the module (e.g. a file name such as `catalog.json`)
			}
			seen++
			if !names[m[2]] {
				t.Errorf("%s names %s.%s, which package %s does not declare", mapFile, m[1], m[2], m[1])
			}
		}
		if seen == 0 {
			t.Fatalf("found no pkg.Name in %s; the pattern no longer matches the document", mapFile)
		}
	})

	t.Run("phases", func(t *testing.T) {
		src := read("controllers/mcpserver_controller.go")
		m := regexp.MustCompile(`\[\]phase\{([^}]*)\}`).FindStringSubmatch(src)
		if m == nil {
			t.Fatal("no []phase{...} in controllers/mcpserver_controller.go")
		}
		var phases []string
		for _, p := range strings.Split(m[1], ",") {
			phases = append(phases, strings.TrimPrefix(strings.TrimSpace(p), "r."))
		}
		// The edit's path lists each step as "│   name:" in the order it runs.
		var listed []string
		for _, m := range regexp.MustCompile(`(?m)^\s*│\s+([a-zA-Z]+):`).FindAllStringSubmatch(doc, -1) {
			listed = append(listed, m[1])
		}
		i := 0
		for _, p := range phases {
			j := slices.Index(listed[i:], p)
			if j < 0 {
				t.Errorf("the reconciler runs the phases %v; %s (\"The path of an edit\") lists %v: %s is missing or out of order", phases, mapFile, listed, p)
				continue
			}
			i += j + 1
		}
		files, err := filepath.Glob(filepath.Join(root, "controllers", "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var methods strings.Builder
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				methods.WriteString(read(strings.TrimPrefix(f, root+string(filepath.Separator))))
			}
		}
		for _, l := range listed {
			if l != "deferred" && !strings.Contains(methods.String(), "func (r *MCPServerReconciler) "+l+"(") {
				t.Errorf("%s lists the step %s, which MCPServerReconciler does not have", mapFile, l)
			}
		}
	})

	t.Run("sidecar flags", func(t *testing.T) {
		flags := regexp.MustCompile(`(?m)^\s*Flag[A-Za-z]+\s*=\s*"([a-z-]+)"`).FindAllStringSubmatch(read("internal/inject/inject.go"), -1)
		if len(flags) < 10 {
			t.Fatalf("found %d Flag constants in internal/inject/inject.go; the pattern no longer matches", len(flags))
		}
		for _, f := range flags {
			if !strings.Contains(doc, "--"+f[1]) {
				t.Errorf("the injector passes the sidecar --%s; %s (\"The pod\") does not say so", f[1], mapFile)
			}
		}
	})

	t.Run("skip reasons", func(t *testing.T) {
		n := 0
		for _, f := range []string{"inject.go", "server_container.go", "stdio.go"} {
			for _, m := range regexp.MustCompile(`SkipReason = "([A-Za-z]+)"`).FindAllStringSubmatch(read("internal/inject/"+f), -1) {
				n++
				if !strings.Contains(doc, "`"+m[1]+"`") {
					t.Errorf("the injector skips with reason %s; %s does not list it", m[1], mapFile)
				}
			}
		}
		if n < 4 {
			t.Fatalf("found %d skip reasons in internal/inject; the pattern no longer matches", n)
		}
	})

	t.Run("object names", func(t *testing.T) {
		suffixes := regexp.MustCompile(`n \+ "(-[a-z-]+)"`).FindAllStringSubmatch(read("internal/inject/names.go"), -1)
		if len(suffixes) < 4 {
			t.Fatalf("found %d derived names in internal/inject/names.go; the pattern no longer matches", len(suffixes))
		}
		for _, s := range suffixes {
			if !strings.Contains(doc, "`<s>"+s[1]+"`") {
				t.Errorf("the controller names a child <server>%s; %s (\"The objects of one MCPServer\") does not list it", s[1], mapFile)
			}
		}
	})
}

// declsByPackage maps each package name of the module (outside tests and testdata) to its
// top-level declarations.
func declsByPackage(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", "bin", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := out[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			out[f.Name.Name] = names
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
