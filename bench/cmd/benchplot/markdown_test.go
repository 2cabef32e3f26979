package main

import (
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	const sec = "## T\n\nnew\n"
	for _, tc := range []struct{ name, doc, want string }{
		{"empty", "", sec},
		{"append", "# Doc\n\ntext", "# Doc\n\ntext\n\n" + sec},
		{"replace last", "# Doc\n\n## T\n\nold\n", "# Doc\n\n" + sec},
		{"replace middle", "# Doc\n\n## T\n\nold\n### sub\n\n## Next\nx\n", "# Doc\n\n" + sec + "\n## Next\nx\n"},
		{"heading in fence", "## T\n\n```\n## not a heading\n```\n## Next\n", sec + "\n## Next\n"},
		{"other title", "## T2\n\nkeep\n", "## T2\n\nkeep\n\n" + sec},
	} {
		if got := replaceSection(tc.doc, "T", sec); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFmtOps(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999.4: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := fmtOps(v); got != want {
			t.Errorf("fmtOps(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestEtcdSummaryCPU(t *testing.T) {
	run := func(target string, ops, cpu float64) Run {
		r := Run{Target: target, OpsPerSec: ops}
		if cpu > 0 {
			r.WAL = &struct {
				CPUUsPerOp float64 `json:"cpu_us_per_op"`
			}{cpu}
		}
		return r
	}
	var b strings.Builder
	writeEtcdSummary(&b, sectionInput{Groups: []Group{
		{Workload: "put", Cutkv: []Run{run("cutkv", 3000, 600), run("cutkv", 3000, 700)}, Etcd: []Run{run("etcd", 2000, 500)}},
		{Workload: "get", Cutkv: []Run{run("cutkv", 1000, 0)}, Etcd: []Run{run("etcd", 1000, 0)}},
	}})
	for _, want := range []string{"| put | 3,000 | 2,000 | 1.50 | 650 | 500 | 1.30 |", "| get | 1,000 | 1,000 | 1.00 | - | - | - |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// TestEtcdSetupNamesItsBuild: the section says which etcd ran and where it
// came from, as bench-compare passes them.
func TestEtcdSetupNamesItsBuild(t *testing.T) {
	var b strings.Builder
	writeEtcdSetup(&b, sectionInput{EtcdVersion: "3.7.3", EtcdBuild: "built by `make etcd` from the Go module proxy"})
	if want := "* etcd 3.7.3 (built by `make etcd` from the Go module proxy), 3 members"; !strings.Contains(b.String(), want) {
		t.Errorf("setup %q lacks %q", b.String(), want)
	}
}

// TestSectionNamesItsCommit: the section says which commit it measured,
// and benchplot refuses to write one that would not.
func TestSectionNamesItsCommit(t *testing.T) {
	sec := section(sectionInput{Groups: []Group{{Workload: "put"}}, Machine: "m", Commit: "7c9c64e"})
	if want := "* Code: commit 7c9c64e ("; !strings.Contains(sec, want) {
		t.Errorf("section lacks %q:\n%s", want, sec)
	}
	if err := run([]string{"--results", t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--commit") {
		t.Errorf("benchplot without --commit: %v", err)
	}
}
