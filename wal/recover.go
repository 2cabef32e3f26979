package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
)

// This file checks and repairs the segment files before tidwall/wal opens
// them (doc.go, "Recovery at Open"). tidwall/wal's own Open refuses a torn
// final entry, reads zero fill as empty entries and never looks inside an
// entry, so every segment is parsed and every record's checksum verified here
// first. Nothing on disk changes unless the whole log passed.

// segment is one segment file as the WAL tracks it.
type segment struct {
	start   uint64        // tidwall index of its first entry, which is also its file name
	size    int64         // bytes in the file
	first   uint64        // WAL index of its first record (the next record's, if it holds none)
	chained bool          // its first entry is a chain record
	link    [linkLen]byte // that chain record's link, for the progress file
}

// slot returns the tidwall index of record i, which must lie in s.
func (s segment) slot(i uint64) uint64 {
	if s.chained {
		return s.start + 1 + (i - s.first)
	}
	return s.start + (i - s.first)
}

// segmentName is tidwall/wal's file name for the segment whose first entry
// has index start: the index in decimal, zero-padded to 20 digits.
func segmentName(start uint64) string { return fmt.Sprintf("%020d", start) }

const (
	// startSuffix marks tidwall/wal's copy of the first segment during
	// TruncateFront; Open renames it to the plain name.
	startSuffix = ".START"
	// endSuffix marks tidwall/wal's copy of the last segment during
	// TruncateBack, which this package never calls.
	endSuffix = ".END"
	// tempSuffix marks the file tidwall/wal writes before renaming it to
	// a .START or .END name.
	tempSuffix = ".TEMP"

	// sectorSize is the granularity at which a crash can leave a file's
	// never-written range reading as zeros.
	sectorSize = 512

	// resyncBudget bounds the bytes checksummed while looking for a valid
	// record behind a length prefix that overruns the last segment.
	resyncBudget = 256 << 20
)

// diskFile is a segment file found in the directory.
type diskFile struct {
	name  string // base name
	start uint64
}

// scannedSegment is one segment file as scanDir found it.
type scannedSegment struct {
	name    string        // base name (a ".START" name until tidwall/wal renames it)
	start   uint64        // tidwall index of its first entry
	entries uint64        // valid entries, a torn tail not counted
	end     int64         // offset just past the last valid entry: the size after repair
	size    int64         // bytes in the file
	torn    string        // why the bytes from end on are a torn tail; "" if none
	chain   *chain        // its first entry, when that is a chain record
	lastSum [linkLen]byte // SHA-256 of its last entry's record, when it has one
}

// records is the number of records (entries other than the chain record)
// in s.
func (s scannedSegment) records() uint64 {
	if s.chain != nil {
		return s.entries - 1
	}
	return s.entries
}

// dirScan is what scanDir found in a log's directory.
type dirScan struct {
	segs       []scannedSegment // the segments to keep, oldest first
	superseded []string         // leftovers of an interrupted TruncateFront, to remove
	temps      []string         // temporary files to remove
}

// scanDir lists and verifies the segment files in dir without changing
// anything. It returns the segments as they will be named once tidwall/wal
// has finished an interrupted TruncateFront, and what repair must remove
// or cut. An empty directory yields no segments. Damage that is not a torn
// tail yields a *CorruptError.
func scanDir(dir string) (*dirScan, error) {
	files, temps, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, progressTemp)); err == nil {
		temps = append(temps, progressTemp)
	}
	sc := &dirScan{temps: temps}
	var (
		prevData    []byte
		prevOffsets []int64
	)
	for i, f := range files {
		path := filepath.Join(dir, f.name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("wal: read segment %s: %w", path, err)
		}
		seg, err := scanSegment(path, f.start, data, i == len(files)-1)
		if err != nil {
			return nil, err
		}
		if len(sc.segs) > 0 {
			prev := sc.segs[len(sc.segs)-1]
			next := prev.start + prev.entries
			switch {
			case f.start <= prev.start:
				return nil, &CorruptError{Segment: path, Offset: 0, Index: f.start,
					Reason: fmt.Sprintf("segment does not start after segment %s", prev.name)}
			case f.start > next:
				return nil, &CorruptError{Segment: path, Offset: 0, Index: f.start,
					Reason: fmt.Sprintf("segment starts at index %d but segment %s ends at index %d: entries are missing",
						f.start, prev.name, next-1)}
			case f.start < next:
				// tidwall/wal's TruncateFront writes the kept tail of a
				// segment to a new file named by the new first index,
				// then removes the older files. A crash that persisted
				// the new name but not every removal leaves both; the new
				// file then begins with exactly the old one's bytes from
				// that index on. Anything else overlapping is damage.
				from := prevOffsets[f.start-prev.start]
				if !bytes.HasPrefix(data, prevData[from:prev.end]) {
					return nil, &CorruptError{Segment: path, Offset: 0, Index: f.start,
						Reason: fmt.Sprintf("segment starts at index %d inside segment %s (which ends at index %d) and does not repeat its entries",
							f.start, prev.name, next-1)}
				}
				for _, k := range sc.segs {
					sc.superseded = append(sc.superseded, k.name)
				}
				sc.segs = sc.segs[:0]
			}
		}
		sc.segs = append(sc.segs, seg.scannedSegment)
		prevData, prevOffsets = data, seg.offsets
	}
	return sc, nil
}

