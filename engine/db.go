package engine

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// FormatVersion is the Pebble format major version of every partition DB.
// It is pinned, never "newest": replicas exchange materializations as DB
// directories, so the format must be the same cluster-wide. Raising it is a
// cluster upgrade step.
const FormatVersion = pebble.FormatTableFormatV6

// MemTableSize is each DB's memtable size. Small, because a node holds many
// partitions and every memtable is reserved in the shared cache; Pebble
// stalls a DB's commits while two full memtables wait for a flush.
const MemTableSize = 4 << 20

// DB is the state of one partition replica. Its methods are safe for
// concurrent use; Commit calls are serialized.
type DB struct {
	id  uint64
	dir string
	env *Env
	log *slog.Logger
	pdb *pebble.DB

	// life is held shared by every call that uses pdb and exclusively by
	// Close, because Pebble panics on use after close.
	life   sync.RWMutex
	closed bool // REQUIRES: life held

	commitMu sync.Mutex // serializes Commit
	applied  atomic.Uint64

	errMu   sync.Mutex
	err     error         // sticky; first failure wins
	stopped chan struct{} // closed when err is set

	viewsMu sync.Mutex
	views   map[*ReadView]struct{}

	// compacted holds the SSTs this DB's compactions wrote since it opened
	// (by file name), for the snapshot upload's report of the bytes that
	// compactions, not new writes, made it send (CompactionOutput).
	// Bounded: the oldest names go first.
	compactedMu sync.Mutex
	compacted   map[string]struct{}
	compactOrd  []string
}

// maxCompactedNames bounds DB.compacted: far more SSTs than a DB holds at
// once, so a file of a kept checkpoint is still known.
const maxCompactedNames = 1 << 16

// pebbleOptions are the options of the DB (or materialization) in dir.
func (e *Env) pebbleOptions(log *slog.Logger, dir string) *pebble.Options {
	o := &pebble.Options{
		FS:                          e.cfg.FS,
		Cache:                       e.cache,
		FileCache:                   e.fileCache,
		MaxOpenFiles:                e.cfg.MaxOpenFiles,
		DisableWAL:                  true,
		MemTableSize:                MemTableSize,
		MemTableStopWritesThreshold: 2,
		FormatMajorVersion:          FormatVersion,
		CompactionConcurrencyRange:  func() (int, int) { return 1, 1 },
		Logger:                      pebbleLogger{l: log, dir: dir, fatal: e.cfg.Fatal},
	}
	setFilters(o)
	return o
}

// setFilters gives every level's SSTs a bloom filter (10 bits, about 1 %
// false positives, 1.25 bytes a key): applying a put reads the key's
// previous version first, and a point read skips the files that do not
// hold the key instead of seeking in each one's index and data blocks.
func setFilters(o *pebble.Options) {
	o.Levels[0].FilterPolicy = bloom.FilterPolicy(10) // the levels below inherit it
}

// Open opens (creating if absent) the DB of partition replica id in dir.
// Its Applied() is the index of the last batch a flush made durable.
func Open(env *Env, dir string, id uint64) (*DB, error) {
	if err := env.acquire(); err != nil {
		return nil, err
	}
	d := &DB{
		id:      id,
		dir:     dir,
		env:     env,
		log:     env.cfg.Logger.With("partition", id, "dir", dir),
		stopped: make(chan struct{}),
		views:   make(map[*ReadView]struct{}),
	}
	pdb, err := d.open()
	if err != nil {
		env.release()
		return nil, err
	}
	d.pdb = pdb
	return d, nil
}

func (d *DB) open() (*pebble.DB, error) {
	if err := d.env.cfg.FS.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: partition %d: create %s: %w", d.id, d.dir, err)
	}
	opts := d.env.pebbleOptions(d.log, d.dir)
	opts.EventListener = &pebble.EventListener{
		// Called with Pebble's mutex held: record only, never call into Pebble.
		BackgroundError: func(err error) { d.setErr("background flush or compaction", err) },
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			d.setErr("data corruption", fmt.Errorf("%s: %w", info.Path, info.Details))
		},
		TableCreated: func(info pebble.TableCreateInfo) {
			if info.Reason == "compacting" {
				d.noteCompacted(d.env.cfg.FS.PathBase(info.Path))
			}
		},
	}
	pdb, err := pebble.Open(d.dir, opts)
	if err != nil {
		return nil, fmt.Errorf("engine: partition %d: open %s: %w", d.id, d.dir, err)
	}
	if v := pdb.FormatMajorVersion(); v != FormatVersion {
		_ = pdb.Close()
		return nil, fmt.Errorf("%w: partition %d dir %s has %d, want %d", ErrFormat, d.id, d.dir, v, FormatVersion)
	}
	applied, err := readApplied(pdb)
	if err != nil {
		_ = pdb.Close()
		return nil, fmt.Errorf("engine: partition %d dir %s: %w", d.id, d.dir, err)
	}
	d.applied.Store(applied)
	return pdb, nil
}

