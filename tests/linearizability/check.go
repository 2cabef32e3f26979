package linearizability

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Errors Check returns for a history that does not pass; match them with
// errors.Is.
var (
	// ErrNotLinearizable: porcupine proved the history not linearizable.
	ErrNotLinearizable = errors.New("linearizability: history is not linearizable")
	// ErrUndecided: porcupine ran out of time before deciding. This is a
	// failure, not a pass: the history is not known to be right.
	ErrUndecided = errors.New("linearizability: checker timed out before deciding")
)

// visualizeTimeout bounds the verbose re-run that feeds the visualization
// of a check that already timed out.
const visualizeTimeout = 10 * time.Second

// CheckResult describes one check of a history.
type CheckResult struct {
	// Verdict is porcupine's: Ok, Illegal, or Unknown (timed out). Only
	// Ok is a pass.
	Verdict porcupine.CheckResult
	// Operations is the number of operations given; Checked the number
	// left after Prepare dropped writes of unknown outcome nobody saw.
	Operations, Checked int
	// Partitions is the number of porcupine partitions checked: one per
	// key in the history.
	Partitions int
	// Timeout is the bound the check ran under (0: none).
	Timeout time.Duration
	// Duration is how long the deciding check took (not the failure
	// analysis after it).
	Duration time.Duration
	// Failures names, when the Verdict is Illegal, each key whose own
	// history is not linearizable, with an explanation.
	Failures []KeyFailure
	// Visualization is the absolute path of porcupine's HTML rendering,
	// written when the Verdict is not Ok; empty otherwise, or if writing
	// it failed (the error returned says why).
	Visualization string
}

// KeyFailure explains why the history of one key is not linearizable.
type KeyFailure struct {
	Key string
	// Operations is the number of operations on the key (after Prepare).
	Operations int
	// Explanation is multi-line text: the end of the longest
	// linearization found, with the model's state after each step, the
	// first operation that cannot be placed after it, and the operations
	// concurrent with that one.
	Explanation string
}

// Passed reports whether the history was found linearizable.
func (r CheckResult) Passed() bool { return r.Verdict == porcupine.Ok }

// String renders the result as one line for a log.
func (r CheckResult) String() string {
	s := fmt.Sprintf("porcupine: %s on %d operations (%d after dropping writes of unknown outcome nobody saw), %d keys, in %v",
		verdictName(r.Verdict), r.Operations, r.Checked, r.Partitions, r.Duration.Round(time.Millisecond))
	if r.Visualization != "" {
		s += "; visualization " + r.Visualization
	}
	return s
}

// verdictName renders a porcupine verdict for a person.
func verdictName(v porcupine.CheckResult) string {
	switch v {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	default:
		return "unknown (check timed out)"
	}
}

// Check decides whether history is linearizable under Model, after
// Prepare. timeout bounds porcupine (0 or less: no bound); a check that
// runs out is a failure, reported as ErrUndecided. The error is nil if
// and only if the verdict is Ok; otherwise it wraps ErrNotLinearizable or
// ErrUndecided, joined with any error writing the visualization.
//
// When the verdict is not Ok, Check runs porcupine again verbosely (that
// slows it several times, so a passing history is not) and writes the
// HTML visualization, with annotations (for instance the faults, timed
// with Workload.Now), to visualizeTo: a file path, or an existing
// directory in which a new cutkv-linearizability-*.html file is created;
// "" means os.TempDir(). On Illegal it also checks each key alone to name
// the guilty ones (CheckResult.Failures). history is not modified.
func Check(history []porcupine.Operation, timeout time.Duration, visualizeTo string, annotations ...porcupine.Annotation) (CheckResult, error) {
	return check(Model, history, timeout, visualizeTo, annotations)
}

// check is Check with the model as a parameter, so that tests can drive
// the verdicts that the real model cannot reach on purpose.
func check(model porcupine.Model, history []porcupine.Operation, timeout time.Duration, visualizeTo string, annotations []porcupine.Annotation) (CheckResult, error) {
	prepared := Prepare(history)
	res := CheckResult{
		Operations: len(history),
		Checked:    len(prepared),
		Partitions: len(model.Partition(prepared)),
		Timeout:    max(timeout, 0),
	}
	start := time.Now()
	res.Verdict = porcupine.CheckOperationsTimeout(model, prepared, timeout)
	res.Duration = time.Since(start)
	var verdict error
	switch res.Verdict {
	case porcupine.Ok:
		return res, nil
	case porcupine.Illegal:
		verdict = fmt.Errorf("%w: %d operations (%d checked) over %d keys", ErrNotLinearizable, res.Operations, res.Checked, res.Partitions)
		res.Failures = blame(model, prepared, timeout)
		if len(res.Failures) > 0 {
			keys := make([]string, len(res.Failures))
			for i, f := range res.Failures {
				keys[i] = f.Key
			}
			verdict = fmt.Errorf("%w; keys %v", verdict, keys)
		}
	default:
		verdict = fmt.Errorf("%w: porcupine could not decide %d operations (%d checked) over %d keys within %v; the history is too hard to check, not known to be wrong: shorten the run or raise the timeout",
			ErrUndecided, res.Operations, res.Checked, res.Partitions, timeout)
	}

	again := timeout
	if res.Verdict == porcupine.Unknown && (again <= 0 || again > visualizeTimeout) {
		again = visualizeTimeout
	}
	_, info := porcupine.CheckOperationsVerbose(model, prepared, again)
	info.AddAnnotations(annotations)
	path, err := writeVisualization(model, info, visualizeTo)
	if err != nil {
		return res, errors.Join(verdict, fmt.Errorf("linearizability: visualization not written: %w", err))
	}
	res.Visualization = path
	return res, verdict
}

