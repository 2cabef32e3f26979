package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fixture writes and closes a log of 60 records spread over segments of
// about 512 bytes, then tail appended with a large segment size so that the
// tail records end the last segment. It returns the directory and every
// record, oldest first.
func fixture(t *testing.T, tail ...Record) (string, []Record) {
	t.Helper()
	dir := t.TempDir()
	recs := testRecords(0, 60)
	w := openT(t, dir, Options{SegmentSize: 512, NoSync: true})
	appendT(t, w, recs, 3)
	closeT(t, w)
	if len(tail) > 0 {
		w = openT(t, dir, Options{SegmentSize: 1 << 20, NoSync: true})
		appendT(t, w, tail, 1)
		closeT(t, w)
		recs = append(recs, tail...)
	}
	if n := len(segmentFiles(t, dir)); n < 4 {
		t.Fatalf("fixture has %d segments, want at least 4", n)
	}
	return dir, recs
}

// defaultTail is three records that end the last segment; the middle one is
// long enough for a two-byte length prefix.
func defaultTail() []Record {
	return []Record{
		{Type: RecordEntry, Group: 5, Data: []byte("tail one")},
		{Type: RecordEntry, Group: 5, Data: bytes.Repeat([]byte("long "), 60)},
		{Type: RecordHardState, Group: 5, Data: []byte("tail three")},
	}
}

// openRepaired opens dir, expecting one torn-tail warning for file at offset
// with dropped bytes, and checks that the file was cut there.
func openRepaired(t *testing.T, dir, file string, offset, dropped int64) *WAL {
	t.Helper()
	logger, logs := captureLogs()
	w := openT(t, dir, Options{Logger: logger})
	warns := logs.warnings()
	if len(warns) != 1 {
		t.Fatalf("got warnings %v, want one about the torn tail", warns)
	}
	got := warns[0]
	if !strings.Contains(got["msg"].(string), "torn tail") || got["file"] != file || got["offset"] != offset || got["bytes"] != dropped {
		t.Fatalf("warning %v, want file=%s offset=%d bytes=%d", got, file, offset, dropped)
	}
	if size := int64(len(readFile(t, file))); size != offset {
		t.Fatalf("%s is %d bytes after repair, want %d", file, size, offset)
	}
	return w
}

// openRefused opens dir, expecting a *CorruptError for file at offset and no
// change to any file.
func openRefused(t *testing.T, dir, file string, offset int64, reason string) {
	t.Helper()
	before := snapshotDir(t, dir)
	logger, logs := captureLogs()
	w, err := Open(dir, Options{Logger: logger})
	if err == nil {
		_ = w.Close()
		t.Fatalf("Open succeeded, want corruption at %s:%d", file, offset)
	}
	ce := corruptAt(t, err, file, offset)
	if !strings.Contains(ce.Reason, reason) {
		t.Fatalf("reason %q, want it to mention %q", ce.Reason, reason)
	}
	if !strings.Contains(err.Error(), file) || (offset >= 0 && !strings.Contains(err.Error(), "offset")) {
		t.Fatalf("error %q does not name the file and offset", err)
	}
	if after := snapshotDir(t, dir); !maps.EqualFunc(before, after, bytes.Equal) {
		t.Fatal("a refused Open changed files")
	}
	if w := logs.warnings(); len(w) != 0 {
		t.Fatalf("a refused Open logged repairs: %v", w)
	}
}

// lastSegment returns the path of the last segment and its frames.
func lastSegment(t *testing.T, dir string) (path string, offs, ends []int64) {
	files := segmentFiles(t, dir)
	path = files[len(files)-1]
	offs, ends = frames(t, path)
	return path, offs, ends
}

func truncateFile(t *testing.T, path string, size int64) {
	t.Helper()
	writeFile(t, path, readFile(t, path)[:size])
}

func TestRepairHalfWrittenLastEntry(t *testing.T) {
	dir, recs := fixture(t, defaultTail()...)
	file, offs, ends := lastSegment(t, dir)
	k := len(offs) - 1
	cut := offs[k] + (ends[k]-offs[k])/2
	truncateFile(t, file, cut)

	w := openRepaired(t, dir, file, offs[k], cut-offs[k])
	if w.LastIndex() != uint64(len(recs)-1) {
		t.Fatalf("LastIndex = %d, want %d", w.LastIndex(), len(recs)-1)
	}
	sameRecords(t, replayT(t, w), recs[:len(recs)-1])
	// The log goes on where the torn record was.
	more := testRecords(500, 2)
	appendT(t, w, more, 2)
	closeT(t, w)
	logger, logs := captureLogs()
	w = openT(t, dir, Options{Logger: logger})
	if len(logs.warnings()) != 0 {
		t.Fatalf("second open warned: %v", logs.warnings())
	}
	sameRecords(t, replayT(t, w), append(recs[:len(recs)-1:len(recs)-1], more...))
}

