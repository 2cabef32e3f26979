package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cutkv/cutkv/chaos/hosts"
	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/datadir"
)

// recoveryFlag bounds the time from the last heal to a healthy cluster
// taking cuts again (make chaos RECOVERY=45s); it wins over
// CUTKV_CHAOS_RECOVERY.
var recoveryFlag = flag.Duration("chaos.recovery", 0, "bound on recovery after the last fault (default 30s)")

// TestChaos is the harness (doc.go). It runs only with CUTKV_CHAOS=1, as
// root: make chaos.
// maxAnomaliesShown bounds the anomalies a failed round prints; the
// round's directory keeps them all.
const maxAnomaliesShown = 20

func TestChaos(t *testing.T) {
	if os.Getenv("CUTKV_CHAOS") != "1" {
		t.Skip("set CUTKV_CHAOS=1 (make chaos) to run the fault harness; it needs root")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the fault harness needs root (network namespaces, nftables): run sudo make chaos")
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configFromEnv(repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.overrideRecovery(*recoveryFlag); err != nil {
		t.Fatal(err)
	}
	// Interrupted, the harness still stops what it started.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	go func() {
		if _, ok := <-sigc; ok {
			closeActive()
			os.Exit(2)
		}
	}()
	rounds := plan(cfg)
	t.Logf("chaos: seed %d (from %s), soak %v, kinds %v, %d round(s); replay with: sudo make chaos SEED=%d CUTKV_SOAK=%v",
		cfg.Seed, cfg.SeedSource, cfg.Soak, cfg.Kinds, len(rounds), cfg.Seed, cfg.Soak)
	if err := hosts.CleanupStale("ck"); err != nil {
		t.Logf("removing a crashed run's hosts: %v", err)
	}
	out := cfg.Out
	keep := out != ""
	if out == "" {
		out = filepath.Join(os.TempDir(), fmt.Sprintf("cutkv-chaos-%d-%d", cfg.Seed, time.Now().Unix()))
	}
	if err := os.MkdirAll(out, 0o750); err != nil {
		t.Fatal(err)
	}
	kvnode := filepath.Join(out, "bin", "kvnode")
	// The failpoints build: crash points (armed in the environment of one
	// start by the crash-point kind; unarmed they do nothing), the
	// fsynced lengths that lose-unsynced cuts files back to (package
	// synclog), and the clock skew hook (package clock).
	build := exec.Command("go", "build", "-tags", "failpoints", "-o", kvnode, "github.com/cutkv/cutkv/cmd/kvnode")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build kvnode: %v", err)
	}
	t.Logf("chaos: files in %s (kept when a round fails); GOMAXPROCS %d", out, runtime.GOMAXPROCS(0))

	var results []*roundResult
	allOK := true
	for i, rd := range rounds {
		res := runRound(t, cfg, rd, i+1, kvnode, out)
		results = append(results, res)
		allOK = allOK && res.OK
	}
	if cfg.Journal != "" {
		if err := appendJournal(cfg.Journal, results); err != nil {
			t.Errorf("journal: %v", err)
		} else if all, err := readJournal(cfg.Journal); err != nil {
			t.Errorf("journal: %v", err)
		} else if err := writeReliability(filepath.Join(repo, "docs", "reliability.md"), all, cfg.Journal); err != nil {
			t.Errorf("docs/reliability.md: %v", err)
		} else {
			t.Logf("chaos: %s and docs/reliability.md updated (%d rounds in all)", cfg.Journal, len(all))
		}
	}
	if allOK && !keep {
		_ = os.RemoveAll(out)
	}
	// Why a round failed is said last, after everything the rounds
	// logged; TestMain repeats it after the subtests' results, so that a
	// CI log cut to its tail still shows it.
	for i, res := range results {
		if !res.OK {
			for _, line := range failureLines(i+1, res) {
				t.Error(line)
				failures = append(failures, line)
			}
		}
	}
}

// failures are the lines TestChaos reported for its failed rounds.
var failures []string

func TestMain(m *testing.M) {
	code := m.Run()
	if len(failures) > 0 {
		fmt.Println("chaos: why rounds failed:")
		for _, l := range failures {
			fmt.Println("  " + l)
		}
	}
	os.Exit(code)
}

// failureLines says why round idx failed: its problems, and at most
// maxAnomaliesShown of its anomalies (the round's directory keeps all).
func failureLines(idx int, res *roundResult) []string {
	lines := []string{fmt.Sprintf("round %d (%d nodes, seed %d) failed: %d anomalies, problems %v; files kept in %s; replay: %s",
		idx, res.Nodes, res.Seed, len(res.Anomalies), res.Problems, res.Dir, res.Replay)}
	for j, a := range res.Anomalies {
		if j == maxAnomaliesShown {
			lines = append(lines, fmt.Sprintf("... and %d more anomalies (all in %s)", len(res.Anomalies)-j, res.Dir))
			break
		}
		lines = append(lines, "anomaly: "+a)
	}
	return lines
}

