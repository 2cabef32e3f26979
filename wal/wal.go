package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	tidwall "github.com/tidwall/wal"
)

// WAL is a node's write-ahead log. All methods are safe for concurrent use.
//
// Records have WAL indexes; tidwall/wal's entries have their own indexes,
// called slots here. The two differ by the chain records, which take a
// slot but no WAL index (doc.go, "Indexes").
type WAL struct {
	dir     string
	dirFile *os.File // dir, open for every directory fsync; closed by Close
	opts    Options
	env     env
	log     *tidwall.Log
	limit   int // the segment size tidwall/wal is given: above any chain record

	incarnation uint64 // written into every chain record and the progress file
	node        string

	// first, last and size are published for lock-free reads. last is the
	// index of the last durable record; first is FirstIndex().
	first atomic.Uint64
	last  atomic.Uint64
	size  atomic.Int64
	// spans is a copy of segs for readers that map WAL indexes to slots
	// without ioMu. It is replaced whenever a segment starts, gains its
	// chain record or is truncated, before last or first move.
	spans atomic.Pointer[[]segment]

	mu      sync.Mutex
	work    sync.Cond    // L is &mu; signalled when pending gains records or closed is set
	pending *commitBatch // the batch collecting Appends; nil when none is waiting. REQUIRES mu.
	next    uint64       // index the next appended record gets. REQUIRES mu.
	closed  bool         // REQUIRES mu.
	err     error        // the sticky error. REQUIRES mu.
	spare   *commitBatch // a committed batch whose buffers the next batch reuses. REQUIRES mu.

	// ioMu serialises tidwall/wal writes and syncs (the committer) with
	// TruncateFront and Close, and guards segs and nextSlot.
	ioMu        sync.Mutex
	segs        []segment // the segment files, oldest first. REQUIRES ioMu.
	nextSlot    uint64    // the slot tidwall/wal gives the next entry. REQUIRES ioMu.
	hasProgress bool      // the directory holds a progress file. REQUIRES ioMu.

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
	recs  [][]byte      // the encoded records, in order; they alias the Appends' buffers
	tb    tidwall.Batch // filled by the committer: recs and the chain records it adds
	first uint64        // index of the first record
	err   error         // the outcome; written before done is closed
	done  chan struct{}
}

// Open opens the log in dir, creating the directory and an empty log if
// needed. It first verifies every record and repairs a torn tail of the last
// segment (doc.go, "Recovery at Open"); damage it must not repair makes it
// return a *CorruptError (errors.Is(err, ErrCorrupt)) naming the segment file
// and byte offset, with nothing on disk changed. It then checks that the
// segments continue one another and reach as far as the progress file says
// (doc.go, "Segment chain"); a log that went backwards or holds a foreign
// segment makes it return a *ChainError (errors.Is(err, ErrChain)) naming
// the files, again with nothing changed.
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
	df, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	w, err := open(dir, df, opts, e)
	if err != nil {
		_ = df.Close()
		return nil, err
	}
	go w.runCommitter()
	return w, nil
}

