package main

import (
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := kvctl(t, nil, "", args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "kvctl ") || !strings.Contains(r.stdout, " go1.") || strings.Count(r.stdout, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	r := kvctl(t, nil, "", "version", "-o", "json")
	var v struct {
		Version   string  `json:"version"`
		Commit    *string `json:"commit"`
		Modified  *bool   `json:"modified"`
		GoVersion string  `json:"go_version"`
	}
	decode(t, r, &v)
	if v.Version == "" || v.Commit == nil || v.Modified == nil || !strings.HasPrefix(v.GoVersion, "go1.") {
		t.Errorf("version -o json: %q", r.stdout)
	}
}

// TestCompletion: the completion command is on, for every shell cobra
// supports, and completes kvctl's own commands.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_kvctl", "zsh": "#compdef kvctl", "fish": "complete -c kvctl", "powershell": "Register-ArgumentCompleter"} {
		r := kvctl(t, nil, "", "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, stdout has no %q", shell, r.code, r.stderr, marker)
		}
	}
	r := kvctl(t, nil, "", "__complete", "snap")
	if r.code != 0 || !strings.Contains(r.stdout, "snapshot") {
		t.Errorf("__complete snap: exit %d, stdout %q", r.code, r.stdout)
	}
}
