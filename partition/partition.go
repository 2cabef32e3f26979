package partition

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/engine"
	"github.com/cutkv/cutkv/internal/notify"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// ErrUnknownCommand is returned by Apply for a command it does not know;
// the raft loop treats it as a broken invariant (the log was written by a
// newer version).
var ErrUnknownCommand = errors.New("partition: unknown command")

// KV is one committed key-value. Version counts writes since creation;
// CreateIndex and ModIndex are raft indexes of this partition.
type KV struct {
	Key         []byte
	Value       []byte
	Version     int64
	CreateIndex uint64
	ModIndex    uint64
}

func lessKV(a, b *KV) bool { return bytes.Compare(a.Key, b.Key) < 0 }

// Result is what applying one command produced, handed to the proposer.
type Result struct {
	// Prev is the key-value before the write, nil if the key was absent.
	Prev *KV
	// Deleted is 1 when a Delete removed a key.
	Deleted int64
	// LockedBy names the transaction whose lock refused a plain write;
	// the write was not applied.
	LockedBy string
}

// Partition is the state of one partition. The zero value is not usable;
// call New.
type Partition struct {
	id uint64

	mu  sync.RWMutex
	kvs kvStore // REQUIRES: mu held for access
	// failed is the first store error of an apply (fail); REQUIRES: mu
	// held.
	failed error
	// rows are the rows changed by the entry being applied, and cutGen
	// the cut progress's generation last stored, when the store is
	// durable (rows.go); rows is nil otherwise. REQUIRES: mu held.
	rows    map[rowKey]struct{}
	cutGen  uint64
	applied uint64 // REQUIRES: mu held for access
	// Transactions (REQUIRES: mu held for access): locks and intents of
	// transactions prepared here, and the records of transactions whose
	// record partition this is.
	locks   *txn.LockTable
	intents map[string]*Intent
	records map[string]*internalpb.TxnDecideOp
	// finished remembers transactions finished here, so a prepare that
	// arrives after its Finish (a delayed proposal) cannot lock again:
	// each id with its prepare time (Unix ms; 0 unknown), including the
	// tombstones of aborts that came before any prepare (txn.go,
	// "Transaction ids"). horizon refuses prepares stamped before it, so
	// ids prepared before it are dropped (TxnHorizonOp).
	finished map[string]int64
	horizon  int64
	// cut is the consistent cut's progress (REQUIRES: mu held).
	cut *cut.Progress
	// onCutReady, when set, is called (under mu: it must not block) when a
	// running cut's active set becomes empty, so the leader can propose
	// CutFinish at once.
	onCutReady func(partition uint64)

	hashes hashes

	// release, when set, runs once after the store is closed (a scratch
	// partition's own Env and directory, OpenCheckpointScratch); closed
	// makes Close idempotent. Guarded by mu.
	release func() error
	closed  bool

	// changed wakes the waiters at the next apply (Changed). Guarded by
	// mu.
	changed notify.Signal
}

// Changed returns a channel that is closed when the next entry applies
// (a command, or an index recorded by SetApplied). Waiters take it before
// they look at the state and wait on it when what they need is not there
// yet: the apply that changes the state wakes them, so no waiter polls,
// and none misses a change made between its look and its wait.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed.Wait()
}

// New returns an empty partition held in memory (Open keeps one on
// disk).
func New(id uint64) *Partition { return newWith(id, newKVs(id)) }

// newWith returns an empty partition on store s.
func newWith(id uint64, s kvStore) *Partition {
	p := &Partition{
		id:      id,
		kvs:     s,
		locks:   txn.NewLockTable(),
		intents: map[string]*Intent{},
		records: map[string]*internalpb.TxnDecideOp{},

		finished: map[string]int64{},
		cut:      cut.NewProgress(),
	}
	if p.kvs.durable() {
		p.rows = map[rowKey]struct{}{}
	}
	return p
}