// blame checks each key of a history alone, all at once, and explains
// the ones that are not linearizable, in key order.
func blame(model porcupine.Model, prepared []porcupine.Operation, timeout time.Duration) []KeyFailure {
	subs := model.Partition(prepared)
	results := make([]porcupine.CheckResult, len(subs))
	var wg sync.WaitGroup
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = porcupine.CheckOperationsTimeout(model, sub, timeout)
		}()
	}
	wg.Wait()
	var out []KeyFailure
	for i, sub := range subs {
		if results[i] == porcupine.Illegal {
			out = append(out, KeyFailure{
				Key:         sub[0].Input.(Input).Key,
				Operations:  len(sub),
				Explanation: explainKey(model, sub, timeout),
			})
		}
	}
	return out
}

// explainKey describes where the history of one key stops being
// linearizable: the end of the longest linearization porcupine found,
// with the model's state after each step, the first operation it could
// not place, and the operations concurrent with that one.
func explainKey(model porcupine.Model, sub []porcupine.Operation, timeout time.Duration) string {
	_, info := porcupine.CheckOperationsVerbose(model, sub, timeout)
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	type opID struct {
		client int
		call   int64
	}
	placed := map[opID]bool{}
	for _, op := range longest {
		placed[opID{op.ClientId, op.Call}] = true
	}
	var stuck *porcupine.Operation
	for i := range sub {
		if op := &sub[i]; !placed[opID{op.ClientId, op.Call}] && (stuck == nil || op.Return < stuck.Return) {
			stuck = op
		}
	}
	var b strings.Builder
	const tail = 15
	fmt.Fprintf(&b, "  longest linearization: %d operations; its last steps (state after each):\n", len(longest))
	state := model.Init()
	for i, op := range longest {
		_, state = model.Step(state, op.Input, op.Output)
		if i >= len(longest)-tail {
			fmt.Fprintf(&b, "    %s => %s\n", opLine(op), model.DescribeState(state))
		}
	}
	if stuck == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "  first operation that cannot be placed after it:\n    %s\n  operations concurrent with that one:\n", opLine(*stuck))
	var around []porcupine.Operation
	for _, op := range sub {
		if op.Call <= stuck.Return && op.Return >= stuck.Call {
			around = append(around, op)
		}
	}
	b.WriteString(dumpOps(around, 60))
	return b.String()
}

func opLine(op porcupine.Operation) string {
	ret := "never"
	if op.Return != never {
		ret = time.Duration(op.Return).String()
	}
	return fmt.Sprintf("client %-3d [%v, %s] %s (%v)", op.ClientId, time.Duration(op.Call), ret,
		describe(op.Input.(Input), op.Output.(Output)), op.Metadata)
}

// dumpOps renders operations of this package's model one per line, in
// call order, at most limit of them; for logs of failures.
func dumpOps(ops []porcupine.Operation, limit int) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var b strings.Builder
	for i, op := range sorted {
		if i == limit {
			fmt.Fprintf(&b, "    ... %d more\n", len(sorted)-limit)
			break
		}
		fmt.Fprintf(&b, "    %s\n", opLine(op))
	}
	return b.String()
}

// writeVisualization writes porcupine's HTML to to (a file, or an existing
// directory) or else a new file in os.TempDir(), and returns its absolute
// path.
func writeVisualization(model porcupine.Model, info porcupine.LinearizationInfo, to string) (string, error) {
	path := to
	dir := os.TempDir()
	if path != "" {
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			dir, path = path, ""
		}
	}
	if path == "" {
		f, err := os.CreateTemp(dir, "cutkv-linearizability-*.html")
		if err != nil {
			return "", err
		}
		path = f.Name()
		f.Close()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if err := porcupine.VisualizePath(model, info, abs); err != nil {
		return "", fmt.Errorf("%s: %w", abs, err)
	}
	return abs, nil
}
