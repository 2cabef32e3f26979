package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// equalRecords returns n records of one size, so that every full segment
// holds the same number of them.
func equalRecords(from, n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		data := bytes.Repeat([]byte{byte(from + i)}, 80)
		binary.LittleEndian.PutUint32(data, uint32(from+i))
		recs[i] = Record{Type: RecordEntry, Group: 3, Data: data}
	}
	return recs
}

// chainedFixture writes and closes a log of 60 equal records of node over
// segments of about 512 bytes, appended one by one. It returns the
// directory and the records.
func chainedFixture(t *testing.T, node string) (string, []Record) {
	t.Helper()
	dir := t.TempDir()
	recs := equalRecords(0, 60)
	w := openT(t, dir, Options{SegmentSize: 512, NoSync: true, NodeID: node})
	appendT(t, w, recs, 1)
	closeT(t, w)
	if n := len(segmentFiles(t, dir)); n < 5 {
		t.Fatalf("fixture has %d segments, want at least 5", n)
	}
	return dir, recs
}

// openChainRefused opens dir, expecting a *ChainError that names segment
// and other (the file it was checked against, "" for none) and gives a
// reason mentioning reason, and no change to any file.
func openChainRefused(t *testing.T, dir string, o Options, segment, other, reason string) *ChainError {
	t.Helper()
	before := snapshotDir(t, dir)
	logger, logs := captureLogs()
	o.Logger = logger
	w, err := Open(dir, o)
	if err == nil {
		_ = w.Close()
		t.Fatalf("Open succeeded, want the chain refused at %s", segment)
	}
	if !errors.Is(err, ErrChain) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrChain (and ErrCorrupt)", err)
	}
	var ce *ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v is not a *ChainError", err)
	}
	if ce.Segment != segment || ce.Other != other {
		t.Fatalf("refused %s against %q, want %s against %q (%v)", ce.Segment, ce.Other, segment, other, err)
	}
	if !strings.Contains(ce.Reason, reason) {
		t.Fatalf("reason %q, want it to mention %q", ce.Reason, reason)
	}
	if !strings.Contains(err.Error(), segment) || !strings.Contains(err.Error(), other) {
		t.Fatalf("error %q does not name the files", err)
	}
	if after := snapshotDir(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatal("a refused Open changed files")
	}
	if w := logs.warnings(); len(w) != 0 {
		t.Fatalf("a refused Open logged repairs: %v", w)
	}
	return ce
}

// entryRecords decodes every entry of a segment file.
func entryRecords(t testing.TB, path string) []Record {
	t.Helper()
	data := readFile(t, path)
	offs, ends := frames(t, path)
	recs := make([]Record, len(offs))
	for k, off := range offs {
		_, n := binary.Uvarint(data[off:])
		r, err := decodeRecord(data[off+int64(n) : ends[k]])
		if err != nil {
			t.Fatalf("%s entry %d: %v", path, k, err)
		}
		recs[k] = r
	}
	return recs
}

// chainOf decodes the chain record a segment file starts with; ok is false
// if it starts with none.
func chainOf(t testing.TB, path string) (c chain, ok bool) {
	t.Helper()
	recs := entryRecords(t, path)
	if len(recs) == 0 || recs[0].Type != RecordChain {
		return chain{}, false
	}
	c, reason := decodeChain(recs[0].Data)
	if reason != "" {
		t.Fatalf("%s: %s", path, reason)
	}
	return c, true
}

// lastEntry returns the record bytes of a segment file's last entry.
func lastEntry(t testing.TB, path string) []byte {
	t.Helper()
	data := readFile(t, path)
	offs, ends := frames(t, path)
	off := offs[len(offs)-1]
	_, n := binary.Uvarint(data[off:])
	return data[off+int64(n) : ends[len(ends)-1]]
}