func (d *DB) noteCompacted(name string) {
	d.compactedMu.Lock()
	defer d.compactedMu.Unlock()
	if d.compacted == nil {
		d.compacted = map[string]struct{}{}
	}
	if _, ok := d.compacted[name]; ok {
		return
	}
	d.compacted[name] = struct{}{}
	d.compactOrd = append(d.compactOrd, name)
	if len(d.compactOrd) > maxCompactedNames {
		delete(d.compacted, d.compactOrd[0])
		d.compactOrd = d.compactOrd[1:]
	}
}

// CompactionOutput says whether the SST named name (a file of this DB or
// of a checkpoint of it) was written by one of its compactions since it
// opened; false for a flush's output, and for a file written before the
// DB opened (unknown).
func (d *DB) CompactionOutput(name string) bool {
	d.compactedMu.Lock()
	defer d.compactedMu.Unlock()
	_, ok := d.compacted[name]
	return ok
}

// ID returns the partition id given to Open.
func (d *DB) ID() uint64 { return d.id }

// Dir returns the DB directory.
func (d *DB) Dir() string { return d.dir }

// Applied returns the applied index of the last committed batch.
func (d *DB) Applied() uint64 { return d.applied.Load() }

// Err returns the sticky error that stopped the DB, or nil.
func (d *DB) Err() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
}

// setErr records the first Pebble failure; later ones are only logged.
func (d *DB) setErr(op string, cause error) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if d.err != nil {
		return
	}
	d.err = &stoppedError{id: d.id, dir: d.dir, op: op, cause: cause}
	close(d.stopped)
	d.log.Error("partition storage stopped", "op", op, "err", cause)
	if f := d.env.cfg.Stopped; f != nil {
		// Not here: Pebble may hold its mutex (an event listener).
		go f(d, d.err)
	}
	if IsCorruption(cause) {
		if err := markCorrupt(d.env.cfg.FS, d.dir, d.err); err != nil {
			d.log.Error("could not mark the state corrupt; move the directory aside by hand before restarting", "err", err)
		}
	}
}

// CorruptMarker is the file a DB that found corruption leaves in its
// directory: the next start (partition.Open) moves the directory aside and
// rebuilds the state from a materialization and the log, rather than
// reading the damaged files again.
const CorruptMarker = "CUTKV-CORRUPT"

// IsCorruption says whether err is damage in the stored data (a Pebble
// checksum mismatch or malformed file, or a value that does not decode),
// not a failure of the disk or the process.
func IsCorruption(err error) bool {
	return pebble.IsCorruptionError(err) || errors.Is(err, ErrCorrupt)
}

// Corrupt says whether dir holds a DB that found corruption in its files,
// and returns what it found.
func Corrupt(fs vfs.FS, dir string) (string, bool) {
	f, err := fs.Open(fs.PathJoin(dir, CorruptMarker))
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(b), true
}

func markCorrupt(fs vfs.FS, dir string, why error) error {
	f, err := fs.Create(fs.PathJoin(dir, CorruptMarker), vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(why.Error())); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(fs, dir)
}

// enter takes the shared life lock and checks the DB is usable. On success
// the caller must call d.life.RUnlock.
func (d *DB) enter() error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return fmt.Errorf("engine: partition %d: %w", d.id, ErrClosed)
	}
	if err := d.Err(); err != nil {
		d.life.RUnlock()
		return err
	}
	return nil
}

// Closed says whether Close was called. It waits for a Close under way.
func (d *DB) Closed() bool {
	d.life.RLock()
	defer d.life.RUnlock()
	return d.closed
}