// newKVs makes the store of a partition made by New: in memory. The
// package's tests run again with a Pebble store in its place
// (CUTKV_PARTITION_STORE=pebble).
var newKVs = func(uint64) kvStore { return newMemKVs() }

// Close releases the partition's store (a Pebble's files); the partition
// is not used after it. Closing it again does nothing.
func (p *Partition) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.kvs.close()
	if p.release != nil {
		err = errors.Join(err, p.release())
	}
	return err
}

// Flush makes what the partition applied durable in its store (a Pebble
// flush); a memory store has nothing to do.
func (p *Partition) Flush() error {
	p.mu.RLock()
	s, ok := p.kvs.(*pebbleKVs)
	p.mu.RUnlock()
	if !ok {
		return nil
	}
	return s.db.Flush()
}

// StoreMetrics returns the Pebble metrics of the partition's store; ok is
// false for a partition kept in memory.
func (p *Partition) StoreMetrics() (m engine.Metrics, ok bool, err error) {
	p.mu.RLock()
	s, ok := p.kvs.(*pebbleKVs)
	p.mu.RUnlock()
	if !ok {
		return engine.Metrics{}, false, nil
	}
	m, err = s.db.Metrics()
	return m, true, err
}

// Err returns the store error that stopped the partition, nil while it
// runs.
func (p *Partition) Err() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.failed
}

// SetCutReady sets the function called when a running cut can finish.
// Set it before the partition applies entries.
func (p *Partition) SetCutReady(f func(partition uint64)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onCutReady = f
}

// ID returns the partition id.
func (p *Partition) ID() uint64 { return p.id }

// Applied returns the index of the last applied entry.
func (p *Partition) Applied() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.applied
}

// Len returns the number of keys.
func (p *Partition) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.kvs.len()
}

// Apply applies a plain write (or a no-op) at index and returns its
// Result; other commands go through ApplyCommand. Entries must come in
// increasing index order; an index at or below Applied is ignored (it is
// already in the state). Values stored are copies owned by the partition.
func (p *Partition) Apply(index uint64, cmd *internalpb.Command) (Result, error) {
	res, err := p.ApplyCommand(index, cmd)
	r, _ := res.(Result)
	return r, err
}

// SetApplied records that index was applied when its entry changed no key
// (raft's empty entries and configuration changes).
func (p *Partition) SetApplied(index uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if index > p.applied && p.failed == nil {
		p.kvs.begin()
		if err := p.kvs.commit(index); err != nil {
			p.fail(err)
			return
		}
		p.applied = index
		p.changed.Notify()
	}
}

func (p *Partition) putLocked(index uint64, key, value []byte) Result {
	kv := &KV{Key: bytes.Clone(key), Value: bytes.Clone(value), Version: 1, CreateIndex: index, ModIndex: index}
	prev, ok := p.getLocked(key)
	if ok {
		kv.Version = prev.Version + 1
		kv.CreateIndex = prev.CreateIndex
	}
	if p.failed != nil {
		return Result{} // the read failed: ok says nothing
	}
	if err := p.kvs.set(kv, ok); err != nil {
		p.fail(err)
	}
	if ok {
		return Result{Prev: prev}
	}
	return Result{}
}

func (p *Partition) deleteLocked(key []byte) Result {
	prev, ok, err := p.kvs.del(key)
	if err != nil {
		p.fail(err)
	}
	if !ok {
		return Result{}
	}
	return Result{Prev: prev, Deleted: 1}
}

// getLocked reads key inside an apply; a store error stops the partition
// (fail). REQUIRES: mu held.
func (p *Partition) getLocked(key []byte) (*KV, bool) {
	kv, ok, err := p.kvs.get(key)
	if err != nil {
		p.fail(err)
		return nil, false
	}
	return kv, ok
}

// scanLocked is Scan inside an apply. REQUIRES: mu held.
func (p *Partition) scanLocked(start, end []byte, limit int) ([]*KV, bool) {
	kvs, more, err := scanKVs(p.kvs, start, end, limit)
	if err != nil {
		p.fail(err)
	}
	return kvs, more
}

