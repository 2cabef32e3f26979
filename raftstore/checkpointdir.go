package raftstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/internal/failpoint"
)

// A state machine on Pebble (package partition) materializes as a
// checkpoint directory (checkpoint/dir.go) instead of an encoded image:
// the loop only notes the applied index; a Pebble flush and checkpoint,
// hard links of the SSTs, run in the background while applies go on, and
// the materialization is named by the index read back from the
// checkpoint. Consumers that need a materialization file (a follower's
// raft snapshot, a snapshot upload) get one encoded from a clone of the
// directory (MaterializationFile); the directory itself is never opened.

// Checkpointer is a StateMachine that can keep its materializations as
// checkpoint directories.
type Checkpointer interface {
	// Checkpoints says whether it does (a partition kept in memory does
	// not).
	Checkpoints() bool
	// Checkpoint makes durable and checkpoints the applied state into
	// dst, a directory that must not exist, and returns the applied
	// index the checkpoint holds (at least the one applied at the call).
	// Safe to call outside the loop, while entries are applied.
	Checkpoint(dst string) (uint64, error)
	// MaterializeCheckpoint returns the state held by the checkpoint
	// directory ckpt, read through a clone made in scratch (a directory
	// that must not exist) that Close removes.
	MaterializeCheckpoint(ckpt, scratch string) (Image, error)
	// InstallCheckpoint replaces the whole state with the checkpoint
	// ckpt's. A checkpoint that does not open leaves the state unchanged.
	InstallCheckpoint(ckpt string) error
}

// clonesDirName is the subdirectory of MaterializeDir where checkpoint
// directories are cloned to be read; emptied at Open.
const clonesDirName = "clones"

func (s *Store) clonesDir() string { return filepath.Join(s.cfg.MaterializeDir, clonesDirName) }

// newClonePath returns a path in clonesDir that does not exist yet.
func (s *Store) newClonePath(group uint64) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return filepath.Join(s.clonesDir(), fmt.Sprintf("p%04d-%s", group, hex.EncodeToString(b[:])))
}

// checkpointerOf returns g's state machine as a Checkpointer when it keeps
// its materializations as checkpoint directories.
func checkpointerOf(sm StateMachine) (Checkpointer, bool) {
	c, ok := sm.(Checkpointer)
	if !ok || !c.Checkpoints() {
		return nil, false
	}
	return c, true
}

// writeCheckpoint writes the checkpoint directory of group g, whose state
// was at least at applied when the loop started it, and reports the
// index and term it holds. Outside the loop.
func (s *Store) writeCheckpoint(g *group, cp Checkpointer, applied uint64) (idx, term uint64, size int64, err error) {
	start := time.Now()
	tmp := checkpoint.TempDir(s.cfg.MaterializeDir, checkpoint.Meta{Partition: g.id, Index: applied})
	idx, err = cp.Checkpoint(tmp)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return 0, 0, 0, err
	}
	// The loop may run fn after doSync gave up on a stopping store, so fn
	// shares no variable with this function's returns: it reads at and
	// writes got, which is read only once fn has run.
	at, got := idx, uint64(0)
	if derr := s.doSync(func() error {
		t, err := g.storage.Term(at)
		if err != nil {
			return fmt.Errorf("raftstore: group %d: term of checkpointed index %d: %w", g.id, at, err)
		}
		got = t
		return nil
	}); derr != nil {
		_ = os.RemoveAll(tmp)
		return 0, 0, 0, derr
	}
	term = got
	if err := failpoint.Inject(failpoint.MaterializeBeforeRename); err != nil {
		return 0, 0, 0, err
	}
	prev := ""
	if mats, err := s.Materializations(g.id); err == nil {
		for _, m := range mats {
			if m.Dir && m.Index < idx {
				prev = filepath.Join(s.cfg.MaterializeDir, m.Name())
			}
		}
	}
	m, files, err := checkpoint.Seal(tmp, checkpoint.Meta{Partition: g.id, Index: idx, Term: term}, prev)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return 0, 0, 0, err
	}
	for _, f := range files {
		size += f.Size
	}
	s.log.Info("materialized", "group", g.id, "index", idx, "checkpoint", m.Name(), "files", len(files), "bytes", size, "took", time.Since(start))
	return idx, term, size, nil
}

