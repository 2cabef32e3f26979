package importrules

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleFollowsRules applies rules.txt to every package of the module.
func TestModuleFollowsRules(t *testing.T) {
	f, err := os.Open("rules.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \",\"}}|{{join .Deps \",\"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod := exec.Command("go", "list", "-m")
	mod.Dir = root
	m, err := mod.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(m))
	var pkgs []Package
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.Split(line, "|")
		if len(parts) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		pkgs = append(pkgs, Package{Path: parts[0], Imports: split(parts[1]), Deps: split(parts[2])})
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; is the test run inside the module?", len(pkgs))
	}
	for _, v := range Check(module, rules, pkgs) {
		t.Error(v)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// TestCheckFindsBrokenEdges: each verb reports the edge that breaks it,
// directly and through another package, and a rule matching nothing.
func TestCheckFindsBrokenEdges(t *testing.T) {
	const m = "example.com/m"
	rules, err := Parse(strings.NewReader(`
# a comment
rule client/... only-deps client/... proto/kvpb
why users import it
rule cut no-deps google.golang.org/grpc/...
why cores know no transport
rule cut no-imports os
why cores do no I/O
rule nothere no-deps wal
why a typo
`))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := []Package{
		{Path: m + "/client", Imports: []string{m + "/txn"}, Deps: []string{m + "/txn", m + "/proto/kvpb", "fmt"}},
		{Path: m + "/client/sub", Imports: []string{m + "/client"}, Deps: []string{m + "/client", m + "/proto/kvpb"}},
		{Path: m + "/cut", Imports: []string{"fmt", m + "/proto/internalpb"}, Deps: []string{"fmt", "os", m + "/proto/internalpb", "google.golang.org/grpc"}},
	}
	got := strings.Join(Check(m, rules, pkgs), "\n")
	for _, want := range []string{
		m + "/client depends on " + m + "/txn, which is not among",
		m + "/cut depends on google.golang.org/grpc (rule of line 5: cores know no transport)",
		"rule of line 9: no package matches [nothere]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Check does not report %q; it reports:\n%s", want, got)
		}
	}
	// fmt imports os, cut does not: the direct rule holds.
	if strings.Contains(got, "imports os") || strings.Contains(got, "client/sub") {
		t.Errorf("Check reports edges that are allowed:\n%s", got)
	}
	pkgs[2].Imports = append(pkgs[2].Imports, "os")
	if got := strings.Join(Check(m, rules, pkgs), "\n"); !strings.Contains(got, m+"/cut imports os") {
		t.Errorf("a direct import of os is not reported:\n%s", got)
	}
}

// TestParseRefuses: a rule needs a why, a known verb, and both sides.
func TestParseRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"no why":          "rule a no-deps b\nrule c no-deps d\nwhy d\n",
		"no why at end":   "rule a no-deps b\n",
		"unknown verb":    "rule a depends b\nwhy x\n",
		"no target":       "rule a no-deps\nwhy x\n",
		"no from":         "rule no-deps b\nwhy x\n",
		"stray why":       "why x\n",
		"two whys":        "rule a no-deps b\nwhy x\nwhy y\n",
		"unknown keyword": "allow a b\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%s: %v, want an error naming the line", name, err)
		}
	}
}
