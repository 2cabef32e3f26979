package linearizability

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/keyspace"
)

// Shorthands for hand-made histories. Times are abstract ticks.
func get(client int, call, ret int64, key string, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Op: OpGet, Key: key}, Output: out}
}

func put(client int, call, ret int64, key, value string, prev Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Op: OpPut, Key: key, Value: value}, Output: prev}
}

func del(client int, call, ret int64, key string, prev Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: Input{Op: OpDelete, Key: key}, Output: prev}
}

// putUnknown is a write whose answer never came: it never returns.
func putUnknown(client int, call int64, key, value string) porcupine.Operation {
	return put(client, call, never, key, value, Output{Unknown: true})
}

func delUnknown(client int, call int64, key string) porcupine.Operation {
	return del(client, call, never, key, Output{Unknown: true})
}

var absent = Output{}

func is(value string, version int64) Output { return Output{Value: value, Version: version} }

// TestCheckerRejectsIllegalHistories proves the checker bites: each
// history below breaks linearizability in a way a buggy server could, and
// the very check TestLinearizable uses must call it Illegal.
func TestCheckerRejectsIllegalHistories(t *testing.T) {
	cases := []struct {
		name    string
		history []porcupine.Operation
	}{
		{"read of a value never written", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			get(1, 20, 30, "a", is("y", 1)),
		}},
		{"stale read after a completed write", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			put(0, 20, 30, "a", "y", is("x", 1)),
			get(1, 40, 50, "a", is("x", 1)),
		}},
		{"acknowledged write lost", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			get(1, 20, 30, "a", absent),
		}},
		{"lost update: two writes saw the same previous value", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			put(1, 5, 15, "a", "y", absent),
		}},
		{"write applied twice (version jumps)", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			get(1, 20, 30, "a", is("x", 2)),
		}},
		{"deleted key comes back", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			del(0, 20, 30, "a", is("x", 1)),
			get(1, 40, 50, "a", is("x", 1)),
		}},
		{"delete answer contradicts itself", []porcupine.Operation{
			del(0, 0, 10, "a", Output{Version: -1}),
		}},
		{"write of unknown outcome seen before it was sent", []porcupine.Operation{
			get(1, 0, 10, "a", is("x", 1)),
			putUnknown(0, 20, "a", "x"),
		}},
		{"write of unknown outcome seen, then undone", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			putUnknown(0, 20, "a", "y"),
			get(2, 30, 40, "a", is("y", 2)),
			get(3, 50, 60, "a", is("x", 1)),
		}},
		{"one bad key among good ones", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			get(1, 20, 30, "a", is("x", 1)),
			put(2, 0, 10, "b", "u", absent),
			get(3, 20, 30, "b", absent),
			putUnknown(4, 0, "c", "w"),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if res := checkFor(t, tc.history); res.Verdict != porcupine.Illegal {
				t.Fatalf("checker says %s, want NOT linearizable:\n%s", verdictName(res.Verdict), dumpOps(tc.history, 100))
			}
		})
	}
}