// doSync runs fn in the loop and returns its error (or the loop's).
func (s *Store) doSync(fn func() error) error {
	ch := make(chan error, 1)
	if err := s.do(context.Background(), func() { ch <- fn() }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-s.stopc: // queued, but the loop may exit without running it
		return ErrStopped
	}
}

// FindMaterialization returns group's materialization at index (the
// checkpoint directory when a file of the same index exists too: the one
// Materializations lists last); index 0 asks for the newest.
func (s *Store) FindMaterialization(group, index uint64) (checkpoint.Materialization, error) {
	mats, err := s.Materializations(group)
	if err != nil {
		return checkpoint.Materialization{}, err
	}
	for i := len(mats) - 1; i >= 0; i-- {
		if mats[i].Index == index || index == 0 {
			return mats[i], nil
		}
	}
	return checkpoint.Materialization{}, fmt.Errorf("raftstore: group %d: no materialization at index %d on this node: %w", group, index, os.ErrNotExist)
}

// CheckpointPath returns where the checkpoint directory of group at index
// lives (or would live) on this node.
func (s *Store) CheckpointPath(group, index uint64) string {
	return filepath.Join(s.cfg.MaterializeDir, checkpoint.Materialization{Partition: group, Index: index, Dir: true}.Name())
}

// MaterializationFile returns group's materialization at index as the
// bytes of a materialization file (checkpoint.Write's format): the file
// itself, or for a checkpoint directory an image encoded from a clone of
// it as the reader is read. Pin the group first.
func (s *Store) MaterializationFile(group, index uint64) (io.ReadCloser, error) {
	m, err := s.FindMaterialization(group, index)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(s.cfg.MaterializeDir, m.Name())
	if !m.Dir {
		return os.Open(path)
	}
	g := s.groups[group]
	if g == nil {
		return nil, fmt.Errorf("%w %d", ErrUnknownGroup, group)
	}
	cp, ok := g.sm.(Checkpointer)
	if !ok {
		return nil, fmt.Errorf("raftstore: group %d: %s is a checkpoint directory, and this state machine cannot read one", group, path)
	}
	meta, _, err := checkpoint.ReadManifest(path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.clonesDir(), 0o750); err != nil {
		return nil, fmt.Errorf("raftstore: %w", err)
	}
	img, err := cp.MaterializeCheckpoint(path, s.newClonePath(group))
	if err != nil {
		return nil, err
	}
	if img.Applied() != meta.Index {
		img.Close()
		return nil, fmt.Errorf("%w: %s holds the state at %d, its manifest says %d", checkpoint.ErrCorrupt, path, img.Applied(), meta.Index)
	}
	pr, pw := io.Pipe()
	go func() {
		err := checkpoint.Stream(pw, meta, img.Encode)
		img.Close()
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// OpenMaterialization opens group's materialization at index for reading
// its state, whichever form it is kept in (MaterializationFile).
func (s *Store) OpenMaterialization(group, index uint64) (*checkpoint.Reader, error) {
	rc, err := s.MaterializationFile(group, index)
	if err != nil {
		return nil, err
	}
	r, err := checkpoint.NewReader(rc, checkpoint.Materialization{Partition: group, Index: index}.Name())
	if err != nil {
		rc.Close()
		return nil, err
	}
	return r, nil
}

// loadCheckpointDir checks the checkpoint directory path and, unless the
// state machine is already at or past its index (ahead), verifies every
// file's hash and installs it. A state already past it only checks the
// manifest and the files' sizes: reading the whole state at every start
// would make a restart cost its size, and whoever reads the files later
// (an upload, a follower receiving them) checks their hashes.
func loadCheckpointDir(sm StateMachine, path string, ahead uint64) (checkpoint.Meta, error) {
	meta, _, err := checkpoint.CheckDir(path)
	if err != nil || ahead >= meta.Index {
		return meta, err
	}
	if _, _, err := checkpoint.VerifyDir(path); err != nil {
		return meta, err
	}
	cp, ok := sm.(Checkpointer)
	if !ok || !cp.Checkpoints() {
		return meta, errors.New("a checkpoint directory, which only a partition kept in Pebble loads (--storage=pebble)")
	}
	return meta, cp.InstallCheckpoint(path)
}