// TestChainRecordStartsEverySegment checks, over batches of every size
// (some spanning several segments), that each segment file starts with a
// chain record naming the file, the previous segment's last record and its
// link, that no other entry is one, and that the records keep consecutive
// WAL indexes.
func TestChainRecordStartsEverySegment(t *testing.T) {
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 300, NodeID: "node-a", NoSync: true})
	var want []Record
	next := 0
	for _, n := range []int{1, 2, 3, 7, 1, 1, 20, 4, 1, 13, 2} {
		recs := testRecords(next, n)
		next += n
		appendT(t, w, recs, n)
		want = append(want, recs...)
	}
	sameRecords(t, replayT(t, w), want)
	files := segmentFiles(t, dir)
	if len(files) < 8 {
		t.Fatalf("%d segments, want several", len(files))
	}
	var incarnation uint64
	records := uint64(0)
	for i, f := range files {
		c, ok := chainOf(t, f)
		if !ok {
			t.Fatalf("%s does not start with a chain record", f)
		}
		if i == 0 {
			incarnation = c.incarnation
		}
		if c.slot != segmentStart(t, f) || c.prev != records || c.node != "node-a" || c.incarnation != incarnation {
			t.Fatalf("%s: chain %+v, want slot %d, prev %d, node-a, incarnation %x", f, c, segmentStart(t, f), records, incarnation)
		}
		wantLink := [linkLen]byte{}
		if i > 0 {
			wantLink = linkOf(lastEntry(t, files[i-1]))
		}
		if c.link != wantLink {
			t.Fatalf("%s: link does not match the last entry of the segment before", f)
		}
		for k, r := range entryRecords(t, f)[1:] {
			if r.Type == RecordChain {
				t.Fatalf("%s: entry %d is a chain record", f, k+1)
			}
			records++
		}
	}
	if records != w.LastIndex() {
		t.Fatalf("%d records in the files, LastIndex %d", records, w.LastIndex())
	}
	for i := uint64(1); i <= w.LastIndex(); i++ {
		r, err := w.Read(i)
		if err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		sameRecords(t, []Record{r}, want[i-1:i])
	}
}

func TestRefuseOldSegmentCopiedIn(t *testing.T) {
	t.Run("under the next segment's name", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		tail := files[len(files)-1]
		// An old segment with as many entries as the tail had slots left
		// would also fit the indexes; the chain record tells.
		next := filepath.Join(dir, segmentName(segmentStart(t, tail)+uint64(len(entryRecords(t, tail)))))
		writeFile(t, next, readFile(t, files[1]))
		openChainRefused(t, dir, Options{}, next, "", "chain record of segment "+filepath.Base(files[1]))
	})
	t.Run("older copy of the segment before", func(t *testing.T) {
		// The previous segment replaced by a copy of itself from when it
		// was the tail and shorter: the entries no longer reach the next
		// segment.
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		offs, _ := frames(t, files[2])
		truncateFile(t, files[2], offs[len(offs)-1])
		openRefused(t, dir, files[3], 0, "entries are missing")
	})
}

func TestRefuseSegmentsOutOfOrder(t *testing.T) {
	dir, _ := chainedFixture(t, "")
	files := segmentFiles(t, dir)
	a, b := readFile(t, files[1]), readFile(t, files[2])
	if len(entryRecords(t, files[1])) != len(entryRecords(t, files[2])) {
		t.Fatal("fixture: segments 1 and 2 differ in entries")
	}
	writeFile(t, files[1], b)
	writeFile(t, files[2], a)
	openChainRefused(t, dir, Options{}, files[1], "", "chain record of segment "+filepath.Base(files[2]))
}

// TestRefuseForeignSegment builds a second log whose segments have the same
// names as the first's and puts one of them in.
func TestRefuseForeignSegment(t *testing.T) {
	for _, tc := range []struct {
		name        string
		node, other string
		which       func(n int) int
	}{
		{"another node's, in the middle", "n1", "n2", func(n int) int { return n / 2 }},
		{"another node's, as the tail", "n1", "n2", func(n int) int { return n - 1 }},
		{"an earlier incarnation of this node's, in the middle", "n1", "n1", func(n int) int { return 2 }},
		{"an earlier incarnation, as the first segment", "n1", "n1", func(int) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := chainedFixture(t, tc.node)
			foreign, _ := chainedFixture(t, tc.other) // the same records, so the same names
			files := segmentFiles(t, dir)
			theirs := segmentFiles(t, foreign)
			if !slices.Equal(dirNames(t, dir), dirNames(t, foreign)) {
				t.Fatal("fixture: the two logs have different files")
			}
			k := tc.which(len(files))
			writeFile(t, files[k], readFile(t, theirs[k]))
			progress := filepath.Join(dir, progressName)
			openChainRefused(t, dir, Options{NodeID: tc.node}, files[k], progress, "belongs to another log")
		})
	}
	t.Run("a whole log of another node", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n2")
		openChainRefused(t, dir, Options{NodeID: "n1"}, filepath.Join(dir, progressName), "", `belongs to node "n2"`)
	})
}

