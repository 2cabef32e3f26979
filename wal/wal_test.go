package wal

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAppendReplayAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 512})
	if w.FirstIndex() != 1 || w.LastIndex() != 0 {
		t.Fatalf("new log: [%d, %d], want [1, 0]", w.FirstIndex(), w.LastIndex())
	}
	want := testRecords(0, 200)
	// Mix single appends and batches, some spanning a segment boundary.
	appendT(t, w, want[:50], 1)
	appendT(t, w, want[50:], 7)
	if n := len(segmentFiles(t, dir)); n < 5 {
		t.Fatalf("%d segment files, want several", n)
	}
	sameRecords(t, replayT(t, w), want)
	if w.FirstIndex() != 1 || w.LastIndex() != 200 {
		t.Fatalf("[%d, %d], want [1, 200]", w.FirstIndex(), w.LastIndex())
	}
	if w.Dir() != dir {
		t.Fatalf("Dir = %s, want %s", w.Dir(), dir)
	}
}

// TestSegmentsMatchDisk checks that the WAL's picture of its segment files,
// which follows tidwall/wal's rule for starting a new segment, matches the
// directory after every batch, and that Size is the bytes on disk.
func TestSegmentsMatchDisk(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 300, NoSync: true})
	rng := rand.New(rand.NewPCG(1, 2))
	next := 0
	check := func() {
		t.Helper()
		files := segmentFiles(t, dir)
		w.ioMu.Lock()
		segs := append([]segment(nil), w.segs...)
		w.ioMu.Unlock()
		if len(files) != len(segs) {
			t.Fatalf("disk has %d segments %v, WAL tracks %d %+v", len(files), files, len(segs), segs)
		}
		var total int64
		for i, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) != segmentName(segs[i].start) || fi.Size() != segs[i].size {
				t.Fatalf("segment %d: disk %s %d bytes, WAL tracks %s %d bytes", i, filepath.Base(f), fi.Size(), segmentName(segs[i].start), segs[i].size)
			}
			total += fi.Size()
		}
		if w.Size() != total {
			t.Fatalf("Size = %d, disk holds %d", w.Size(), total)
		}
	}
	check()
	for range 150 {
		n := 1 + rng.IntN(6)
		appendT(t, w, testRecords(next, n), n)
		next += n
		check()
		if rng.IntN(20) == 0 {
			if err := w.TruncateFront(w.FirstIndex() + uint64(rng.IntN(int(w.LastIndex()-w.FirstIndex()+2)))); err != nil {
				t.Fatal(err)
			}
			check()
		}
	}
	// A smaller SegmentSize after reopening makes the first batch start a
	// new segment before writing (the tail is already over the limit).
	closeT(t, w)
	w = openT(t, dir, Options{SegmentSize: 40, NoSync: true})
	check()
	appendT(t, w, testRecords(next, 3), 3)
	check()
}

func TestReopenAfterClose(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 1024})
	want := testRecords(0, 60)
	appendT(t, w, want[:40], 3)
	size := w.Size()
	closeT(t, w)

	w = openT(t, dir, Options{SegmentSize: 1024})
	if w.FirstIndex() != 1 || w.LastIndex() != 40 || w.Size() != size {
		t.Fatalf("after reopen: [%d, %d] size %d, want [1, 40] size %d", w.FirstIndex(), w.LastIndex(), w.Size(), size)
	}
	sameRecords(t, replayT(t, w), want[:40])
	appendT(t, w, want[40:], 4)
	closeT(t, w)

	w = openT(t, dir, Options{SegmentSize: 1024})
	sameRecords(t, replayT(t, w), want)
}

