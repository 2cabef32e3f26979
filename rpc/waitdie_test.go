package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func putShare(key string) *internalpb.TxnShare {
	return &internalpb.TxnShare{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(key), Value: []byte("v")}}}}}
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

// TestWaitDieGrace: a younger transaction waits finishGrace for an older
// holder, proceeds when the holder finishes within it (a decided
// transaction whose Finish is on its way), and dies after it otherwise.
func TestWaitDieGrace(t *testing.T) {
	ctx := context.Background()

	p := holding(t, "old", 1, "k")
	start := time.Now()
	err := waitDie(ctx, p, "young", 2, putShare("k"))
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("younger behind an older holder that stays: %v, want ErrConflict", err)
	}
	if took := time.Since(start); took < finishGrace {
		t.Fatalf("died after %v, before the %v grace", took, finishGrace)
	}

	p = holding(t, "old", 1, "k")
	go func() {
		time.Sleep(finishGrace / 4)
		_, _ = p.ApplyCommand(2, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{TxnId: []byte("old"), Commit: true, Succeeded: true}}})
	}()
	if err := waitDie(ctx, p, "young", 2, putShare("k")); err != nil {
		t.Fatalf("younger behind an older holder that finishes within the grace: %v, want to proceed", err)
	}

	// Other keys do not wait at all.
	p = holding(t, "old", 1, "k")
	start = time.Now()
	if err := waitDie(ctx, p, "young", 2, putShare("other")); err != nil || time.Since(start) > finishGrace/2 {
		t.Fatalf("no conflict: %v after %v", err, time.Since(start))
	}
}
