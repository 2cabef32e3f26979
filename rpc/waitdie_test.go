package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

func putShare(keys ...string) *internalpb.TxnShare {
	s := &internalpb.TxnShare{}
	for _, k := range keys {
		s.Success = append(s.Success, &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte("v")}}})
	}
	return s
}

func readShare(keys ...string) *internalpb.TxnShare {
	s := &internalpb.TxnShare{}
	for _, k := range keys {
		s.Success = append(s.Success, &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(k)}}})
	}
	return s
}

// passDie is waitDie for a transaction whose entry applies at once:
// admitted is called on success.
func passDie(ctx context.Context, part *partition.Partition, q *txn.WaitQueue, id string, prio int64, share *internalpb.TxnShare) error {
	admitted, err := waitDie(ctx, part, q, id, prio, share)
	if err == nil {
		admitted()
	}
	return err
}

// holding returns a partition in which transaction id (priority prio)
// holds a prepared write on key.
func holding(t *testing.T, id string, prio int64, key string) *partition.Partition {
	t.Helper()
	p := partition.New(1)
	cmd := &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: &internalpb.TxnPrepareOp{
		TxnId: []byte(id), Priority: prio, RecordPartition: 1, Share: putShare(key)}}}
	res, err := p.ApplyCommand(1, cmd)
	if v, _ := res.(partition.Vote); err != nil || !v.Prepared {
		t.Fatalf("prepare %s: %v %v", id, res, err)
	}
	return p
}

// TestWaitDie: a younger transaction behind an older holder dies at once;
// an older one waits for a younger holder and proceeds when it finishes;
// other keys do not wait.
func TestWaitDie(t *testing.T) {
	ctx := context.Background()
	p := holding(t, "old", 1, "k")
	start := time.Now()
	if err := passDie(ctx, p, &txn.WaitQueue{}, "young", 2, putShare("k")); !errors.Is(err, ErrConflict) || time.Since(start) > dieWait/2 {
		t.Fatalf("younger behind an older holder: %v after %v, want ErrConflict at once", err, time.Since(start))
	}

	p = holding(t, "young", 2, "k")
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = p.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte("young"), Commit: true, Succeeded: true}}})
	}()
	if err := passDie(ctx, p, &txn.WaitQueue{}, "old", 1, putShare("k")); err != nil {
		t.Fatalf("older behind a younger holder that finishes: %v, want to proceed", err)
	}

	p = holding(t, "old", 1, "k")
	if err := passDie(ctx, p, &txn.WaitQueue{}, "young", 2, putShare("other")); err != nil {
		t.Fatalf("no conflict: %v", err)
	}
}

// TestWaitDieReserves: an older transaction waiting behind a younger
// holder reserves what it wants: a transaction younger than the waiter
// that wants one of those keys dies, although nobody holds it, so the
// waiter is not overtaken; once the waiter is through, the key is free.
func TestWaitDieReserves(t *testing.T) {
	ctx := context.Background()
	p := holding(t, "young", 5, "k1")
	q := &txn.WaitQueue{}
	waited := make(chan error, 1)
	go func() { waited <- passDie(ctx, p, q, "old", 1, putShare("k1", "k2")) }()
	deadline := time.Now().Add(dieWait / 2)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if q.Len() != 1 {
		t.Fatal("the older transaction did not wait behind the younger holder")
	}
	if err := passDie(ctx, p, q, "mid", 3, putShare("k2")); !errors.Is(err, ErrConflict) {
		t.Fatalf("younger than a waiter that wants k2: %v, want ErrConflict", err)
	}
	if err := passDie(ctx, p, q, "oldest", 0, putShare("k2")); err != nil {
		t.Fatalf("older than the waiter, k2 not held: %v, want to proceed", err)
	}
	_, _ = p.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte("young"), Commit: true, Succeeded: true}}})
	if err := <-waited; err != nil {
		t.Fatalf("the waiter, once the holder finished: %v", err)
	}
	if q.Len() != 0 {
		t.Fatal("the waiter's reservation outlived its wait")
	}
	if err := passDie(ctx, p, q, "mid", 3, putShare("k2")); err != nil {
		t.Fatalf("k2 after the waiter went: %v", err)
	}
}

// TestWaitDieAdmitted: a transaction that passed the door stays admitted
// until its entry applied: an older one that conflicts waits for it
// (rather than both being proposed and the older refused where it
// applies), proceeding on the leave; a younger one dies.
func TestWaitDieAdmitted(t *testing.T) {
	neverTimeout(t)
	ctx := context.Background()
	p := partition.New(1)
	q := &txn.WaitQueue{}
	admitted, err := waitDie(ctx, p, q, "transfer", 5, putShare("k"))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- passDie(ctx, p, q, "audit", 1, readShare("k", "l")) }()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-waited:
		t.Fatalf("the older reader went past a younger admitted writer: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := passDie(ctx, p, q, "late", 7, putShare("l")); !errors.Is(err, ErrConflict) {
		t.Fatalf("younger than the waiting reader: %v, want ErrConflict", err)
	}
	admitted() // the transfer's entry applied (here: nothing to apply)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("the reader after the writer left: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not wake when the admitted writer left")
	}
}

// TestWaitWritable: a plain write waits for a transaction's lock on its
// key to go (a committed transaction's Finish a raft round behind its
// answer), and gives up, leaving the refusal to the state machine, when
// its context ends first.
func TestWaitWritable(t *testing.T) {
	p := holding(t, "txn", 1, "k")
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = p.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte("txn"), Commit: true, Succeeded: true}}})
	}()
	waitWritable(context.Background(), p, []byte("k"))
	if h, locked := p.WriteBlocker([]byte("k")); locked {
		t.Fatalf("returned while %s still locks k", h)
	}

	p = holding(t, "txn", 1, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	waitWritable(ctx, p, []byte("k"))
	if took := time.Since(start); took > readLockWait/2 {
		t.Fatalf("waited %v past its context", took)
	}
}