func TestTruncateFront(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	w := openT(t, dir, Options{SegmentSize: 400, Hooks: c.hooks()})
	want := testRecords(0, 100)
	appendT(t, w, want, 5)
	segsBefore := len(segmentFiles(t, dir))

	_, _, dirSyncs := c.counts()
	if err := w.TruncateFront(37); err != nil {
		t.Fatal(err)
	}
	if _, _, n := c.counts(); n != dirSyncs+1 {
		t.Fatalf("TruncateFront made %d directory syncs, want 1", n-dirSyncs)
	}
	if w.FirstIndex() != 37 || w.LastIndex() != 100 {
		t.Fatalf("[%d, %d], want [37, 100]", w.FirstIndex(), w.LastIndex())
	}
	if n := len(segmentFiles(t, dir)); n >= segsBefore {
		t.Fatalf("%d segments after truncation, %d before", n, segsBefore)
	}
	sameRecords(t, replayT(t, w), want[36:])

	// At or below FirstIndex nothing happens; past LastIndex+1 is refused.
	for _, idx := range []uint64{0, 1, 37} {
		if err := w.TruncateFront(idx); err != nil || w.FirstIndex() != 37 {
			t.Fatalf("TruncateFront(%d) = %v, FirstIndex %d", idx, err, w.FirstIndex())
		}
	}
	if err := w.TruncateFront(102); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("TruncateFront(102) = %v, want ErrOutOfRange", err)
	}
	if w.Err() != nil {
		t.Fatalf("out of range made the WAL fail: %v", w.Err())
	}
	closeT(t, w)

	w = openT(t, dir, Options{SegmentSize: 400, Hooks: c.hooks()})
	if w.FirstIndex() != 37 || w.LastIndex() != 100 {
		t.Fatalf("after reopen [%d, %d], want [37, 100]", w.FirstIndex(), w.LastIndex())
	}
	sameRecords(t, replayT(t, w), want[36:])

	// Emptying the log keeps the index sequence going.
	if err := w.TruncateFront(101); err != nil {
		t.Fatal(err)
	}
	if w.FirstIndex() != 101 || w.LastIndex() != 100 || len(replayT(t, w)) != 0 {
		t.Fatalf("emptied log: [%d, %d]", w.FirstIndex(), w.LastIndex())
	}
	more := testRecords(100, 3)
	appendT(t, w, more, 3)
	closeT(t, w)
	w = openT(t, dir, Options{SegmentSize: 400})
	if w.FirstIndex() != 101 || w.LastIndex() != 103 {
		t.Fatalf("after reopen [%d, %d], want [101, 103]", w.FirstIndex(), w.LastIndex())
	}
	sameRecords(t, replayT(t, w), more)
}

// TestRollSyncsDirectory checks that exactly the batches that start a new
// segment file fsync the directory — once for the new file, then once more
// for the progress file that names it — and that every batch fsyncs the
// tail once (and a roll the progress file's temporary file too).
func TestRollSyncsDirectory(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	w := openT(t, dir, Options{SegmentSize: 500, Hooks: c.hooks()})
	rolls := 0
	for i := range 60 {
		before := len(segmentFiles(t, dir))
		_, syncs0, dirs0 := c.counts()
		appendT(t, w, testRecords(i, 1), 1)
		_, syncs1, dirs1 := c.counts()
		grew := len(segmentFiles(t, dir)) > before
		if grew {
			rolls++
		}
		if want := map[bool]int{true: 2, false: 0}[grew]; dirs1-dirs0 != want {
			t.Fatalf("append %d: new segment %v, %d directory syncs, want %d", i, grew, dirs1-dirs0, want)
		}
		if want := map[bool]int{true: 2, false: 1}[grew]; syncs1-syncs0 != want {
			t.Fatalf("append %d: new segment %v, %d fsyncs, want %d", i, grew, syncs1-syncs0, want)
		}
		if grew {
			c.mu.Lock()
			synced := c.syncedFiles[len(c.syncedFiles)-2:]
			c.mu.Unlock()
			if tail := segmentFiles(t, dir); synced[0] != tail[len(tail)-1] || synced[1] != filepath.Join(dir, progressTemp) {
				t.Fatalf("append %d: fsynced %v, want the new tail, then the progress file", i, synced)
			}
		}
	}
	if rolls < 3 {
		t.Fatalf("only %d segment rolls", rolls)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.syncedDirs {
		if d != dir {
			t.Fatalf("synced directory %s, want %s", d, dir)
		}
	}
}

func TestOpenSyncsDirectories(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "wal")
	c := &ioCounter{}
	w := openT(t, dir, Options{Hooks: c.hooks()})
	closeT(t, w)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.syncedDirs) != 2 || c.syncedDirs[0] != parent || c.syncedDirs[1] != dir {
		t.Fatalf("synced %v, want the parent (new directory) then the directory (new segment)", c.syncedDirs)
	}
}

