package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// appendJournal adds the rounds to the journal (one JSON object a line).
func appendJournal(path string, rounds []*roundResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, r := range rounds {
		kept := *r
		if kept.OK {
			kept.Dir = "" // removed after a passing run
		}
		b, err := json.Marshal(&kept)
		if err != nil {
			f.Close()
			return err
		}
		if _, err := f.Write(append(b, '\n')); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// maxJournalLine bounds one line of the journal (one round): a longer line
// is refused, not read into memory.
const maxJournalLine = 64 << 20

// readJournal reads every round the journal holds. A line that is not a
// round (not JSON, not an object, no time or nodes, longer than
// maxJournalLine) is an error that names the line; blank lines are
// skipped.
func readJournal(path string) ([]*roundResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*roundResult
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxJournalLine)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var r *roundResult // stays nil for a JSON null
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("chaos: journal %s line %d: %w", path, line, err)
		}
		if r == nil || r.Time.IsZero() || r.Nodes < 1 {
			return nil, fmt.Errorf("chaos: journal %s line %d: not a round (want an object with a time and nodes)", path, line)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaos: journal %s line %d: %w", path, line+1, err)
	}
	return out, nil
}

const (
	markBegin = "<!-- chaos:begin -->"
	markEnd   = "<!-- chaos:end -->"
)

// kindTotals are one fault kind's totals over the journal.
type kindTotals struct {
	rounds, injected, proven               int
	ops, cuts, verified, snaps, restoredOK int
	anomalies                              int
	recovery                               []int64
	seeds                                  []uint64
}

// writeReliability rewrites the part of docs/reliability.md between the
// markers from the journal; the rest (the bugs found) is kept as is.
// goalProven is how many proven faults of each kind the journal should
// hold (issue 17).
const goalProven = 20

