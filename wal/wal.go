package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	tidwall "github.com/tidwall/wal"
)

// WAL is a node's write-ahead log. All methods are safe for concurrent use.
type WAL struct {
	dir  string
	opts Options
	env  env
	log  *tidwall.Log

	// first, last and size are published for lock-free reads. last is the
	// index of the last durable record; first is FirstIndex().
	first atomic.Uint64
	last  atomic.Uint64
	size  atomic.Int64

	mu      sync.Mutex
	work    sync.Cond    // L is &mu; signalled when pending gains records or closed is set
	pending *commitBatch // the batch collecting Appends; nil when none is waiting. REQUIRES mu.
	next    uint64       // index the next appended record gets. REQUIRES mu.
	closed  bool         // REQUIRES mu.
	err     error        // the sticky error. REQUIRES mu.
	spare   *commitBatch // a committed batch whose buffers the next batch reuses. REQUIRES mu.

	// ioMu serialises tidwall/wal writes and syncs (the committer) with
	// TruncateFront and Close, and guards segs.
	ioMu sync.Mutex
	segs []segment // the segment files, oldest first. REQUIRES ioMu.

	// readMu serialises tidwall/wal reads: Log.Read loads and caches
	// segments while holding only its read lock.
	readMu sync.Mutex

	committerDone chan struct{} // closed when the committer goroutine exits

	// onEnqueue, if set before the first Append, is called by Append after
	// its records are queued and before it waits. Tests use it to know that
	// callers are queued without sleeping.
	onEnqueue func()
}

// commitBatch is a group of Appends written with one tidwall batch and made
// durable by one fsync.
type commitBatch struct {
	tb    tidwall.Batch
	sizes []int  // bytes each entry takes in its segment file (length prefix included)
	first uint64 // index of the first entry
	n     int    // number of entries
	bytes int    // sum of sizes
	err   error  // the outcome; written before done is closed
	done  chan struct{}
}

// Open opens the log in dir, creating the directory and an empty log if
// needed. It first verifies every record and repairs a torn tail of the last
// segment (doc.go, "Recovery at Open"); damage it must not repair makes it
// return a *CorruptError (errors.Is(err, ErrCorrupt)) naming the segment file
// and byte offset, with nothing on disk changed.
func Open(dir string, opts Options) (*WAL, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	e := env{hooks: opts.Hooks, noSync: opts.NoSync}
	if err := makeDir(dir, e); err != nil {
		return nil, err
	}
	segs, last, err := recoverDir(dir, e, opts.Logger)
	if err != nil {
		return nil, err
	}
	log, err := tidwall.Open(dir, &tidwall.Options{
		NoSync:           true, // the committer fsyncs once per batch
		SegmentSize:      opts.SegmentSize,
		LogFormat:        tidwall.Binary,
		SegmentCacheSize: 2,
		AllowEmpty:       true, // TruncateFront(LastIndex()+1) empties the log
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if len(segs) == 0 {
		segs, last = []segment{{start: 1}}, 0 // tidwall/wal created it
	}
	tfirst, ferr := log.FirstIndex()
	tlast, lerr := log.LastIndex()
	if err := errors.Join(ferr, lerr); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if tfirst != segs[0].start || tlast != last {
		// The scan and tidwall/wal read the same files; disagreeing means
		// the files changed under us or the two parsers differ.
		_ = log.Close()
		return nil, fmt.Errorf("%w: tidwall/wal opened %s with indexes [%d, %d], the scan found [%d, %d]",
			ErrCorrupt, dir, tfirst, tlast, segs[0].start, last)
	}
	// Make tidwall/wal's renames and file creation, and our removals,
	// durable before anything is appended.
	if err := e.syncDir(dir); err != nil {
		_ = log.Close()
		return nil, writeError("fsync directory", dir, err)
	}
	w := &WAL{
		dir:           dir,
		opts:          opts,
		env:           e,
		log:           log,
		next:          last + 1,
		segs:          segs,
		committerDone: make(chan struct{}),
	}
	w.work.L = &w.mu
	w.first.Store(segs[0].start)
	w.last.Store(last)
	w.size.Store(totalSize(segs))
	go w.runCommitter()
	return w, nil
}

// makeDir creates dir if it does not exist, and then fsyncs its parent so
// that the new directory survives a crash.
func makeDir(dir string, e env) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("wal: open %s: not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return writeError("create directory", dir, err)
	}
	if err := e.syncDir(filepath.Dir(dir)); err != nil {
		return writeError("fsync directory", filepath.Dir(dir), err)
	}
	return nil
}

func totalSize(segs []segment) int64 {
	var n int64
	for _, s := range segs {
		n += s.size
	}
	return n
}

// Append writes recs durably: it returns only after they are fsynced (unless
// Options.NoSync). Concurrent calls are group-committed: one committer writes
// everything queued as one tidwall batch with one fsync, then wakes all their
// callers. The records of one call are consecutive in the log, in the order
// given. Append returns the WAL indexes of the first and last record of
// recs; a new log's first record has index 1.
//
// Append does not retain recs or their Data. With no records it writes
// nothing and returns 0, 0 and ErrClosed or the sticky error, if any.
// A record of unknown type fails the call with ErrInvalidRecord and nothing
// written. Any I/O failure fails this and every later call (ErrWrite).
func (w *WAL) Append(recs []Record) (first, last uint64, err error) {
	if len(recs) == 0 {
		return 0, 0, w.usable()
	}
	n := 0
	for i, r := range recs {
		if !r.Type.Valid() {
			return 0, 0, fmt.Errorf("%w: record %d of %d has unknown type %d", ErrInvalidRecord, i, len(recs), uint8(r.Type))
		}
		n += encodedLen(r)
	}
	// Encode and checksum outside the lock, so callers do it in parallel.
	buf := make([]byte, 0, n)
	for _, r := range recs {
		buf = appendRecord(buf, r)
	}

	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return 0, 0, err
	}
	b := w.pending
	if b == nil {
		b = w.newBatchLocked()
		w.pending = b
	}
	first = w.next
	for _, r := range recs {
		l := encodedLen(r)
		b.tb.Write(w.next, buf[:l])
		buf = buf[l:]
		framed := uvarintLen(uint64(l)) + l
		b.sizes = append(b.sizes, framed)
		b.bytes += framed
		w.next++
	}
	b.n += len(recs)
	w.work.Signal()
	hook := w.onEnqueue
	w.mu.Unlock()
	if hook != nil {
		hook()
	}

	<-b.done
	if b.err != nil {
		return 0, 0, b.err
	}
	return first, first + uint64(len(recs)) - 1, nil
}