// open is Open once the directory is open as df.
func open(dir string, df *os.File, opts Options, e env) (*WAL, error) {
	sc, err := scanDir(dir)
	if err != nil {
		return nil, err
	}
	prog, err := readProgress(dir)
	if err != nil {
		return nil, err
	}
	var ch chainState
	switch {
	case len(sc.segs) > 0:
		if ch, err = verifyChain(dir, sc.segs, prog, opts.NodeID); err != nil {
			return nil, err
		}
	case prog != nil:
		return nil, &ChainError{Segment: filepath.Join(dir, segmentName(prog.tail)), Other: filepath.Join(dir, progressName),
			Reason: fmt.Sprintf("the progress file names this segment (records from %d on), and the directory holds no segment at all", prog.first)}
	default:
		// A new log: its first chain record, or its progress file, will
		// record these.
		ch = chainState{incarnation: newIncarnation(), node: opts.NodeID}
	}
	if ch.unchained {
		opts.Logger.Warn("wal: the log predates segment chaining; it is chained from its next segment on",
			"dir", dir, "segments", len(sc.segs))
	}
	if err := sc.repair(dir, e, opts.Logger); err != nil {
		return nil, err
	}
	limit := max(opts.SegmentSize, chainEntryLen(ch.node)+1)
	log, err := tidwall.Open(dir, &tidwall.Options{
		NoSync:           true, // the committer fsyncs once per batch
		SegmentSize:      limit,
		LogFormat:        tidwall.Binary,
		SegmentCacheSize: 1,    // reads are rare: restart, snapshot pieces, slow followers
		AllowEmpty:       true, // TruncateFront(LastIndex()+1) empties the log
		DirPerms:         0o750,
		FilePerms:        0o640,
	})
	if err != nil {
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	segs := make([]segment, len(sc.segs))
	for i, s := range sc.segs {
		segs[i] = segment{start: s.start, size: s.end, first: ch.firsts[i]}
		if s.chain != nil {
			segs[i].chained, segs[i].link = true, s.chain.link
		}
	}
	if len(segs) == 0 {
		segs = []segment{{start: 1, first: 1}} // tidwall/wal created it
	}
	tail := segs[len(segs)-1]
	lastSlot := tail.start + sc.entriesOfTail() - 1
	tfirst, ferr := log.FirstIndex()
	tlast, lerr := log.LastIndex()
	if err := errors.Join(ferr, lerr); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("wal: open %s: %w", dir, err)
	}
	if tfirst != segs[0].start || tlast != lastSlot {
		// The scan and tidwall/wal read the same files; disagreeing means
		// the files changed under us or the two parsers differ.
		_ = log.Close()
		return nil, fmt.Errorf("%w: tidwall/wal opened %s with indexes [%d, %d], the scan found [%d, %d]",
			ErrCorrupt, dir, tfirst, tlast, segs[0].start, lastSlot)
	}
	// Make tidwall/wal's renames and file creation, and our removals,
	// durable before anything is appended, and before the progress file
	// may name a segment.
	if err := e.syncDir(dir, df); err != nil {
		_ = log.Close()
		return nil, writeError("fsync directory", dir, err)
	}
	if ch.write != nil {
		if err := writeProgress(dir, df, *ch.write, e); err != nil {
			_ = log.Close()
			return nil, err
		}
	}
	last := tail.first - 1 + sc.entriesOfTail()
	if tail.chained {
		last-- // the chain record is no record
	}
	w := &WAL{
		dir:           dir,
		dirFile:       df,
		opts:          opts,
		env:           e,
		log:           log,
		limit:         limit,
		incarnation:   ch.incarnation,
		node:          ch.node,
		next:          last + 1,
		segs:          segs,
		nextSlot:      lastSlot + 1,
		hasProgress:   prog != nil || ch.write != nil,
		committerDone: make(chan struct{}),
	}
	w.work.L = &w.mu
	w.publishSpans()
	w.first.Store(segs[0].first)
	w.last.Store(last)
	w.size.Store(totalSize(segs))
	return w, nil
}

