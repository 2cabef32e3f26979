// Package wal is the node's write-ahead log: one log per node, holding the
// raft logs, hard states and materialization markers of every raft group the
// node carries, as typed, checksummed records (DESIGN.md, "The node WAL").
//
// It is built on github.com/tidwall/wal (v1.2.1) in its Binary format, which
// stores entries and assigns consecutive indexes. This package adds the
// record layout and its checksum, group commit (one tidwall batch and one
// fsync for all Appends queued meanwhile), the directory fsyncs tidwall/wal
// leaves out, sticky write errors, the checks and torn-tail repair that run
// before tidwall/wal is allowed to open the files, and a segment chain with
// a progress file that let Open refuse a log that went backwards (DESIGN.md,
// "Trust").
//
// # Indexes
//
// Every record gets the next WAL index; a new log's first record has index 1.
// WAL indexes are local to the node. A record's raft index, where it has one,
// is inside its Data. A later record for (group, raft index i) supersedes
// earlier records for (group, ≥ i); resolving that is the reader's job, the
// log only keeps order.
//
// tidwall/wal gives every entry it stores an index of its own, here called
// its slot. Each record is one entry, and so is the chain record the WAL
// writes at the start of each segment (below). A chain record has a slot but
// no WAL index: Append, Replay, Read, FirstIndex, LastIndex, SegmentStart and
// TruncateFront speak only of WAL indexes and never show a chain record, so
// the records of one Append stay consecutive. Slot and WAL index differ by
// the number of chain records written before the record (a log written
// before chaining has none: there the two are equal). A record's slot never
// changes; the WAL keeps, per segment, its first slot and its first WAL
// index.
//
// # Directory
//
// The log is one directory of segment files and a progress file. tidwall/wal
// names each segment by the slot of its first entry, in decimal,
// zero-padded to 20 digits:
//
//	00000000000000000001      slots 1 … 41 (its chain record, then records 1 … 40)
//	00000000000000000042      slots 42 … (the tail, the only segment written to)
//	progress                  the tail segment when the log last started one
//
// A segment is closed and the next one started once it holds at least
// Options.SegmentSize bytes (raised, if needed, to one byte more than a
// chain record, so that a chain record never fills a segment alone); the
// new file's name is the next slot. The progress file is replaced by
// writing "progress.tmp" and renaming it; Open removes a stale
// "progress.tmp". While tidwall/wal truncates the front of the log it also
// writes "<first>.START.TEMP", renames it to "<first>.START", removes the
// older segments and renames the .START file to "<first>". A ".END" file
// (from tidwall/wal's TruncateBack, which this package never calls) makes
// Open refuse the log. Other names are ignored.
//
// # Segment file
//
// A segment file is a plain sequence of tidwall entries, with no header,
// footer, padding or checksum of tidwall's own. Entry k of the segment named
// S has slot S+k. Each entry is:
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
//	                3 materialization marker, 4 node metadata,
//	                5 chain record (only as a segment's first entry)
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
// is malformed or not in its shortest form is corrupt, and so is a chain
// record of a group other than 0 or whose payload does not decode.
//
// # Chain record
//
// The WAL writes a chain record (type 5, group 0) as the first entry of
// every segment it starts, in the same tidwall batch as the records that
// follow it. Its payload says where the segment continues from; all
// integers are little-endian:
//
//	offset  size    field
//	0       1       version, 1
//	1       8       incarnation: a random value other than 0, drawn when
//	                the log is created (or first opened by a version that
//	                chains); every segment of one log carries the same
//	9       8       slot of this chain record, which is the segment's name
//	17      8       prev: WAL index of the last record before this segment
//	                (0 if none); the segment's first record is prev+1
//	25      32      link: SHA-256 of the record bytes (as stored, without
//	                the length prefix) of the entry just before this one,
//	                the previous segment's last entry; zeros when the log
//	                holds none (a new or emptied log)
//	57      1       n, the length of the node id (Options.NodeID), 0–255
//	58      n       node id; empty if none was ever given
//
// A payload of any other length, another version, incarnation 0, slot 0 or
// a prev that is not below slot is corrupt. For node "n1" the chain record
// is 66 bytes, 67 in its segment.
//
// The link covers one record, not everything before it: it is computed once
// per segment, and each link can be checked from two neighbouring files
// alone, so a front truncation, which deletes files and may rewrite the
// front segment, leaves every remaining link checkable. A running hash of
// every record would cost a hash of every appended byte and would add
// nothing against the failures the chain is for (DESIGN.md, "Trust"):
// damage inside a segment is the CRC's to find. With prev, the link pins a
// segment to exactly one end of its predecessor.
//
// # Progress file
//
// The chain cannot see its own end go missing. The progress file names the
// tail segment as it was when the log last started a segment (or renamed
// its tail, or was opened); its bytes are:
//
//	offset  size    field
//	0       4       magic, "WALP"
//	4       1       version, 1
//	5       1       flags: 1 if the tail starts with a chain record, else 0
//	6       8       incarnation, as in the chain records
//	14      8       tail: the tail segment's first slot (its name)
//	22      8       first: WAL index of the tail's first record
//	30      32      link of the tail's chain record; zeros if flags is 0
//	62      1       n, the length of the node id
//	63      n       node id
//	63+n    4       CRC-32C of bytes [0, 63+n), as for records
//
// Any other length, magic, version or flags, a failed checksum, incarnation
// 0, tail or first 0, a first beyond the tail's slots, or a link with flags
// 0 makes Open refuse the log with a *CorruptError naming the file.
//
// # Segment chain
//
// The committer writes the progress file (temporary file, fsync, rename,
// directory fsync) after every batch that started a segment, once that
// segment and the directory are fsynced and before any of the batch's
// Appends returns; TruncateFront writes it when it gave the tail a new name
// (and, if there is none yet, first for the tail as it was, since the
// renamed tail loses the chain record that says where its records start);
// Open writes it when it is missing or does not describe the tail. A log
// Open has just created has none until it starts a segment or is opened
// again: only such a log, or a crash before its first progress file was
// durable, lacks the file, and Open then trusts the chain alone.
//
// Open checks, before it changes anything, that every chain record sits in
// the file named by its slot, that all carry the log's incarnation (from the
// progress file, else from the oldest chain record), that a node id, once
// recorded, stays the same and is Options.NodeID when that is given, and
// that each chained segment continues the one before it: its prev is the
// last record of that segment and its link that segment's last entry. After
// the first chained segment every segment must be chained, except a last
// segment that holds no entry (created, then a crash before its chain record
// was durable; the next batch chains it). The oldest segment is the anchor:
// its own predecessor is gone, so its link is not checked; when a
// truncation inside a segment rewrote it without its chain record, the WAL
// indexes of its records follow from the next segment's chain record (or,
// if it is the only one, from the progress file). Then the segment the
// progress file names must be there, as the tail or an older segment, with
// the same first record and, if the file says so, the same chain record —
// unless it was the tail when a truncation inside it left only its remains
// under a later name. A break is a *ChainError (errors.Is(err, ErrChain),
// which also matches ErrCorrupt) naming the segment and the file it was
// checked against.
//
// So Open refuses a log that went backwards in these ways: an old segment
// copied in under another name (including the next segment's), segments
// swapped or out of order, a segment of another node's log or of an earlier
// incarnation of this node's (a wiped and re-created directory), a segment
// written before chaining put after chained ones, a missing segment in the
// middle (also a gap in the slots), and the newest segment or segments
// missing or emptied, when the progress file named them — and every segment
// missing while the progress file is left.
//
// What it cannot see, because a crash could leave the same: the newest
// segment cut at a record boundary after its chain record (an older copy of
// it under its own name is the same thing), since records not yet fsynced
// were never acknowledged; and a newest segment gone that the progress file
// never named (no Append into it had returned). Nor can it see the whole
// directory, progress file included, replaced by an older copy of itself;
// a log written before chaining, up to its first chained segment; what came
// before the anchor; or a forgery, since SHA-256 and CRC-32C can be
// recomputed: the chain is against mistakes, not adversaries. How far the
// log got is also recorded elsewhere, and checked there: by the raft store
// against its materialization marks, and by the peer commit check against
// a peer's commit index above this node's last index.
//
// A log written before the chain existed (no chain records, no progress
// file) is accepted with a warning; Open writes its progress file, and the
// next segment the WAL starts, or an empty tail, gets the first chain
// record, linked to the last unchained segment.
//
// # Durability
//
// tidwall/wal is opened with its own fsync off. The committer writes a batch
// with one tidwall WriteBatch, fsyncs the tail segment once, and, if the
// batch started a new segment file, fsyncs the directory and then writes the
// progress file (so that the progress file never names a segment whose
// name a crash could still lose); only then do the batch's Append calls
// return. (tidwall/wal itself fsyncs a full segment before starting the
// next.) TruncateFront fsyncs the directory after tidwall/wal's renames and
// removals, then writes the progress file if the tail was renamed. The WAL
// opens its directory once, at Open, and syncs it through that handle until
// Close, so a process out of file descriptors can still sync it. A failed
// write or fsync is never retried: it becomes the sticky error returned by
// every later call, because after a failed fsync the kernel may have dropped
// the dirty pages and a second fsync could report success for data that is
// gone.
//
// # Recovery at Open
//
// Before tidwall/wal opens the directory, Open reads every segment (the ones
// an interrupted truncation will keep), parses every entry and verifies every
// record as above, checks that each segment starts at the slot after the
// previous one's last entry, and then checks the chain (above). Only the
// end of the last segment may be repaired, and only when it is a torn tail,
// meaning the bytes from some entry boundary to the end of the file are one
// of:
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
// bytes, zero bytes followed by data, a chain record that is not its
// segment's first entry, any damage in a segment other than the last, a
// missing segment (a gap in the slots), or segments that overlap.
// A complete record is never dropped: raft may have acknowledged it.
//
// Two leftovers of a crash during TruncateFront are cleaned up: stale
// ".TEMP" files are removed, and when a segment's name index lies inside the
// previous segment and the file repeats that segment's entries from there on
// byte for byte (the removals were lost, the rename was not), the older
// segments are removed with a warning. A ".START" file is completed by
// tidwall/wal's Open.
package wal