func TestRefuseMissingSegment(t *testing.T) {
	t.Run("middle", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		remove(t, files[2])
		openRefused(t, dir, files[3], 0, "entries are missing")
	})
	t.Run("newest", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		remove(t, files[len(files)-1])
		openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "newer segments are missing")
	})
	t.Run("newest two", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		remove(t, files[len(files)-1])
		remove(t, files[len(files)-2])
		ce := openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "newer segments are missing")
		if !strings.Contains(ce.Reason, files[len(files)-3]) {
			t.Fatalf("reason %q does not name the newest segment left", ce.Reason)
		}
	})
	t.Run("every segment", func(t *testing.T) {
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		for _, f := range files {
			remove(t, f)
		}
		openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "no segment at all")
	})
	t.Run("newest emptied", func(t *testing.T) {
		// Cut at the first record boundary: even the chain record the
		// progress file counts on is gone.
		dir, _ := chainedFixture(t, "n1")
		files := segmentFiles(t, dir)
		truncateFile(t, files[len(files)-1], 0)
		openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "starts with a chain record; it has none")
	})
}

// TestUndetectedTailCut documents what the chain cannot see (doc.go,
// "Segment chain"): the newest segment cut at a record boundary after its
// chain record looks like a crash before those records were fsynced.
func TestUndetectedTailCut(t *testing.T) {
	dir, recs := chainedFixture(t, "n1")
	w := openT(t, dir, Options{SegmentSize: 1 << 20})
	appendT(t, w, equalRecords(60, 3), 1)
	closeT(t, w)
	file, offs, _ := lastSegment(t, dir)
	truncateFile(t, file, offs[len(offs)-2])
	w = openT(t, dir, Options{})
	if w.LastIndex() != uint64(len(recs)+1) {
		t.Fatalf("LastIndex = %d, want %d", w.LastIndex(), len(recs)+1)
	}
}

func TestPreChainLog(t *testing.T) {
	dir := t.TempDir()
	// The old format: segments of plain records, named by the index of
	// their first record, and no progress file.
	old := equalRecords(0, 25)
	for start := 0; start < len(old); start += 10 {
		var seg []byte
		for _, r := range old[start:min(start+10, len(old))] {
			rec := appendRecord(nil, r)
			seg = append(binary.AppendUvarint(seg, uint64(len(rec))), rec...)
		}
		writeFile(t, filepath.Join(dir, segmentName(uint64(start+1))), seg)
	}
	preFiles := segmentFiles(t, dir)

	logger, logs := captureLogs()
	w := openT(t, dir, Options{SegmentSize: 512, Logger: logger, NodeID: "n1"})
	if warns := logs.warnings(); len(warns) != 1 || !strings.Contains(warns[0]["msg"].(string), "predates segment chaining") {
		t.Fatalf("warnings %v, want one saying the log is unchained", warns)
	}
	if w.FirstIndex() != 1 || w.LastIndex() != 25 {
		t.Fatalf("[%d, %d], want [1, 25]", w.FirstIndex(), w.LastIndex())
	}
	sameRecords(t, replayT(t, w), old)
	// It is chained from its next segment on; the old ones stay as they
	// are and the indexes go on.
	more := equalRecords(25, 40)
	appendT(t, w, more, 1)
	closeT(t, w)
	files := segmentFiles(t, dir)
	for _, f := range preFiles {
		if _, ok := chainOf(t, f); ok {
			t.Fatalf("%s gained a chain record", f)
		}
	}
	c, ok := chainOf(t, files[len(preFiles)])
	if !ok || c.prev != segmentStart(t, files[len(preFiles)])-1 || c.node != "n1" ||
		c.link != linkOf(lastEntry(t, preFiles[len(preFiles)-1])) {
		t.Fatalf("first new segment %s: chain %+v, %v", files[len(preFiles)], c, ok)
	}

	logger, logs = captureLogs()
	w = openT(t, dir, Options{Logger: logger})
	if len(logs.warnings()) != 0 {
		t.Fatalf("reopening warned: %v", logs.warnings())
	}
	sameRecords(t, replayT(t, w), append(old, more...))
	closeT(t, w)

	// Now the chained part is checked, back to the last old segment.
	first := files[len(preFiles)]
	saved := readFile(t, first)
	writeFile(t, first, readFile(t, files[len(preFiles)+1]))
	openChainRefused(t, dir, Options{}, first, "", "chain record of segment")
	writeFile(t, first, saved)
	remove(t, files[len(files)-1])
	openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "newer segments are missing")
}