// TestTxnPriority: the client's priority, else the arrival time; a
// transaction that writes nothing gets no head start (it starved
// writers); a priority from beyond the last maxAge or from the future is
// bounded to the window (a node whose clock is off refuses nobody).
func TestTxnPriority(t *testing.T) {
	now := time.Unix(1000, 0)
	get := &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte("a")}}}
	put := &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte("a"), Value: []byte("v")}}}
	first := now.Add(-3 * time.Second).UnixNano()
	for name, tc := range map[string]struct {
		req  *kvpb.TxnRequest
		want int64
	}{
		"a write, no priority": {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}}, now.UnixNano()},
		"a write retried":      {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}, Priority: first}, first},
		"a read":               {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{get}}, now.UnixNano()},
		"a read retried":       {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{get}, Priority: first}, first},
		"an hour ago":          {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}, Priority: now.Add(-time.Hour).UnixNano()}, now.Add(-time.Minute).UnixNano()},
		"the oldest accepted":  {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}, Priority: now.Add(-time.Minute).UnixNano()}, now.Add(-time.Minute).UnixNano()},
		"15 min ahead":         {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}, Priority: now.Add(15 * time.Minute).UnixNano()}, now.Add(MaxPrioSkew).UnixNano()},
		"negative":             {&kvpb.TxnRequest{Success: []*kvpb.RequestOp{put}, Priority: -5}, now.Add(-time.Minute).UnixNano()},
	} {
		if got := txnPriority(tc.req, now, time.Minute); got != tc.want {
			t.Errorf("%s: priority %d, want %d", name, got, tc.want)
		}
	}
}

// neverTimeout makes the waits' timers never fire, for the test's life.
func neverTimeout(t *testing.T) {
	old := waitTimer
	waitTimer = func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }
	t.Cleanup(func() { waitTimer = old })
}

// TestWaitsWakeOnApply: with a clock that never advances (the waits'
// timers never fire, and nothing polls), each wait on a partition ends on
// the apply that releases it: a lock's holder finishing wakes an older
// transaction (wait-die), a plain write and a plain read; group 0
// recording a cut's end wakes WaitCut, and a partition applying the
// CutFinish index wakes a snapshot's waitApplied.
func TestWaitsWakeOnApply(t *testing.T) {
	neverTimeout(t)
	ctx := context.Background()
	finishLater := func(p *partition.Partition, id string) {
		go func() {
			time.Sleep(20 * time.Millisecond)
			_, _ = p.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte(id), Commit: true, Succeeded: true}}})
		}()
	}
	ends := func(name string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting 10 s after the apply that releases it", name)
		}
	}
	p := holding(t, "young", 2, "k")
	finishLater(p, "young")
	ends("an older transaction behind a younger holder", func() error {
		return passDie(ctx, p, &txn.WaitQueue{}, "old", 1, putShare("k"))
	})

	p = holding(t, "txn", 1, "k")
	finishLater(p, "txn")
	ends("a plain write behind a lock", func() error {
		waitWritable(ctx, p, []byte("k"))
		if h, locked := p.WriteBlocker([]byte("k")); locked {
			return fmt.Errorf("returned while %s still locks k", h)
		}
		return nil
	})

	p = holding(t, "txn", 1, "k")
	finishLater(p, "txn")
	ends("a plain read behind a prepared write", func() error { return waitUnlocked(ctx, p, []byte("k"), nil) })

	// Cut progress: a cut's end recorded in group 0, and the apply of the
	// CutFinish index a snapshot waits for.
	m := meta.New()
	if _, err := m.ApplyCommand(1, &internalpb.Command{Op: &internalpb.Command_CutAllocate{CutAllocate: &internalpb.CutAllocateOp{}}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = m.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_CutRecord{CutRecord: &internalpb.CutRecordOp{Cut: &kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED}}}})
	}()
	ends("a wait for a cut's end", func() error {
		c, err := WaitCut(ctx, &Node{Meta: m}, 1)
		if err == nil && c.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			err = fmt.Errorf("returned cut %v", c)
		}
		return err
	})

	p = partition.New(1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		p.SetApplied(7)
	}()
	ends("a snapshot's wait for a CutFinish index", func() error {
		return waitApplied(ctx, &Node{Partitions: map[uint64]*partition.Partition{1: p}}, 1, 7)
	})
}

// TestRecordStatusTime: a Record read's status time is the clock's, but
// never so far behind the horizon that its tombstone would not be left.
func TestRecordStatusTime(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	r := FinishedRetention.Milliseconds()
	for name, tc := range map[string]struct {
		now     time.Time
		horizon int64
		want    int64
	}{
		"no horizon":                 {now, 0, now.UnixMilli()},
		"a clock in step":            {now, now.UnixMilli() - r, now.UnixMilli()},
		"a clock ahead":              {now.Add(15 * time.Minute), now.UnixMilli() - r, now.Add(15 * time.Minute).UnixMilli()},
		"a clock behind the horizon": {now.Add(-15 * time.Minute), now.UnixMilli() - r, now.UnixMilli()},
	} {
		got := recordStatusTime(tc.now, tc.horizon)
		if got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
		if got < tc.horizon {
			t.Errorf("%s: %d is behind the horizon %d: no tombstone", name, got, tc.horizon)
		}
	}
}