func TestRepairTornLengthPrefix(t *testing.T) {
	// The final record has a two-byte length prefix; keep only its first
	// byte.
	dir, recs := fixture(t, Record{Type: RecordEntry, Group: 1, Data: bytes.Repeat([]byte{7}, 300)})
	file, offs, _ := lastSegment(t, dir)
	k := len(offs) - 1
	truncateFile(t, file, offs[k]+1)
	w := openRepaired(t, dir, file, offs[k], 1)
	sameRecords(t, replayT(t, w), recs[:len(recs)-1])
}

func TestRepairZeroFill(t *testing.T) {
	for _, n := range []int{1, 7, 4096} {
		dir, recs := fixture(t, defaultTail()...)
		file, _, ends := lastSegment(t, dir)
		appendFile(t, file, make([]byte, n))
		w := openRepaired(t, dir, file, ends[len(ends)-1], int64(n))
		if w.LastIndex() != uint64(len(recs)) {
			t.Fatalf("%d zero bytes: LastIndex = %d, want %d (no phantom records)", n, w.LastIndex(), len(recs))
		}
		sameRecords(t, replayT(t, w), recs)
	}
}

func TestRepairIncompleteFinalRecord(t *testing.T) {
	// A length prefix promising 1000 bytes, of which 10 made it.
	dir, recs := fixture(t, defaultTail()...)
	file, _, ends := lastSegment(t, dir)
	partial := appendRecord(nil, Record{Type: RecordEntry, Group: 9, Data: bytes.Repeat([]byte("p"), 1000)})
	framed := binary.AppendUvarint(nil, uint64(len(partial)))
	appendFile(t, file, append(framed, partial[:10]...))
	w := openRepaired(t, dir, file, ends[len(ends)-1], int64(len(framed)+10))
	sameRecords(t, replayT(t, w), recs)
}

// TestRepairHalfWrittenSector covers a crash that extended the file but left
// sectors of the final record unwritten (reading as zeros): the record is
// complete by length but fails its checksum.
func TestRepairHalfWrittenSector(t *testing.T) {
	big := Record{Type: RecordEntry, Group: 3, Data: bytes.Repeat([]byte("data"), 500)}
	for _, tc := range []struct {
		name  string
		zero  func(start, end int64) (from, to int64) // range of the final entry to zero
		extra int                                     // zero bytes after the entry
	}{
		{"whole sector in the middle", func(s, e int64) (int64, int64) {
			from := (s+600)/sectorSize*sectorSize + sectorSize
			return from, from + sectorSize
		}, 0},
		{"from a sector boundary to the end", func(s, e int64) (int64, int64) {
			return (e - 5) / sectorSize * sectorSize, e
		}, 0},
		{"with zeros after it", func(s, e int64) (int64, int64) {
			return (s+1000)/sectorSize*sectorSize + sectorSize, e
		}, 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, recs := fixture(t, testRecord(70), big)
			file, offs, ends := lastSegment(t, dir)
			k := len(offs) - 1
			data := readFile(t, file)
			from, to := tc.zero(offs[k], ends[k])
			clear(data[from:to])
			data = append(data, make([]byte, tc.extra)...)
			writeFile(t, file, data)
			w := openRepaired(t, dir, file, offs[k], ends[k]-offs[k]+int64(tc.extra))
			sameRecords(t, replayT(t, w), recs[:len(recs)-1])
		})
	}
}