// TestPreChainSegmentAfterChained refuses an unchained segment among
// chained ones: an old-format segment copied in.
func TestPreChainSegmentAfterChained(t *testing.T) {
	dir, _ := chainedFixture(t, "n1")
	files := segmentFiles(t, dir)
	// Its records and one more in place of the chain record, so that the
	// indexes still fit.
	recs := append(entryRecords(t, files[3])[1:], equalRecords(100, 1)...)
	var seg []byte
	for _, r := range recs {
		rec := appendRecord(nil, r)
		seg = append(binary.AppendUvarint(seg, uint64(len(rec))), rec...)
	}
	writeFile(t, files[3], seg)
	openChainRefused(t, dir, Options{}, files[3], files[2], "has no chain record but follows a chained segment")
}

// TestTruncateFrontKeepsChain truncates inside the first segment and inside
// the tail, and checks that what remains is still verified after the new
// anchor.
func TestTruncateFrontKeepsChain(t *testing.T) {
	dir, recs := chainedFixture(t, "n1")
	w := openT(t, dir, Options{SegmentSize: 512})
	older := readFile(t, segmentFiles(t, dir)[1])
	mid := w.SegmentStart(w.LastIndex()/2) + 2 // inside a segment
	if err := w.TruncateFront(mid); err != nil {
		t.Fatal(err)
	}
	closeT(t, w)
	w = openT(t, dir, Options{SegmentSize: 512})
	if w.FirstIndex() != mid {
		t.Fatalf("FirstIndex = %d, want %d", w.FirstIndex(), mid)
	}
	sameRecords(t, replayT(t, w), recs[mid-1:])
	closeT(t, w)
	after := segmentFiles(t, dir)
	if _, ok := chainOf(t, after[0]); ok {
		t.Fatalf("%s, rewritten by the truncation, kept a chain record", after[0])
	}
	// The segments after the anchor are still checked.
	saved := readFile(t, after[2])
	writeFile(t, after[2], older)
	openChainRefused(t, dir, Options{}, after[2], "", "chain record of segment")
	writeFile(t, after[2], saved)

	// Inside the tail: the tail gets a new name, which the progress file
	// follows.
	w = openT(t, dir, Options{SegmentSize: 1 << 20})
	appendT(t, w, equalRecords(60, 5), 5)
	last := w.LastIndex()
	if err := w.TruncateFront(last - 1); err != nil {
		t.Fatal(err)
	}
	closeT(t, w)
	if n := len(segmentFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments after truncating inside the tail", n)
	}
	w = openT(t, dir, Options{SegmentSize: 512})
	if w.FirstIndex() != last-1 || w.LastIndex() != last {
		t.Fatalf("[%d, %d], want [%d, %d]", w.FirstIndex(), w.LastIndex(), last-1, last)
	}
	appendT(t, w, equalRecords(65, 20), 1)
	sameRecords(t, replayT(t, w), append(equalRecords(63, 2), equalRecords(65, 20)...))
	closeT(t, w)
	files := segmentFiles(t, dir)
	remove(t, files[len(files)-1])
	openChainRefused(t, dir, Options{}, files[len(files)-1], filepath.Join(dir, progressName), "newer segments are missing")
}

