package failpoint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// injectCall matches a use of a named failpoint in the module's code.
var injectCall = regexp.MustCompile(`failpoint\.Inject\(\s*failpoint\.([A-Za-z0-9_]+)\s*\)`)

// TestEveryNameListedAndInjected: every failpoint constant of doc.go is in
// Names once, and the module's code (tests aside) injects every one of
// them and no other: a point named but never reached would be armed by a
// test or the chaos harness and never fire.
func TestEveryNameListedAndInjected(t *testing.T) {
	consts := docConstants(t)
	for name, value := range consts {
		if n := countOf(Names, value); n != 1 {
			t.Errorf("constant %s (%q) is in Names %d times, want once", name, value, n)
		}
	}
	if len(Names) != len(consts) {
		t.Errorf("Names has %d entries, doc.go declares %d failpoint constants", len(Names), len(consts))
	}
	used := map[string][]string{}
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range injectCall.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = append(used[m[1]], path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking the module from %s: %v", root, err)
	}
	for name := range consts {
		if len(used[name]) == 0 {
			t.Errorf("failpoint %s is declared but no code calls failpoint.Inject(failpoint.%s)", name, name)
		}
	}
	for name, paths := range used {
		if _, ok := consts[name]; !ok {
			t.Errorf("%v inject failpoint.%s, which doc.go does not declare", paths, name)
		}
	}
}

// docConstants returns the constants of doc.go's block "Names of all
// failpoints", by name.
func docConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST || !strings.HasPrefix(gd.Doc.Text(), "Names of all failpoints") {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("doc.go: constant %s is not a string literal", id.Name)
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("doc.go: constant %s: %v", id.Name, err)
				}
				out[id.Name] = v
			}
		}
	}
	if len(out) == 0 {
		t.Fatal(`doc.go has no const block documented "Names of all failpoints"`)
	}
	return out
}

func countOf(xs []string, x string) int {
	n := 0
	for i := range xs {
		if xs[i] == x {
			n++
		}
	}
	return n
}

// TestNamesDistinct: two constants never share a name (arming one would
// arm both).
func TestNamesDistinct(t *testing.T) {
	s := slices.Clone(Names)
	slices.Sort(s)
	if c := slices.Compact(slices.Clone(s)); len(c) != len(s) {
		t.Errorf("Names has duplicates: %v", s)
	}
}