// repair removes the temporary files and superseded segments scanDir found
// and cuts the last segment's torn tail, logging each. Only call it once
// the whole log passed.
func (sc *dirScan) repair(dir string, e env, logger *slog.Logger) error {
	if err := removeTemps(dir, sc.temps, logger); err != nil {
		return err
	}
	for _, name := range sc.superseded {
		path := filepath.Join(dir, name)
		logger.Warn("wal: removing segment left behind by an interrupted truncation", "file", path)
		if err := os.Remove(path); err != nil {
			return writeError("remove", path, err)
		}
	}
	if len(sc.segs) == 0 {
		return nil
	}
	tail := sc.segs[len(sc.segs)-1]
	if tail.torn != "" {
		path := filepath.Join(dir, tail.name)
		if err := cutTail(path, tail.end, e); err != nil {
			return err
		}
		logger.Warn("wal: cut off torn tail of the last segment",
			"file", path, "offset", tail.end, "bytes", tail.size-tail.end, "reason", tail.torn)
	}
	return nil
}

// listSegments returns the segment files of dir in index order, as
// tidwall/wal's Open will see them once it has completed an interrupted
// TruncateFront (files before a .START file are dropped), and the names of
// leftover temporary files.
func listSegments(dir string) (files []diskFile, temps []string, err error) {
	entries, err := os.ReadDir(dir) // sorted by name, as tidwall/wal sorts
	if err != nil {
		return nil, nil, fmt.Errorf("wal: list %s: %w", dir, err)
	}
	for _, de := range entries {
		name := de.Name()
		if de.IsDir() || len(name) < 20 {
			continue
		}
		start, perr := strconv.ParseUint(name[:20], 10, 64)
		if perr != nil || start == 0 {
			continue // tidwall/wal ignores such names too
		}
		switch rest := name[20:]; rest {
		case "":
			files = append(files, diskFile{name: name, start: start})
		case startSuffix:
			files = append(files[:0], diskFile{name: name, start: start})
		case endSuffix:
			return nil, nil, &CorruptError{Segment: filepath.Join(dir, name), Offset: -1,
				Reason: "unexpected .END file: this WAL never truncates the back of its log"}
		default:
			if rest == startSuffix+tempSuffix || rest == endSuffix+tempSuffix {
				temps = append(temps, name)
			}
		}
	}
	return files, temps, nil
}

// removeTemps removes the temporary files an interrupted TruncateFront or
// progress file update left. They hold nothing the log needs: a segment's
// copy is either also in a .START file or still in the segments it was
// copied from, and a progress file counts only once renamed.
func removeTemps(dir string, temps []string, logger *slog.Logger) error {
	for _, name := range temps {
		path := filepath.Join(dir, name)
		logger.Info("wal: removing temporary file left by an interrupted truncation or progress update", "file", path)
		if err := os.Remove(path); err != nil {
			return writeError("remove", path, err)
		}
	}
	return nil
}

// scanned is the result of scanSegment.
type scanned struct {
	scannedSegment
	offsets []int64 // offset of the length prefix of each valid entry
}