// newBatchLocked starts a batch at w.next, reusing a spare one's buffers.
// REQUIRES mu held.
func (w *WAL) newBatchLocked() *commitBatch {
	b := &commitBatch{first: w.next, done: make(chan struct{})}
	if s := w.spare; s != nil {
		w.spare = nil
		b.tb = s.tb
		b.tb.Clear()
		b.sizes = s.sizes[:0]
	}
	return b
}

// runCommitter is the committer goroutine: it takes the pending batch,
// commits it and wakes its callers, until the WAL is closed and nothing is
// pending.
func (w *WAL) runCommitter() {
	defer close(w.committerDone)
	for {
		w.mu.Lock()
		for w.pending == nil && !w.closed {
			w.work.Wait()
		}
		b := w.pending
		w.pending = nil
		w.mu.Unlock()
		if b == nil {
			return // closed, and every queued Append has been answered
		}

		took, err := w.commit(b)
		if err == nil && w.opts.OnSync != nil {
			w.opts.OnSync(b.n, b.bytes, took)
		}

		w.mu.Lock()
		if err != nil {
			w.setErrLocked(err)
		}
		b.err = w.err // a batch queued behind a failed one fails with it
		if b.err == nil {
			// Callers read only b.err once done is closed, so the next
			// batch may reuse the buffers.
			w.spare = &commitBatch{tb: b.tb, sizes: b.sizes}
		}
		w.mu.Unlock()
		close(b.done)
	}
}

// commit writes b to the tail of the log as one tidwall batch, fsyncs the
// tail segment once, and fsyncs the directory if the batch started a new
// segment. Any failure is returned as an ErrWrite naming the file; the caller
// makes it sticky.
func (w *WAL) commit(b *commitBatch) (time.Duration, error) {
	if err := w.Err(); err != nil {
		return 0, err
	}
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	began := time.Now()

	full, next := w.planSegments(b)
	tail := w.path(w.segs[len(w.segs)-1].start)
	if err := w.env.beforeWrite(tail, b.bytes); err != nil {
		return 0, writeError("write", tail, err)
	}
	if err := w.log.WriteBatch(&b.tb); err != nil {
		return 0, writeError("write", tail, err)
	}
	newTail := w.path(next.start)
	if err := w.env.syncFile(newTail, w.log.Sync); err != nil {
		return 0, writeError("fsync", newTail, err)
	}
	if len(full) > 0 {
		// tidwall/wal created the new segment file but does not sync the
		// directory; without this a crash could lose the file's name and
		// with it acknowledged records.
		if err := w.env.syncDir(w.dir); err != nil {
			return 0, writeError("fsync directory", w.dir, err)
		}
	}
	w.segs = append(append(w.segs[:len(w.segs)-1], full...), next)
	w.size.Add(int64(b.bytes))
	w.last.Store(b.first + uint64(b.n) - 1)
	return time.Since(began), nil
}

