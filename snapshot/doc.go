// Package snapshot stores cutkv's snapshots in a blob store (DESIGN.md,
// "Snapshots" and "Checkpoints"): the pieces, the manifests that are the
// catalogue, and the rules for sharing and deleting pieces. It is the
// storage layer, and the planning of a snapshot's handles from what the
// store holds (PlanPartition, a pure function the node calls); taking the
// cut and having replicas upload is the node's, and restoring a partition
// from a handle is cut/verify's rebuild.
//
// # The idea
//
// A snapshot is a completed cut v plus, per partition p, a checkpoint
// handle: the newest materialization at m < pos_p(v) and the changelog
// pieces with the committed entries m+1 … End, End being the index of the
// CutFinish(v) entry that closed the cut in p (it carries the before set
// that restore needs). Pieces are immutable and named by what they hold,
// so a piece stored for one snapshot serves every later one that needs
// it: an upload stores only the pieces the store lacks (HasPiece), and a
// snapshot costs about one materialization interval of log per partition
// plus what changed.
//
// The store is authoritative: a machine with nothing but the URL and the
// cluster id lists (List), checks (Check) and reads (OpenPiece,
// OpenMaterialization) every snapshot. Nothing about snapshots is kept
// elsewhere that the store does not also say.
//
// # Layout
//
// A Store opens a gocloud.dev/blob bucket by URL (file:// or s3://; see
// OpenStoreOptions) and keeps everything of one cluster under its id, 16
// lowercase hex digits:
//
//	<cluster>/pieces/p0003-00000000000000001234.mat                    a materialization (checkpoint's file, as written)
//	<cluster>/pieces/g0003-00000000000000001235-00000000000000001300.log  a changelog piece, group 3, entries 1235 … 1300
//	<cluster>/manifests/<snapshot id>.json                             a snapshot's manifest
//	<cluster>/uploading/<snapshot id>.json                             the lock of an upload in flight
//	<cluster>/pruning/<random token>.json                              the lock of a prune or delete in flight
//
// No call lists, reads or deletes outside its cluster's prefix, so
// clusters share a bucket safely. Objects whose names do not parse (the
// file:// driver's temporary files, "<name>.<hex>.tmp") are ignored.
//
// # Changelog pieces
//
// A changelog piece holds the committed raft entries lo … hi (inclusive,
// contiguous) of one group: a partition's changelog is its raft log, and
// the raft index is the sequence number (DESIGN.md, "The node WAL").
// EncodePiece writes one, DecodePiece and PieceReader read one. All
// integers are little-endian.
//
// Header, 40 bytes:
//
//	offset  size  field
//	0       8     magic "CUTKVLOG"
//	8       4     format version (uint32): 1. A reader refuses a higher one
//	              with ErrVersion, naming both versions.
//	12      8     group (uint64)
//	20      8     lo, the first entry's index (uint64), >= 1
//	28      8     hi, the last entry's index (uint64), >= lo
//	36      4     CRC-32C (Castagnoli) of bytes [0, 36)
//
// Then hi-lo+1 entry records, in index order:
//
//	0       4     n: length of the entry (uint32), 1 ≤ n ≤ 64 MiB
//	4       n     the raftpb.Entry, protobuf-marshaled (deterministic)
//	4+n     4     CRC-32C of bytes [0, 4+n) of the record (length and entry)
//
// Trailer, 52 bytes, then the end of the piece:
//
//	0       8     magic "CUTKVEND"
//	8       8     number of entry records (uint64)
//	16      32    SHA-256 of all entry records, byte for byte
//	48      4     CRC-32C of bytes [0, 48) of the trailer
//
// A reader checks the header, each record's CRC before it unmarshals the
// entry, that entry i has index lo+i and a term no lower than the one
// before, and the trailer (count, SHA-256, nothing after it). Anything
// else is damage: a *CorruptError (ErrCorrupt) naming the piece, the byte
// offset and the record. Read through a name (NewPieceReader), the header
// must also hold the group and range the name says.
//
// # Manifests
//
// A Manifest is JSON with a format version (1, or 2 when a base is a
// checkpoint: ManifestVersion; a reader refuses a higher one with
// ErrVersion and unknown fields as damage): the
// snapshot id, the cluster, the cut version, the time, the partition
// count, the key-hash function's name, and per partition its Pos, End,
// base and pieces, each piece with its name, range, the index it is used
// from, size and SHA-256. A checkpoint base (pNNNN-<index>.ckpt, the
// directory's manifest) lists its files, each stored once as f-<sha256>. Manifest.Validate checks the shape, including
// that each partition's pieces cover base+1 … End without gaps or
// overlaps. Manifests are never rewritten.
//
// # Uploading
//
// The node plans each partition's handle (IndexStored of the manifests,
// then PlanPartition with what the uploading replica offers) and then:
//
//	u := store.BeginUpload(ctx, id, names)  // every piece the manifest will name
//	for each name: if !store.HasPiece(name) { u.PutPiece(name, bytes) }
//	u.Finish(ctx, manifest)                 // PutManifest, release the lock
//
// A blob store has no rename, so PutPiece writes a piece under its final
// name at once, as a conditional write that fails if the name exists
// (pieces are never overwritten), and then reads it back and compares the
// SHA-256 with what it sent, deleting it again on a mismatch. Both drivers
// make the object appear whole or not at all (an S3 PUT or completed
// multipart upload; file:// renames a finished temporary file next to the
// final one, fsynced first), so the read-back is there for damage in
// transit or at rest, at the price of reading each piece once more.
// PutManifest checks that every piece exists with the size the manifest
// says before it writes the manifest, which makes the snapshot visible.
//
// # Deleting: references and locks
//
// Delete removes one snapshot, Prune expires them (keep the newest N and
// those younger than a duration). Both then sweep: every piece of the
// cluster that no remaining manifest names is deleted. The reference
// count of a piece is the number of manifests naming it, computed afresh
// from the manifests at each sweep; no counter is stored that could
// drift. A manifest that cannot be read stops the sweep before it deletes
// anything. This also collects pieces of aborted or crashed uploads.
//
// An upload in flight has stored pieces, or counts on stored ones, that
// no manifest names yet. The locks keep a sweep off them:
//
//   - BeginUpload writes uploading/<id>.json listing every piece the
//     snapshot will name, then waits until no live prune lock exists;
//   - Prune and Delete write pruning/<token>.json first, then read the
//     upload locks, then the manifests, and keep every piece a live
//     upload lists.
//
// Each side writes its lock before it reads the other's, so at least one
// sees the other: either the sweep sees the upload's list, or the upload
// waits until the sweep is done and only then asks which pieces exist.
// The upload locks are read before the manifests, so an upload that
// finishes in between has its manifest seen.
//
// A lock is live while it was refreshed within Options.LockTTL (default
// 10 minutes); holders refresh it every LockTTL/3 (Upload.PutPiece does,
// Upload.Refresh on demand). A stale lock belongs to a dead process: a
// sweep removes it and ignores its list, and the late holder's Refresh or
// Finish fails with ErrLockLost without writing the manifest. Lock times
// come from Options.Now on the holder and are compared with the reader's
// clock, so the clocks of processes sharing a store must agree to well
// within LockTTL.
//
// # Checking
//
// Check reads every piece of a snapshot: presence (ErrMissing), size and
// SHA-256 against the manifest and the piece's own format (ErrCorrupt;
// materializations through checkpoint's reader), and that the chain ends
// at the cut: the entry at Pos has cut version >= v, the command before it
// (when after the base) < v, and the entry at End is CutFinish(v) with
// that Pos (ErrIncomplete). It stops at the first fault, as a *CheckError
// naming the snapshot, partition and piece.
//
// # Concurrency and I/O
//
// Every Store method does network or disk I/O and blocks; a Store and an
// Upload are safe for concurrent use. Encoding and decoding pieces and
// manifests is pure.
package snapshot