func TestNodeID(t *testing.T) {
	dir, _ := chainedFixture(t, "")
	// A log that records no node takes the first one given, and keeps it.
	w := openT(t, dir, Options{NodeID: "n7", SegmentSize: 512})
	appendT(t, w, equalRecords(60, 20), 1)
	closeT(t, w)
	files := segmentFiles(t, dir)
	if c, _ := chainOf(t, files[len(files)-1]); c.node != "n7" {
		t.Fatalf("new segment written for node %q, want n7", c.node)
	}
	if c, _ := chainOf(t, files[0]); c.node != "" {
		t.Fatalf("old segment rewritten: node %q", c.node)
	}
	w = openT(t, dir, Options{SegmentSize: 512}) // no node id: checks nothing, keeps n7
	appendT(t, w, equalRecords(80, 20), 1)
	closeT(t, w)
	files = segmentFiles(t, dir)
	if c, _ := chainOf(t, files[len(files)-1]); c.node != "n7" {
		t.Fatalf("segment written for node %q after opening without a node id, want n7", c.node)
	}
	openChainRefused(t, dir, Options{NodeID: "n8"}, filepath.Join(dir, progressName), "", `belongs to node "n7", it was opened as node "n8"`)

	if _, err := Open(t.TempDir(), Options{NodeID: strings.Repeat("x", 256)}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Open with a 256-byte NodeID = %v, want ErrInvalidOptions", err)
	}
}

func TestRefuseDamagedProgressFile(t *testing.T) {
	dir, _ := chainedFixture(t, "n1")
	path := filepath.Join(dir, progressName)
	data := readFile(t, path)
	data[10] ^= 1
	writeFile(t, path, data)
	before := snapshotDir(t, dir)
	_, err := Open(dir, Options{})
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Segment != path || !strings.Contains(ce.Reason, "checksum mismatch") {
		t.Fatalf("Open = %v, want a *CorruptError naming %s", err, path)
	}
	if after := snapshotDir(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatal("a refused Open changed files")
	}
}

// TestRefuseOversizedProgressFile: a progress file with the longest node
// id opens, and one byte more, or a large file under the name, is refused
// as corrupt without being read whole.
func TestRefuseOversizedProgressFile(t *testing.T) {
	dir, _ := chainedFixture(t, strings.Repeat("n", maxNodeIDLen))
	path := filepath.Join(dir, progressName)
	data := readFile(t, path)
	if len(data) != progressMaxLen {
		t.Fatalf("progress file of %d bytes, want the longest, %d", len(data), progressMaxLen)
	}
	closeT(t, openT(t, dir, Options{}))
	for _, extra := range []int{1, 1 << 20} {
		writeFile(t, path, append(slices.Clone(data), make([]byte, extra)...))
		before := snapshotDir(t, dir)
		_, err := Open(dir, Options{})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Segment != path || !strings.Contains(ce.Reason, "longer than the maximum") {
			t.Fatalf("Open with %d bytes more in the progress file = %v, want a *CorruptError naming %s", extra, err, path)
		}
		if after := snapshotDir(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
			t.Fatal("a refused Open changed files")
		}
	}
}

// TestKeepsDirectoryOpen checks that the WAL holds its directory open while
// it is (for every directory fsync) and lets it go at Close.
func TestKeepsDirectoryOpen(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	holds := func(dir string) bool {
		t.Helper()
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == dir {
				return true
			}
		}
		return false
	}
	dir := t.TempDir()
	w := openT(t, dir, Options{SegmentSize: 300})
	if w.dirFile == nil || !holds(dir) {
		t.Fatal("the WAL does not hold its directory open")
	}
	appendT(t, w, testRecords(0, 40), 2) // rolls segments: directory fsyncs
	if err := w.TruncateFront(20); err != nil {
		t.Fatal(err)
	}
	closeT(t, w)
	if holds(dir) {
		t.Fatal("the directory is still open after Close")
	}
}

// crashImage is the directory as a crash at one I/O step could leave it,
// and what the log must hold then.
type crashImage struct {
	step    string
	files   map[string][]byte
	first   [2]uint64 // the FirstIndex it may open with: before and after a truncation in progress
	acked   []Record  // acknowledged records, from first[0] on
	newTail string    // the tail segment, if the batch in progress created it
}

// crashScript drives a WAL through add (appends of the given sizes, one
// call each) and truncate (TruncateFront).
type crashScript func(w *WAL, add func(sizes ...int), truncate func(index uint64))