// TestGroupCommit holds the first batch inside its fsync while more callers
// queue, and checks that they are all committed by one batch and one fsync.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	inSync := make(chan struct{})
	release := make(chan struct{})
	c := &ioCounter{blockSync: func(n int) {
		if n == 1 {
			close(inSync)
			<-release
		}
	}}
	var mu sync.Mutex
	var batches []int
	w := openT(t, dir, Options{Hooks: c.hooks(), OnSync: func(records, _ int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, records)
	}})
	queued := make(chan struct{}, 100)
	w.onEnqueue = func() { queued <- struct{}{} }

	type result struct {
		first, last uint64
		recs        []Record
	}
	results := make(chan result, 100)
	appendAsync := func(recs []Record) {
		go func() {
			first, last, err := w.Append(recs)
			if err != nil {
				t.Errorf("Append: %v", err)
			}
			results <- result{first, last, recs}
		}()
	}

	appendAsync(testRecords(0, 2))
	<-queued
	<-inSync // the committer is inside the first batch's fsync
	const callers, per = 8, 3
	for i := range callers {
		appendAsync(testRecords(100*(i+1), per))
	}
	for range callers {
		<-queued
	}
	close(release)

	byFirst := map[uint64]result{}
	for range callers + 1 {
		r := <-results
		byFirst[r.first] = r
		if r.last-r.first+1 != uint64(len(r.recs)) {
			t.Fatalf("Append of %d records returned [%d, %d]", len(r.recs), r.first, r.last)
		}
	}
	if _, syncs, _ := c.counts(); syncs != 2 {
		t.Fatalf("%d fsyncs for %d callers, want 2 (the held batch, then one for the rest)", syncs, callers+1)
	}
	mu.Lock()
	if len(batches) != 2 || batches[0] != 2 || batches[1] != callers*per {
		t.Fatalf("OnSync saw batches %v, want [2 %d]", batches, callers*per)
	}
	mu.Unlock()

	// The indexes tile [1, LastIndex] and each caller's records sit at
	// the indexes it was given.
	var want []Record
	for idx := uint64(1); idx <= w.LastIndex(); {
		r, ok := byFirst[idx]
		if !ok {
			t.Fatalf("no caller got index %d; results %v", idx, byFirst)
		}
		want = append(want, r.recs...)
		idx = r.last + 1
	}
	if w.LastIndex() != 2+callers*per {
		t.Fatalf("LastIndex = %d", w.LastIndex())
	}
	sameRecords(t, replayT(t, w), want)
}

func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	syncs, records := 0, 0
	w := openT(t, dir, Options{SegmentSize: 4096, OnSync: func(n, _ int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		syncs++
		records += n
	}})
	const goroutines, appends = 16, 25
	got := make([][][2]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range appends {
				recs := testRecords(g*1000+i*4, 1+i%4)
				first, last, err := w.Append(recs)
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				got[g] = append(got[g], [2]uint64{first, last})
			}
		})
	}
	wg.Wait()

	// Rebuild what each index must hold from the callers' answers.
	byIndex := map[uint64]Record{}
	total := 0
	for g := range goroutines {
		for i, r := range got[g] {
			recs := testRecords(g*1000+i*4, 1+i%4)
			if r[1]-r[0]+1 != uint64(len(recs)) {
				t.Fatalf("goroutine %d append %d: [%d, %d] for %d records", g, i, r[0], r[1], len(recs))
			}
			for k, rec := range recs {
				if _, dup := byIndex[r[0]+uint64(k)]; dup {
					t.Fatalf("index %d handed out twice", r[0]+uint64(k))
				}
				byIndex[r[0]+uint64(k)] = rec
			}
			total += len(recs)
		}
	}
	if w.LastIndex() != uint64(total) {
		t.Fatalf("LastIndex = %d, appended %d", w.LastIndex(), total)
	}
	want := make([]Record, total)
	for i := range want {
		want[i] = byIndex[uint64(i+1)]
	}
	sameRecords(t, replayT(t, w), want)
	mu.Lock()
	defer mu.Unlock()
	if records != total || syncs > goroutines*appends {
		t.Fatalf("OnSync: %d records in %d batches, want %d records", records, syncs, total)
	}
	t.Logf("%d records in %d appends, %d fsyncs", total, goroutines*appends, syncs)
}

