package rpc

import (
	"context"
	"sync"

	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/txn"
)

// maxFinishBatch bounds the Finishes in one entry (a raft entry stays
// far below the proposal size limit: a Finish is ~60 bytes).
const maxFinishBatch = 256

// finishBatcher puts the Finishes that wait for one partition into one
// raft entry (TxnFinishBatchOp), the way a WAL groups commits: while an
// entry is being proposed the next Finishes queue, and they go out
// together as soon as it applied. Nothing waits on a timer: a lone
// Finish is proposed at once (a Finish held back would hold its locks
// and every cut waiting for it that long).
type finishBatcher struct {
	n *Node
	p uint64

	mu    sync.Mutex
	queue []*pendingFinish // REQUIRES: mu held
	busy  bool             // a flusher runs; it takes the queue next. REQUIRES: mu held
}

type pendingFinish struct {
	op   *internalpb.TxnFinishOp
	done chan error
}

// finish proposes op in the partition's next Finish entry and waits until
// that entry applied. The entry's version is at least every stamp in it
// (rule 4: a Finish stamped at or after a cut lies after its position).
func (b *finishBatcher) finish(ctx context.Context, op *internalpb.TxnFinishOp) error {
	f := &pendingFinish{op: op, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, f)
	flush := !b.busy
	b.busy = true
	b.mu.Unlock()
	if flush {
		go b.flush()
	}
	select {
	case err := <-f.done:
		return err
	case <-ctx.Done():
		return ctx.Err() // the entry may still apply: a Finish is idempotent
	}
}

// flush proposes the queue's Finishes, batch after batch, until the queue
// is empty.
func (b *finishBatcher) flush() {
	for {
		b.mu.Lock()
		batch := b.queue[:min(len(b.queue), maxFinishBatch)]
		b.queue = b.queue[len(batch):]
		if len(batch) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		err := b.propose(batch)
		for _, f := range batch {
			f.done <- err
		}
	}
}

func (b *finishBatcher) propose(batch []*pendingFinish) error {
	ctx, cancel := context.WithTimeout(b.n.lifetime(), finishWait)
	defer cancel()
	ops := make([]*internalpb.TxnFinishOp, 0, len(batch))
	for _, f := range batch {
		ops = append(ops, f.op)
	}
	if len(ops) > 1 {
		if err := failpoint.Inject(failpoint.TxnInFinishBatch); err != nil {
			return err // "exit" kills the leader with a batch of Finishes unproposed
		}
	}
	cmd := txn.FinishEntry(ops)
	_, err := b.n.Store.Propose(ctx, b.p, cmd)
	return err
}
