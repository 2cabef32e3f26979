// Package checkpoint holds the two halves of cutkv's changelog checkpoints
// (DESIGN.md, "Checkpoints (FLIP-158)" and "Snapshots"): the files that
// hold a partition's materialized state, and the bookkeeping that says
// which stored pieces of state a checkpoint is made of and when a piece
// may be deleted.
//
// # The idea
//
// A partition's changelog is its raft log: the sequence number of a change
// is the raft index of its entry, the same on every replica. Now and then
// the full state of the partition at an applied index m is written out: a
// materialization (partition.Image, written by Write). A checkpoint of the
// partition at index n is then
//
//	materialization at m  +  the committed entries (m, n]
//
// and the entries travel as pieces: a Piece is a stored, immutable run of
// committed entries [Lo, Hi] of one group, named by its bounds. A Handle
// says which materialization (its Base) and which pieces make up one
// checkpoint. A piece stored for one checkpoint is reused by the next ones
// rather than uploaded again; when a newer materialization lies inside a
// piece, the handle uses the piece from an index on (a PieceRef with From
// above the piece's Lo): recovery skips the entries the materialization
// already holds. Hence "incremental": a checkpoint stores only what no
// earlier one stored.
//
// # The Registry
//
// Registry counts who holds each stored piece and materialization, and
// tells the caller when one is no longer held, so that it can be deleted.
// The holders are
//
//   - every retained handle: a checkpoint that is pending (pinned from the
//     moment it is planned until it fails or is released) or finalized
//     and not yet subsumed;
//   - the changelog, for each piece it stored (AddPiece), until it is
//     truncated behind a materialization (Truncate), so that later
//     checkpoints can reuse the piece;
//   - the partition, for its newest materialization (AddMaterialization),
//     which is the base of the checkpoints it plans next.
//
// The checkpoint protocol, per partition, with the calls that go with it:
//
//	state changes           raft entries are committed and applied
//	checkpoint at n         h, missing := Plan(p, n); store *missing, AddPiece(*missing);
//	                        Retain(cp, h)
//	checkpoint finalized    Subsume(cp, p): every older handle of p is released
//	checkpoint failed       Release(cp, p)
//	materialization at m    partition.Image at m, Write in the background; when
//	                        durable, AddMaterialization(m), then Truncate(p, m)
//
// Every call that can drop a holder returns the Garbage: the pieces and
// materializations that became unheld by that call. The caller deletes
// them, and only them, after the call.
//
// # Invariants
//
//  1. A piece or materialization is reported as garbage exactly once, by
//     the call that removes its last holder; never while a retained handle
//     names it (the subsumption rule of FLIP-158).
//  2. A retained handle is contiguous: with base index m (0 without a base)
//     its piece refs cover m+1 … n with no gap and no overlap, each inside
//     its piece and of the handle's partition.
//  3. The changelog lets go of a piece only when the piece lies wholly at or
//     below the partition's newest materialization (Truncate refuses an
//     index above it), so Plan can always cover (m, n] with stored pieces
//     and at most one new piece at the end.
//  4. Bases only move forward: AddMaterialization refuses an index below
//     the current base's.
//
// The Registry is a plain value: no I/O, no goroutines, no locks. Its owner
// serializes calls; Plan's answer holds until the next call that releases
// something, so plan and retain in one step.
//
// # Materialization files
//
// A materialization is one immutable file, named after its partition and
// index (Materialization.Name): "p" and the partition id in decimal, at
// least four digits, "-", the index in decimal, twenty digits, ".mat",
// e.g. p0003-00000000000000001234.mat. Write creates it crash-atomically
// (a temporary "<name>.tmp-*" file, fsync, rename, fsync of the
// directory); a crash leaves at most a temporary file, which List ignores
// and RemoveTemp deletes. All integers are little-endian.
//
// Header, 40 bytes:
//
//	offset  size  field
//	0       8     magic "CUTKVMAT"
//	8       4     format version (uint32): 1. A reader refuses a higher
//	              version with ErrVersion, naming both versions.
//	12      8     partition id (uint64)
//	20      8     index m: the applied index of the state (uint64)
//	28      8     raft term of the entry at m (uint64), as the caller says
//	36      4     CRC-32C (Castagnoli) of bytes [0, 36)
//
// Body: the state (a partition.Image encoding, opaque here) in chunks,
// then an empty chunk. Each chunk is
//
//	0       4     n: length of the data (uint32), 1 ≤ n ≤ 16 MiB;
//	              n = 0 ends the body and has no data and no CRC
//	4       n     data
//	4+n     4     CRC-32C of bytes [0, 4+n) of the chunk (length and data)
//
// Write makes chunks of 64 KiB but the last. The body is the concatenation
// of the chunks' data.
//
// Trailer, 60 bytes, then the end of the file:
//
//	0       8     magic "CUTKVEND"
//	8       8     length of the body in bytes (uint64)
//	16      8     number of chunks, the empty one not counted (uint64)
//	24      32    SHA-256 of the body
//	56      4     CRC-32C of bytes [0, 56) of the trailer
//
// A reader checks the header when the file is opened, each chunk's CRC
// before handing out its data, and the trailer (length, count, SHA-256,
// nothing after it) before it reports the end of the body. Anything else
// is damage, reported as a *CorruptError naming the file, the byte offset
// and, in the body, the chunk. A file whose name is a materialization name
// must hold that partition and index.
package checkpoint