// TestPlanAndKinds: every kind is picked by some seed, a kind that needs
// five nodes gets a round of five, and plans cover the soak.
func TestPlanAndKinds(t *testing.T) {
	seen := map[Kind]bool{}
	for seed := uint64(0); seed < 50; seed++ {
		for _, k := range pickKinds(seed) {
			seen[k] = true
		}
	}
	for _, k := range AllKinds {
		if !seen[k] {
			t.Errorf("no seed of 50 picks %s", k)
		}
	}
	for _, kinds := range [][]Kind{{Split23, KillRestart}, {IsolateNode}, AllKinds} {
		for _, soak := range []time.Duration{time.Minute, 5 * time.Minute} {
			rs := plan(Config{Soak: soak, Kinds: kinds, Seed: 1})
			var total time.Duration
			covered := map[Kind]bool{}
			for _, r := range rs {
				total += r.soak
				for _, k := range r.kinds {
					if k.needs5() && r.nodes != 5 {
						t.Errorf("kinds %v soak %v: %s in a round of %d nodes", kinds, soak, k, r.nodes)
					}
					covered[k] = true
				}
			}
			if total != soak {
				t.Errorf("kinds %v soak %v: rounds last %v", kinds, soak, total)
			}
			for _, k := range kinds {
				if !covered[k] {
					t.Errorf("kinds %v soak %v: %s in no round", kinds, soak, k)
				}
			}
		}
	}
}

// TestRecoveryBound: the bound comes from CUTKV_CHAOS_RECOVERY, the flag
// wins, and a bad value is refused.
func TestRecoveryBound(t *testing.T) {
	t.Setenv("CUTKV_CHAOS_RECOVERY", "")
	cfg, err := configFromEnv("..")
	if err != nil || cfg.RecoveryBound != 30*time.Second {
		t.Fatalf("default bound %v (%v), want 30s", cfg.RecoveryBound, err)
	}
	t.Setenv("CUTKV_CHAOS_RECOVERY", "45s")
	if cfg, err = configFromEnv(".."); err != nil || cfg.RecoveryBound != 45*time.Second {
		t.Fatalf("bound from the environment %v (%v), want 45s", cfg.RecoveryBound, err)
	}
	if err := cfg.overrideRecovery(0); err != nil || cfg.RecoveryBound != 45*time.Second {
		t.Fatalf("no flag: bound %v (%v), want 45s kept", cfg.RecoveryBound, err)
	}
	if err := cfg.overrideRecovery(10 * time.Second); err != nil || cfg.RecoveryBound != 10*time.Second {
		t.Fatalf("flag: bound %v (%v), want 10s", cfg.RecoveryBound, err)
	}
	if err := cfg.overrideRecovery(-time.Second); err == nil {
		t.Fatal("a negative flag accepted")
	}
	t.Setenv("CUTKV_CHAOS_RECOVERY", "soon")
	if _, err := configFromEnv(".."); err == nil {
		t.Fatal("CUTKV_CHAOS_RECOVERY=soon accepted")
	}
}

