package cut

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// intentsFn returns an intents function for Observe that counts its calls.
func intentsFn(calls *int, ids ...string) func() []string {
	return func() []string {
		*calls++
		return slices.Clone(ids)
	}
}

func noIntents() []string { return nil }

func txnNames(ts []*internalpb.CutTxn) []string {
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("%s@%d/%v", t.GetTxnId(), t.GetStamp(), t.GetSucceeded()))
	}
	return out
}

func idNames(ids [][]byte) []string {
	var out []string
	for _, id := range ids {
		out = append(out, string(id))
	}
	return out
}

func TestProgressClassification(t *testing.T) {
	p := NewProgress()
	calls := 0
	if p.Running() || p.Version() != 0 || p.Pos() != 0 || len(p.Active()) != 0 {
		t.Fatalf("new progress: running %v version %d pos %d active %v", p.Running(), p.Version(), p.Pos(), p.Active())
	}
	// Entries of version 0 are no position.
	if p.Observe(1, 0, intentsFn(&calls, "A")) {
		t.Fatal("an entry of version 0 started a cut")
	}
	// Finishing before any cut records nothing.
	p.TxnFinished("A", true, true, 3)
	if p.ReadyToFinish() {
		t.Fatal("ready to finish without a cut")
	}
	if !p.Observe(2, 5, intentsFn(&calls, "D", "B", "A", "C", "E")) {
		t.Fatal("the first entry of version 5 started no cut")
	}
	if calls != 1 {
		t.Fatalf("intents called %d times, want once (at the position only)", calls)
	}
	if p.Version() != 5 || p.Pos() != 2 || !p.Running() {
		t.Fatalf("version %d pos %d running %v, want 5, 2, true", p.Version(), p.Pos(), p.Running())
	}
	if got := p.Active(); !slices.Equal(got, []string{"A", "B", "C", "D", "E"}) {
		t.Fatalf("active %v", got)
	}
	// Later entries of the same version (or lower: never in a log, but
	// harmless) move nothing.
	for i, ev := range []uint64{5, 4, 0} {
		if p.Observe(uint64(3+i), ev, intentsFn(&calls, "X")) {
			t.Fatalf("an entry of version %d moved the position", ev)
		}
	}
	if calls != 1 || p.Pos() != 2 {
		t.Fatalf("intents called %d times, pos %d", calls, p.Pos())
	}

	p.TxnFinished("A", true, true, 4)   // stamp < v: before
	p.TxnFinished("B", true, false, 5)  // stamp = v: after (failure branch)
	p.TxnFinished("C", true, true, 7)   // stamp > v: after
	p.TxnFinished("D", false, false, 2) // abort, whatever the stamp
	p.TxnFinished("Z", true, true, 1)   // not active (prepared after pos): ignored
	p.TxnFinished("A", false, false, 9) // finished already: ignored
	if p.ReadyToFinish() {
		t.Fatal("ready while E is active")
	}
	if _, ok := p.Pending(); ok {
		t.Fatal("a CutFinish pending while E is active")
	}
	if got := p.Active(); !slices.Equal(got, []string{"E"}) {
		t.Fatalf("active %v, want [E]", got)
	}
	p.TxnFinished("E", false, true, 9)
	op, ok := p.Pending()
	if !ok || !p.ReadyToFinish() {
		t.Fatal("nothing pending with the active set empty")
	}
	if op.GetVersion() != 5 || op.GetPos() != 2 {
		t.Fatalf("pending version %d pos %d", op.GetVersion(), op.GetPos())
	}
	if got, want := txnNames(op.GetBefore()), []string{"A@4/true"}; !slices.Equal(got, want) {
		t.Errorf("before %v, want %v", got, want)
	}
	if got, want := txnNames(op.GetAfter()), []string{"B@5/false", "C@7/true"}; !slices.Equal(got, want) {
		t.Errorf("after %v, want %v", got, want)
	}
	if got, want := idNames(op.GetAborted()), []string{"D", "E"}; !slices.Equal(got, want) {
		t.Errorf("aborted %v, want %v", got, want)
	}
	if !p.ApplyFinish(9, op) {
		t.Fatal("the pending CutFinish did not close the cut")
	}
	if p.Running() || p.ReadyToFinish() {
		t.Fatal("still running after CutFinish")
	}
	// A Finish after the cut closed changes nothing.
	p.TxnFinished("E", true, true, 1)
	f, ok := p.Result(5)
	if !ok || f.Index != 9 || len(f.Op.GetBefore()) != 1 || len(f.Op.GetAfter()) != 2 || len(f.Op.GetAborted()) != 2 {
		t.Fatalf("result %+v %v", f, ok)
	}
}