// planSegments returns the segments this batch fills and closes, and the
// tail segment as it will be after tidwall/wal has written b. It follows the
// rule of tidwall/wal v1.2.1 (Log.writeBatch): before the batch, a tail
// holding more than SegmentSize bytes is closed; after each entry, a tail
// holding at least SegmentSize bytes is closed and a new one, named by the
// next index, is started. TestSegmentsMatchDisk checks that the two agree.
// REQUIRES ioMu held.
func (w *WAL) planSegments(b *commitBatch) (full []segment, tail segment) {
	limit := int64(w.opts.SegmentSize)
	tail = w.segs[len(w.segs)-1]
	if tail.size > limit {
		full = append(full, tail)
		tail = segment{start: b.first}
	}
	for i, sz := range b.sizes {
		tail.size += int64(sz)
		if tail.size >= limit {
			full = append(full, tail)
			tail = segment{start: b.first + uint64(i) + 1}
		}
	}
	return full, tail
}

// path is the file of the segment whose first index is start.
func (w *WAL) path(start uint64) string { return filepath.Join(w.dir, segmentName(start)) }

// Replay calls fn for every record from FirstIndex to LastIndex (as they
// are when Replay starts), in order, verifying each record's checksum again.
// It stops at fn's first error and returns it unchanged. r.Data belongs to
// fn. Replay must not run concurrently with TruncateFront; Appends may run.
// A damaged record yields a *CorruptError naming the segment and index.
func (w *WAL) Replay(fn func(index uint64, r Record) error) error {
	if err := w.usable(); err != nil {
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	for i := first; i <= last; i++ {
		w.readMu.Lock()
		data, err := w.log.Read(i)
		w.readMu.Unlock()
		if err != nil {
			if errors.Is(err, tidwall.ErrCorrupt) {
				return &CorruptError{Segment: w.segmentOf(i), Offset: -1, Index: i, Reason: "tidwall/wal cannot parse the segment"}
			}
			if errors.Is(err, tidwall.ErrClosed) {
				return ErrClosed
			}
			return fmt.Errorf("wal: read index %d from %s: %w", i, w.segmentOf(i), err)
		}
		r, reason := parseRecord(data)
		if reason != "" {
			return &CorruptError{Segment: w.segmentOf(i), Offset: -1, Index: i, Reason: reason}
		}
		if err := fn(i, r); err != nil {
			return err
		}
	}
	return nil
}

// Read returns the record at index, verifying its checksum. An index
// outside [FirstIndex, LastIndex] is ErrOutOfRange; a damaged record a
// *CorruptError. Read may run concurrently with Append and TruncateFront
// (a record truncated meanwhile is ErrOutOfRange). r.Data belongs to the
// caller.
func (w *WAL) Read(index uint64) (Record, error) {
	if err := w.usable(); err != nil {
		return Record{}, err
	}
	if first, last := w.first.Load(), w.last.Load(); index < first || index > last {
		return Record{}, fmt.Errorf("%w: record %d, the log holds [%d, %d]", ErrOutOfRange, index, first, last)
	}
	w.readMu.Lock()
	data, err := w.log.Read(index)
	w.readMu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, tidwall.ErrNotFound):
			return Record{}, fmt.Errorf("%w: record %d was truncated away", ErrOutOfRange, index)
		case errors.Is(err, tidwall.ErrCorrupt):
			return Record{}, &CorruptError{Segment: w.segmentOf(index), Offset: -1, Index: index, Reason: "tidwall/wal cannot parse the segment"}
		case errors.Is(err, tidwall.ErrClosed):
			return Record{}, ErrClosed
		}
		return Record{}, fmt.Errorf("wal: read index %d from %s: %w", index, w.segmentOf(index), err)
	}
	r, reason := parseRecord(data)
	if reason != "" {
		return Record{}, &CorruptError{Segment: w.segmentOf(index), Offset: -1, Index: index, Reason: reason}
	}
	return r, nil
}