// entriesOfTail is the number of valid entries in the last segment, 0 for
// an empty directory.
func (sc *dirScan) entriesOfTail() uint64 {
	if len(sc.segs) == 0 {
		return 0
	}
	return sc.segs[len(sc.segs)-1].entries
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
	parent := filepath.Dir(dir)
	pf, err := os.Open(parent)
	if err != nil {
		return writeError("open directory", parent, err)
	}
	defer pf.Close()
	if err := e.syncDir(parent, pf); err != nil {
		return writeError("fsync directory", parent, err)
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
// A record of unknown type, or a RecordChain (only the WAL writes those),
// fails the call with ErrInvalidRecord and nothing written. Any I/O failure
// fails this and every later call (ErrWrite).
func (w *WAL) Append(recs []Record) (first, last uint64, err error) {
	if len(recs) == 0 {
		return 0, 0, w.usable()
	}
	n := 0
	for i, r := range recs {
		if !r.Type.Valid() {
			return 0, 0, fmt.Errorf("%w: record %d of %d has unknown type %d", ErrInvalidRecord, i, len(recs), uint8(r.Type))
		}
		if r.Type == RecordChain {
			return 0, 0, fmt.Errorf("%w: record %d of %d is a chain record, which only the WAL writes", ErrInvalidRecord, i, len(recs))
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
		b.recs = append(b.recs, buf[:l:l])
		buf = buf[l:]
	}
	w.next += uint64(len(recs))
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
		clear(s.recs) // let the Appends' buffers go
		b.recs = s.recs[:0]
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

		took, written, err := w.commit(b)
		if err == nil && w.opts.OnSync != nil {
			w.opts.OnSync(len(b.recs), written, took)
		}

		w.mu.Lock()
		if err != nil {
			w.setErrLocked(err)
		}
		b.err = w.err // a batch queued behind a failed one fails with it
		if b.err == nil {
			// Callers read only b.err once done is closed, so the next
			// batch may reuse the buffers.
			w.spare = &commitBatch{tb: b.tb, recs: b.recs}
		}
		w.mu.Unlock()
		close(b.done)
	}
}

// commit writes b to the tail of the log as one tidwall batch, with the
// chain records of the segments it starts, and fsyncs the tail segment
// once. If the batch started a new segment file it then fsyncs the
// directory and records the new tail in the progress file. It returns the
// bytes written. Any failure is returned as an ErrWrite naming the file;
// the caller makes it sticky.
func (w *WAL) commit(b *commitBatch) (time.Duration, int, error) {
	if err := w.Err(); err != nil {
		return 0, 0, err
	}
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	began := time.Now()

	full, next, entries, written, err := w.planSegments(b)
	if err != nil {
		return 0, 0, err
	}
	tail := w.path(w.segs[len(w.segs)-1].start)
	if err := w.env.beforeWrite(tail, written); err != nil {
		return 0, 0, writeError("write", tail, err)
	}
	if err := w.log.WriteBatch(&b.tb); err != nil {
		return 0, 0, writeError("write", tail, err)
	}
	newTail := w.path(next.start)
	if err := w.env.syncFile(newTail, w.log.Sync); err != nil {
		return 0, 0, writeError("fsync", newTail, err)
	}
	if len(full) > 0 {
		// tidwall/wal created the new segment file but does not sync the
		// directory; without this a crash could lose the file's name and
		// with it acknowledged records. It must also be durable before
		// the progress file names it.
		if err := w.env.syncDir(w.dir, w.dirFile); err != nil {
			return 0, 0, writeError("fsync directory", w.dir, err)
		}
		if err := writeProgress(w.dir, w.dirFile, w.progressOf(next), w.env); err != nil {
			return 0, 0, err
		}
		w.hasProgress = true
	}
	old := w.segs[len(w.segs)-1]
	w.segs = append(append(w.segs[:len(w.segs)-1], full...), next)
	w.nextSlot += uint64(entries)
	if len(full) > 0 || next.chained != old.chained {
		w.publishSpans()
	}
	w.size.Add(int64(written))
	w.last.Store(b.first + uint64(len(b.recs)) - 1)
	return time.Since(began), written, nil
}

// progressOf is the progress file naming tail.
func (w *WAL) progressOf(tail segment) progress {
	return progress{incarnation: w.incarnation, tail: tail.start, first: tail.first,
		chained: tail.chained, link: tail.link, node: w.node}
}

// planSegments fills b.tb with b's records and the chain records the WAL
// adds, and returns the segments the batch fills and closes, the tail
// segment as it will be after tidwall/wal has written it, and the entries
// and bytes it writes. It follows the rule of tidwall/wal v1.2.1 (Log.writeBatch):
// before the batch, a tail holding more than the segment size is closed;
// after each entry, a tail holding at least the segment size is closed
// and a new one, named by the next slot, is started. Every segment started
// this way, and a tail that holds no entry at all, gets a chain record as
// its first entry (doc.go, "Segment chain"); the limit is above the size
// of a chain record, so a chain record never closes its segment itself.
// TestSegmentsMatchDisk checks that the plan and the disk agree.
// REQUIRES ioMu held.
func (w *WAL) planSegments(b *commitBatch) (full []segment, tail segment, entries, written int, err error) {
	limit := int64(w.limit)
	tail = w.segs[len(w.segs)-1]
	slot, rec := w.nextSlot, b.first
	b.tb.Clear()
	var prev []byte // the entry before the next one, once the batch wrote one
	needChain := tail.size == 0
	put := func(entry []byte) {
		b.tb.Write(slot, entry)
		slot++
		entries++
		framed := uvarintLen(uint64(len(entry))) + len(entry)
		tail.size += int64(framed)
		written += framed
		prev = entry
		if tail.size >= limit {
			full = append(full, tail)
			tail, needChain = segment{start: slot}, true
		}
	}
	putChain := func() error {
		var link [linkLen]byte
		if prev != nil {
			link = linkOf(prev)
		} else {
			var err error
			if link, err = w.lastLink(); err != nil {
				return err
			}
		}
		tail.first, tail.chained, tail.link, needChain = rec, true, link, false
		put(chainRecord(chain{incarnation: w.incarnation, slot: slot, prev: rec - 1, link: link, node: w.node}))
		return nil
	}
	if tail.size > limit {
		full = append(full, tail)
		tail, needChain = segment{start: slot}, true
	}
	for _, r := range b.recs {
		if needChain {
			if err := putChain(); err != nil {
				return nil, segment{}, 0, 0, err
			}
		}
		put(r)
		rec++
	}
	if needChain {
		// The batch's last record filled its segment: tidwall/wal has
		// started the next one, and its chain record goes in now.
		if err := putChain(); err != nil {
			return nil, segment{}, 0, 0, err
		}
	}
	return full, tail, entries, written, nil
}

// lastLink returns the link to the log's last entry, which is on disk: its
// SHA-256, or zeros when the log holds no entry (a new or emptied log).
// REQUIRES ioMu held.
func (w *WAL) lastLink() ([linkLen]byte, error) {
	at := w.nextSlot - 1
	if at < w.segs[0].start {
		return [linkLen]byte{}, nil
	}
	w.readMu.Lock()
	data, err := w.log.Read(at)
	w.readMu.Unlock()
	if err != nil {
		return [linkLen]byte{}, fmt.Errorf("%w: read the last entry (slot %d) of %s to chain the next segment to it: %w",
			ErrWrite, at, w.path(w.segs[len(w.segs)-1].start), err)
	}
	return linkOf(data), nil
}

// publishSpans makes the current segments the readers' map from WAL
// indexes to slots. REQUIRES ioMu held, or the WAL not yet shared.
func (w *WAL) publishSpans() {
	spans := append([]segment(nil), w.segs...)
	w.spans.Store(&spans)
}

// locate returns the segment holding record i according to the published
// spans: the last one whose first record is at or below i. The first one
// for an i below all of them.
func (w *WAL) locate(i uint64) segment {
	spans := *w.spans.Load()
	k := sort.Search(len(spans), func(k int) bool { return spans[k].first > i })
	return spans[max(k-1, 0)]
}

// path is the file of the segment whose first index is start.
func (w *WAL) path(start uint64) string { return filepath.Join(w.dir, segmentName(start)) }

// Replay calls fn for every record from FirstIndex to LastIndex (as they
// are when Replay starts), in order, verifying each record's checksum again.
// It stops at fn's first error and returns it unchanged. r.Data belongs to
// fn. Chain records are not records: fn never sees one, and the indexes it
// gets are consecutive. Replay must not run concurrently with TruncateFront;
// Appends may run. A damaged record yields a *CorruptError naming the
// segment and index.
func (w *WAL) Replay(fn func(index uint64, r Record) error) error {
	if err := w.usable(); err != nil {
		return err
	}
	first, last := w.first.Load(), w.last.Load()
	for i := first; i <= last; i++ {
		r, err := w.read(i)
		if err != nil {
			if errors.Is(err, ErrOutOfRange) {
				return fmt.Errorf("wal: replay: %w", err) // truncated under Replay
			}
			return err
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
	return w.read(index)
}

// read reads record index, which was in [FirstIndex, LastIndex], from the
// slot the published spans map it to.
func (w *WAL) read(index uint64) (Record, error) {
	sg := w.locate(index)
	if index < sg.first {
		return Record{}, fmt.Errorf("%w: record %d was truncated away", ErrOutOfRange, index)
	}
	slot := sg.slot(index)
	w.readMu.Lock()
	data, err := w.log.Read(slot)
	w.readMu.Unlock()
	file := func() string { return w.path(sg.start) } // for errors only
	if err != nil {
		switch {
		case errors.Is(err, tidwall.ErrNotFound):
			return Record{}, fmt.Errorf("%w: record %d was truncated away", ErrOutOfRange, index)
		case errors.Is(err, tidwall.ErrCorrupt):
			return Record{}, &CorruptError{Segment: file(), Offset: -1, Index: index, Reason: "tidwall/wal cannot parse the segment"}
		case errors.Is(err, tidwall.ErrClosed):
			return Record{}, ErrClosed
		}
		return Record{}, fmt.Errorf("wal: read index %d (slot %d) from %s: %w", index, slot, file(), err)
	}
	r, reason := parseRecord(data)
	if reason == "" && r.Type == RecordChain {
		reason = fmt.Sprintf("slot %d holds a chain record where record %d should be", slot, index)
	}
	if reason != "" {
		return Record{}, &CorruptError{Segment: file(), Offset: -1, Index: index, Reason: reason}
	}
	return r, nil
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
// a larger one is ErrOutOfRange. The directory is fsynced before it returns,
// and when the tail segment was rewritten under a new name the progress
// file names it. Any I/O failure is sticky (ErrWrite).
//
// Truncating to a segment's first record keeps the segment's chain record,
// so only older files go. Inside a segment, tidwall/wal rewrites the
// segment from that record on under a new name, without its chain record:
// the front segment is the chain's anchor and is not checked against what
// came before it (doc.go, "Segment chain").
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
	k := sort.Search(len(w.segs), func(k int) bool { return w.segs[k].first > index }) - 1
	sg := w.segs[k]
	slot := sg.start
	if index != sg.first {
		slot = sg.slot(index)
	}
	renamesTail := k == len(w.segs)-1 && slot != sg.start
	if renamesTail && !w.hasProgress {
		// The tail is about to lose its chain record, and with it the
		// only record of how its slots line up with WAL indexes: a
		// crash before the progress file names the new tail must find
		// the old one named there.
		if err := writeProgress(w.dir, w.dirFile, w.progressOf(sg), w.env); err != nil {
			return w.fail(err)
		}
		w.hasProgress = true
	}
	if err := w.log.TruncateFront(slot); err != nil {
		return w.fail(writeError(fmt.Sprintf("truncate front to index %d (slot %d) in", index, slot), w.dir, err))
	}
	// tidwall/wal renamed and removed files without syncing the directory.
	if err := w.env.syncDir(w.dir, w.dirFile); err != nil {
		return w.fail(writeError("fsync directory", w.dir, err))
	}
	segs := append([]segment(nil), w.segs[k:]...)
	if slot != sg.start {
		segs[0] = segment{start: slot, first: index}
	}
	fi, err := os.Stat(w.path(slot))
	if err != nil {
		return w.fail(writeError("stat", w.path(slot), err))
	}
	segs[0].size = fi.Size()
	if renamesTail {
		// The tail has a new name: without this a crash would leave the
		// progress file naming a segment that is gone, and the chain
		// record the tail lost no longer says where records start.
		if err := writeProgress(w.dir, w.dirFile, w.progressOf(segs[0]), w.env); err != nil {
			return w.fail(err)
		}
	}
	w.segs = segs
	w.publishSpans()
	w.size.Store(totalSize(segs))
	w.first.Store(index)
	return nil
}

// SegmentStart returns the first index of the segment holding index i
// (FirstIndex for an index below it). Truncating the front to a segment's
// start only deletes files; truncating inside a segment rewrites its tail.
func (w *WAL) SegmentStart(i uint64) uint64 {
	return max(w.first.Load(), w.locate(i).first)
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
	dirErr := w.dirFile.Close()
	if err := w.Err(); err != nil {
		return err
	}
	if err := w.log.Close(); err != nil {
		return writeError("close", w.dir, err)
	}
	if dirErr != nil {
		return fmt.Errorf("wal: close directory %s: %w", w.dir, dirErr)
	}
	return nil
}