// Close closes the DB and any read view still open. Writes not flushed are
// lost (there is no Pebble WAL): after reopening, the caller replays its log
// from Applied(). Close of a stopped DB releases it and returns nil.
func (d *DB) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return fmt.Errorf("engine: partition %d: %w", d.id, ErrClosed)
	}
	d.closed = true
	d.viewsMu.Lock()
	for v := range d.views {
		v.closeLocked()
	}
	d.views = nil
	d.viewsMu.Unlock()
	err := d.pdb.Close()
	d.env.release()
	if err != nil {
		return fmt.Errorf("engine: partition %d: close %s: %w", d.id, d.dir, err)
	}
	return nil
}

// Flush writes the memtables to SSTs and returns when every batch committed
// before the call is durable. It blocks new commits only while Pebble
// switches memtables; commits continue during the flush itself (up to the
// memtable stall limit, see MemTableSize). It returns early, with the
// sticky error, if a flush fails (Pebble retries a failed flush forever).
func (d *DB) Flush() error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.life.RUnlock()
	return d.flush()
}

// REQUIRES: life held shared.
func (d *DB) flush() error {
	done, err := d.pdb.AsyncFlush()
	if err != nil {
		d.setErr("flush", err)
		return d.Err()
	}
	select {
	case <-done:
		// A failure reported just before the memtables were declared flushed
		// still stops the DB.
		return d.Err()
	case <-d.stopped:
		return d.Err()
	}
}

// reader is what Get and Scan need of a pebble.DB or pebble.Snapshot.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// getRaw returns a copy of the value at key.
func getRaw(r reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := clone(v)
	if out == nil {
		out = []byte{}
	}
	return out, true, closer.Close()
}

func readApplied(r reader) (uint64, error) {
	v, ok, err := getRaw(r, keyApplied)
	if err != nil || !ok {
		return 0, err
	}
	return decodeUint64("meta", keyApplied, v)
}

func getKV(r reader, key []byte) (KV, bool, error) {
	if err := checkKey(key); err != nil {
		return KV{}, false, err
	}
	k := makeKey(prefixKV, key)
	v, ok, err := getRaw(r, k)
	if err != nil || !ok {
		return KV{}, false, err
	}
	kv, err := decodeValue(k, v)
	if err != nil {
		return KV{}, false, err
	}
	kv.Key = clone(key)
	return kv, true, nil
}

// scanKV returns the key-values in [start, end) in key order; end nil means
// to the end of the table, limit <= 0 means no limit. more reports that
// limit stopped the scan before the end.
func scanKV(r reader, start, end []byte, limit int) (kvs []KV, more bool, err error) {
	lower := makeKey(prefixKV, start)
	upper := prefixEnd(prefixKV)
	if end != nil {
		upper = makeKey(prefixKV, end)
	}
	err = iterate(r, lower, upper, func(k, v []byte) (bool, error) {
		if limit > 0 && len(kvs) == limit {
			more = true
			return false, nil
		}
		key, err := decodeKVKey(k)
		if err != nil {
			return false, err
		}
		kv, err := decodeValue(k, v)
		if err != nil {
			return false, err
		}
		kv.Key = clone(key)
		kv.Value = clone(kv.Value)
		kvs = append(kvs, kv)
		return true, nil
	})
	if err != nil {
		return nil, false, err
	}
	return kvs, more, nil
}

// ascendKV calls fn with copies of the key-values from start on, in key
// order, until fn returns false. Unlike scanKV it holds one at a time.
func ascendKV(r reader, start []byte, fn func(KV) bool) error {
	return iterate(r, makeKey(prefixKV, start), prefixEnd(prefixKV), func(k, v []byte) (bool, error) {
		key, err := decodeKVKey(k)
		if err != nil {
			return false, err
		}
		kv, err := decodeValue(k, v)
		if err != nil {
			return false, err
		}
		kv.Key, kv.Value = clone(key), clone(kv.Value)
		return fn(kv), nil
	})
}

// iterate calls fn for each key in [lower, upper) until fn returns false or
// an error. k and v are valid only during the call.
func iterate(r reader, lower, upper []byte, fn func(k, v []byte) (bool, error)) (err error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		cont, err := fn(it.Key(), v)
		if err != nil || !cont {
			return err
		}
	}
	return it.Error()
}

// readErr makes a read failure sticky: a Pebble read error is an I/O error
// or corruption, and a value that does not decode is corruption too. Only a
// bad argument (ErrInvalidKey) leaves the DB running.
func (d *DB) readErr(op string, err error) error {
	if err == nil || errors.Is(err, ErrInvalidKey) {
		return err
	}
	d.setErr(op, err)
	return d.Err()
}

