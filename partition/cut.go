package partition

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/txn"
)

// ErrNoHash: no hash was taken at the index asked for (it was not a
// HashOp entry, or the hash was evicted).
var ErrNoHash = errors.New("partition: no hash at that index")

// keepHashes bounds the hashes a partition remembers.
const keepHashes = 16

// intentIDsLocked lists the prepared, unfinished transactions. REQUIRES: mu held.
func (p *Partition) intentIDsLocked() []string {
	out := make([]string, 0, len(p.intents))
	for id := range p.intents {
		out = append(out, id)
	}
	return out
}

// CutVersion returns the newest cut whose position is in the applied log.
func (p *Partition) CutVersion() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cut.Version()
}

// CutPos returns the position of the newest cut in the applied log (0:
// none yet).
func (p *Partition) CutPos() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cut.Pos()
}

// CutPending returns the CutFinish the leader should propose now, if any.
func (p *Partition) CutPending() (*internalpb.CutFinishOp, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cut.Pending()
}

// CutProposal returns what this partition's leader proposes for the cut
// when the node knows version known (cut.Progress.Proposal), nil if
// nothing.
func (p *Partition) CutProposal(known uint64) *internalpb.Command {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cut.Proposal(known)
}

// CutResult returns how cut v ended here, if CutFinish(v) was applied.
func (p *Partition) CutResult(v uint64) (cut.Finished, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cut.Result(v)
}

// CutActive returns the running cut's version and the transactions it
// waits for (version 0: none runs).
func (p *Partition) CutActive() (uint64, []string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.cut.Running() {
		return 0, nil
	}
	return p.cut.Version(), p.cut.Active()
}

// ResolveAtCut turns the state after the entries before a cut's position
// into the state at the cut (DESIGN.md, consistent cut rule 5): the writes
// of the before set's transactions are applied (their chosen branch), and
// every other intent, lock, transaction record and finished id is dropped.
// Used on a partition rebuilt from the log (the cut verifier, restore; in
// memory, or on Pebble in a scratch directory), never on a live replica.
func (p *Partition) ResolveAtCut(before []*internalpb.CutTxn) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, onPebble := p.kvs.(*pebbleKVs)
	if onPebble {
		// A partition rebuilt in a scratch directory (a checkpoint base):
		// the resolution is one batch at the index it is at.
		ps.begin()
	}
	for _, t := range before {
		in := p.intents[string(t.GetTxnId())]
		if in == nil {
			return fmt.Errorf("partition %d: before-set transaction %x has no intent at the cut", p.id, t.GetTxnId())
		}
		ops := in.Op.GetShare().GetFailure()
		if t.GetSucceeded() {
			ops = in.Op.GetShare().GetSuccess()
		}
		p.writeLocked(p.applied, ops)
	}
	p.touchAll()
	p.intents = map[string]*Intent{}
	p.locks = txn.NewLockTable()
	p.records = map[string]*internalpb.TxnDecideOp{}
	p.finished = map[string]int64{}
	p.horizon = 0
	p.cut = cut.NewProgress()
	if onPebble {
		if err := p.writeRowsLocked(); err != nil {
			p.fail(err)
			return err
		}
		if err := ps.commitInPlace(); err != nil {
			p.fail(err)
			return err
		}
	}
	return nil
}

// Each returns the committed key-values in key order, calling fn until it
// returns false. It holds the read lock throughout.
func (p *Partition) Each(fn func(kv *KV) bool) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.kvs.ascend(nil, fn)
}

// hashes remembers the state hashes HashOp entries took.
type hashes struct {
	mu  sync.Mutex
	by  map[uint64]hashResult // by index; pending while computing
	ord []uint64
}

type hashResult struct {
	done bool
	hash uint64
	keys uint64
	err  error
}

// hashLocked takes a copy-on-write copy of the state at index and hashes
// it in the background, so that the apply loop does not wait for it.
// REQUIRES: mu held.
func (p *Partition) hashLocked(index uint64) {
	view, verr := p.kvs.view()
	ids := p.intentIDsLocked()
	sort.Strings(ids)
	h := &p.hashes
	h.mu.Lock()
	if h.by == nil {
		h.by = map[uint64]hashResult{}
	}
	h.by[index] = hashResult{}
	h.ord = append(h.ord, index)
	if len(h.ord) > keepHashes {
		delete(h.by, h.ord[0])
		h.ord = h.ord[1:]
	}
	h.mu.Unlock()
	go func() {
		var sum, keys uint64
		err := verr
		if err == nil {
			sum, keys, err = hashState(view, ids)
			view.close()
		}
		h.mu.Lock()
		if _, ok := h.by[index]; ok {
			h.by[index] = hashResult{done: true, hash: sum, keys: keys, err: err}
		}
		h.mu.Unlock()
	}()
}

// hashState hashes the key-values (key, value, version, create and mod
// index) and the prepared transactions' ids.
func hashState(view kvView, intents []string) (sum, keys uint64, err error) {
	f := fnv.New64a()
	var b [8]byte
	put := func(x uint64) { binary.BigEndian.PutUint64(b[:], x); f.Write(b[:]) }
	err = view.ascend(nil, func(kv *KV) bool {
		put(uint64(len(kv.Key)))
		f.Write(kv.Key)
		put(uint64(len(kv.Value)))
		f.Write(kv.Value)
		put(uint64(kv.Version))
		put(kv.CreateIndex)
		put(kv.ModIndex)
		keys++
		return true
	})
	if err != nil {
		return 0, 0, err
	}
	for _, id := range intents {
		put(uint64(len(id)))
		f.Write([]byte(id))
	}
	return f.Sum64(), keys, nil
}

// HashAt waits until the hash taken at index (by a HashOp entry) is
// computed and returns it with the number of keys. ErrNoHash: this replica
// applied index without taking a hash there. An admin path: it polls.
func (p *Partition) HashAt(ctx context.Context, index uint64) (sum, keys uint64, err error) {
	h := &p.hashes
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		// The applied index is read first: the Hash entry records its
		// slot before the apply raises the index, so a slot missing after
		// the index was seen past it is really missing (read the other way
		// round, an apply in between looked like a missing hash).
		applied := p.Applied()
		h.mu.Lock()
		r, ok := h.by[index]
		h.mu.Unlock()
		if ok && r.done {
			return r.hash, r.keys, r.err
		}
		if !ok && applied >= index {
			return 0, 0, fmt.Errorf("%w %d of partition %d", ErrNoHash, index, p.id)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-t.C:
		}
	}
}
