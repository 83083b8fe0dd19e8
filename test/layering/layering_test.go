// Package layering checks that the module's imports follow the package map in
// docs/architecture.md.
package layering

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const (
	module  = "github.com/switchboard-mcp/switchboard"
	mapFile = "docs/architecture.md"
	mapHead = "## Packages and who may import what"
)

// rule is one row of the map: packages matching pattern may import the module packages
// matching mayImport, and their tests also those matching testsMayImport.
type rule struct {
	pattern                   string
	mayImport, testsMayImport []string
}

// pkg is one package of the module, paths relative to the module root.
type pkg struct {
	path                 string
	imports, testImports []string
}

// TestImportsFollowTheMap lists every package of the module with `go list` and checks its
// imports, and its tests' imports, against the map in docs/architecture.md.
func TestImportsFollowTheMap(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, mapFile))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := parseMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := listPackages(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, problem := range check(rules, pkgs) {
		t.Error(problem)
	}
}

// TestCheckFindsViolations feeds check a tree that breaks each kind of rule.
func TestCheckFindsViolations(t *testing.T) {
	rules, err := parseMap([]byte(mapHead + `
| Package | Holds | May import | Its tests may also import |
|---|---|---|---|
| ` + "`internal/inject`" + ` | x | ` + "`api/...`" + ` | — |
| ` + "`internal/gone`" + ` | x | — | — |
| ` + "`internal/...`" + ` | x | ` + "`api/...`, `internal/...`" + ` | ` + "`test/framework`" + ` |
| ` + "`controllers`" + ` | x | ` + "`api/...`, `internal/...`" + ` | — |

## Next section
| ` + "`hack/...`" + ` | not part of the map | ` + "`controllers`" + ` | — |
`))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := []pkg{
		{path: "api/v1alpha1"},
		{path: "internal/inject", imports: []string{"api/v1alpha1", "controllers"}},
		{path: "internal/webhook", imports: []string{"internal/inject"}, testImports: []string{"test/framework", "hack/sidecarbench", "internal/webhook"}},
		{path: "controllers", imports: []string{"internal/inject"}, testImports: []string{"test/framework"}},
		{path: "hack/dev", imports: []string{"controllers"}},
	}
	got := check(rules, pkgs)
	want := []string{
		"api/v1alpha1: no row of " + mapFile + " covers this package; add one",
		"hack/dev: no row of " + mapFile + " covers this package; add one",
		"internal/gone: " + mapFile + " has a row for this package, but there is no such package",
		"internal/inject imports controllers, which the row `internal/inject` of " + mapFile + " does not allow",
		"internal/webhook (tests) imports hack/sidecarbench, which the row `internal/...` of " + mapFile + " does not allow",
		"controllers (tests) imports test/framework, which the row `controllers` of " + mapFile + " does not allow",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("check found:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// parseMap reads the table under mapHead: | `pattern` | holds | may import | tests may import |.
func parseMap(doc []byte) ([]rule, error) {
	var rules []rule
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == mapHead:
			in = true
			continue
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			return nil, fmt.Errorf("%s: row %q has %d cells, want 4", mapFile, line, len(cells))
		}
		rules = append(rules, rule{
			pattern:        strings.Trim(strings.TrimSpace(cells[0]), "`"),
			mayImport:      patterns(cells[2]),
			testsMayImport: patterns(cells[3]),
		})
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: no table under %q", mapFile, mapHead)
	}
	return rules, sc.Err()
}

// patterns splits a cell like "`api/...`, `internal/inject`"; "—" is none.
func patterns(cell string) []string {
	var out []string
	for _, p := range strings.Split(cell, ",") {
		if p = strings.Trim(strings.TrimSpace(p), "`"); p != "" && p != "—" {
			out = append(out, p)
		}
	}
	return out
}

func matches(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	return path == pattern
}

func allowed(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, path) })
}

// check returns one line per package no row covers, per exact row with no package, and per
// import its row does not allow. A package may always import itself (external tests do).
func check(rules []rule, pkgs []pkg) []string {
	var problems []string
	paths := map[string]bool{}
	for _, p := range pkgs {
		paths[p.path] = true
	}
	for _, r := range rules {
		if !strings.HasSuffix(r.pattern, "/...") && !paths[r.pattern] {
			problems = append(problems, fmt.Sprintf("%s: %s has a row for this package, but there is no such package", r.pattern, mapFile))
		}
	}
	for _, p := range pkgs {
		i := slices.IndexFunc(rules, func(r rule) bool { return matches(r.pattern, p.path) })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s: no row of %s covers this package; add one", p.path, mapFile))
			continue
		}
		r := rules[i]
		for _, imp := range p.imports {
			if imp != p.path && !allowed(r.mayImport, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which the row `%s` of %s does not allow", p.path, imp, r.pattern, mapFile))
			}
		}
		for _, imp := range p.testImports {
			if imp != p.path && !allowed(r.mayImport, imp) && !allowed(r.testsMayImport, imp) {
				problems = append(problems, fmt.Sprintf("%s (tests) imports %s, which the row `%s` of %s does not allow", p.path, imp, r.pattern, mapFile))
			}
		}
	}
	return problems
}

// listPackages runs `go list` over the module and keeps the imports inside the module.
func listPackages(root string) ([]pkg, error) {
	// -tags e2e: the imports of both test tiers (Makefile, "Test tiers").
	cmd := exec.Command("go", "list", "-tags", "e2e", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Error                              *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		path, ok := local(p.ImportPath)
		if !ok {
			continue
		}
		pkgs = append(pkgs, pkg{path: path, imports: locals(p.Imports), testImports: locals(append(p.TestImports, p.XTestImports...))})
	}
	return pkgs, nil
}

func local(importPath string) (string, bool) {
	return strings.CutPrefix(importPath, module+"/")
}

func locals(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if path, ok := local(imp); ok && !slices.Contains(out, path) {
			out = append(out, path)
		}
	}
	return out
}
