package partition

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/cutkv/cutkv/engine"
)

// A partition on Pebble materializes as a Pebble checkpoint (engine's
// Materialize: a flush, then hard links of its SSTs), not as an encoded
// image: the cost of a materialization is the files flushed since the
// last one. A checkpoint directory is never opened read-write: it is read
// through a clone (engine.Clone), which links the SSTs and copies the
// small files an open DB writes to.

// ErrInMemory: the partition keeps its state in memory, which has no
// checkpoints (its materializations are image files).
var ErrInMemory = errors.New("partition: the state is kept in memory, not in Pebble")

// pebbleStore returns p's Pebble store, or ErrInMemory.
func (p *Partition) pebbleStore() (*pebbleKVs, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.kvs.(*pebbleKVs)
	if !ok {
		return nil, fmt.Errorf("%w: partition %d", ErrInMemory, p.id)
	}
	return s, nil
}

// Checkpoints says whether the partition materializes as checkpoints (it
// is on Pebble).
func (p *Partition) Checkpoints() bool {
	_, err := p.pebbleStore()
	return err == nil
}

// Checkpoint flushes the partition's state and checkpoints it into dst, a
// directory that must not exist, and returns the applied index the
// checkpoint holds (read back from it: at least the index applied when
// Checkpoint was called). Applies go on meanwhile. A store error is
// sticky: later applies fail with it.
func (p *Partition) Checkpoint(dst string) (uint64, error) {
	s, err := p.pebbleStore()
	if err != nil {
		return 0, err
	}
	m, err := s.db.Materialize(dst)
	if err != nil {
		return 0, fmt.Errorf("partition %d: %w", p.id, err)
	}
	return m.Index, nil
}

// OpenCheckpoint opens the checkpoint directory ckpt of partition id as a
// partition of its own, through a clone made in scratch (a directory that
// must not exist). Close it, then remove scratch.
func OpenCheckpoint(env *engine.Env, ckpt, scratch string, id uint64) (*Partition, error) {
	if err := engine.Clone(env.Config().FS, ckpt, scratch); err != nil {
		return nil, err
	}
	q, err := Open(env, scratch, id)
	if err != nil {
		_ = env.Config().FS.RemoveAll(scratch)
		return nil, fmt.Errorf("partition %d: checkpoint %s: %w", id, ckpt, err)
	}
	return q, nil
}

// CompactionOutput says whether the SST named name, a file of this
// partition's Pebble or of a checkpoint of it, was written by one of its
// compactions since it opened (engine.DB.CompactionOutput); false in
// memory.
func (p *Partition) CompactionOutput(name string) bool {
	s, err := p.pebbleStore()
	return err == nil && s.db.CompactionOutput(name)
}

// scratchCacheSize is the block cache of a scratch partition's own Env
// (OpenCheckpointScratch): room for its memtables, not a working set.
const scratchCacheSize = 16 << 20

// OpenCheckpointScratch opens the checkpoint directory ckpt of partition
// id as a partition of its own, on an Env of its own (a small cache, the
// default file system, Pebble's messages to logger), through a hard-link
// clone made in scratch (a directory that must not exist, on ckpt's file
// system, so that the SSTs are links, not copies): a past state that
// entries can be replayed onto while the checkpoint itself is never
// opened. Closing the partition closes its Env and removes scratch.
func OpenCheckpointScratch(ckpt, scratch string, id uint64, logger *slog.Logger) (*Partition, error) {
	env, err := engine.NewEnv(engine.EnvConfig{CacheSize: scratchCacheSize, Logger: logger})
	if err != nil {
		return nil, err
	}
	q, err := OpenCheckpoint(env, ckpt, scratch, id)
	if err != nil {
		return nil, errors.Join(err, env.Close())
	}
	q.release = func() error { return errors.Join(env.Close(), env.Config().FS.RemoveAll(scratch)) }
	return q, nil
}

// OpenCheckpointClone opens the checkpoint ckpt of this partition as a
// partition of its own on this partition's Env, through a clone made in
// scratch (see OpenCheckpoint): a past state to replay entries onto (a
// full snapshot's base) without holding it in memory.
func (p *Partition) OpenCheckpointClone(ckpt, scratch string) (*Partition, error) {
	s, err := p.pebbleStore()
	if err != nil {
		return nil, err
	}
	return OpenCheckpoint(s.db.Env(), ckpt, scratch, p.id)
}

// CheckpointImage returns the image of the checkpoint ckpt of this
// partition (for a raft snapshot sent as an image, or an upload), read
// through a clone in scratch that closing the image removes.
func (p *Partition) CheckpointImage(ckpt, scratch string) (*Image, error) {
	s, err := p.pebbleStore()
	if err != nil {
		return nil, err
	}
	env := s.db.Env()
	q, err := OpenCheckpoint(env, ckpt, scratch, p.id)
	if err != nil {
		return nil, err
	}
	im := q.Image()
	im.release = func() {
		_ = q.Close()
		_ = env.Config().FS.RemoveAll(scratch)
	}
	if im.err != nil {
		err := im.err
		im.Close()
		return nil, err
	}
	return im, nil
}

// InstallCheckpoint replaces the partition's state with the checkpoint
// ckpt's: a clone of it beside the live directory, opened to check it,
// then swapped in. A clone that does not open leaves the partition as it
// was.
func (p *Partition) InstallCheckpoint(ckpt string) error {
	s, err := p.pebbleStore()
	if err != nil {
		return err
	}
	env, dir := s.db.Env(), s.db.Dir()
	fs := env.Config().FS
	next := dir + ".load"
	if err := fs.RemoveAll(next); err != nil {
		return err
	}
	q, err := OpenCheckpoint(env, ckpt, next, p.id)
	if err != nil {
		return err
	}
	if err := q.Close(); err != nil {
		_ = fs.RemoveAll(next)
		return fmt.Errorf("partition %d: checkpoint %s: %w", p.id, ckpt, err)
	}
	return p.swapIn(s, next)
}