func TestRefuseFlippedBit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		segment func(files []string) string
		entry   func(n int) int // which entry of the segment
		byteAt  func(off, end int64) int64
	}{
		{"payload, older segment", func(f []string) string { return f[1] }, func(n int) int { return n / 2 },
			func(off, end int64) int64 { return end - 6 }},
		{"payload, last segment, middle", func(f []string) string { return f[len(f)-1] }, func(n int) int { return n - 2 },
			func(off, end int64) int64 { return end - 8 }},
		{"payload, last segment, final record", func(f []string) string { return f[len(f)-1] }, func(n int) int { return n - 1 },
			func(off, end int64) int64 { return end - 5 }},
		{"type byte", func(f []string) string { return f[len(f)-1] }, func(n int) int { return n - 1 },
			func(off, end int64) int64 { return off + 1 }},
		{"checksum", func(f []string) string { return f[len(f)-1] }, func(n int) int { return n - 1 },
			func(off, end int64) int64 { return end - 1 }},
		{"first segment, first record", func(f []string) string { return f[0] }, func(int) int { return 0 },
			func(off, end int64) int64 { return off + 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := fixture(t, defaultTail()...)
			file := tc.segment(segmentFiles(t, dir))
			offs, ends := frames(t, file)
			k := tc.entry(len(offs))
			data := readFile(t, file)
			data[tc.byteAt(offs[k], ends[k])] ^= 0x04
			writeFile(t, file, data)
			openRefused(t, dir, file, offs[k], "checksum mismatch")
		})
	}
}

func TestLengthPrefixPastEnd(t *testing.T) {
	t.Run("earlier segment", func(t *testing.T) {
		dir, _ := fixture(t, defaultTail()...)
		file := segmentFiles(t, dir)[1]
		offs, ends := frames(t, file)
		k := len(offs) - 1
		truncateFile(t, file, ends[k]-3)
		openRefused(t, dir, file, offs[k], "length prefix promises")
	})
	t.Run("last segment, valid records behind it", func(t *testing.T) {
		// A flipped bit in the two-byte prefix of the long middle
		// record makes it promise 8 KiB more than the file holds. The
		// records behind it are intact, so this is damage, not a torn
		// tail, and dropping them would lose acknowledged records.
		dir, _ := fixture(t, defaultTail()...)
		file, offs, _ := lastSegment(t, dir)
		k := len(offs) - 2
		data := readFile(t, file)
		if data[offs[k]]&0x80 == 0 {
			t.Fatal("fixture: middle tail record has a one-byte prefix")
		}
		data[offs[k]+1] ^= 0x40
		writeFile(t, file, data)
		openRefused(t, dir, file, offs[k], "a valid record follows")
	})
	// The last segment's final record is TestRepairIncompleteFinalRecord.
}

func TestRefuseDamagedOlderSegment(t *testing.T) {
	t.Run("zero fill", func(t *testing.T) {
		dir, _ := fixture(t)
		file := segmentFiles(t, dir)[1]
		size := int64(len(readFile(t, file)))
		appendFile(t, file, make([]byte, 64))
		openRefused(t, dir, file, size, "shorter than the minimum")
	})
	t.Run("cut inside a length prefix", func(t *testing.T) {
		dir, _ := fixture(t)
		file := segmentFiles(t, dir)[1]
		offs, _ := frames(t, file)
		data := readFile(t, file)
		for _, off := range offs {
			if data[off]&0x80 != 0 { // a two-byte prefix: keep one byte
				truncateFile(t, file, off+1)
				openRefused(t, dir, file, off, "ends inside a length prefix")
				return
			}
		}
		t.Fatal("fixture: no two-byte length prefix in the segment")
	})
	t.Run("missing segment", func(t *testing.T) {
		dir, _ := fixture(t)
		files := segmentFiles(t, dir)
		remove(t, files[1])
		openRefused(t, dir, files[2], 0, "entries are missing")
	})
}

func TestRefuseValidChecksumBadRecord(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		entry        []byte
	}{
		{"unknown type", "unknown record type 9", withCRC(9, 1, 'x')},
		{"group varint not shortest", "malformed group varint", withCRC(1, 0x81, 0x00, 'x')},
		{"group varint runs off", "malformed group varint", withCRC(2, 0xff, 0xff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := fixture(t, defaultTail()...)
			file, _, ends := lastSegment(t, dir)
			appendFile(t, file, append(binary.AppendUvarint(nil, uint64(len(tc.entry))), tc.entry...))
			openRefused(t, dir, file, ends[len(ends)-1], tc.reason)
		})
	}
}

func TestRefuseZerosThenData(t *testing.T) {
	dir, _ := fixture(t, defaultTail()...)
	file, _, ends := lastSegment(t, dir)
	rec := appendRecord(nil, testRecord(80))
	appendFile(t, file, append(make([]byte, 16), append(binary.AppendUvarint(nil, uint64(len(rec))), rec...)...))
	openRefused(t, dir, file, ends[len(ends)-1], "shorter than the minimum")
}

