package rpc

import (
	"context"
	"sync"
	"time"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
)

// Transaction records are dropped in batches: one TxnForget entry per
// record partition every forgetDelay (or forgetBatch ids), not one raft
// entry per transaction.
const (
	forgetDelay = time.Second
	forgetBatch = 1024
	forgetWait  = 10 * time.Second
)

// forgetter collects, on the coordinator, the transactions whose Finish
// every participant applied, by record partition, and has their records
// dropped.
type forgetter struct {
	mu      sync.Mutex
	pending map[uint64][][]byte // by record partition
	armed   bool
}

// Forget has the record of transaction id on partition p dropped, in the
// next batch: every participant applied its Finish (the coordinator's
// driver and recovery call it).
func (n *Node) Forget(p uint64, id []byte) { n.forget.add(n, p, id) }

// add queues transaction id's record on partition p for forgetting.
func (f *forgetter) add(n *Node, p uint64, id []byte) {
	f.mu.Lock()
	if f.pending == nil {
		f.pending = map[uint64][][]byte{}
	}
	f.pending[p] = append(f.pending[p], id)
	full := len(f.pending[p]) >= forgetBatch
	arm := !f.armed && !full
	if arm {
		f.armed = true
	}
	f.mu.Unlock()
	switch {
	case full:
		f.flush(n, p)
	case arm:
		time.AfterFunc(forgetDelay, func() { f.flushAll(n) })
	}
}

func (f *forgetter) flushAll(n *Node) {
	f.mu.Lock()
	f.armed = false
	parts := make([]uint64, 0, len(f.pending))
	for p := range f.pending {
		parts = append(parts, p)
	}
	f.mu.Unlock()
	for _, p := range parts {
		f.flush(n, p)
	}
}

// flush sends partition p's pending ids in Forgets of at most
// forgetBatch ids (the participant's door refuses more).
func (f *forgetter) flush(n *Node, p uint64) {
	f.mu.Lock()
	ids := f.pending[p]
	delete(f.pending, p)
	f.mu.Unlock()
	for len(ids) > 0 {
		batch := ids[:min(len(ids), forgetBatch)]
		ids = ids[len(batch):]
		ctx, cancel := context.WithTimeout(n.lifetime(), forgetWait)
		// callLeader follows leader changes until forgetWait; a batch that
		// still fails is dropped, and its records stay (memory only).
		_, _ = CallParticipant(ctx, n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.ForgetResponse, error) {
			return c.Forget(cctx, &internalpb.ForgetRequest{Partition: p, Op: &internalpb.TxnForgetOp{TxnIds: batch}})
		})
		cancel()
	}
}