// checkSticky asserts that w has failed with err and keeps failing without
// touching the disk.
func checkSticky(t *testing.T, w *WAL, c *ioCounter, logs *logCapture, injected error, file string) {
	t.Helper()
	sticky := w.Err()
	if !errors.Is(sticky, ErrWrite) || !errors.Is(sticky, injected) {
		t.Fatalf("Err() = %v, want ErrWrite wrapping %v", sticky, injected)
	}
	if !strings.Contains(sticky.Error(), file) {
		t.Fatalf("Err() = %v, want it to name %s", sticky, file)
	}
	c.set(func(c *ioCounter) { c.failWrite, c.failSync, c.failDirSync = nil, nil, nil })
	writes, syncs, dirSyncs := c.counts()
	last := w.LastIndex()
	for range 3 {
		if _, _, err := w.Append(testRecords(0, 2)); err != sticky {
			t.Fatalf("later Append = %v, want the sticky %v", err, sticky)
		}
	}
	if _, _, err := w.Append(nil); err != sticky {
		t.Fatalf("empty Append = %v, want the sticky error", err)
	}
	if err := w.TruncateFront(w.FirstIndex() + 1); err != sticky {
		t.Fatalf("TruncateFront = %v, want the sticky error", err)
	}
	if err := w.Replay(func(uint64, Record) error { return nil }); err != sticky {
		t.Fatalf("Replay = %v, want the sticky error", err)
	}
	if w2, s2, d2 := c.counts(); w2 != writes || s2 != syncs || d2 != dirSyncs {
		t.Fatalf("after the failure the WAL did more I/O: writes %d→%d, fsyncs %d→%d, dir fsyncs %d→%d",
			writes, w2, syncs, s2, dirSyncs, d2)
	}
	if w.LastIndex() != last {
		t.Fatalf("LastIndex moved from %d to %d after the failure", last, w.LastIndex())
	}
	if err := w.Close(); err != sticky {
		t.Fatalf("Close = %v, want the sticky error", err)
	}
	if n := logs.errorCount(); n != 1 {
		t.Fatalf("%d errors logged, want one when the WAL failed", n)
	}
}

func TestStickyWriteError(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	logger, logs := captureLogs()
	w := openT(t, dir, Options{Hooks: c.hooks(), Logger: logger})
	appendT(t, w, testRecords(0, 5), 5)
	injected := errors.New("injected EIO")
	c.set(func(c *ioCounter) { c.failWrite = injected })
	_, _, err := w.Append(testRecords(5, 1))
	if !errors.Is(err, ErrWrite) || !errors.Is(err, injected) {
		t.Fatalf("Append = %v, want ErrWrite wrapping the injected error", err)
	}
	checkSticky(t, w, c, logs, injected, filepath.Join(dir, segmentName(1)))

	// What was acknowledged before the failure is still there.
	w = openT(t, dir, Options{})
	sameRecords(t, replayT(t, w), testRecords(0, 5))
}

func TestStickySyncError(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	logger, logs := captureLogs()
	w := openT(t, dir, Options{Hooks: c.hooks(), Logger: logger})
	appendT(t, w, testRecords(0, 5), 5)
	injected := errors.New("injected fsync failure")
	c.set(func(c *ioCounter) { c.failSync = injected })
	if _, _, err := w.Append(testRecords(5, 1)); !errors.Is(err, injected) || !errors.Is(err, ErrWrite) {
		t.Fatalf("Append = %v, want ErrWrite wrapping the injected error", err)
	}
	_, syncs, _ := c.counts()
	checkSticky(t, w, c, logs, injected, filepath.Join(dir, segmentName(1)))
	if _, s, _ := c.counts(); s != syncs {
		t.Fatalf("fsync retried: %d calls, then %d", syncs, s)
	}
}