// TestCheckerAcceptsLegalHistories guards against a model so strict that
// TestLinearizable could only fail: each history is linearizable.
func TestCheckerAcceptsLegalHistories(t *testing.T) {
	cases := []struct {
		name    string
		history []porcupine.Operation
	}{
		{"empty", nil},
		{"read concurrent with a write sees the old value", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			put(0, 20, 40, "a", "y", is("x", 1)),
			get(1, 25, 30, "a", is("x", 1)),
		}},
		{"read concurrent with a write sees the new value", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			put(0, 20, 40, "a", "y", is("x", 1)),
			get(1, 25, 30, "a", is("y", 2)),
		}},
		{"write of unknown outcome that happened", []porcupine.Operation{
			putUnknown(0, 0, "a", "x"),
			get(1, 20, 30, "a", is("x", 1)),
			put(1, 40, 50, "a", "y", is("x", 1)),
		}},
		{"write of unknown outcome that never happened", []porcupine.Operation{
			putUnknown(0, 0, "a", "x"),
			get(1, 20, 30, "a", absent),
			put(1, 40, 50, "a", "y", absent),
			get(1, 60, 70, "a", is("y", 1)),
		}},
		{"delete of unknown outcome that happens late", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			delUnknown(0, 20, "a"),
			get(1, 30, 40, "a", is("x", 1)),
			get(1, 50, 60, "a", absent),
		}},
		{"unseen write of unknown outcome between two seen ones", []porcupine.Operation{
			// y happened too (z shows version 3) but nobody saw y itself:
			// Prepare drops y, and the model must still accept v3.
			put(0, 0, 10, "a", "x", absent),
			putUnknown(1, 20, "a", "y"),
			putUnknown(2, 30, "a", "z"),
			get(3, 40, 50, "a", is("z", 3)),
			put(3, 60, 70, "a", "w", is("z", 3)),
			get(3, 80, 90, "a", is("w", 4)),
		}},
		{"keys are independent", []porcupine.Operation{
			put(0, 0, 10, "a", "x", absent),
			put(1, 0, 10, "b", "x", absent),
			get(2, 20, 30, "a", is("x", 1)),
			del(3, 20, 30, "b", is("x", 1)),
			get(2, 40, 50, "b", absent),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if res := checkFor(t, tc.history); res.Verdict != porcupine.Ok {
				t.Fatalf("checker says %s, want linearizable:\n%s", verdictName(res.Verdict), dumpOps(tc.history, 100))
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	history := []porcupine.Operation{
		put(0, 0, 10, "a", "x", absent),
		putUnknown(1, 5, "a", "seen"),
		putUnknown(2, 6, "a", "unseen"),
		putUnknown(3, 7, "b", "seen"), // same value, other key: unseen there
		delUnknown(4, 8, "a"),
		get(5, 20, 40, "a", is("seen", 2)),
		put(6, 30, 35, "a", "y", is("seen", 2)),
		putUnknown(7, 50, "a", "late"),
		get(8, 10, 45, "a", is("late", 3)), // seen before it was sent
	}
	got := Prepare(history)
	want := map[string]int64{"x": 10, "seen": 35, "y": 35, "late": never}
	var puts, dels, gets int
	for _, op := range got {
		i := op.Input.(Input)
		switch i.Op {
		case OpPut:
			puts++
			if i.Key != "a" {
				t.Errorf("kept %s of key %s, which nobody saw", i.Value, i.Key)
			}
			ret, ok := want[i.Value]
			if !ok {
				t.Errorf("kept put of %q, which should be dropped", i.Value)
			} else if op.Return != ret {
				t.Errorf("put of %q returns at %d, want %d", i.Value, op.Return, ret)
			}
		case OpDelete:
			dels++
			if op.Return != never {
				t.Errorf("delete of unknown outcome returns at %d, want never", op.Return)
			}
		case OpGet:
			gets++
		}
	}
	if puts != 4 || dels != 1 || gets != 2 {
		t.Errorf("kept %d puts, %d deletes, %d gets; want 4, 1, 2", puts, dels, gets)
	}
	if history[1].Return != never {
		t.Errorf("Prepare changed its input")
	}
}

// checkFor runs the very check TestLinearizable uses, visualizing into a
// temporary directory, and holds Check to its contract: an error if and
// only if the verdict is not Ok, of the matching kind, and a
// visualization exactly when it fails.
func checkFor(t *testing.T, history []porcupine.Operation) CheckResult {
	t.Helper()
	res, err := Check(history, checkTimeout, t.TempDir())
	switch res.Verdict {
	case porcupine.Ok:
		if err != nil || res.Visualization != "" {
			t.Fatalf("passing check returned error %v, visualization %q", err, res.Visualization)
		}
	case porcupine.Illegal:
		if !errors.Is(err, ErrNotLinearizable) || res.Visualization == "" {
			t.Fatalf("failing check returned error %v, visualization %q", err, res.Visualization)
		}
	}
	if res.Operations != len(history) {
		t.Fatalf("result counts %d operations, history has %d", res.Operations, len(history))
	}
	return res
}

// TestFailureWritesVisualization runs the failure path on an illegal
// history: the HTML lands where it was asked to, the result names the
// guilty key, and the annotations (the nemesis' faults) make it into the
// file.
func TestFailureWritesVisualization(t *testing.T) {
	history := []porcupine.Operation{
		put(0, 0, 10, "a", "x", absent),
		get(1, 20, 30, "a", absent),
		put(2, 0, 10, "b", "u", absent),
		get(3, 20, 30, "b", is("u", 1)),
	}
	fault := porcupine.Annotation{Tag: "nemesis", Start: 12, End: 18, Description: "n1 down"}

	dir := t.TempDir()
	res, err := Check(history, checkTimeout, dir, fault)
	if !errors.Is(err, ErrNotLinearizable) || res.Verdict != porcupine.Illegal {
		t.Fatalf("Check = %v, %v; want NOT linearizable", res.Verdict, err)
	}
	if res.Operations != 4 || res.Checked != 4 || res.Partitions != 2 {
		t.Errorf("result counts %d operations, %d checked, %d partitions; want 4, 4, 2", res.Operations, res.Checked, res.Partitions)
	}
	if len(res.Failures) != 1 || res.Failures[0].Key != "a" || res.Failures[0].Operations != 2 {
		t.Errorf("failures %+v, want key a alone with 2 operations", res.Failures)
	} else if !strings.Contains(res.Failures[0].Explanation, "get(a) -> absent") {
		t.Errorf("explanation does not name the stale read:\n%s", res.Failures[0].Explanation)
	}
	if filepath.Dir(res.Visualization) != dir || !filepath.IsAbs(res.Visualization) {
		t.Errorf("visualization at %q, want a file in %s", res.Visualization, dir)
	}
	html, err := os.ReadFile(res.Visualization)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "n1 down") {
		t.Errorf("visualization %s (%d bytes) lacks the annotation", res.Visualization, len(html))
	}
	if !strings.Contains(res.String(), res.Visualization) {
		t.Errorf("result line %q does not say where the visualization is", res)
	}

	file := filepath.Join(dir, "given.html")
	if res, err := Check(history, checkTimeout, file); res.Visualization != file || !errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("visualization to a named file went to %q, %v", res.Visualization, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("visualization %s: %v", file, err)
	}

	// A path that cannot be written: the verdict still comes back,
	// joined with the reason the file is missing.
	bad := filepath.Join(dir, "no such dir", "v.html")
	res, err = Check(history, checkTimeout, bad)
	if res.Verdict != porcupine.Illegal || !errors.Is(err, ErrNotLinearizable) || res.Visualization != "" ||
		!strings.Contains(fmt.Sprint(err), "visualization not written") {
		t.Fatalf("unwritable visualization: %v, %q, %v", res.Verdict, res.Visualization, err)
	}
}

// TestCheckTimeoutIsAFailure drives porcupine into its timeout for sure:
// the model's step blocks until porcupine gives up, so no verdict can come
// first. Check must report it as a failure (ErrUndecided), never a pass,
// and still leave a visualization to look at.
func TestCheckTimeoutIsAFailure(t *testing.T) {
	stuck := Model
	stuck.StepContext = func(ctx context.Context, s, in, out any) (bool, any) {
		<-ctx.Done()
		return false, s
	}
	history := []porcupine.Operation{
		put(0, 0, 10, "a", "x", absent),
		get(1, 20, 30, "a", is("x", 1)),
	}
	dir := t.TempDir()
	res, err := check(stuck, history, 20*time.Millisecond, dir, nil)
	if res.Verdict != porcupine.Unknown {
		t.Fatalf("verdict %v, want Unknown", res.Verdict)
	}
	if res.Passed() {
		t.Fatal("a check that timed out passed")
	}
	if !errors.Is(err, ErrUndecided) || errors.Is(err, ErrNotLinearizable) {
		t.Fatalf("error %v, want ErrUndecided", err)
	}
	if !strings.Contains(err.Error(), "20ms") || !strings.Contains(err.Error(), "not known to be wrong") {
		t.Errorf("error does not say what happened: %v", err)
	}
	if res.Failures != nil {
		t.Errorf("blamed keys %+v without a verdict", res.Failures)
	}
	if fi, statErr := os.Stat(res.Visualization); statErr != nil || fi.Size() == 0 || filepath.Dir(res.Visualization) != dir {
		t.Errorf("visualization %q: %v", res.Visualization, statErr)
	}
	if !strings.Contains(res.String(), "timed out") {
		t.Errorf("result line %q does not say the check timed out", res)
	}
}

func TestClassify(t *testing.T) {
	withInfo := func(domain, reason string) error {
		st, err := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	cases := []struct {
		err  error
		want outcome
	}{
		{withInfo("cutkv.io", "NOT_LEADER"), notApplied},
		{withInfo("cutkv.io", "NO_LEADER"), notApplied},
		{withInfo("cutkv.io", "PROPOSAL_DROPPED"), notApplied},
		{withInfo("cutkv.io", "NOT_SERVING"), notApplied},
		{withInfo("cutkv.io", "SHUTTING_DOWN"), notApplied},
		{withInfo("cutkv.io", "SOMETHING_NEW"), unknown},
		{withInfo("example.com", "NOT_LEADER"), unknown},
		{status.Error(codes.Unavailable, "connection reset"), unknown},
		{status.Error(codes.DeadlineExceeded, "late"), unknown},
		{status.Error(codes.Canceled, "gone"), unknown},
		{status.Error(codes.Internal, "boom"), unknown},
		{context.DeadlineExceeded, unknown},
	}
	for _, tc := range cases {
		if got, label, _ := classify(tc.err); got != tc.want {
			t.Errorf("classify(%v) = %d (%s), want %d", tc.err, got, label, tc.want)
		}
	}
}

func TestParseSoak(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"", 10 * time.Second, false},
		{"90s", 90 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"10", 0, true},
		{"-1s", 0, true},
		{"soon", 0, true},
	} {
		got, err := parseSoak(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseSoak(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestPickKeysCoversEveryPartition(t *testing.T) {
	keys := PickKeys(numKeys, partitions)
	if len(keys) != numKeys {
		t.Fatalf("got %d keys, want %d: %v", len(keys), numKeys, keys)
	}
	seen := map[string]bool{}
	covered := map[uint64]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatalf("duplicate key %q in %v", k, keys)
		}
		seen[k] = true
		covered[keyspace.PartitionOf([]byte(k), partitions)] = true
	}
	if len(covered) != partitions {
		t.Fatalf("keys %v cover partitions %v, want all %d", keys, fmt.Sprint(covered), partitions)
	}
}