// scanSegment parses data, the content of segment file path whose first
// entry has index start, and verifies every record. In the last segment a
// torn tail (doc.go, "Recovery at Open") stops the scan and is reported in
// torn; every other failure is a *CorruptError, as is a chain record that
// is not the segment's first entry.
func scanSegment(path string, start uint64, data []byte, last bool) (scanned, error) {
	sc := scanned{scannedSegment: scannedSegment{name: filepath.Base(path), start: start, size: int64(len(data))}}
	corrupt := func(off int, reason string) error {
		return &CorruptError{Segment: path, Offset: int64(off), Index: start + uint64(len(sc.offsets)), Reason: reason}
	}
	var lastEntry []byte
	off := 0
	for off < len(data) {
		rest := data[off:]
		size, n := binary.Uvarint(rest)
		if n == 0 {
			if last {
				sc.torn = fmt.Sprintf("incomplete length prefix (%d bytes at the end of the file)", len(rest))
				break
			}
			return sc, corrupt(off, "segment ends inside a length prefix")
		}
		if n < 0 {
			return sc, corrupt(off, "length prefix overflows 64 bits")
		}
		if size == 0 && last && allZero(rest) {
			sc.torn = fmt.Sprintf("%d zero bytes after the last record", len(rest))
			break
		}
		if size > uint64(len(rest)-n) {
			reason := fmt.Sprintf("length prefix promises %d bytes but only %d remain in the file", size, len(rest)-n)
			if !last {
				return sc, corrupt(off, reason)
			}
			// A torn final record is the last thing in the file. If a
			// valid record follows, the prefix itself is damaged and the
			// records behind it must not be dropped.
			found, exhausted := findRecord(data[off+1:])
			if found {
				return sc, corrupt(off, reason+", and a valid record follows it")
			}
			if exhausted {
				reason += fmt.Sprintf(" (search for a valid record behind it stopped after %d bytes)", resyncBudget)
			}
			sc.torn = "incomplete final record: " + reason
			break
		}
		entry := rest[n : n+int(size)]
		r, reason := parseRecord(entry)
		if reason != "" {
			after := rest[n+int(size):]
			if last && len(entry) >= minRecordLen && !checksumOK(entry) && allZero(after) &&
				hasUnwrittenSector(int64(off+n), entry) {
				sc.torn = fmt.Sprintf("half-written final record: its %d bytes fail the checksum and include a never-written (all-zero) sector", len(entry))
				break
			}
			return sc, corrupt(off, reason)
		}
		if r.Type == RecordChain {
			if len(sc.offsets) > 0 {
				return sc, corrupt(off, "chain record inside a segment: only a segment's first entry may be one")
			}
			c, _ := decodeChain(r.Data) // parseRecord checked it
			sc.chain = &c
		}
		sc.offsets = append(sc.offsets, int64(off))
		lastEntry = entry
		off += n + int(size)
	}
	sc.entries = uint64(len(sc.offsets))
	if lastEntry != nil {
		sc.lastSum = linkOf(lastEntry)
	}
	if sc.torn == "" {
		sc.end = int64(len(data))
	} else {
		sc.end = int64(off)
	}
	return sc, nil
}

// findRecord reports whether a complete, valid framed record (length
// prefix, then a record whose checksum matches) starts anywhere in b. It
// gives up, reporting exhausted, once it has checksummed resyncBudget bytes.
func findRecord(b []byte) (found, exhausted bool) {
	budget := resyncBudget
	for p := 0; p+1+minRecordLen <= len(b); p++ {
		size, n := binary.Uvarint(b[p:])
		if n <= 0 || size < minRecordLen || size > uint64(len(b)-p-n) {
			continue
		}
		entry := b[p+n : p+n+int(size)]
		if !RecordType(entry[0]).Valid() {
			continue
		}
		if g, m := binary.Uvarint(entry[1:]); m <= 0 || m != uvarintLen(g) {
			continue
		}
		if budget < len(entry) {
			return false, true
		}
		budget -= len(entry)
		if checksumOK(entry) {
			return true, false
		}
	}
	return false, false
}

// hasUnwrittenSector reports whether the entry b, which starts at file
// offset abs, holds evidence of a write that never reached the disk: a
// sector-aligned stretch of it that is all zeros and is either a whole sector
// or the entry's final bytes (at least the whole checksum). A crash can leave
// an extended file's unwritten sectors reading as zeros; a flipped bit
// cannot produce such a stretch.
func hasUnwrittenSector(abs int64, b []byte) bool {
	end := abs + int64(len(b))
	for s := (abs + sectorSize - 1) / sectorSize * sectorSize; s < end; s += sectorSize {
		e := min(s+sectorSize, end)
		chunk := b[s-abs : e-abs]
		if (len(chunk) == sectorSize || (e == end && len(chunk) >= crcLen)) && allZero(chunk) {
			return true
		}
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// cutTail truncates the file at path to size bytes and fsyncs it.
func cutTail(path string, size int64, e env) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return writeError("open", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return writeError("truncate", path, err)
	}
	if err := e.syncFile(path, f.Sync); err != nil {
		return writeError("fsync", path, err)
	}
	if err := f.Close(); err != nil {
		return writeError("close", path, err)
	}
	return nil
}