// TestFailedBatchFailsQueuedCallers checks that callers queued behind a
// batch whose fsync fails get the error too, and that their batch is never
// written.
func TestFailedBatchFailsQueuedCallers(t *testing.T) {
	dir := t.TempDir()
	injected := errors.New("injected fsync failure")
	inSync := make(chan struct{})
	release := make(chan struct{})
	c := &ioCounter{failSync: injected, blockSync: func(n int) {
		if n == 1 {
			close(inSync)
			<-release
		}
	}}
	logger, _ := captureLogs()
	w := openT(t, dir, Options{Hooks: c.hooks(), Logger: logger})
	queued := make(chan struct{}, 10)
	w.onEnqueue = func() { queued <- struct{}{} }
	errs := make(chan error, 10)
	appendAsync := func(i int) {
		go func() {
			_, _, err := w.Append(testRecords(i, 2))
			errs <- err
		}()
	}
	appendAsync(0)
	<-queued
	<-inSync
	const callers = 4
	for i := range callers {
		appendAsync(10 * (i + 1))
	}
	for range callers {
		<-queued
	}
	close(release)
	for range callers + 1 {
		if err := <-errs; !errors.Is(err, injected) || !errors.Is(err, ErrWrite) {
			t.Fatalf("Append = %v, want the injected fsync error", err)
		}
	}
	if writes, syncs, _ := c.counts(); writes != 1 || syncs != 1 {
		t.Fatalf("%d writes and %d fsyncs, want 1 and 1: the queued batch must not be written", writes, syncs)
	}
	if w.LastIndex() != 0 {
		t.Fatalf("LastIndex = %d, nothing was acknowledged", w.LastIndex())
	}
}

func TestStickyDirSyncError(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	logger, logs := captureLogs()
	w := openT(t, dir, Options{SegmentSize: 200, Hooks: c.hooks(), Logger: logger})
	injected := errors.New("injected directory fsync failure")
	c.set(func(c *ioCounter) { c.failDirSync = injected })
	// Append until a batch starts a new segment; that batch must fail.
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, _, err = w.Append(testRecords(i, 1))
	}
	if !errors.Is(err, injected) {
		t.Fatalf("Append = %v, want the injected directory fsync error", err)
	}
	checkSticky(t, w, c, logs, injected, dir)
}

func TestStickyTruncateDirSyncError(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	logger, logs := captureLogs()
	w := openT(t, dir, Options{SegmentSize: 200, Hooks: c.hooks(), Logger: logger})
	appendT(t, w, testRecords(0, 30), 3)
	injected := errors.New("injected directory fsync failure")
	c.set(func(c *ioCounter) { c.failDirSync = injected })
	if err := w.TruncateFront(10); !errors.Is(err, injected) || !errors.Is(err, ErrWrite) {
		t.Fatalf("TruncateFront = %v, want ErrWrite wrapping the injected error", err)
	}
	checkSticky(t, w, c, logs, injected, dir)
}

func TestAppendInvalidType(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	for _, typ := range []RecordType{0, 5, 255} {
		_, _, err := w.Append([]Record{testRecord(0), {Type: typ, Group: 1}})
		if !errors.Is(err, ErrInvalidRecord) {
			t.Fatalf("type %d: Append = %v, want ErrInvalidRecord", typ, err)
		}
	}
	if w.LastIndex() != 0 || w.Err() != nil {
		t.Fatalf("after refused appends: LastIndex %d, Err %v", w.LastIndex(), w.Err())
	}
	appendT(t, w, testRecords(0, 1), 1)
}

func TestEmptyAppend(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	if first, last, err := w.Append(nil); first != 0 || last != 0 || err != nil {
		t.Fatalf("Append(nil) = %d, %d, %v", first, last, err)
	}
	if w.LastIndex() != 0 {
		t.Fatalf("LastIndex = %d", w.LastIndex())
	}
}

