// Package importrules checks the module's import rules (rules.txt beside
// it) against the package graph `go list` reports. The rules are data so
// that they read as a list, each with the reason it exists; the test in
// this package applies them to the whole module.
package importrules

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Verbs of a rule.
const (
	NoDeps    = "no-deps"    // no FROM package depends on a TARGET, transitively
	NoImports = "no-imports" // no FROM package imports a TARGET itself
	OnlyDeps  = "only-deps"  // every module package FROM depends on is a TARGET
)

// Rule is one line of the rules file.
type Rule struct {
	Line    int
	From    []string // patterns
	Verb    string
	Targets []string // patterns
	Why     string
}

// Package is what the check needs of one package: its path, the
// packages its own files import, and every package it depends on.
type Package struct {
	Path    string
	Imports []string
	Deps    []string
}

// Parse reads a rules file. A rule without a why line after it, an
// unknown verb, or a rule that names no FROM or no TARGET is an error
// naming the line.
func Parse(r io.Reader) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(text, " ")
		switch kind {
		case "rule":
			f := strings.Fields(rest)
			vi := slices.IndexFunc(f, func(s string) bool { return s == NoDeps || s == NoImports || s == OnlyDeps })
			if vi < 1 || vi == len(f)-1 {
				return nil, fmt.Errorf("rules line %d: want \"rule FROM... %s|%s|%s TARGET...\", got %q", line, NoDeps, NoImports, OnlyDeps, text)
			}
			if n := len(rules); n > 0 && rules[n-1].Why == "" {
				return nil, fmt.Errorf("rules line %d: the rule of line %d has no why line", line, rules[n-1].Line)
			}
			rules = append(rules, Rule{Line: line, From: f[:vi], Verb: f[vi], Targets: f[vi+1:]})
		case "why":
			n := len(rules)
			if n == 0 || rules[n-1].Why != "" {
				return nil, fmt.Errorf("rules line %d: a why line that follows no rule", line)
			}
			if rules[n-1].Why = strings.TrimSpace(rest); rules[n-1].Why == "" {
				return nil, fmt.Errorf("rules line %d: an empty why", line)
			}
		default:
			return nil, fmt.Errorf("rules line %d: a line is a rule, a why, a comment or blank; got %q", line, text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n := len(rules); n > 0 && rules[n-1].Why == "" {
		return nil, fmt.Errorf("rules line %d: the rule has no why line", rules[n-1].Line)
	}
	return rules, nil
}

// matches says whether import path p matches pattern pat: a path inside
// module (cut, client/...) or a full import path (os, net/...,
// google.golang.org/grpc/...). Both readings are tried; no module package
// shares a standard library package's path.
func matches(module, pat, p string) bool {
	for _, full := range []string{pat, module + "/" + pat} {
		if base, ok := strings.CutSuffix(full, "/..."); ok {
			if p == base || strings.HasPrefix(p, base+"/") {
				return true
			}
		} else if p == full {
			return true
		}
	}
	return false
}

func matchesAny(module string, pats []string, p string) bool {
	return slices.ContainsFunc(pats, func(pat string) bool { return matches(module, pat, p) })
}

// Check applies rules to pkgs, the packages of module, and returns one
// line per broken rule edge, plus one for a rule whose FROM matches no
// package (a typo would otherwise pass forever).
func Check(module string, rules []Rule, pkgs []Package) []string {
	var out []string
	for _, r := range rules {
		seen := false
		for _, p := range pkgs {
			if !matchesAny(module, r.From, p.Path) {
				continue
			}
			seen = true
			switch r.Verb {
			case NoDeps:
				for _, d := range p.Deps {
					if matchesAny(module, r.Targets, d) {
						out = append(out, fmt.Sprintf("%s depends on %s (rule of line %d: %s)", p.Path, d, r.Line, r.Why))
					}
				}
			case NoImports:
				for _, d := range p.Imports {
					if matchesAny(module, r.Targets, d) {
						out = append(out, fmt.Sprintf("%s imports %s (rule of line %d: %s)", p.Path, d, r.Line, r.Why))
					}
				}
			case OnlyDeps:
				for _, d := range p.Deps {
					if (d == module || strings.HasPrefix(d, module+"/")) && !matchesAny(module, r.Targets, d) {
						out = append(out, fmt.Sprintf("%s depends on %s, which is not among %v (rule of line %d: %s)", p.Path, d, r.Targets, r.Line, r.Why))
					}
				}
			}
		}
		if !seen {
			out = append(out, fmt.Sprintf("rule of line %d: no package matches %v", r.Line, r.From))
		}
	}
	return out
}
