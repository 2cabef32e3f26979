package partition

import (
	"bytes"
	"testing"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// TestTxnOutsideFinish: finishes for a transaction never prepared here,
// as an outside (or confused) sender could send them. A commit writes
// nothing and leaves nothing; an abort leaves a tombstone that refuses
// the id's prepare, also after the partition went through an image, and
// until the horizon takes over.
func TestTxnOutsideFinish(t *testing.T) {
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
	apply(put("k", "0"))
	share := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("k", "1"), rDel("j")}, SuccessIndex: []uint32{0, 1}}
	before := p.Image()

	// Commit, both branches, with and without a prepare time.
	apply(finishAt("C", true, 5000))
	apply(cmdFinish("C", true, false))
	was, is := partitionOf(t, before), partitionOf(t, p.Image())
	is.applied = was.applied // the state, not the index
	if err := diffImagePartitions(was, is); err != nil {
		t.Fatalf("a commit finish for an unknown transaction changed the state: %v", err)
	}
	if n, _ := p.FinishedCount(); n != 0 {
		t.Fatalf("a commit finish for an unknown transaction left %d finished ids", n)
	}

	// Abort: a tombstone.
	apply(finishAt("A", false, 5000))
	if n, _ := p.FinishedCount(); n != 1 {
		t.Fatalf("finished ids after an abort of an unknown transaction: %d, want 1", n)
	}
	p = imageRoundTrip(t, p)
	if v := apply(prepareAt("A", 5000, share)).(Vote); v.Prepared || len(v.Conflicts) > 0 {
		t.Fatalf("prepare after an outside abort (through an image): %s, want a refusal", fmtVote(v))
	}
	if hs := p.LockHolders(); len(hs) != 0 {
		t.Fatalf("a refused prepare locked: %v", hs)
	}
	// The horizon drops the tombstone and refuses the prepare itself.
	apply(horizon(5001))
	if n, _ := p.FinishedCount(); n != 0 {
		t.Fatalf("finished ids behind the horizon: %d, want 0", n)
	}
	if v := apply(prepareAt("A", 5000, share)).(Vote); v.Prepared {
		t.Fatal("prepare behind the horizon locked")
	}
	// The commit left nothing: C prepares (and commits) as any other.
	if v := apply(prepareAt("C", 6000, share)).(Vote); !v.Prepared {
		t.Fatalf("C, after a stray commit finish: %s, want prepared", fmtVote(v))
	}
	apply(finishAt("C", true, 6000))
	if kv, ok, _ := p.Get([]byte("k")); !ok || string(kv.Value) != "1" {
		t.Fatalf("k = %v after C committed, want 1", kv)
	}
}

// partitionOf decodes an image, to compare two states with
// diffImagePartitions.
func partitionOf(t *testing.T, im *Image) *Partition {
	t.Helper()
	q, err := Decode(im.ID(), bytes.NewReader(encodeImage(t, im)))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestTxnIDReuse: two transactions under one id. The second one's
// prepare is refused wherever the first is prepared, finished or
// decided — it must never vote prepared while its own writes are not
// the ones that would apply — and its finishes (another prepare time)
// leave the first one's intent alone, so the first commits as decided.
func TestTxnIDReuse(t *testing.T) {
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
	first := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("a", "first")}, SuccessIndex: []uint32{0}}
	second := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("b", "second")}, SuccessIndex: []uint32{0}}
	if v := apply(prepareAt("T", 1000, first)).(Vote); !v.Prepared {
		t.Fatalf("first prepare: %s", fmtVote(v))
	}
	// A retry of the same prepare gets its vote; the second transaction,
	// same share or not, is refused.
	if v := apply(prepareAt("T", 1000, first)).(Vote); !v.Prepared {
		t.Fatalf("retried prepare: %s, want the first vote", fmtVote(v))
	}
	for _, c := range []*internalpb.Command{prepareAt("T", 2000, second), prepareAt("T", 2000, first), prepareAt("T", 1000, second)} {
		if v := apply(c).(Vote); v.Prepared || len(v.Conflicts) > 0 {
			t.Fatalf("second transaction under a prepared id: %s, want a refusal", fmtVote(v))
		}
	}
	// Its abort does not drop the first one's intent.
	apply(finishAt("T", false, 2000))
	if _, ok := p.IntentOf("T"); !ok {
		t.Fatal("the second transaction's abort dropped the first one's intent")
	}
	p = imageRoundTrip(t, p)
	apply(finishAt("T", true, 1000))
	if kv, ok, _ := p.Get([]byte("a")); !ok || string(kv.Value) != "first" {
		t.Fatalf("a = %v, want the first transaction's write", kv)
	}
	if _, ok, _ := p.Get([]byte("b")); ok {
		t.Fatal("the refused second transaction wrote b")
	}
	// Finished: refused, through an image too.
	p = imageRoundTrip(t, p)
	if v := apply(prepareAt("T", 3000, second)).(Vote); v.Prepared {
		t.Fatal("a prepare reusing a finished id locked")
	}
	// Decided here first (this is the id's record partition): refused.
	apply(cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte("R"), Commit: true, Participants: []uint64{1}}))
	if v := apply(prepareAt("R", 3000, second)).(Vote); v.Prepared {
		t.Fatal("a prepare of an id decided here locked")
	}
	if hs := p.LockHolders(); len(hs) != 0 {
		t.Fatalf("locks left: %v", hs)
	}
}
