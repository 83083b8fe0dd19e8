package main_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/inject"
	"github.com/switchboard-mcp/switchboard/sidecar/app"
	"github.com/switchboard-mcp/switchboard/sidecar/legacy"
)

// The controller (internal/inject) and the sidecar share no package, so the names they agree
// on, flags and environment variables, are checked here, where both are visible.

// TestDrainTokenEnvName: injection and the sidecar name the drain token's variable alike.
func TestDrainTokenEnvName(t *testing.T) {
	if app.DrainTokenEnv != inject.DrainTokenEnv {
		t.Fatalf("the sidecar reads %s, injection sets %s", app.DrainTokenEnv, inject.DrainTokenEnv)
	}
}

// TestSessionKeyEnvName: injection sets the session key's variable the sidecar reads.
func TestSessionKeyEnvName(t *testing.T) {
	if legacy.SessionKeyEnv != inject.SessionKeyEnv {
		t.Fatalf("the sidecar reads %s, injection sets %s", legacy.SessionKeyEnv, inject.SessionKeyEnv)
	}
}

// TestInjectedFlagsAreRegistered: every flag the injector passes the sidecar (the Flag
// constants of internal/inject) is one main.go registers.
func TestInjectedFlagsAreRegistered(t *testing.T) {
	injected := stringConsts(t, "../../internal/inject/inject.go", "Flag")
	if len(injected) < 10 {
		t.Fatalf("found %d Flag constants in internal/inject/inject.go; expected every flag the injector passes", len(injected))
	}
	registered := map[string]bool{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "fs" {
			return true
		}
		// fs.XVar(&v, inject.FlagX, ...), fs.X(inject.FlagX, ...), or the same with a literal name.
		for _, a := range call.Args[:min(2, len(call.Args))] {
			if c, ok := a.(*ast.SelectorExpr); ok {
				if pkg, ok := c.X.(*ast.Ident); ok && pkg.Name == "inject" {
					if v, ok := injected[c.Sel.Name]; ok {
						registered[v] = true
					}
					break
				}
			}
			if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					registered[s] = true
				}
				break
			}
		}
		return true
	})
	for name, value := range injected {
		if !registered[value] {
			t.Errorf("inject.%s passes --%s, which cmd/sidecar/main.go does not register", name, value)
		}
	}
}

// stringConsts returns the string constants of a Go file whose names start with prefix.
func stringConsts(t *testing.T, path, prefix string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[n.Name] = v
				}
			}
		}
	}
	return out
}