func TestClosed(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	appendT(t, w, testRecords(0, 3), 3)
	closeT(t, w)
	if _, _, err := w.Append(testRecords(3, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if err := w.Replay(func(uint64, Record) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Replay after Close = %v", err)
	}
	if err := w.TruncateFront(2); !errors.Is(err, ErrClosed) {
		t.Fatalf("TruncateFront after Close = %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if w.LastIndex() != 3 {
		t.Fatalf("LastIndex after Close = %d", w.LastIndex())
	}
}

func TestReplayStopsOnError(t *testing.T) {
	w := openT(t, t.TempDir(), Options{})
	appendT(t, w, testRecords(0, 10), 10)
	stop := errors.New("stop")
	var seen []uint64
	err := w.Replay(func(i uint64, _ Record) error {
		seen = append(seen, i)
		if i == 4 {
			return stop
		}
		return nil
	})
	if err != stop || len(seen) != 4 {
		t.Fatalf("Replay = %v after %v, want stop after 4 records", err, seen)
	}
}

func TestInvalidOptions(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{SegmentSize: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open with negative SegmentSize = %v", err)
	}
	o := Options{}
	if err := o.Validate(); err != nil || o.SegmentSize != DefaultSegmentSize || o.Logger == nil {
		t.Fatalf("Validate filled %+v, %v", o, err)
	}
}

func TestOpenNotADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	writeFile(t, path, []byte("x"))
	if _, err := Open(path, Options{}); err == nil {
		t.Fatal("Open of a regular file succeeded")
	}
}

var modelSeed = flag.Uint64("wal.seed", 0, "seed for TestModel (0: pick one)")

// TestModel drives the WAL with random appends, truncations, reopenings and
// torn tails, and compares it with a slice after every step. A failure
// prints the seed; rerun with -wal.seed to reproduce it.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -wal.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	dir := t.TempDir()
	opts := func() Options {
		logger, _ := captureLogs()
		return Options{SegmentSize: 64 + rng.IntN(1024), NoSync: true, Logger: logger}
	}
	w := openT(t, dir, opts())
	var model []Record // records from first on
	first := uint64(1)
	next := 0
	for step := range 300 {
		switch op := rng.IntN(20); {
		case op < 12:
			n := 1 + rng.IntN(5)
			recs := testRecords(next, n)
			next += n
			appendT(t, w, recs, n)
			model = append(model, recs...)
		case op < 15:
			last := first + uint64(len(model)) - 1
			idx := first + uint64(rng.IntN(len(model)+1))
			if err := w.TruncateFront(idx); err != nil {
				t.Fatalf("step %d: TruncateFront(%d) on [%d, %d]: %v", step, idx, first, last, err)
			}
			model = model[idx-first:]
			first = idx
		case op < 18:
			closeT(t, w)
			w = openT(t, dir, opts())
		default:
			// A crash in the middle of a write: part of an unsynced
			// record at the end of the last segment.
			closeT(t, w)
			files := segmentFiles(t, dir)
			torn := appendRecord(nil, testRecord(next))
			framed := append(binaryUvarint(len(torn)), torn...)
			appendFile(t, files[len(files)-1], framed[:1+rng.IntN(len(framed)-1)])
			w = openT(t, dir, opts())
		}
		if w.FirstIndex() != first || w.LastIndex() != first+uint64(len(model))-1 {
			t.Fatalf("step %d: WAL holds [%d, %d], model [%d, %d]", step, w.FirstIndex(), w.LastIndex(), first, first+uint64(len(model))-1)
		}
		if step%10 == 0 {
			sameRecords(t, replayT(t, w), model)
		}
	}
	sameRecords(t, replayT(t, w), model)
}

func binaryUvarint(n int) []byte {
	var b []byte
	for x := uint64(n); ; x >>= 7 {
		if x < 0x80 {
			return append(b, byte(x))
		}
		b = append(b, byte(x)|0x80)
	}
}

// ExampleWAL shows the calls a node makes. It is compiled, not run, because
// tests write only under t.TempDir().
func ExampleWAL() {
	w, err := Open("/var/lib/cutkv/wal", Options{})
	if err != nil {
		panic(err)
	}
	first, last, err := w.Append([]Record{
		{Type: RecordEntry, Group: 3, Data: []byte("entry")},
		{Type: RecordHardState, Group: 3, Data: []byte("hard state")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("appended", first, last)
	_ = w.Replay(func(index uint64, r Record) error {
		fmt.Println(index, r.Type, r.Group, string(r.Data))
		return nil
	})
	if err := w.Close(); err != nil {
		panic(err)
	}
}

func TestSegmentStart(t *testing.T) {
	w, err := Open(t.TempDir(), Options{SegmentSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < 50; i++ {
		if _, _, err := w.Append([]Record{{Type: RecordEntry, Group: 1, Data: make([]byte, 200)}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.SegmentStart(1); got != 1 {
		t.Fatalf("SegmentStart(1) = %d", got)
	}
	s := w.SegmentStart(40)
	if s <= 1 || s > 40 {
		t.Fatalf("SegmentStart(40) = %d, want a later segment's start at or below 40", s)
	}
	if err := w.TruncateFront(s); err != nil {
		t.Fatal(err)
	}
	if w.FirstIndex() != s || w.SegmentStart(s) != s || w.SegmentStart(2) != s {
		t.Fatalf("after truncating to %d: first %d, SegmentStart %d", s, w.FirstIndex(), w.SegmentStart(2))
	}
}

// TestReadByIndex reads single records back across segments, while the
// front is truncated, and refuses indexes outside the log.
func TestReadByIndex(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 512})
	want := testRecords(0, 120)
	appendT(t, w, want, 9)
	for _, i := range []uint64{1, 2, 57, 119, 120} {
		r, err := w.Read(i)
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		sameRecords(t, []Record{r}, want[i-1:i])
	}
	for _, i := range []uint64{0, 121, 1000} {
		if _, err := w.Read(i); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("Read(%d) = %v, want ErrOutOfRange", i, err)
		}
	}
	if err := w.TruncateFront(w.SegmentStart(60)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Read(w.FirstIndex() - 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Read below the truncated front = %v, want ErrOutOfRange", err)
	}
	r, err := w.Read(100)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, []Record{r}, want[99:100])
}

// TestAfterSyncSeesDurableFiles: AfterSync follows every successful fsync
// BeforeSync announced, with the file's bytes written, and never a failed
// one (the synced-length log of a failpoints build relies on it).
func TestAfterSyncSeesDurableFiles(t *testing.T) {
	dir := t.TempDir()
	c := &ioCounter{}
	var mu sync.Mutex
	var after []string
	sizes := map[string]int64{}
	h := c.hooks()
	h.AfterSync = func(seg string) {
		mu.Lock()
		defer mu.Unlock()
		after = append(after, seg)
		if st, err := os.Stat(seg); err == nil {
			sizes[seg] = st.Size()
		}
	}
	w := openT(t, dir, Options{Hooks: h})
	appendT(t, w, testRecords(0, 5), 5)
	mu.Lock()
	n := len(after)
	_, syncs, _ := c.counts()
	seg := filepath.Join(dir, segmentName(1))
	if n == 0 || n != syncs {
		mu.Unlock()
		t.Fatalf("AfterSync called %d times for %d fsyncs", n, syncs)
	}
	st, err := os.Stat(seg)
	if err != nil || sizes[seg] != st.Size() {
		mu.Unlock()
		t.Fatalf("after the appends %s holds %v bytes (%v); AfterSync saw %d", seg, st.Size(), err, sizes[seg])
	}
	mu.Unlock()
	c.set(func(c *ioCounter) { c.failSync = errors.New("injected fsync failure") })
	if _, _, err := w.Append(testRecords(5, 1)); err == nil {
		t.Fatal("Append with a failing fsync succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(after) != n {
		t.Fatalf("AfterSync called for a failed fsync: %v", after[n:])
	}
}
