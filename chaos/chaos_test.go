package chaos

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutkv/cutkv/chaos/hosts"
)

// recoveryFlag bounds the time from the last heal to a healthy cluster
// taking cuts again (make chaos RECOVERY=45s); it wins over
// CUTKV_CHAOS_RECOVERY.
var recoveryFlag = flag.Duration("chaos.recovery", 0, "bound on recovery after the last fault (default 30s)")

// TestChaos is the harness (doc.go). It runs only with CUTKV_CHAOS=1, as
// root: make chaos.
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
	bin := filepath.Join(out, "bin")
	for _, p := range []string{"kvnode", "kvctl"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, p), "github.com/cutkv/cutkv/cmd/"+p)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("go build %s: %v", p, err)
		}
	}
	t.Logf("chaos: files in %s (kept when a round fails); GOMAXPROCS %d", out, runtime.GOMAXPROCS(0))

	var results []*roundResult
	allOK := true
	for i, rd := range rounds {
		res := runRound(t, cfg, rd, i+1, filepath.Join(bin, "kvnode"), filepath.Join(bin, "kvctl"), out)
		results = append(results, res)
		if !res.OK {
			allOK = false
			t.Errorf("round %d (%d nodes, seed %d) failed: %d anomalies, problems %v; files kept in %s\nreplay: %s",
				i+1, rd.nodes, rd.seed, len(res.Anomalies), res.Problems, res.Dir, res.Replay)
			for _, a := range res.Anomalies {
				t.Errorf("anomaly: %s", a)
			}
		}
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
		"| split-2-3 | 1 | 0 | 0 | 0 | 10 |", "FAILED: bank: torn / transfer", "## Bugs the harness found"} {
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