// TestProgressEmptyActiveSet: nothing active at pos, so the cut is
// finished at pos itself (rule 6), nothing is pending, and a CutFinish
// entry for it later (an old binary's, or a retry) changes nothing.
func TestProgressEmptyActiveSet(t *testing.T) {
	p := NewProgress()
	calls := 0
	if !p.Observe(7, 1, intentsFn(&calls)) {
		t.Fatal("no cut started")
	}
	if op, ok := p.Pending(); ok || p.Running() {
		t.Fatalf("pending %v, running %v; want the cut closed at its position", op, p.Running())
	}
	f, ok := p.Result(1)
	if !ok || f.Index != 7 || f.Op.GetVersion() != 1 || f.Op.GetPos() != 7 || len(f.Op.GetBefore())+len(f.Op.GetAfter())+len(f.Op.GetAborted()) != 0 {
		t.Fatalf("result %+v %v; want closed at 7 with empty sets", f, ok)
	}
	if p.ApplyFinish(9, &internalpb.CutFinishOp{Version: 1, Pos: 7}) {
		t.Fatal("a CutFinish for a cut closed at its position closed it again")
	}
	if f, _ := p.Result(1); f.Index != 7 {
		t.Fatalf("the late CutFinish moved the result to %d", f.Index)
	}
}

func TestProgressFinishDuplicatesAndStale(t *testing.T) {
	p := NewProgress()
	calls := 0
	p.Observe(3, 5, intentsFn(&calls, "A"))

	// Early: A is still active.
	early := &internalpb.CutFinishOp{Version: 5, Pos: 3}
	if p.ApplyFinish(4, early) {
		t.Fatal("a CutFinish closed the cut while A is active")
	}
	if !p.Running() {
		t.Fatal("an early CutFinish stopped the cut")
	}
	if _, ok := p.Result(5); ok {
		t.Fatal("an early CutFinish left a result")
	}
	p.TxnFinished("A", true, true, 4)
	op, _ := p.Pending()

	// Stale: an older version, never the running one.
	if p.ApplyFinish(5, &internalpb.CutFinishOp{Version: 4}) {
		t.Fatal("a CutFinish of version 4 closed cut 5")
	}
	if !p.ApplyFinish(6, op) {
		t.Fatal("the CutFinish did not close the cut")
	}
	// Duplicates: the same entry proposed again, committed later.
	for i := range 3 {
		if p.ApplyFinish(uint64(7+i), op) {
			t.Fatalf("duplicate %d closed the cut again", i)
		}
	}
	f, ok := p.Result(5)
	if !ok || f.Index != 6 {
		t.Fatalf("result %+v %v, want the first CutFinish at 6", f, ok)
	}

	// A newer cut starts; a late CutFinish(5) neither closes it nor
	// changes cut 5's result.
	p.Observe(10, 6, intentsFn(&calls, "B"))
	if p.ApplyFinish(11, op) {
		t.Fatal("a CutFinish(5) closed cut 6")
	}
	if f, _ := p.Result(5); f.Index != 6 {
		t.Fatalf("cut 5's result moved to %d", f.Index)
	}
	if !p.Running() || p.Version() != 6 {
		t.Fatalf("running %v version %d", p.Running(), p.Version())
	}

	// A newer cut overtakes a running one: the old one is dropped, the new
	// one's active set is taken afresh, and the old one never finishes.
	p.Observe(12, 8, intentsFn(&calls, "B", "C"))
	if got := p.Active(); !slices.Equal(got, []string{"B", "C"}) {
		t.Fatalf("active %v", got)
	}
	p.TxnFinished("B", true, true, 6)
	p.TxnFinished("C", true, true, 8)
	if p.ApplyFinish(13, &internalpb.CutFinishOp{Version: 6}) {
		t.Fatal("the overtaken cut 6 closed")
	}
	op8, ok := p.Pending()
	if !ok || op8.GetVersion() != 8 || op8.GetPos() != 12 {
		t.Fatalf("pending %v %v", op8, ok)
	}
	if got, want := txnNames(op8.GetBefore()), []string{"B@6/true"}; !slices.Equal(got, want) {
		t.Errorf("before %v, want %v", got, want)
	}
	if !p.ApplyFinish(14, op8) {
		t.Fatal("cut 8 did not close")
	}
	if _, ok := p.Result(6); ok {
		t.Fatal("the overtaken cut 6 has a result")
	}
}