func TestRefuseHalfWrittenSectorNotFinal(t *testing.T) {
	// A record with a zeroed sector is only a torn tail if nothing but
	// zeros follows it.
	big := Record{Type: RecordEntry, Group: 3, Data: bytes.Repeat([]byte("data"), 500)}
	dir, _ := fixture(t, big, testRecord(71))
	file, offs, _ := lastSegment(t, dir)
	k := len(offs) - 2
	data := readFile(t, file)
	from := (offs[k]+600)/sectorSize*sectorSize + sectorSize
	clear(data[from : from+sectorSize])
	writeFile(t, file, data)
	openRefused(t, dir, file, offs[k], "checksum mismatch")
}

// interruptedTruncation returns a fixture and what tidwall/wal's
// TruncateFront writes first when the WAL truncates to the second record of
// the third segment: the bytes of that segment from that record on. slot is
// the record's tidwall index, which names the new file, and index its WAL
// index.
func interruptedTruncation(t *testing.T) (dir string, recs []Record, index, slot uint64, kept []byte, files []string) {
	dir, recs = fixture(t)
	files = segmentFiles(t, dir)
	start := segmentStart(t, files[2])
	offs, _ := frames(t, files[2])
	if len(offs) < 3 {
		t.Fatalf("fixture: segment has %d entries", len(offs))
	}
	slot = start + 2 // entry 0 is the chain record
	return dir, recs, recordIndexes(t, dir)[slot], slot, readFile(t, files[2])[offs[2]:], files
}

func segmentStart(t testing.TB, path string) uint64 {
	t.Helper()
	var start uint64
	for _, c := range filepath.Base(path) {
		start = start*10 + uint64(c-'0')
	}
	return start
}

func TestInterruptedTruncation(t *testing.T) {
	t.Run("start file written", func(t *testing.T) {
		dir, recs, index, slot, kept, files := interruptedTruncation(t)
		writeFile(t, filepath.Join(dir, segmentName(slot)+startSuffix), kept)
		w := openT(t, dir, Options{})
		if w.FirstIndex() != index || w.LastIndex() != uint64(len(recs)) {
			t.Fatalf("[%d, %d], want [%d, %d]", w.FirstIndex(), w.LastIndex(), index, len(recs))
		}
		sameRecords(t, replayT(t, w), recs[index-1:])
		names := dirNames(t, dir)
		for _, f := range files[:3] {
			if hasName(names, filepath.Base(f)) {
				t.Fatalf("%s still there: %v", f, names)
			}
		}
		if !hasName(names, segmentName(slot)) || hasName(names, segmentName(slot)+startSuffix) {
			t.Fatalf("start file not renamed: %v", names)
		}
	})
	t.Run("renamed, removals lost", func(t *testing.T) {
		dir, recs, index, slot, kept, files := interruptedTruncation(t)
		writeFile(t, filepath.Join(dir, segmentName(slot)), kept)
		logger, logs := captureLogs()
		w := openT(t, dir, Options{Logger: logger})
		if w.FirstIndex() != index {
			t.Fatalf("FirstIndex = %d, want %d", w.FirstIndex(), index)
		}
		sameRecords(t, replayT(t, w), recs[index-1:])
		if got := len(logs.warnings()); got != 3 {
			t.Fatalf("%d warnings, want one per removed segment: %v", got, logs.warnings())
		}
		names := dirNames(t, dir)
		for _, f := range files[:3] {
			if hasName(names, filepath.Base(f)) {
				t.Fatalf("%s still there: %v", f, names)
			}
		}
	})
	t.Run("overlap that does not repeat the entries", func(t *testing.T) {
		dir, _, _, slot, kept, _ := interruptedTruncation(t)
		file := filepath.Join(dir, segmentName(slot-1)) // names the wrong index
		writeFile(t, file, kept)
		openRefused(t, dir, file, 0, "does not repeat its entries")
	})
	t.Run("stale temp file", func(t *testing.T) {
		dir, recs := fixture(t)
		temp := segmentName(7) + startSuffix + tempSuffix
		writeFile(t, filepath.Join(dir, temp), []byte("half a copy"))
		w := openT(t, dir, Options{})
		sameRecords(t, replayT(t, w), recs)
		if hasName(dirNames(t, dir), temp) {
			t.Fatal("temp file not removed")
		}
	})
	t.Run("end file", func(t *testing.T) {
		dir, _ := fixture(t)
		file := filepath.Join(dir, segmentName(3)+endSuffix)
		writeFile(t, file, nil)
		openRefused(t, dir, file, -1, ".END")
	})
}

