package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// RecordType says what a record's Data holds. The byte is stored as is; see
// doc.go for the layout.
type RecordType uint8

const (
	// RecordEntry is one raft entry of one group; Data is a marshaled
	// raftpb.Entry.
	RecordEntry RecordType = 1
	// RecordHardState is the raft hard state of one group; Data is a
	// marshaled raftpb.HardState.
	RecordHardState RecordType = 2
	// RecordMaterialized is a group's materialization marker; Data is opaque
	// to the WAL.
	RecordMaterialized RecordType = 3
	// RecordMeta is node-level metadata; Data is opaque to the WAL.
	RecordMeta RecordType = 4
	// RecordChain starts every segment the WAL writes: group 0, Data says
	// where the segment continues from (doc.go, "Chain record"). Only the
	// WAL writes it, and it has no WAL index: Replay and Read never return
	// one, and Append refuses it.
	RecordChain RecordType = 5
)

// Valid reports whether t is one of the types this version of the WAL knows.
// Open refuses a log holding any other type. Append refuses to write those,
// and RecordChain too.
func (t RecordType) Valid() bool { return t >= RecordEntry && t <= RecordChain }

func (t RecordType) String() string {
	switch t {
	case RecordEntry:
		return "entry"
	case RecordHardState:
		return "hardstate"
	case RecordMaterialized:
		return "materialized"
	case RecordMeta:
		return "meta"
	case RecordChain:
		return "chain"
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// Record is one typed record. Group is the raft group id (0 = metadata
// group).
type Record struct {
	Type  RecordType
	Group uint64
	Data  []byte
}

const (
	// crcLen is the size of the CRC32C trailer of every record.
	crcLen = 4
	// minRecordLen is the size of the smallest record: type byte, a one-byte
	// group varint, no payload, CRC.
	minRecordLen = 1 + 1 + crcLen
)

// castagnoli is the CRC32C table; on amd64 and arm64 the hash/crc32 package
// uses the CPU's CRC instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// uvarintLen is the number of bytes binary.PutUvarint uses for x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// encodedLen is the number of bytes appendRecord adds for r.
func encodedLen(r Record) int { return 1 + uvarintLen(r.Group) + len(r.Data) + crcLen }

// appendRecord appends the encoding of r (doc.go, "Record") to dst and
// returns the extended slice. It does not check r.Type.
func appendRecord(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, byte(r.Type))
	dst = binary.AppendUvarint(dst, r.Group)
	dst = append(dst, r.Data...)
	sum := crc32.Checksum(dst[start:], castagnoli)
	return binary.LittleEndian.AppendUint32(dst, sum)
}

// checksumOK reports whether b is long enough to hold a record and its last
// four bytes are the CRC32C of the bytes before them.
func checksumOK(b []byte) bool {
	if len(b) < minRecordLen {
		return false
	}
	body := b[:len(b)-crcLen]
	return crc32.Checksum(body, castagnoli) == binary.LittleEndian.Uint32(b[len(body):])
}

// parseRecord decodes one record from b, which must be exactly one tidwall
// entry. On success the returned Data aliases b. On failure it returns a
// human-readable reason and a zero Record. The checks run in this order so
// that a damaged record reports a checksum mismatch, not whatever its damaged
// type byte happens to say: length, checksum, type, group varint.
//
// Decoding accepts exactly the byte strings appendRecord produces: a group
// varint must be in its shortest form, so encoding a decoded record gives
// back the same bytes. A chain record must be of group 0 and its Data must
// decode (decodeChain).
func parseRecord(b []byte) (Record, string) {
	if len(b) < minRecordLen {
		return Record{}, fmt.Sprintf("record of %d bytes is shorter than the minimum %d", len(b), minRecordLen)
	}
	body := b[:len(b)-crcLen]
	stored := binary.LittleEndian.Uint32(b[len(body):])
	if sum := crc32.Checksum(body, castagnoli); sum != stored {
		return Record{}, fmt.Sprintf("checksum mismatch: stored %#08x, computed %#08x", stored, sum)
	}
	t := RecordType(body[0])
	if !t.Valid() {
		return Record{}, fmt.Sprintf("unknown record type %d", uint8(t))
	}
	group, n := binary.Uvarint(body[1:])
	if n <= 0 || n != uvarintLen(group) {
		return Record{}, "malformed group varint"
	}
	data := body[1+n:]
	if t == RecordChain {
		if group != 0 {
			return Record{}, fmt.Sprintf("chain record of group %d, not 0", group)
		}
		if _, reason := decodeChain(data); reason != "" {
			return Record{}, "chain record: " + reason
		}
	}
	return Record{Type: t, Group: group, Data: data}, ""
}

// decodeRecord is parseRecord with an error: a *CorruptError (wrapping
// ErrCorrupt) whose Segment and Offset are unknown.
func decodeRecord(b []byte) (Record, error) {
	r, reason := parseRecord(b)
	if reason != "" {
		return Record{}, &CorruptError{Offset: -1, Reason: reason}
	}
	return r, nil
}
