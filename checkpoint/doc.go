// Package checkpoint holds the files of cutkv's changelog checkpoints
// (DESIGN.md, "Checkpoints (FLIP-158)" and "Snapshots"): the
// materializations that hold a partition's state, and the names of the
// changelog pieces stored beside them.
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
// committed entries [Lo, Hi] of one group, named by its bounds. A
// checkpoint's handle says which materialization (its base) and which
// pieces make it up. A piece stored for one checkpoint is reused by the
// next ones rather than uploaded again; when a newer materialization lies
// inside a piece, the handle uses the piece from an index on: recovery
// skips the entries the materialization already holds. Hence
// "incremental": a checkpoint stores only what no earlier one stored.
//
// Snapshots are the checkpoints cutkv keeps, and their store is
// authoritative: package snapshot plans a snapshot's handles from the
// manifests it holds (snapshot.PlanPartition) and deletes a piece when no
// manifest names it any more (Prune, Delete). Nothing is counted in
// memory, so nothing is lost when a node restarts or leadership moves.
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