func TestHasUnwrittenSector(t *testing.T) {
	data := bytes.Repeat([]byte{1}, 2000)
	if hasUnwrittenSector(100, data) {
		t.Fatal("no zeros, yet reported")
	}
	z := bytes.Clone(data)
	clear(z[412:924]) // file offsets 512..1024: a whole sector
	if !hasUnwrittenSector(100, z) {
		t.Fatal("whole zero sector not found")
	}
	z = bytes.Clone(data)
	clear(z[413:925]) // 512 zeros, but not sector-aligned
	if hasUnwrittenSector(100, z) {
		t.Fatal("unaligned zeros taken for a sector")
	}
	z = bytes.Clone(data)
	clear(z[1948:]) // file offsets 2048..2100: the entry's tail from a boundary
	if !hasUnwrittenSector(100, z) {
		t.Fatal("zeroed final bytes from a sector boundary not found")
	}
	z = bytes.Clone(data)
	clear(z[1997:]) // the last 3 bytes only: less than a checksum
	if hasUnwrittenSector(100, z) {
		t.Fatal("three zero bytes taken for an unwritten sector")
	}
}

// FuzzScanSegment checks that parsing arbitrary segment bytes never panics
// and that what it accepts is consistent.
func FuzzScanSegment(f *testing.F) {
	var seg []byte
	for i := range 5 {
		rec := appendRecord(nil, testRecord(i))
		seg = append(binary.AppendUvarint(seg, uint64(len(rec))), rec...)
	}
	f.Add(seg, true)
	f.Add(seg[:len(seg)-3], true)
	f.Add(append(bytes.Clone(seg), make([]byte, 600)...), true)
	f.Add(seg, false)
	f.Fuzz(func(t *testing.T, data []byte, last bool) {
		sc, err := scanSegment("seg", 1, data, last)
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset >= int64(len(data)) {
				t.Fatalf("bad error %v", err)
			}
			return
		}
		if sc.torn != "" && !last {
			t.Fatal("torn tail reported in a segment that is not the last")
		}
		if sc.torn == "" && sc.end != int64(len(data)) || sc.end > int64(len(data)) {
			t.Fatalf("end %d of %d bytes, torn %q", sc.end, len(data), sc.torn)
		}
		for i, off := range sc.offsets {
			size, n := binary.Uvarint(data[off:])
			end := off + int64(n) + int64(size)
			if i+1 < len(sc.offsets) && end != sc.offsets[i+1] || i+1 == len(sc.offsets) && end != sc.end {
				t.Fatalf("entry %d at %d does not end where the next begins", i, off)
			}
			if _, err := decodeRecord(data[off+int64(n) : end]); err != nil {
				t.Fatalf("accepted entry %d does not decode: %v", i, err)
			}
		}
	})
}

// TestWriteErrorNamesFileOnce: a failed write names the file and the
// cause once (the node's fatal line quotes it), and matches ErrWrite and
// the cause.
func TestWriteErrorNamesFileOnce(t *testing.T) {
	const seg = "/d/wal/00000000000000000007"
	for _, tt := range []struct {
		op   string
		err  error
		want string
	}{
		{"write", &fs.PathError{Op: "write", Path: seg, Err: syscall.ENOSPC}, "wal: write failed: write " + seg + ": no space left on device"},
		{"fsync", &fs.PathError{Op: "sync", Path: seg, Err: syscall.EIO}, "wal: write failed: fsync " + seg + ": sync " + seg + ": input/output error"},
		{"write", fmt.Errorf("tidwall: %w", &fs.PathError{Op: "write", Path: seg, Err: syscall.ENOSPC}), "wal: write failed: write " + seg + ": tidwall: write " + seg + ": no space left on device"},
		{"write", syscall.ENOSPC, "wal: write failed: write " + seg + ": no space left on device"},
	} {
		err := writeError(tt.op, seg, tt.err)
		if err.Error() != tt.want {
			t.Errorf("writeError(%s, %v) = %q, want %q", tt.op, tt.err, err, tt.want)
		}
		if !errors.Is(err, ErrWrite) || !errors.Is(err, tt.err) {
			t.Errorf("writeError(%s, %v) does not match ErrWrite and its cause", tt.op, tt.err)
		}
	}
}
