package engine

import (
	"errors"
	"fmt"
	"os"
	"sort"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/cutkv/cutkv/internal/failpoint"
)

// lockFile is the name of Pebble's directory lock (created by every Open,
// read-only included). It is not state and not part of a materialization.
const lockFile = "LOCK"

// File is one file of a materialization directory.
type File struct {
	Name string // base name in Dir
	Size int64
}

// Materialization is a checkpoint of a DB: a DB directory holding the state
// at applied index Index.
type Materialization struct {
	Index uint64
	Dir   string
	Files []File // every file of Dir (SSTs, MANIFEST, OPTIONS, markers), by name
}

// Materialize flushes the DB and checkpoints it into dst, a directory that
// must not exist. SSTs are hard links of the live DB's where the file system
// allows it, so a materialization costs what changed since the last one.
//
// Commits may continue during the call; a batch committed after the flush
// may or may not be in the checkpoint (a background flush can take it), so
// Index is read back from the checkpoint itself rather than from Applied().
// The flush blocks commits only while Pebble switches memtables; the
// checkpoint blocks none.
func (d *DB) Materialize(dst string) (Materialization, error) {
	if err := d.enter(); err != nil {
		return Materialization{}, err
	}
	defer d.life.RUnlock()
	fs := d.env.cfg.FS
	if _, err := fs.Stat(dst); err == nil {
		return Materialization{}, fmt.Errorf("%w: partition %d: %s", ErrExists, d.id, dst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return Materialization{}, fmt.Errorf("engine: partition %d: stat %s: %w", d.id, dst, err)
	}
	if err := d.flush(); err != nil {
		return Materialization{}, err
	}
	if err := failpoint.Inject(failpoint.MaterializeBeforeCheckpoint); err != nil {
		return Materialization{}, fmt.Errorf("engine: partition %d: checkpoint to %s: %w", d.id, dst, err)
	}
	if err := d.pdb.Checkpoint(dst); err != nil {
		d.setErr("checkpoint to "+dst, err)
		return Materialization{}, d.Err()
	}
	index, err := d.readCheckpointIndex(dst)
	if err != nil {
		return Materialization{}, err
	}
	files, err := listFiles(fs, dst)
	if err != nil {
		return Materialization{}, fmt.Errorf("engine: partition %d: %w", d.id, err)
	}
	return Materialization{Index: index, Dir: dst, Files: files}, nil
}

// readCheckpointIndex opens the checkpoint read-only, reads its applied
// index and closes it, removing the LOCK file the open created.
func (d *DB) readCheckpointIndex(dir string) (uint64, error) {
	v, err := OpenMaterialization(d.env, dir)
	if err != nil {
		return 0, err
	}
	index := v.Applied()
	if err := v.Close(); err != nil {
		return 0, err
	}
	return index, nil
}

// OpenMaterialization opens a materialization directory read-only. Nothing
// is written into it except Pebble's LOCK file, removed again by Close; two
// readers of one directory at once are refused by that lock.
func OpenMaterialization(env *Env, dir string) (*ReadView, error) {
	if err := env.acquire(); err != nil {
		return nil, err
	}
	opts := env.pebbleOptions(env.cfg.Logger.With("materialization", dir), dir)
	opts.ReadOnly = true
	opts.EventListener = &pebble.EventListener{}
	pdb, err := pebble.Open(dir, opts)
	if err != nil {
		env.release()
		return nil, fmt.Errorf("engine: open materialization %s: %w", dir, err)
	}
	closeFn := func() error {
		err := pdb.Close()
		env.release()
		if rerr := env.cfg.FS.Remove(env.cfg.FS.PathJoin(dir, lockFile)); err == nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("engine: close materialization %s: %w", dir, err)
		}
		return nil
	}
	applied, err := readApplied(pdb)
	if err == nil {
		if v := pdb.FormatMajorVersion(); v != FormatVersion {
			err = fmt.Errorf("%w: materialization %s has %d, want %d", ErrFormat, dir, v, FormatVersion)
		}
	}
	if err != nil {
		_ = closeFn()
		return nil, fmt.Errorf("engine: materialization %s: %w", dir, err)
	}
	return &ReadView{applied: applied, what: "materialization " + dir, r: pdb, closeFn: closeFn}, nil
}

// listFiles lists the regular files of dir by name, without the LOCK file.
func listFiles(fs vfs.FS, dir string) ([]File, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Strings(names)
	var files []File
	for _, n := range names {
		if n == lockFile {
			continue
		}
		fi, err := fs.Stat(fs.PathJoin(dir, n))
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", n, err)
		}
		if fi.IsDir() {
			continue
		}
		files = append(files, File{Name: n, Size: fi.Size()})
	}
	return files, nil
}
