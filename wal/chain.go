package wal

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// This file holds the segment chain (doc.go, "Segment chain"): the chain
// record that starts each segment, the progress file that says which
// segment the log had reached, and the check Open runs over both before
// anything on disk changes.

const (
	// chainVersion is the version byte of a chain record and of the
	// progress file.
	chainVersion = 1
	// linkLen is the size of a link: a SHA-256 digest.
	linkLen = sha256.Size
	// maxNodeIDLen bounds Options.NodeID; its length is stored in one byte.
	maxNodeIDLen = 255
	// chainFixedLen is the size of a chain record's Data without the node
	// id: version, incarnation, slot, prev, link, node id length.
	chainFixedLen = 1 + 8 + 8 + 8 + linkLen + 1

	// progressName is the progress file in the log's directory; it is
	// replaced by writing progressTemp and renaming it.
	progressName = "progress"
	progressTemp = "progress.tmp"
	// progressMagic starts the progress file.
	progressMagic = "WALP"
	// progressFixedLen is the size of the progress file without the node
	// id: magic, version, flags, incarnation, tail, first, link, node id
	// length, CRC.
	progressFixedLen = 4 + 1 + 1 + 8 + 8 + 8 + linkLen + 1 + crcLen
	// progressMaxLen is the size of the longest progress file: one with
	// the longest node id.
	progressMaxLen = progressFixedLen + maxNodeIDLen
)

// chain is the Data of a RecordChain record: where the segment it starts
// continues from.
type chain struct {
	incarnation uint64        // the log's incarnation; never 0
	slot        uint64        // tidwall index of the chain record: the segment's file name
	prev        uint64        // WAL index of the last record before the segment, 0 if none
	link        [linkLen]byte // SHA-256 of the entry before the chain record, zero if none is known
	node        string        // the node id the log was written for, "" if none was given
}

// appendChain appends the encoding of c (doc.go, "Chain record") to dst.
func appendChain(dst []byte, c chain) []byte {
	dst = append(dst, chainVersion)
	dst = binary.LittleEndian.AppendUint64(dst, c.incarnation)
	dst = binary.LittleEndian.AppendUint64(dst, c.slot)
	dst = binary.LittleEndian.AppendUint64(dst, c.prev)
	dst = append(dst, c.link[:]...)
	dst = append(dst, byte(len(c.node)))
	return append(dst, c.node...)
}

// decodeChain decodes a chain record's Data. On failure it returns a
// human-readable reason. It accepts exactly what appendChain writes for a
// chain that could be written: a known version, an incarnation other than
// 0, a slot of at least 1 and fewer records before the segment than
// entries.
func decodeChain(b []byte) (chain, string) {
	if len(b) < chainFixedLen {
		return chain{}, fmt.Sprintf("%d bytes, shorter than the minimum %d", len(b), chainFixedLen)
	}
	if b[0] != chainVersion {
		return chain{}, fmt.Sprintf("unknown version %d", b[0])
	}
	var c chain
	c.incarnation = binary.LittleEndian.Uint64(b[1:])
	c.slot = binary.LittleEndian.Uint64(b[9:])
	c.prev = binary.LittleEndian.Uint64(b[17:])
	copy(c.link[:], b[25:25+linkLen])
	n := int(b[chainFixedLen-1])
	if len(b) != chainFixedLen+n {
		return chain{}, fmt.Sprintf("%d bytes, but a node id of %d bytes makes %d", len(b), n, chainFixedLen+n)
	}
	c.node = string(b[chainFixedLen:])
	switch {
	case c.incarnation == 0:
		return chain{}, "incarnation 0"
	case c.slot == 0:
		return chain{}, "slot 0"
	case c.prev >= c.slot:
		return chain{}, fmt.Sprintf("%d records before slot %d", c.prev, c.slot)
	}
	return c, ""
}

// chainRecord returns the encoded record (doc.go, "Record") holding c.
func chainRecord(c chain) []byte {
	return appendRecord(nil, Record{Type: RecordChain, Data: appendChain(nil, c)})
}

// chainEntryLen is the bytes a chain record for node takes in its segment,
// length prefix included.
func chainEntryLen(node string) int {
	l := encodedLen(Record{Type: RecordChain, Data: make([]byte, chainFixedLen+len(node))})
	return uvarintLen(uint64(l)) + l
}