// segmentOf returns the file holding index i, for error messages.
func (w *WAL) segmentOf(i uint64) string {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	k := len(w.segs) - 1
	for k > 0 && w.segs[k].start > i {
		k--
	}
	return w.path(w.segs[k].start)
}

// FirstIndex returns the index of the first record in the log. For an empty
// log it is LastIndex()+1: 1 for a new log.
func (w *WAL) FirstIndex() uint64 { return w.first.Load() }

// LastIndex returns the index of the last durable record, 0 for a new log.
// Records of an Append that has not yet returned are not included.
func (w *WAL) LastIndex() uint64 { return w.last.Load() }

// TruncateFront drops every record below index; index itself stays and
// becomes FirstIndex. An index at or below FirstIndex does nothing; an index
// of LastIndex()+1 empties the log (the next record still gets that index);
// a larger one is ErrOutOfRange. The directory is fsynced before it returns.
// Any I/O failure is sticky (ErrWrite).
func (w *WAL) TruncateFront(index uint64) error {
	if err := w.usable(); err != nil {
		return err
	}
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	if err := w.usable(); err != nil { // Close or a failed batch may have come first
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	if index <= first {
		return nil
	}
	if index > last+1 {
		return fmt.Errorf("%w: cannot truncate front to %d, the log holds [%d, %d]", ErrOutOfRange, index, first, last)
	}
	if err := w.log.TruncateFront(index); err != nil {
		return w.fail(writeError(fmt.Sprintf("truncate front to index %d in", index), w.dir, err))
	}
	// tidwall/wal renamed and removed files without syncing the directory.
	if err := w.env.syncDir(w.dir); err != nil {
		return w.fail(writeError("fsync directory", w.dir, err))
	}
	k := len(w.segs) - 1
	for k > 0 && w.segs[k].start > index {
		k--
	}
	segs := append([]segment(nil), w.segs[k:]...)
	segs[0].start = index
	fi, err := os.Stat(w.path(index))
	if err != nil {
		return w.fail(writeError("stat", w.path(index), err))
	}
	segs[0].size = fi.Size()
	w.segs = segs
	w.size.Store(totalSize(segs))
	w.first.Store(index)
	return nil
}

// SegmentStart returns the first index of the segment holding index i
// (FirstIndex for an index below it). Truncating the front to a segment's
// start only deletes files; truncating inside a segment rewrites its tail.
func (w *WAL) SegmentStart(i uint64) uint64 {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	start := w.first.Load()
	for _, sg := range w.segs {
		if sg.start > i {
			break
		}
		start = max(start, sg.start)
	}
	return start
}

// fail records err as the sticky error (unless one is already set) and
// returns the sticky error.
func (w *WAL) fail(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.setErrLocked(err)
	return w.err
}

// setErrLocked makes err the sticky error unless one is already set, and
// says so loudly. REQUIRES mu held.
func (w *WAL) setErrLocked(err error) {
	if w.err != nil {
		return
	}
	w.err = err
	w.opts.Logger.Error("wal: write failed; the log refuses every further write", "dir", w.dir, "err", err)
}

// Size returns the bytes on disk of all segment files.
func (w *WAL) Size() int64 { return w.size.Load() }

// Dir returns the absolute path of the log's directory.
func (w *WAL) Dir() string { return w.dir }

// Err returns the sticky error, nil if no write has failed.
func (w *WAL) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// usable returns ErrClosed or the sticky error, whichever applies.
func (w *WAL) usable() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.usableLocked()
}

// usableLocked is usable. REQUIRES mu held.
func (w *WAL) usableLocked() error {
	if w.closed {
		return ErrClosed
	}
	return w.err
}

// Close waits for queued Appends to be committed, then closes the log. It
// returns ErrClosed if already closed, and the sticky error if a write had
// failed. In that case the files are not touched again: tidwall/wal's Close
// would fsync the tail segment, and a failed fsync is never retried, so the
// tail file stays open until the process exits (which a node whose WAL
// failed should do).
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.work.Broadcast()
	w.mu.Unlock()
	<-w.committerDone

	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	if err := w.Err(); err != nil {
		return err
	}
	if err := w.log.Close(); err != nil {
		return writeError("close", w.dir, err)
	}
	return nil
}