// TestReliabilityReport: the report is rebuilt from the journal between
// its markers, keeping the hand-written part.
func TestReliabilityReport(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.jsonl")
	r1 := &roundResult{Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Commit: "abcdef0123456789", Seed: 7, Nodes: 3, Soak: "2m",
		Kinds: []Kind{IsolateNode, KillRestart}, OK: true, RecoveryMs: 900, Ops: map[string]int{"register": 100, "bank-transfers": 50},
		Faults: []fault{{Kind: IsolateNode, Proven: true, RecoveryMs: 800}, {Kind: KillRestart, Proven: true, RecoveryMs: 1200}, {Kind: IsolateNode, Proven: false, RecoveryMs: -1}},
		Cuts:   cutCounts{Completed: 200, Verified: 200}, Snapshots: snapCounts{Taken: 20, Restored: 3, RestoredOK: 3}}
	r2 := &roundResult{Time: r1.Time.Add(time.Hour), Commit: "0123456789abcdef", Seed: 8, Nodes: 5, Soak: "2m", Kinds: []Kind{Split23},
		Anomalies: []string{"bank: torn | transfer"}, Ops: map[string]int{"append-txns": 10}}
	if err := appendJournal(journal, []*roundResult{r1}); err != nil {
		t.Fatal(err)
	}
	if err := appendJournal(journal, []*roundResult{r2}); err != nil {
		t.Fatal(err)
	}
	all, err := readJournal(journal)
	if err != nil || len(all) != 2 {
		t.Fatalf("journal: %d rounds, %v", len(all), err)
	}
	doc := filepath.Join(dir, "reliability.md")
	if err := writeReliability(doc, all, journal); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	s := string(b)
	for _, want := range []string{"2 rounds (1 failed)", "| isolate-node | 1 | 2 | 1 | 1 | 150 | 200 | 200 | 20 | 3 | 0 | 800 / 800 | 7 |",
		"| split-2-3 | 1 | 0 | 0 | 0 | 10 |", "FAILED: bank: torn / transfer", "## Bugs the harness found",
		fmt.Sprintf("0 of %d kinds are there; short of it: isolate-node (1), isolate-leader (0)", len(AllKinds))} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	// The hand-written part survives a rewrite.
	if err := os.WriteFile(doc, []byte(s+"| 1 | 2026-12-01 | a bug | abc123 |\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeReliability(doc, all[:1], journal); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(doc)
	if !strings.Contains(string(b), "| 1 | 2026-12-01 | a bug | abc123 |") || !strings.Contains(string(b), "1 rounds (0 failed)") {
		t.Errorf("rewrite lost the bugs or kept the old totals:\n%s", b)
	}
}

// TestReadJournalRefuses: a line that is not a round is an error naming
// the file and the line; blank lines are skipped.
func TestReadJournalRefuses(t *testing.T) {
	good := `{"time":"2026-12-01T10:00:00Z","seed":7,"nodes":3,"ok":true}`
	for name, c := range map[string]struct {
		text string
		line int
	}{
		"truncated":  {good + "\n" + good[:20] + "\n", 2},
		"not json":   {"\n" + good + "\nround 3 passed\n", 3},
		"an array":   {"[1,2]\n", 1},
		"null":       {good + "\nnull\n", 2},
		"no time":    {`{"seed":7,"nodes":3}` + "\n", 1},
		"no nodes":   {`{"time":"2026-12-01T10:00:00Z","seed":7}` + "\n", 1},
		"wrong type": {`{"time":"2026-12-01T10:00:00Z","nodes":"three"}` + "\n", 1},
	} {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := readJournal(path)
		if want := fmt.Sprintf("%s line %d:", path, c.line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", name, err, want)
		}
	}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	if err := os.WriteFile(path, []byte("\n"+good+"\n  \n"+good+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rs, err := readJournal(path); err != nil || len(rs) != 2 || rs[1].Seed != 7 {
		t.Fatalf("a journal with blank lines: %d rounds, %v", len(rs), err)
	}
}

// TestReliabilityKeepsHandWritten: a report whose markers are gone or out
// of order is refused and left as it was; the replay line names the
// round's own seed; a long failure is cut between characters.
func TestReliabilityKeepsHandWritten(t *testing.T) {
	dir := t.TempDir()
	rounds := []*roundResult{{Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Seed: 7, Nodes: 3, Soak: "2m",
		Kinds: []Kind{IsolateNode}, Anomalies: []string{strings.Repeat("x", 159) + "→ the rest"}}}
	for name, text := range map[string]string{
		"no markers": "# Reliability\n\n## Bugs the harness found\n\n| 1 | a bug |\n",
		"no end":     "# Reliability\n" + markBegin + "\nold\n",
		"reversed":   "# Reliability\n" + markEnd + "\nkept\n" + markBegin + "\n",
	} {
		doc := filepath.Join(dir, name+".md")
		if err := os.WriteFile(doc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeReliability(doc, rounds, "journal.jsonl"); err == nil || !strings.Contains(err.Error(), doc) {
			t.Errorf("%s: %v, want an error naming %s", name, err, doc)
		}
		if b, _ := os.ReadFile(doc); string(b) != text {
			t.Errorf("%s: the file was changed:\n%s", name, b)
		}
	}
	doc := filepath.Join(dir, "new.md")
	if err := writeReliability(doc, rounds, "journal.jsonl"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	if !strings.Contains(string(b), "CUTKV_CHAOS_ROUND_SEED=<seed>") {
		t.Errorf("the replay line does not use the round's seed:\n%s", b)
	}
	if !utf8.Valid(b) || !strings.Contains(string(b), "FAILED: "+strings.Repeat("x", 159)+"…") {
		t.Errorf("the failure is not cut before the character that does not fit:\n%s", b)
	}
}

// TestConfigFromEnv: every knob is read, and a bad value is refused with
// the variable named.
func TestConfigFromEnv(t *testing.T) {
	for _, v := range []string{"CUTKV_SOAK", "CUTKV_SEED", "SEED", "CUTKV_CHAOS_KINDS", "CUTKV_CHAOS_NODES",
		"CUTKV_CHAOS_RECOVERY", "CUTKV_CHAOS_ROUND_SEED", "CUTKV_CHAOS_OUT", "CUTKV_CHAOS_JOURNAL"} {
		t.Setenv(v, "")
	}
	t.Setenv("SEED", "12")
	t.Setenv("CUTKV_SOAK", "90s")
	t.Setenv("CUTKV_CHAOS_KINDS", "one-way, kill-restart")
	t.Setenv("CUTKV_CHAOS_NODES", "5")
	t.Setenv("CUTKV_CHAOS_ROUND_SEED", "99")
	t.Setenv("CUTKV_CHAOS_JOURNAL", "-")
	cfg, err := configFromEnv("..")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 12 || cfg.SeedSource != "the environment" || cfg.Soak != 90*time.Second || cfg.Nodes != 5 || cfg.RoundSeed != 99 ||
		cfg.Journal != "" || !slices.Equal(cfg.Kinds, []Kind{OneWay, KillRestart}) {
		t.Errorf("config %+v", cfg)
	}
	// A replayed round keeps its own seed, its size and the whole soak.
	if rs := plan(cfg); len(rs) != 1 || rs[0].seed != 99 || rs[0].nodes != 5 || rs[0].soak != cfg.Soak {
		t.Errorf("plan of a replay: %+v", rs)
	}
	t.Setenv("CUTKV_SEED", "13") // wins over SEED
	t.Setenv("CUTKV_CHAOS_KINDS", "all")
	if cfg, err = configFromEnv(".."); err != nil || cfg.Seed != 13 || !slices.Equal(cfg.Kinds, AllKinds) {
		t.Errorf("CUTKV_SEED and all kinds: %+v, %v", cfg, err)
	}
	for v, bad := range map[string]string{
		"CUTKV_SOAK":             "-1m",
		"CUTKV_SEED":             "-3",
		"CUTKV_CHAOS_KINDS":      "one-way,flood",
		"CUTKV_CHAOS_NODES":      "4",
		"CUTKV_CHAOS_ROUND_SEED": "x",
	} {
		t.Run(v, func(t *testing.T) {
			t.Setenv(v, bad)
			want := v
			if v == "CUTKV_SEED" {
				want = "seed"
			}
			if _, err := configFromEnv(".."); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s: %v, want an error naming it", v, bad, err)
			}
		})
	}
}

// TestCopyDataDirs: the verifier's copy holds each node's progress file,
// WAL segments and materializations, and none of the temporary files a
// node is writing; a node with no materializations yet is copied too.
func TestCopyDataDirs(t *testing.T) {
	src := t.TempDir()
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2 := filepath.Join(src, "n1"), filepath.Join(src, "n2")
	for name, text := range map[string]string{
		"progress": "p1", "progress.tmp": "torn", "00000000000000000001": "s1", "00000000000000000009.START.TEMP": "torn",
	} {
		write(filepath.Join(n1, datadir.WALDir, name), text)
	}
	write(filepath.Join(n1, checkpoint.DirName, "m-3"), "m3")
	write(filepath.Join(n1, checkpoint.DirName, "m-4.tmp"), "torn")
	write(filepath.Join(n2, datadir.WALDir, "00000000000000000001"), "s2")
	c := &cluster{nodes: []*node{{id: "n1", data: n1}, {id: "n2", data: n2}}}
	dst := t.TempDir()
	dirs, err := copyDataDirs(c, dst)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dst, "n1", datadir.WALDir); dirs["n1"] != want || len(dirs) != 2 {
		t.Fatalf("WAL dirs %v, want n1's at %s", dirs, want)
	}
	var got []string
	_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dst, p)
			got = append(got, rel+"="+string(b))
		}
		return nil
	})
	want := []string{"n1/materializations/m-3=m3", "n1/wal/00000000000000000001=s1", "n1/wal/progress=p1", "n2/wal/00000000000000000001=s2"}
	if !slices.Equal(got, want) {
		t.Errorf("copied %v, want %v", got, want)
	}
}

// TestFailureLines: a failed round's summary names its seed, problems
// and directory, and shows at most maxAnomaliesShown anomalies.
func TestFailureLines(t *testing.T) {
	res := &roundResult{Seed: 42, Nodes: 5, Problems: []string{"no cut completed"}, Dir: "/tmp/r"}
	for i := 0; i < maxAnomaliesShown+5; i++ {
		res.Anomalies = append(res.Anomalies, fmt.Sprintf("a%d", i))
	}
	lines := failureLines(2, res)
	if len(lines) != maxAnomaliesShown+2 {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), maxAnomaliesShown+2, strings.Join(lines, "\n"))
	}
	for _, want := range []string{"round 2 (5 nodes, seed 42)", "no cut completed", "/tmp/r"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("first line %q lacks %q", lines[0], want)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "5 more anomalies") {
		t.Errorf("last line %q, want the count of anomalies not shown", last)
	}
}