// linkOf is the link a chain record placed after entry carries.
func linkOf(entry []byte) [linkLen]byte { return sha256.Sum256(entry) }

// newIncarnation draws a random incarnation other than 0.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
		if x := binary.LittleEndian.Uint64(b[:]); x != 0 {
			return x
		}
	}
}

// progress is the content of the progress file: the tail segment as it was
// when the log last started a segment (or renamed its tail, or was opened).
type progress struct {
	incarnation uint64
	tail        uint64        // tidwall index of the tail's first entry: its file name
	first       uint64        // WAL index of the tail's first record
	chained     bool          // the tail starts with a chain record
	link        [linkLen]byte // that chain record's link; zero when not chained
	node        string
}

// encodeProgress returns the progress file's bytes for p (doc.go,
// "Progress file").
func encodeProgress(p progress) []byte {
	b := make([]byte, 0, progressFixedLen+len(p.node))
	b = append(b, progressMagic...)
	b = append(b, chainVersion)
	var flags byte
	if p.chained {
		flags = 1
	}
	b = append(b, flags)
	b = binary.LittleEndian.AppendUint64(b, p.incarnation)
	b = binary.LittleEndian.AppendUint64(b, p.tail)
	b = binary.LittleEndian.AppendUint64(b, p.first)
	b = append(b, p.link[:]...)
	b = append(b, byte(len(p.node)))
	b = append(b, p.node...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeProgress decodes a progress file. On failure it returns a
// human-readable reason. It accepts exactly what encodeProgress writes for
// a progress that could be written.
func decodeProgress(b []byte) (progress, string) {
	if len(b) < progressFixedLen {
		return progress{}, fmt.Sprintf("%d bytes, shorter than the minimum %d", len(b), progressFixedLen)
	}
	if !checksumOK(b) {
		return progress{}, "checksum mismatch"
	}
	if string(b[:4]) != progressMagic {
		return progress{}, fmt.Sprintf("does not start with %q", progressMagic)
	}
	if b[4] != chainVersion {
		return progress{}, fmt.Sprintf("unknown version %d", b[4])
	}
	if b[5] > 1 {
		return progress{}, fmt.Sprintf("unknown flags %#x", b[5])
	}
	p := progress{chained: b[5] == 1}
	p.incarnation = binary.LittleEndian.Uint64(b[6:])
	p.tail = binary.LittleEndian.Uint64(b[14:])
	p.first = binary.LittleEndian.Uint64(b[22:])
	copy(p.link[:], b[30:30+linkLen])
	n := int(b[30+linkLen])
	if len(b) != progressFixedLen+n {
		return progress{}, fmt.Sprintf("%d bytes, but a node id of %d bytes makes %d", len(b), n, progressFixedLen+n)
	}
	p.node = string(b[31+linkLen : 31+linkLen+n])
	slots := p.tail
	if p.chained {
		slots++
	}
	switch {
	case p.incarnation == 0:
		return progress{}, "incarnation 0"
	case p.tail == 0 || p.first == 0:
		return progress{}, fmt.Sprintf("tail segment %d, first record %d: indexes start at 1", p.tail, p.first)
	case p.first > slots:
		return progress{}, fmt.Sprintf("first record %d lies beyond slot %d", p.first, slots)
	case !p.chained && p.link != [linkLen]byte{}:
		return progress{}, "link set for a tail without a chain record"
	}
	return p, ""
}

// readProgress reads the progress file of dir: nil if there is none, a
// *CorruptError if it does not decode. It reads at most one byte more
// than the longest progress file, so that whatever lies there under the
// name costs no more memory than a valid file.
func readProgress(dir string) (*progress, error) {
	path := filepath.Join(dir, progressName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, progressMaxLen+1))
	_ = f.Close() // read only
	if err != nil {
		return nil, fmt.Errorf("wal: read %s: %w", path, err)
	}
	if len(b) > progressMaxLen {
		return nil, &CorruptError{Segment: path, Offset: -1,
			Reason: fmt.Sprintf("progress file: longer than the maximum %d bytes", progressMaxLen)}
	}
	p, reason := decodeProgress(b)
	if reason != "" {
		return nil, &CorruptError{Segment: path, Offset: -1, Reason: "progress file: " + reason}
	}
	return &p, nil
}

// writeProgress replaces dir's progress file with p crash-atomically: it
// writes and fsyncs a temporary file, renames it over the progress file
// and fsyncs the directory through df.
func writeProgress(dir string, df *os.File, p progress, e env) error {
	tmp, path := filepath.Join(dir, progressTemp), filepath.Join(dir, progressName)
	b := encodeProgress(p)
	if err := e.beforeWrite(tmp, len(b)); err != nil {
		return writeError("write", tmp, err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return writeError("create", tmp, err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return writeError("write", tmp, err)
	}
	if err := e.syncFile(tmp, f.Sync); err != nil {
		_ = f.Close()
		return writeError("fsync", tmp, err)
	}
	if err := f.Close(); err != nil {
		return writeError("close", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return writeError("rename to "+path, tmp, err)
	}
	if err := e.syncDir(dir, df); err != nil {
		return writeError("fsync directory", dir, err)
	}
	return nil
}

// chainState is what verifyChain learned about a log.
type chainState struct {
	firsts      []uint64  // WAL index of each segment's first record
	incarnation uint64    // a new one when neither a chain record nor a progress file names one
	node        string    // the node id the WAL writes from now on
	write       *progress // the progress file Open must write; nil when the one on disk describes the tail
	unchained   bool      // the log holds records but no chain record and no progress file: it predates chaining
}

// verifyChain checks that segs (as scanDir found them, oldest first, at
// least one) continue one another and reach as far as prog (nil: no
// progress file) says, and that the log is node's (if given). It changes
// nothing on disk. A break is a *ChainError naming the files. write in the
// result is the progress file the log should have, nil when prog is it.
func verifyChain(dir string, segs []scannedSegment, prog *progress, node string) (chainState, error) {
	path := func(s scannedSegment) string { return filepath.Join(dir, s.name) }
	progPath := filepath.Join(dir, progressName)
	broken := func(s scannedSegment, other, format string, args ...any) error {
		return &ChainError{Segment: path(s), Other: other, Reason: fmt.Sprintf(format, args...)}
	}

	// Each chain record must sit in the file it was written to.
	k := -1 // the first chained segment
	for j, s := range segs {
		if s.chain == nil {
			continue
		}
		if s.chain.slot != s.start {
			return chainState{}, broken(s, "", "it begins with the chain record of segment %s: the file was copied or renamed",
				segmentName(s.chain.slot))
		}
		if k < 0 {
			k = j
		}
	}

	// Whose log this is.
	var st chainState
	identity := ""
	switch {
	case prog != nil:
		st.incarnation, st.node, identity = prog.incarnation, prog.node, progPath
	case k >= 0:
		st.incarnation, st.node, identity = segs[k].chain.incarnation, lastNode(segs), path(segs[k])
	}
	if st.incarnation == 0 {
		st.incarnation = newIncarnation() // nothing records one yet
	}
	if node != "" {
		if st.node != "" && st.node != node {
			return chainState{}, &ChainError{Segment: identity,
				Reason: fmt.Sprintf("the log belongs to node %q, it was opened as node %q", st.node, node)}
		}
		st.node = node
	}
	for _, s := range segs {
		if c := s.chain; c != nil && c.incarnation != st.incarnation {
			return chainState{}, broken(s, identity, "it belongs to another log (incarnation %016x, this log's is %016x): a segment of another node's WAL or of an earlier one in this directory",
				c.incarnation, st.incarnation)
		}
	}

	// Where each segment's records start. Unchained segments before the
	// first chained one (written before chaining, or the front segment a
	// truncation rewrote) map WAL indexes to slots with one offset.
	st.firsts = make([]uint64, len(segs))
	var offset uint64 // slot − WAL index in the unchained front segments
	switch {
	case k >= 0:
		first := segs[k].chain.prev + 1
		offset = segs[k].start - first
		if k >= 2 && offset != 0 {
			return chainState{}, broken(segs[k], path(segs[k-1]), "it continues from record %d, but the unchained segments before it end at record %d",
				first-1, segs[k].start-1)
		}
		if k > 0 && segs[k].chain.link != segs[k-1].lastSum {
			return chainState{}, broken(segs[k], path(segs[k-1]), "it does not continue the segment before it (the link to that segment's last record differs)")
		}
	case prog != nil:
		// Only the tail's remains after a truncation, or a log that
		// never started a chained segment: the progress file says how
		// slots and records line up.
		offset = prog.tail - prog.first
		if prog.chained {
			offset++
		}
	}
	for j := 0; j < len(segs) && (k < 0 || j < k); j++ {
		if segs[j].start <= offset {
			return chainState{}, broken(segs[j], identity, "slot %d cannot hold a record when slots run %d ahead of records", segs[j].start, offset)
		}
		st.firsts[j] = segs[j].start - offset
	}
	if k >= 0 {
		st.firsts[k] = segs[k].chain.prev + 1
		for j := k + 1; j < len(segs); j++ {
			s, p := segs[j], segs[j-1]
			next := st.firsts[j-1] + p.records()
			if s.chain == nil {
				if j == len(segs)-1 && s.entries == 0 {
					// Created by tidwall/wal, then a crash before its
					// chain record was durable: nothing in it was
					// acknowledged, and the next batch chains it.
					st.firsts[j] = next
					continue
				}
				return chainState{}, broken(s, path(p), "it has no chain record but follows a chained segment: a segment written before chaining was copied in, or its chain record is gone")
			}
			c := s.chain
			if pn := lastNode(segs[:j]); c.node != pn && pn != "" {
				return chainState{}, broken(s, path(p), "it was written for node %q, the segments before it for node %q", c.node, pn)
			}
			if c.prev+1 != next {
				return chainState{}, broken(s, path(p), "it continues from record %d, but the segment before it ends at record %d: an older segment was copied in, or segments are out of order",
					c.prev, next-1)
			}
			if c.link != p.lastSum {
				return chainState{}, broken(s, path(p), "it does not continue the segment before it (the link to that segment's last record differs): a segment was copied in, or segments are out of order")
			}
			st.firsts[j] = next
		}
	}

	tail := segs[len(segs)-1]
	tailFirst := st.firsts[len(segs)-1]
	if prog != nil {
		if err := checkProgress(dir, segs, st.firsts, *prog); err != nil {
			return chainState{}, err
		}
	}
	want := progress{incarnation: st.incarnation, tail: tail.start, first: tailFirst, node: st.node}
	if tail.chain != nil {
		want.chained, want.link = true, tail.chain.link
	}
	if prog == nil || !bytes.Equal(encodeProgress(*prog), encodeProgress(want)) {
		st.write = &want
	}
	if prog == nil && k < 0 {
		for _, s := range segs {
			if s.entries > 0 {
				st.unchained = true
			}
		}
	}
	return st, nil
}

// lastNode is the node id of the newest chain record in segs that names
// one, "" if none does.
func lastNode(segs []scannedSegment) string {
	for j := len(segs) - 1; j >= 0; j-- {
		if c := segs[j].chain; c != nil && c.node != "" {
			return c.node
		}
	}
	return ""
}

// checkProgress checks that the log reaches the tail segment p names:
// that segment is there and is the one p describes, or it was the tail
// when a truncation rewrote it under a later name and only its remains
// are left.
func checkProgress(dir string, segs []scannedSegment, firsts []uint64, p progress) error {
	progPath := filepath.Join(dir, progressName)
	named := filepath.Join(dir, segmentName(p.tail))
	tail := segs[len(segs)-1]
	if tail.start < p.tail {
		return &ChainError{Segment: named, Other: progPath,
			Reason: fmt.Sprintf("the progress file says the log reached this segment (records from %d on), but the newest segment is %s: newer segments are missing",
				p.first, filepath.Join(dir, tail.name))}
	}
	for j, s := range segs {
		if s.start != p.tail {
			continue
		}
		switch {
		case p.chained && s.chain == nil:
			return &ChainError{Segment: filepath.Join(dir, s.name), Other: progPath,
				Reason: "the progress file says this segment starts with a chain record; it has none"}
		case p.chained && s.chain.link != p.link:
			return &ChainError{Segment: filepath.Join(dir, s.name), Other: progPath,
				Reason: "this is not the segment the progress file names (its chain record differs)"}
		case firsts[j] != p.first:
			return &ChainError{Segment: filepath.Join(dir, s.name), Other: progPath,
				Reason: fmt.Sprintf("its records start at %d, the progress file says %d", firsts[j], p.first)}
		}
		return nil
	}
	if len(segs) == 1 && tail.chain == nil {
		return nil // the remains of the tail p names, rewritten by TruncateFront
	}
	return &ChainError{Segment: named, Other: progPath,
		Reason: fmt.Sprintf("the progress file names this segment (records from %d on), and it is missing", p.first)}
}
