package cut

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// stateTestCall is one call the apply loop makes on a Progress, applied to
// several copies at once; it renders what each call answered.
type stateTestCall func(p *Progress) string

func randomStateTestCall(r *rand.Rand, index *uint64, version *uint64, open map[string]bool) (string, stateTestCall) {
	*index++
	idx := *index
	ids := []string{"A", "B", "C", "D", "E", "F"}
	switch r.IntN(6) {
	case 0: // an entry that may start a cut
		ev := *version
		if r.IntN(3) == 0 {
			*version++
			ev = *version
		}
		var intents []string
		for _, id := range ids {
			if open[id] {
				intents = append(intents, id)
			}
		}
		return fmt.Sprintf("%d: observe v%d intents %v", idx, ev, intents), func(p *Progress) string {
			return fmt.Sprint(p.Observe(idx, ev, func() []string { return slices.Clone(intents) }))
		}
	case 1, 2: // a Finish
		id := ids[r.IntN(len(ids))]
		commit, succeeded, stamp := r.IntN(3) > 0, r.IntN(2) == 0, uint64(r.IntN(int(*version)+2))
		delete(open, id)
		return fmt.Sprintf("%d: finish %s commit=%v succeeded=%v stamp=%d", idx, id, commit, succeeded, stamp), func(p *Progress) string {
			p.TxnFinished(id, commit, succeeded, stamp)
			return ""
		}
	case 3: // a prepare (seen by the next position only)
		id := ids[r.IntN(len(ids))]
		open[id] = true
		return fmt.Sprintf("%d: prepare %s", idx, id), func(*Progress) string { return "" }
	default: // a CutFinish: the pending one, or a stale or early one
		v := *version
		if r.IntN(4) == 0 && v > 0 {
			v--
		}
		return fmt.Sprintf("%d: cut finish v%d", idx, v), func(p *Progress) string {
			op, ok := p.Pending()
			if !ok || op.GetVersion() != v {
				op = &internalpb.CutFinishOp{Version: v}
			}
			return fmt.Sprint(p.ApplyFinish(idx, op))
		}
	}
}

// progressObservable renders everything a Progress answers.
func progressObservable(p *Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "v%d pos %d running %v ready %v active %v", p.Version(), p.Pos(), p.Running(), p.ReadyToFinish(), p.Active())
	if op, ok := p.Pending(); ok {
		fmt.Fprintf(&b, " pending v%d before %v after %v aborted %v", op.GetVersion(), txnNames(op.GetBefore()), txnNames(op.GetAfter()), idNames(op.GetAborted()))
	}
	for v := uint64(0); v <= p.Version(); v++ {
		if f, ok := p.Result(v); ok {
			fmt.Fprintf(&b, " result v%d@%d before %v after %v aborted %v", v, f.Index, txnNames(f.Op.GetBefore()), txnNames(f.Op.GetAfter()), idNames(f.Op.GetAborted()))
		}
	}
	return b.String()
}

// TestProgressStateRoundTrip drives a Progress at random and, at every
// step, restores a copy from its state; from then on the copy must answer
// every call as the original does and keep the same state.
func TestProgressStateRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x57a7e))
	closed := 0
	for round := 0; round < 20; round++ {
		orig := NewProgress()
		var copies []*Progress
		var index, version uint64
		open := map[string]bool{}
		var steps []string
		for step := 0; step < 300; step++ {
			c, err := RestoreProgress(orig.State())
			if err != nil {
				t.Fatalf("round %d step %d: restore: %v\nsteps:\n%s", round, step, err, strings.Join(steps, "\n"))
			}
			copies = append(copies, c)
			if len(copies) > 8 {
				copies = copies[1:]
			}
			desc, call := randomStateTestCall(r, &index, &version, open)
			steps = append(steps, desc)
			want := call(orig)
			if strings.Contains(desc, "cut finish") && want == "true" {
				closed++
			}
			for i, c := range copies {
				if got := call(c); got != want {
					t.Fatalf("round %d step %d (%s): copy %d answered %q, original %q", round, step, desc, i, got, want)
				}
				if got, want := progressObservable(c), progressObservable(orig); got != want {
					t.Fatalf("round %d step %d (%s): copy %d:\n%s\noriginal:\n%s\nsteps:\n%s", round, step, desc, i, got, want, strings.Join(steps, "\n"))
				}
				if !c.State().Equal(orig.State()) {
					t.Fatalf("round %d step %d (%s): copy %d state differs", round, step, desc, i)
				}
			}
		}
	}
	if closed == 0 {
		t.Fatal("no cut closed: the generator proves little")
	}
	t.Logf("%d cuts closed", closed)
}