// fail records the first store error met inside an apply: the entry's
// ApplyCommand returns it, its writes are not committed, and every later
// apply is refused (a disk error is sticky, like the WAL's). REQUIRES: mu
// held.
func (p *Partition) fail(err error) {
	if p.failed == nil {
		p.failed = fmt.Errorf("partition %d: %w", p.id, err)
	}
}

// Get returns the key-value for key. The returned value must not be
// modified (it may be shared with the partition). An error is the
// store's (a disk error): the partition stops applying too.
func (p *Partition) Get(key []byte) (*KV, bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.kvs.get(key)
}

// Scan returns up to limit key-values with start <= key < end in key order
// (end nil = no bound) and whether more exist in range. limit <= 0 means no
// limit. The returned values must not be modified.
func (p *Partition) Scan(start, end []byte, limit int) (kvs []*KV, more bool, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return scanKVs(p.kvs, start, end, limit)
}

// Proto returns kv as the API's KeyValue, without the value when keysOnly.
// The bytes are shared, not copied (a KV is never modified).
func (kv *KV) Proto(keysOnly bool) *kvpb.KeyValue {
	out := &kvpb.KeyValue{Key: kv.Key, Version: kv.Version, CreateIndex: kv.CreateIndex, ModIndex: kv.ModIndex}
	if !keysOnly {
		out.Value = kv.Value
	}
	return out
}

// ApplyCommand applies the command of the raft entry at index
// (raftstore.StateMachine). The result depends on the command: a Result
// for a plain write, a Vote, OnePhaseResult or *internalpb.TxnDecideOp for
// a transaction's, whether the cut closed (bool) for a CutFinish, the
// entry's index (uint64) for a HashOp. Every
// command first passes its cut version to the cut progress (DESIGN.md,
// consistent cut rule 2).
func (p *Partition) ApplyCommand(index uint64, cmd *internalpb.Command) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if index <= p.applied {
		if isTxnCommand(cmd) {
			return nil, nil
		}
		return Result{}, nil // already in the state
	}
	if p.failed != nil {
		return nil, p.failed
	}
	p.kvs.begin()
	wasReady := p.cut.ReadyToFinish()
	p.cut.Observe(index, cmd.GetCutVersion(), p.intentIDsLocked)
	var res any
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_Put:
		r := Result{}
		if h, locked := p.locks.WriteBlocker(op.Put.GetKey()); locked {
			r.LockedBy = h
		} else {
			r = p.putLocked(index, op.Put.GetKey(), op.Put.GetValue())
		}
		res = r
	case *internalpb.Command_Delete:
		r := Result{}
		if h, locked := p.locks.WriteBlocker(op.Delete.GetKey()); locked {
			r.LockedBy = h
		} else {
			r = p.deleteLocked(op.Delete.GetKey())
		}
		res = r
	case *internalpb.Command_Noop, *internalpb.Command_CutStart, nil:
		res = Result{}
	case *internalpb.Command_CutFinish:
		res = p.cut.ApplyFinish(index, op.CutFinish)
	case *internalpb.Command_Hash:
		p.hashLocked(index)
		res = index
	default:
		if !isTxnCommand(cmd) {
			return nil, fmt.Errorf("%w %T at partition %d index %d", ErrUnknownCommand, op, p.id, index)
		}
		res = p.applyTxnLocked(index, cmd)
	}
	if p.failed == nil && p.rows != nil {
		if err := p.writeRowsLocked(); err != nil {
			p.fail(err)
		}
	}
	if p.failed == nil {
		if err := p.kvs.commit(index); err != nil {
			p.fail(err)
		}
	}
	if p.failed != nil {
		return nil, p.failed
	}
	p.applied = index
	p.changed.Notify()
	if !wasReady && p.cut.ReadyToFinish() && p.onCutReady != nil {
		p.onCutReady(p.id)
	}
	return res, nil
}