// TestCrashImages takes an image of the directory at every I/O step the WAL
// takes — as if the machine stopped right there with everything before it
// on disk — while it starts segments (some batches several), truncates
// inside its tail, at a segment boundary and to empty, and chains the
// emptied log again; and the same for a log that never starts a second
// segment (so it has no progress file until a truncation renames its tail).
// Where a batch created the tail, the image is also taken with that file
// empty and with half its chain record (the file's name durable, its data
// not). Every image must open with its WAL indexes, hold every record
// acknowledged before the step, and go on across a new segment.
func TestCrashImages(t *testing.T) {
	for _, tc := range []struct {
		name        string
		segmentSize int
		script      crashScript
	}{
		{"rolling", 300, func(w *WAL, add func(...int), truncate func(uint64)) {
			add(1, 2, 5, 1, 9, 1, 3, 1)
			truncate(w.LastIndex() - 1) // inside the tail
			add(2, 12, 1, 1)
			truncate(w.SegmentStart(w.LastIndex())) // at the tail's start: only files go
			add(4, 1)
			truncate(w.LastIndex() + 1) // empty
			add(1, 6, 1)
		}},
		{"one segment", 1 << 20, func(w *WAL, add func(...int), truncate func(uint64)) {
			add(3, 2)
			truncate(3) // inside the tail, before any progress file
			add(1, 2)
			truncate(w.LastIndex() + 1)
			add(2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runCrashImages(t, tc.segmentSize, tc.script) })
	}
}

func runCrashImages(t *testing.T, segmentSize int, script crashScript) {
	dir := t.TempDir()
	var (
		images  []crashImage
		model   []Record // acknowledged, from first on
		first   = uint64(1)
		target  = uint64(1) // FirstIndex once a truncation in progress is done
		before  map[string]bool
		current string
	)
	snap := func(step, file string) {
		img := crashImage{step: step + " " + filepath.Base(file), files: snapshotDir(t, dir),
			first: [2]uint64{first, max(first, target)}, acked: slices.Clone(model)}
		if step == "fsync" && file != filepath.Join(dir, progressTemp) && !before[filepath.Base(file)] {
			img.newTail = filepath.Base(file)
		}
		images = append(images, img)
	}
	hooks := Hooks{
		BeforeWrite: func(f string, _ int) error {
			if filepath.Base(f) != progressTemp {
				before = map[string]bool{}
				for _, n := range dirNames(t, dir) {
					before[n] = true
				}
			}
			snap("write", f)
			return nil
		},
		BeforeSync:    func(f string) error { snap("fsync", f); return nil },
		BeforeSyncDir: func(d string) error { snap("fsync directory in "+current, d); return nil },
	}
	w := openT(t, dir, Options{SegmentSize: segmentSize, Hooks: hooks, NodeID: "n1"})
	next := 0
	add := func(sizes ...int) {
		for _, n := range sizes {
			recs := testRecords(next, n)
			next += n
			current = "append"
			appendT(t, w, recs, n)
			model = append(model, recs...)
		}
	}
	truncate := func(index uint64) {
		target, current = index, "truncate"
		if err := w.TruncateFront(index); err != nil {
			t.Fatal(err)
		}
		model, first = model[index-first:], index
	}
	script(w, add, truncate)
	closeT(t, w)
	if len(images) < 10 {
		t.Fatalf("only %d images", len(images))
	}

	check := func(t *testing.T, img crashImage) {
		dir := t.TempDir()
		for name, data := range img.files {
			writeFile(t, filepath.Join(dir, name), data)
		}
		logger, _ := captureLogs()
		o := Options{SegmentSize: 300, NoSync: true, Logger: logger}
		w := openT(t, dir, o)
		lo, hi := img.first[0], img.first[1]
		if f := w.FirstIndex(); f < lo || f > hi {
			t.Fatalf("FirstIndex %d, want it in [%d, %d]", f, lo, hi)
		}
		if want := lo + uint64(len(img.acked)) - 1; w.LastIndex() < want {
			t.Fatalf("LastIndex %d: acknowledged records up to %d are lost", w.LastIndex(), want)
		}
		got := replayT(t, w)
		skip := w.FirstIndex() - lo
		if skip > uint64(len(img.acked)) {
			skip = uint64(len(img.acked))
		}
		sameRecords(t, got[:uint64(len(img.acked))-skip], img.acked[skip:])
		more := testRecords(900, 12)
		appendT(t, w, more, 1)
		closeT(t, w)
		w = openT(t, dir, o)
		sameRecords(t, replayT(t, w)[len(got):], more)
	}
	for i, img := range images {
		t.Run(strconv.Itoa(i)+" "+img.step, func(t *testing.T) { check(t, img) })
		if img.newTail == "" {
			continue
		}
		for _, cut := range []int{0, 30} {
			cutImg := img
			cutImg.files = maps.Clone(img.files)
			data := cutImg.files[img.newTail]
			cutImg.files[img.newTail] = data[:min(cut, len(data))]
			t.Run(strconv.Itoa(i)+" "+img.step+" cut "+strconv.Itoa(cut), func(t *testing.T) { check(t, cutImg) })
		}
	}
}

// TestCrashAfterSegmentCreated is a crash right after tidwall/wal created
// the next segment file, before its chain record reached the disk.
func TestCrashAfterSegmentCreated(t *testing.T) {
	for _, tc := range []struct {
		name string
		data func(chainRec []byte) []byte
		warn bool
	}{
		{"empty", func([]byte) []byte { return nil }, false},
		{"half a chain record", func(c []byte) []byte { return c[:len(c)/2] }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, recs := chainedFixture(t, "n1")
			file, _, _ := lastSegment(t, dir)
			next := filepath.Join(dir, segmentName(segmentStart(t, file)+uint64(len(entryRecords(t, file)))))
			framed := readFile(t, file)[:67] // the tail's own chain record, as a stand-in
			writeFile(t, next, tc.data(framed))
			logger, logs := captureLogs()
			w := openT(t, dir, Options{SegmentSize: 512, Logger: logger})
			if got := len(logs.warnings()); (got == 1) != tc.warn || got > 1 {
				t.Fatalf("warnings %v", logs.warnings())
			}
			if w.LastIndex() != uint64(len(recs)) {
				t.Fatalf("LastIndex = %d, want %d", w.LastIndex(), len(recs))
			}
			more := equalRecords(60, 10)
			appendT(t, w, more, 1)
			closeT(t, w)
			if c, ok := chainOf(t, next); !ok || c.slot != segmentStart(t, next) || c.prev != uint64(len(recs)) {
				t.Fatalf("%s was not chained where the log stood: %+v", next, c)
			}
			w = openT(t, dir, Options{})
			sameRecords(t, replayT(t, w), append(recs, more...))
		})
	}
}

