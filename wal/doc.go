// Package wal is the node's write-ahead log: one log per node, holding the
// raft logs, hard states and materialization markers of every raft group the
// node carries, as typed, checksummed records (DESIGN.md, "The node WAL").
//
// It is built on github.com/tidwall/wal (v1.2.1) in its Binary format, which
// stores entries and assigns consecutive indexes. This package adds the
// record layout and its checksum, group commit (one tidwall batch and one
// fsync for all Appends queued meanwhile), the directory fsyncs tidwall/wal
// leaves out, sticky write errors, and the checks and torn-tail repair that
// run before tidwall/wal is allowed to open the files.
//
// # Indexes
//
// Every record gets the next WAL index; a new log's first record has index 1.
// WAL indexes are local to the node. A record's raft index, where it has one,
// is inside its Data. A later record for (group, raft index i) supersedes
// earlier records for (group, ≥ i); resolving that is the reader's job, the
// log only keeps order.
//
// # Directory
//
// The log is one directory of segment files. tidwall/wal names each segment
// by the index of its first entry, in decimal, zero-padded to 20 digits:
//
//	00000000000000000001      entries 1 … 41
//	00000000000000000042      entries 42 … (the tail, the only file written to)
//
// A segment is closed and the next one started once it holds at least
// Options.SegmentSize bytes; the new file's name is the next index. While
// tidwall/wal truncates the front of the log it also writes
// "<first>.START.TEMP", renames it to "<first>.START", removes the older
// segments and renames the .START file to "<first>". A ".END" file (from
// tidwall/wal's TruncateBack, which this package never calls) makes Open
// refuse the log. Other names are ignored.
//
// # Segment file
//
// A segment file is a plain sequence of tidwall entries, with no header,
// footer, padding or checksum of tidwall's own. Entry k of the segment named
// S has index S+k. Each entry is:
//
//	offset  size    field
//	0       1–10    length L of the record, unsigned LEB128 varint
//	                (encoding/binary.PutUvarint): 7 bits per byte, least
//	                significant group first, high bit set on every byte
//	                but the last
//	n       L       the record (below), n being the varint's size
//
// # Record
//
// Each tidwall entry holds exactly one record of L ≥ 6 bytes:
//
//	offset  size    field
//	0       1       type: 1 entry (a marshaled raftpb.Entry),
//	                2 hard state (a marshaled raftpb.HardState),
//	                3 materialization marker, 4 node metadata
//	1       g       raft group id, unsigned LEB128 varint in its shortest
//	                form, 1–10 bytes (group 0 is the metadata group)
//	1+g     L-5-g   payload (Record.Data), may be empty
//	L-4     4       CRC-32C (Castagnoli polynomial, reflected 0x82F63B78,
//	                as hash/crc32.Castagnoli) of bytes [0, L-4) of the
//	                record — type, group and payload — stored little-endian
//
// For example a raft entry of group 7 with payload "hi" is the record
// 01 07 68 69 06 2b 2e e5 (checksum 0xe52e2b06) and, framed in its segment
// file, the 9 bytes 08 01 07 68 69 06 2b 2e e5.
//
// The decoder accepts exactly the bytes the encoder writes: a record shorter
// than 6 bytes, a checksum mismatch, an unknown type or a group varint that
// is malformed or not in its shortest form is corrupt.
//
// # Durability
//
// tidwall/wal is opened with its own fsync off. The committer writes a batch
// with one tidwall WriteBatch, fsyncs the tail segment once, and, if the
// batch started a new segment file, fsyncs the directory; only then do the
// batch's Append calls return. (tidwall/wal itself fsyncs a full segment
// before starting the next.) TruncateFront fsyncs the directory after
// tidwall/wal's renames and removals. A failed write or fsync is never
// retried: it becomes the sticky error returned by every later call,
// because after a failed fsync the kernel may have dropped the dirty pages
// and a second fsync could report success for data that is gone.
//
// # Recovery at Open
//
// Before tidwall/wal opens the directory, Open reads every segment (the ones
// an interrupted truncation will keep), parses every entry and verifies every
// record as above, and checks that each segment starts at the index after
// the previous one's last entry. Only the end of the last segment may be
// repaired, and only when it is a torn tail, meaning the bytes from some
// entry boundary to the end of the file are one of:
//
//   - a length prefix cut off by the end of the file;
//   - a length prefix that promises more bytes than the file has left (an
//     incomplete final record), provided no complete valid record is found
//     starting anywhere behind it — otherwise the prefix itself is damaged
//     (the search gives up after checksumming 256 MiB of candidates);
//   - only zero bytes (space a crash allocated but never wrote; read by
//     tidwall/wal as empty entries, which no record can be);
//   - a final complete entry, followed by nothing or zeros, whose checksum
//     fails and which holds a never-written sector: a 512-byte-aligned
//     stretch of zeros that is a whole sector, or its last ≥ 4 bytes.
//
// Such a tail was never fsynced, so no Append returned for it. Open
// truncates the file at the boundary, fsyncs it, and logs a warning with the
// file, the offset and the number of bytes dropped.
//
// Anything else is corruption and Open refuses the log with a *CorruptError
// (ErrCorrupt) naming the segment file and the byte offset of the damaged
// entry, without changing any file: a checksum mismatch in a complete
// record, an unknown type, a malformed group varint, a record shorter than 6
// bytes, zero bytes followed by data, any damage in a segment other than the
// last, a missing segment (a gap in the indexes), or segments that overlap.
// A complete record is never dropped: raft may have acknowledged it.
//
// Two leftovers of a crash during TruncateFront are cleaned up: stale
// ".TEMP" files are removed, and when a segment's name index lies inside the
// previous segment and the file repeats that segment's entries from there on
// byte for byte (the removals were lost, the rename was not), the older
// segments are removed with a warning. A ".START" file is completed by
// tidwall/wal's Open.
package wal