// Get returns the key-value at key.
func (d *DB) Get(key []byte) (KV, bool, error) {
	if err := d.enter(); err != nil {
		return KV{}, false, err
	}
	defer d.life.RUnlock()
	kv, ok, err := getKV(d.pdb, key)
	return kv, ok, d.readErr("get", err)
}

// Ascend calls fn with the key-values from start on (nil: the first), in
// key order, until fn returns false; each KV is a copy fn may keep.
func (d *DB) Ascend(start []byte, fn func(KV) bool) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.life.RUnlock()
	return d.readErr("ascend", ascendKV(d.pdb, start, fn))
}

// KeyCount returns the number of keys the last batch that set it said
// (Batch.SetKeyCount); 0 when none did. The engine does not count: its
// caller knows whether each write created or removed a key.
func (d *DB) KeyCount() (uint64, error) {
	if err := d.enter(); err != nil {
		return 0, err
	}
	defer d.life.RUnlock()
	v, ok, err := getRaw(d.pdb, keyCount)
	if err != nil || !ok {
		return 0, d.readErr("get key count", err)
	}
	n, err := decodeUint64("meta", keyCount, v)
	return n, d.readErr("get key count", err)
}

// Env returns the environment the DB was opened in.
func (d *DB) Env() *Env { return d.env }

// Scan returns copies of the key-values in [start, end), at most limit of
// them (limit <= 0: all); end nil means unbounded. more reports that the
// limit cut the scan short.
func (d *DB) Scan(start, end []byte, limit int) ([]KV, bool, error) {
	if err := d.enter(); err != nil {
		return nil, false, err
	}
	defer d.life.RUnlock()
	kvs, more, err := scanKV(d.pdb, start, end, limit)
	return kvs, more, d.readErr("scan", err)
}

// Horizon returns the transaction horizon (unix ms) and whether one was set.
func (d *DB) Horizon() (int64, bool, error) {
	if err := d.enter(); err != nil {
		return 0, false, err
	}
	defer d.life.RUnlock()
	v, ok, err := getRaw(d.pdb, keyHorizon)
	if err != nil || !ok {
		return 0, false, d.readErr("get horizon", err)
	}
	h, err := decodeUint64("meta", keyHorizon, v)
	if err != nil {
		return 0, false, d.readErr("get horizon", err)
	}
	return int64(h), true, nil
}

// CutProgress returns the cut progress blob (a copy) and whether one was set.
func (d *DB) CutProgress() ([]byte, bool, error) {
	if err := d.enter(); err != nil {
		return nil, false, err
	}
	defer d.life.RUnlock()
	v, ok, err := getRaw(d.pdb, keyCutProgress)
	return v, ok, d.readErr("get cut progress", err)
}

// Intents calls fn for every intent in transaction id order. The slices are
// copies the caller owns; an error from fn stops the walk and is returned.
func (d *DB) Intents(fn func(id []byte, index uint64, data []byte) error) error {
	return d.walkTxn(prefixIntent, func(k, id, v []byte) error {
		index, data, err := decodeIntent(k, v)
		if err != nil {
			return err
		}
		return fn(clone(id), index, clone(data))
	})
}

// Records calls fn for every transaction record, like Intents.
func (d *DB) Records(fn func(id []byte, data []byte) error) error {
	return d.walkTxn(prefixRecord, func(k, id, v []byte) error {
		return fn(clone(id), clone(v))
	})
}

// Finished calls fn for every finished transaction id with its prepared
// time (unix ms), like Intents.
func (d *DB) Finished(fn func(id []byte, preparedUnixMs int64) error) error {
	return d.walkTxn(prefixFinished, func(k, id, v []byte) error {
		ms, err := decodeUint64("finished", k, v)
		if err != nil {
			return err
		}
		return fn(clone(id), int64(ms))
	})
}

func (d *DB) walkTxn(prefix byte, fn func(k, id, v []byte) error) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.life.RUnlock()
	var fnErr error
	err := iterate(d.pdb, []byte{prefix}, prefixEnd(prefix), func(k, v []byte) (bool, error) {
		id, err := decodeTxnKey(prefix, k)
		if err != nil {
			return false, err
		}
		if err := fn(k, id, v); err != nil {
			fnErr = err
			return false, nil
		}
		return true, nil
	})
	if fnErr != nil {
		return fnErr // the caller's, not a storage failure
	}
	return d.readErr("scan "+tableName(prefix), err)
}