func writeReliability(path string, rounds []*roundResult, journal string) error {
	totals := map[Kind]*kindTotals{}
	for _, k := range AllKinds {
		totals[k] = &kindTotals{}
	}
	var failed int
	var first, last time.Time
	for _, r := range rounds {
		if !r.OK {
			failed++
		}
		if first.IsZero() || r.Time.Before(first) {
			first = r.Time
		}
		if r.Time.After(last) {
			last = r.Time
		}
		ops := 0
		for _, n := range r.Ops {
			ops += n
		}
		for _, k := range r.Kinds {
			kt := totals[k]
			if kt == nil {
				continue
			}
			kt.rounds++
			kt.ops += ops
			kt.cuts += r.Cuts.Completed
			kt.verified += r.Cuts.Verified
			kt.snaps += r.Snapshots.Taken
			kt.restoredOK += r.Snapshots.RestoredOK
			kt.anomalies += len(r.Anomalies)
			if !slices.Contains(kt.seeds, r.Seed) && len(kt.seeds) < 6 {
				kt.seeds = append(kt.seeds, r.Seed)
			}
		}
		for _, f := range r.Faults {
			kt := totals[f.Kind]
			if kt == nil {
				continue
			}
			kt.injected++
			if f.Proven {
				kt.proven++
				if f.RecoveryMs >= 0 {
					kt.recovery = append(kt.recovery, f.RecoveryMs)
				}
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", markBegin)
	fmt.Fprintf(&b, "Written by the chaos harness (`make chaos`, package `chaos`) from [`%s`](%s), the journal every round appends to; rerunning it rewrites the text between this section's markers.\n\n",
		filepath.Base(journal), "reliability/"+filepath.Base(journal))
	if len(rounds) == 0 {
		b.WriteString("No round recorded yet.\n")
	} else {
		fmt.Fprintf(&b, "%d rounds (%d failed) from %s to %s.\n\n", len(rounds), failed, first.Format("2006-01-02 15:04"), last.Format("2006-01-02 15:04 UTC"))
		b.WriteString("### Per fault kind\n\n")
		b.WriteString("Totals of the rounds in which the kind ran (a round runs several kinds, so its operations, cuts and anomalies count for each of them). *Proven*: the fault was seen to take effect; the others count as not run. *Cuts completed*: cut calls that returned success; *cuts verified* can be more, since a call that timed out under a fault may still complete, and the verifier checks every cut group 0 lists as completed. *Recovery*: from the heal to the next completed cut.\n\n")
		b.WriteString("| kind | rounds | injected | proven | not run | operations checked | cuts completed | cuts verified | snapshots | restored and equal | anomalies | recovery p50 / max ms | seeds |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, k := range AllKinds {
			kt := totals[k]
			rec := "-"
			if len(kt.recovery) > 0 {
				sort.Slice(kt.recovery, func(i, j int) bool { return kt.recovery[i] < kt.recovery[j] })
				rec = fmt.Sprintf("%d / %d", kt.recovery[len(kt.recovery)/2], kt.recovery[len(kt.recovery)-1])
			}
			seeds := make([]string, len(kt.seeds))
			for i, s := range kt.seeds {
				seeds[i] = fmt.Sprint(s)
			}
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s |\n", k, kt.rounds, kt.injected, kt.proven,
				kt.injected-kt.proven, kt.ops, kt.cuts, kt.verified, kt.snaps, kt.restoredOK, kt.anomalies, rec, strings.Join(seeds, " "))
		}
		var below []string
		for _, k := range AllKinds {
			if kt := totals[k]; kt.proven < goalProven {
				below = append(below, fmt.Sprintf("%s (%d)", k, kt.proven))
			}
		}
		fmt.Fprintf(&b, "\nGoal (issue 17): every kind proven at least %d times. %d of %d kinds are there", goalProven, len(AllKinds)-len(below), len(AllKinds))
		if len(below) > 0 {
			fmt.Fprintf(&b, "; short of it: %s", strings.Join(below, ", "))
		}
		b.WriteString(".\n")
		b.WriteString("\n### Rounds (newest first, the last 30)\n\n")
		b.WriteString("| time (UTC) | commit | seed | nodes | soak | faults proven / injected | operations | cuts completed / verified | snapshots taken / restored equal | recovery ms | anomalies | result |\n")
		b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		recent := slices.Clone(rounds)
		slices.Reverse(recent)
		if len(recent) > 30 {
			recent = recent[:30]
		}
		for _, r := range recent {
			proven := 0
			for _, f := range r.Faults {
				if f.Proven {
					proven++
				}
			}
			ops := 0
			for _, n := range r.Ops {
				ops += n
			}
			result := "ok"
			if !r.OK {
				result = "FAILED: " + strings.ReplaceAll(firstOf(r.Anomalies, r.Problems), "|", "/")
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %d / %d | %d | %d / %d | %d / %d | %d | %d | %s |\n", r.Time.Format("2006-01-02 15:04"),
				short(r.Commit), r.Seed, r.Nodes, r.Soak, proven, len(r.Faults), ops, r.Cuts.Completed, r.Cuts.Verified,
				r.Snapshots.Taken, r.Snapshots.RestoredOK, r.RecoveryMs, len(r.Anomalies), result)
		}
		// The seed recorded is the round's own (plan derives it from the
		// run's), and the run's seed would also pick other kinds.
		b.WriteString("\nReplay a round: `sudo make chaos CUTKV_CHAOS_ROUND_SEED=<seed> CUTKV_SOAK=<soak> CUTKV_CHAOS_NODES=<nodes> CUTKV_CHAOS_KINDS=<its kinds, from the journal>` at its commit (the schedule repeats; the interleavings may differ).\n")
	}
	fmt.Fprintf(&b, "%s\n", markEnd)

	old, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return os.WriteFile(path, []byte(reliabilityHead+b.String()+reliabilityBugs), 0o644)
	}
	if err != nil {
		return err
	}
	// Outside the markers the file is kept by hand (the bugs found): a
	// file whose markers are gone is refused, not replaced.
	s := string(old)
	i := strings.Index(s, markBegin)
	j := -1
	if i >= 0 {
		j = strings.Index(s[i:], markEnd)
	}
	if j < 0 {
		return fmt.Errorf("chaos: %s has no section between %s and %s to rewrite; restore the markers", path, markBegin, markEnd)
	}
	j += i + len(markEnd)
	return os.WriteFile(path, []byte(s[:i]+strings.TrimSuffix(b.String(), "\n")+s[j:]), 0o644)
}

func firstOf(lists ...[]string) string {
	for _, l := range lists {
		if len(l) > 0 {
			s := l[0]
			if len(s) > 160 {
				cut := 160
				for cut > 0 && !utf8.RuneStart(s[cut]) {
					cut-- // never split a character
				}
				s = s[:cut] + "…"
			}
			return s
		}
	}
	return ""
}

const reliabilityHead = `# Reliability

What the fault harness (package [` + "`chaos`" + `](../chaos/doc.go), ` + "`sudo make chaos`" + `) has run
and found. Every node is a host of its own (a network namespace on a
bridge); the nemesis partitions, drops packets one way or at random,
kills and pauses nodes while a register workload (porcupine), the bank
(all-or-nothing and totals) and a list-append workload (Elle-style
serializability) run, a cut is taken every 500 ms and an incremental
snapshot every 5 s. After each round every cut is verified, the last
three snapshots are restored and compared with their cuts' states, the
replicas' hashes compared and every acknowledged write read back. The
goal is zero anomalies.

## Results

`

const reliabilityBugs = `

## Bugs the harness found

Each with what it did and the commit that fixed it (as etcd's robustness
tests list theirs). Kept by hand; the harness never rewrites this part.

| # | found | what happened | fixed in |
|---|---|---|---|
`
