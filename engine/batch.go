package engine

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects the writes of one applied raft entry (or several). The
// setters record the first invalid argument and Commit returns it, writing
// nothing; a Batch is not safe for concurrent use.
type Batch struct {
	d   *DB
	b   *pebble.Batch
	err error
}

// NewBatch returns an empty batch. It must end with Commit or Close.
// On a closed or stopped DB the batch carries that error, which Commit
// returns.
func (d *DB) NewBatch() *Batch {
	if err := d.enter(); err != nil {
		return &Batch{d: d, err: err}
	}
	defer d.life.RUnlock()
	return &Batch{d: d, b: d.pdb.NewBatch()}
}

func (b *Batch) set(k, v []byte) {
	if b.err == nil {
		b.err = b.b.Set(k, v, nil)
	}
}

func (b *Batch) del(k []byte) {
	if b.err == nil {
		b.err = b.b.Delete(k, nil)
	}
}

func (b *Batch) key(prefix byte, id []byte) []byte {
	check := checkTxnID
	if prefix == prefixKV {
		check = checkKey
	}
	if err := check(id); err != nil {
		if b.err == nil {
			b.err = err
		}
		return nil
	}
	return makeKey(prefix, id)
}

// PutKV writes kv at key; kv.Key is not consulted.
func (b *Batch) PutKV(key []byte, kv KV) {
	if k := b.key(prefixKV, key); k != nil {
		b.set(k, encodeValue(kv))
	}
}

// DeleteKV deletes the key-value at key.
func (b *Batch) DeleteKV(key []byte) {
	if k := b.key(prefixKV, key); k != nil {
		b.del(k)
	}
}

// SetIntent records the intent of transaction id, prepared at index.
func (b *Batch) SetIntent(id []byte, index uint64, data []byte) {
	if k := b.key(prefixIntent, id); k != nil {
		b.set(k, encodeIntent(index, data))
	}
}

// DeleteIntent deletes the intent of transaction id.
func (b *Batch) DeleteIntent(id []byte) {
	if k := b.key(prefixIntent, id); k != nil {
		b.del(k)
	}
}

// SetRecord writes the record of transaction id.
func (b *Batch) SetRecord(id []byte, data []byte) {
	if k := b.key(prefixRecord, id); k != nil {
		b.set(k, data)
	}
}

// DeleteRecord deletes the record of transaction id.
func (b *Batch) DeleteRecord(id []byte) {
	if k := b.key(prefixRecord, id); k != nil {
		b.del(k)
	}
}

// SetFinished marks transaction id finished, prepared at preparedUnixMs.
func (b *Batch) SetFinished(id []byte, preparedUnixMs int64) {
	if k := b.key(prefixFinished, id); k != nil {
		b.set(k, encodeUint64(uint64(preparedUnixMs)))
	}
}

// DeleteFinished forgets finished transaction id.
func (b *Batch) DeleteFinished(id []byte) {
	if k := b.key(prefixFinished, id); k != nil {
		b.del(k)
	}
}

// SetHorizon writes the transaction horizon (unix ms).
func (b *Batch) SetHorizon(unixMs int64) {
	b.set(keyHorizon, encodeUint64(uint64(unixMs)))
}

// SetKeyCount records the number of keys after this batch (DB.KeyCount).
func (b *Batch) SetKeyCount(n uint64) {
	b.set(keyCount, encodeUint64(n))
}

// SetCutProgress writes the opaque cut progress blob.
func (b *Batch) SetCutProgress(data []byte) {
	b.set(keyCutProgress, data)
}

// Close discards an uncommitted batch. Closing twice is harmless.
func (b *Batch) Close() {
	if b.b != nil {
		_ = b.b.Close()
		b.b = nil
	}
}

// CommitPart writes the batch without an applied index, into a DB that
// has none yet (applied 0): a DB being filled in several batches (an
// image loaded into a fresh directory), whose last batch is committed
// with Commit. Like Commit it does not sync and closes the batch.
func (b *Batch) CommitPart() error {
	return b.applyWithout("partial batch", func(d *DB) error {
		if cur := d.applied.Load(); cur != 0 {
			return fmt.Errorf("%w: partition %d: a partial batch into a DB at %d", ErrAppliedNotIncreasing, d.id, cur)
		}
		return nil
	})
}

// CommitInPlace writes the batch without moving the applied index: a
// change of the state at the index it is at, for a DB rebuilt offline
// (restore resolves a cut on the state before its position). Never for
// a replica's applies, which use Commit. Like Commit it does not sync and
// closes the batch.
func (b *Batch) CommitInPlace() error {
	return b.applyWithout("batch in place", func(*DB) error { return nil })
}

// applyWithout writes the batch without touching the applied index, once
// check (called under the commit lock) allows it, and closes the batch.
func (b *Batch) applyWithout(what string, check func(*DB) error) error {
	defer b.Close()
	if b.b == nil {
		if b.err != nil {
			return b.err
		}
		return fmt.Errorf("engine: batch: %w", ErrClosed)
	}
	d := b.d
	if err := d.enter(); err != nil {
		return err
	}
	defer d.life.RUnlock()
	if b.err != nil {
		return fmt.Errorf("engine: partition %d: %s: %w", d.id, what, b.err)
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	if err := check(d); err != nil {
		return err
	}
	if err := d.pdb.Apply(b.b, pebble.NoSync); err != nil {
		d.setErr(what, err)
		return d.Err()
	}
	return nil
}

// Commit writes the batch and applied, its applied index, atomically, and
// closes the batch. applied must be above d.Applied(); otherwise, or if a
// setter was given a bad argument, nothing is written.
//
// The write is not synced (pebble.NoSync): with Pebble's WAL disabled there
// is no file to sync, and the batch becomes durable with the next flush.
// Commit does no I/O of its own, but Pebble stalls it while two full
// memtables wait for a flush.
func (b *Batch) Commit(applied uint64) error {
	defer b.Close()
	if b.b == nil {
		if b.err != nil {
			return b.err
		}
		return fmt.Errorf("engine: batch: %w", ErrClosed)
	}
	d := b.d
	if err := d.enter(); err != nil {
		return err
	}
	defer d.life.RUnlock()
	if b.err != nil {
		return fmt.Errorf("engine: partition %d: batch at %d: %w", d.id, applied, b.err)
	}
	d.commitMu.Lock()
	defer d.commitMu.Unlock()
	if cur := d.applied.Load(); applied <= cur {
		return fmt.Errorf("%w: partition %d: %d at or below %d", ErrAppliedNotIncreasing, d.id, applied, cur)
	}
	if err := b.b.Set(keyApplied, encodeUint64(applied), nil); err != nil {
		d.setErr("commit", err)
		return d.Err()
	}
	if err := d.pdb.Apply(b.b, pebble.NoSync); err != nil {
		d.setErr(fmt.Sprintf("commit at %d", applied), err)
		return d.Err()
	}
	d.applied.Store(applied)
	return nil
}