func TestProgressResultRetention(t *testing.T) {
	p := NewProgress()
	const extra = 10
	n := uint64(keepFinished + extra)
	for v := uint64(1); v <= n; v++ {
		if !p.Observe(2*v, v, noIntents) {
			t.Fatalf("cut %d did not start", v)
		}
		if _, ok := p.Result(v); !ok {
			t.Fatalf("cut %d did not close at its position", v)
		}
	}
	for v := uint64(1); v <= n; v++ {
		f, ok := p.Result(v)
		if want := v > extra; ok != want {
			t.Fatalf("Result(%d) remembered %v, want %v", v, ok, want)
		}
		if ok && (f.Index != 2*v || f.Op.GetPos() != 2*v) {
			t.Fatalf("Result(%d) = index %d pos %d", v, f.Index, f.Op.GetPos())
		}
	}
	if len(p.done) != keepFinished || len(p.doneOrder) != keepFinished {
		t.Fatalf("remembers %d results (%d in order), want %d", len(p.done), len(p.doneOrder), keepFinished)
	}
}

// TestProgressProposal: the agent's decision. A partition behind the
// node's known version gets CutStart(known); a running cut with nothing
// active left gets its CutFinish; otherwise nothing.
func TestProgressProposal(t *testing.T) {
	p := NewProgress()
	if c := p.Proposal(0); c != nil {
		t.Fatalf("no cut known: proposal %v", c)
	}
	if c := p.Proposal(3); c.GetCutStart().GetVersion() != 3 {
		t.Fatalf("known 3, partition at 0: proposal %v, want CutStart(3)", c)
	}
	// The CutStart(3) applies with T active: the cut runs, nothing is due.
	p.Observe(5, 3, func() []string { return []string{"T"} })
	if c := p.Proposal(3); c != nil {
		t.Fatalf("T active: proposal %v, want none", c)
	}
	// A newer version known: the next CutStart comes first.
	if c := p.Proposal(4); c.GetCutStart().GetVersion() != 4 {
		t.Fatalf("known 4: proposal %v, want CutStart(4)", c)
	}
	p.TxnFinished("T", true, true, 2)
	c := p.Proposal(3)
	f := c.GetCutFinish()
	if f == nil || f.GetVersion() != 3 || f.GetPos() != 5 || len(f.GetBefore()) != 1 {
		t.Fatalf("T finished before the cut: proposal %v, want CutFinish(3, pos 5, before [T])", c)
	}
	p.ApplyFinish(6, f)
	if c := p.Proposal(3); c != nil {
		t.Fatalf("cut 3 closed: proposal %v, want none", c)
	}
}