// TestCrashBeforeProgressUpdate is a crash after a batch started a new
// segment and fsynced it, before the progress file named it; and the same
// for a truncation that renamed the tail.
func TestCrashBeforeProgressUpdate(t *testing.T) {
	progress := func(dir string) string { return filepath.Join(dir, progressName) }
	t.Run("new segment", func(t *testing.T) {
		dir, recs := chainedFixture(t, "n1")
		saved := readFile(t, progress(dir))
		w := openT(t, dir, Options{SegmentSize: 512})
		more := equalRecords(60, 12)
		appendT(t, w, more, 1)
		closeT(t, w)
		writeFile(t, progress(dir), saved)
		w = openT(t, dir, Options{SegmentSize: 512})
		sameRecords(t, replayT(t, w), append(recs, more...))
		closeT(t, w)
		// Open brought the progress file up to date.
		files := segmentFiles(t, dir)
		remove(t, files[len(files)-1])
		openChainRefused(t, dir, Options{}, files[len(files)-1], progress(dir), "newer segments are missing")
	})
	for _, tc := range []struct {
		name  string
		index func(w *WAL) uint64
	}{
		{"tail renamed by a truncation inside it", func(w *WAL) uint64 { return w.LastIndex() - 2 }},
		{"tail emptied", func(w *WAL) uint64 { return w.LastIndex() + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := chainedFixture(t, "n1")
			w := openT(t, dir, Options{SegmentSize: 1 << 20})
			more := equalRecords(60, 5)
			appendT(t, w, more, 1)
			saved := readFile(t, progress(dir))
			index := tc.index(w)
			if err := w.TruncateFront(index); err != nil {
				t.Fatal(err)
			}
			last := w.LastIndex()
			closeT(t, w)
			writeFile(t, progress(dir), saved)
			w = openT(t, dir, Options{SegmentSize: 512})
			if w.FirstIndex() != index || w.LastIndex() != last {
				t.Fatalf("[%d, %d], want [%d, %d]", w.FirstIndex(), w.LastIndex(), index, last)
			}
			tail := equalRecords(70, 12)
			appendT(t, w, tail, 1)
			closeT(t, w)
			w = openT(t, dir, Options{})
			sameRecords(t, replayT(t, w), append(more[5-(last+1-index):], tail...))
		})
	}
}