// TestProgressStateOwnsItsData: changing a state changes neither the
// Progress it came from nor the one restored from it.
func TestProgressStateOwnsItsData(t *testing.T) {
	p := NewProgress()
	p.Observe(1, 3, func() []string { return []string{"A", "B", "C"} })
	p.TxnFinished("A", true, true, 1)
	p.TxnFinished("B", false, false, 0)
	p.TxnFinished("C", true, true, 5)
	op, _ := p.Pending()
	p.ApplyFinish(2, op)
	p.Observe(3, 4, func() []string { return []string{"D"} })
	want := progressObservable(p)

	s := p.State()
	r, err := RestoreProgress(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Active[0] = "X"
	s.Done[0].Op.Before[0].Stamp = 99
	s.Done[0].Op.Aborted[0][0] = 'Z'
	s.Done[0].Index = 77
	if got := progressObservable(p); got != want {
		t.Fatalf("changing the state changed the progress:\n%s\nwant\n%s", got, want)
	}
	if got := progressObservable(r); got != want {
		t.Fatalf("changing the state changed the restored progress:\n%s\nwant\n%s", got, want)
	}
	if !p.State().Equal(r.State()) || p.State().Equal(s) {
		t.Fatal("Equal does not compare what changed")
	}
}

func TestRestoreProgressRejectsImpossibleStates(t *testing.T) {
	fin := func(v uint64) Finished { return Finished{Op: &internalpb.CutFinishOp{Version: v}, Index: v} }
	many := make([]Finished, keepFinished+1)
	for i := range many {
		many[i] = fin(uint64(i + 1))
	}
	for _, tc := range []struct {
		name string
		s    *ProgressState
	}{
		{"nil", nil},
		{"position without a cut", &ProgressState{Pos: 3}},
		{"active without a cut", &ProgressState{Active: []string{"A"}}},
		{"finished without a cut", &ProgressState{Finished: true}},
		{"finished with active", &ProgressState{Version: 2, Pos: 1, Finished: true, Active: []string{"A"}}},
		{"active unsorted", &ProgressState{Version: 2, Pos: 1, Active: []string{"B", "A"}}},
		{"active repeated", &ProgressState{Version: 2, Pos: 1, Active: []string{"A", "A"}}},
		{"nil before", &ProgressState{Version: 2, Pos: 1, Before: []*internalpb.CutTxn{nil}}},
		{"nil after", &ProgressState{Version: 2, Pos: 1, After: []*internalpb.CutTxn{nil}}},
		{"done without op", &ProgressState{Version: 2, Pos: 1, Done: []Finished{{Index: 3}}}},
		{"done version 0", &ProgressState{Version: 2, Pos: 1, Done: []Finished{fin(0)}}},
		{"done repeated", &ProgressState{Version: 2, Pos: 1, Done: []Finished{fin(1), fin(1)}}},
		{"too many done", &ProgressState{Version: 100, Pos: 1, Done: many}},
	} {
		if _, err := RestoreProgress(tc.s); !errors.Is(err, ErrBadProgressState) {
			t.Errorf("%s: RestoreProgress = %v, want ErrBadProgressState", tc.name, err)
		}
	}
	// The states a Progress really has restore fine, the empty one included.
	if _, err := RestoreProgress(&ProgressState{}); err != nil {
		t.Errorf("empty state: %v", err)
	}
	if _, err := RestoreProgress(&ProgressState{Version: 100, Pos: 9, Done: many[1:]}); err != nil {
		t.Errorf("full done list: %v", err)
	}
}

// TestProgressStateEvictsInOrder: a restored Progress forgets the same old
// results as the original once more cuts finish than it remembers.
func TestProgressStateEvictsInOrder(t *testing.T) {
	p := NewProgress()
	var copies []*Progress
	for v := uint64(1); v <= keepFinished+6; v++ {
		// One transaction active at each cut's position, so that it
		// closes by its CutFinish entry.
		p.Observe(2*v, v, func() []string { return []string{"A"} })
		p.TxnFinished("A", true, true, v)
		op, _ := p.Pending()
		if !p.ApplyFinish(2*v+1, op) {
			t.Fatalf("cut %d did not close", v)
		}
		c, err := RestoreProgress(p.State())
		if err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
		for i, c := range copies[:len(copies)-1] {
			c.Observe(2*v, v, func() []string { return []string{"A"} })
			c.TxnFinished("A", true, true, v)
			op, _ := c.Pending()
			c.ApplyFinish(2*v+1, op)
			if got, want := progressObservable(c), progressObservable(p); got != want {
				t.Fatalf("after cut %d, copy %d:\n%s\noriginal:\n%s", v, i, got, want)
			}
		}
	}
	if _, ok := p.Result(1); ok {
		t.Fatal("cut 1 still remembered")
	}
}
