package partition

import (
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func prepareAt(id string, ms int64, s *internalpb.TxnShare) *internalpb.Command {
	c := cmdPrepare(id, s)
	c.GetTxnPrepare().PreparedUnixMs = ms
	return c
}

func finishAt(id string, commit bool, ms int64) *internalpb.Command {
	c := cmdFinish(id, commit, commit)
	c.GetTxnFinish().PreparedUnixMs = ms
	return c
}

func horizon(ms int64) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnHorizon{TxnHorizon: &internalpb.TxnHorizonOp{UnixMs: ms}}}
}

// TestTxnHorizon: finished ids are remembered (so a late prepare cannot
// lock again) until a horizon passes their prepare time; from then on a
// prepare stamped before the horizon is refused instead, so a late copy
// still cannot lock. Ids of unknown prepare time stay. The horizon and
// the prepare times survive an image.
func TestTxnHorizon(t *testing.T) {
	p := New(1)
	var idx uint64
	apply := func(c *internalpb.Command) any {
		t.Helper()
		idx++
		res, err := p.ApplyCommand(idx, c)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	share := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("k", "v")}}
	prepared := func(c *internalpb.Command) bool { return apply(c).(Vote).Prepared }

	// A: prepared at 1000 and committed. B: aborted before its prepare
	// (the finish names its time). C: finished with no time known.
	if !prepared(prepareAt("A", 1000, share)) {
		t.Fatal("A not prepared")
	}
	apply(finishAt("A", true, 0)) // the intent's time counts
	apply(finishAt("B", false, 1500))
	apply(finishAt("C", false, 0))
	if n, h := p.FinishedCount(); n != 3 || h != 0 {
		t.Fatalf("finished %d, horizon %d; want 3, 0", n, h)
	}
	if prepared(prepareAt("A", 1000, share)) || prepared(prepareAt("B", 1500, share)) {
		t.Fatal("a late prepare of a finished transaction locked again")
	}

	apply(horizon(2000))
	apply(horizon(1200)) // never lowered
	if n, h := p.FinishedCount(); n != 1 || h != 2000 {
		t.Fatalf("after the horizon: finished %d, horizon %d; want 1 (C), 2000", n, h)
	}
	for _, id := range []string{"A", "B"} {
		if prepared(prepareAt(id, map[string]int64{"A": 1000, "B": 1500}[id], share)) {
			t.Fatalf("late prepare of %s, forgotten behind the horizon, locked", id)
		}
	}
	if prepared(prepareAt("C", 0, share)) {
		t.Fatal("late prepare of C locked")
	}
	// FinishedBefore answers as prepareLocked's refusals do: A and B are
	// behind the horizon, C is remembered, D is not over.
	for _, c := range []struct {
		id   string
		at   int64
		want bool
	}{{"A", 1000, true}, {"B", 1500, true}, {"C", 0, true}, {"D", 2500, false}} {
		if got := p.FinishedBefore(c.id, c.at); got != c.want {
			t.Fatalf("FinishedBefore(%s, %d) = %v, want %v", c.id, c.at, got, c.want)
		}
	}
	if !prepared(prepareAt("D", 2500, share)) {
		t.Fatal("a prepare after the horizon was refused")
	}
	if p.FinishedBefore("D", 2500) {
		t.Fatal("FinishedBefore of a prepared transaction")
	}
	apply(finishAt("D", false, 0))
	if !p.FinishedBefore("D", 2500) {
		t.Fatal("FinishedBefore of a finished transaction")
	}

	q := imageRoundTrip(t, p)
	sameImagePartition(t, p, q)
	if n, h := q.FinishedCount(); n != 2 || h != 2000 {
		t.Fatalf("after an image: finished %d, horizon %d; want 2, 2000", n, h)
	}
	p = q
	if prepared(prepareAt("E", 1999, share)) {
		t.Fatal("the decoded partition forgot its horizon")
	}
}
