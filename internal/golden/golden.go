// Package golden is the tests' one golden-file helper: compare what a test produced with a
// checked-in file, or rewrite the file when the test runs with -update.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files instead of comparing with them")

// Check compares got with the file at path; with -update it writes got there instead. A stale
// or missing file fails the test with the command that refreshes it.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is stale (run the test with -update and review the diff); got:\n%s", path, got)
	}
}

// Inputs returns the inputs among dir/*.yaml, sorted: the files named <case>.yaml, not the
// goldens derived from them (<case>.<output>.yaml). It fails the test when there are none.
func Inputs(t testing.TB, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, f := range all {
		if !strings.Contains(strings.TrimSuffix(filepath.Base(f), ".yaml"), ".") {
			inputs = append(inputs, f)
		}
	}
	if len(inputs) == 0 {
		t.Fatalf("no golden inputs in %s", dir)
	}
	return inputs
}
