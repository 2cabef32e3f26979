// Package engine keeps one partition replica's state in its own Pebble
// database: committed key-values, transaction intents, records and finished
// ids, the transaction horizon, the cut progress and, in every batch, the
// applied index (DESIGN.md "Checkpoints (FLIP-158)").
//
// # Durability
//
// Pebble's own WAL is disabled. The raft log in the node WAL is the
// changelog; a DB holds only what its last flush wrote, and the applied
// index is written in the same batch as the state it describes, so the state
// found on disk is always exactly the state at Applied(). After a crash or a
// Close without a flush the caller replays its log from Applied(). Commits
// therefore use pebble.NoSync: a sync would cover no file, and durability is
// the flush's job (Materialize flushes explicitly; Pebble also flushes a full
// memtable in the background).
//
// # Sharing
//
// Every DB of a node is opened in one Env: one block cache (which also holds
// the memtable reservations, see EnvConfig.CacheSize) and one file cache that
// bounds the open table files of all DBs together.
//
// # Errors
//
// The first error Pebble reports for a write, a flush, a compaction or a
// checkpoint is sticky: every later call of that DB returns it wrapped in
// ErrStopped, naming the partition and the DB directory, and is reported
// to EnvConfig.Stopped. A stopped DB is closed and reopened by its owner,
// who replays its log from Applied() (a node exits, and does so at its
// restart).
// The failures Pebble cannot even return (a MANIFEST write that failed,
// on a full disk say: Pebble's Fatalf) go to EnvConfig.Fatal, which ends
// the process; without one they panic.
//
// # Key layout
//
// Pebble's keyspace is split into tables by the first byte of the key, so
// tables never interleave and each can be scanned alone. All integers in keys
// are big-endian; "uvarint" is encoding/binary's unsigned varint, and a
// decoder refuses a non-minimal one.
//
//	byte 0      table
//	0x01        meta
//	0x02        user key-values
//	0x03        intents
//	0x04        transaction records
//	0x05        finished transaction ids
//
// Meta (0x01), one key per item:
//
//	0x01 'a'    applied index: 8 bytes, big-endian uint64
//	0x01 'h'    transaction horizon: 8 bytes, big-endian int64 (unix ms)
//	0x01 'c'    cut progress: opaque bytes, owned by package cut
//
// User key-values (0x02):
//
//	key:   0x02 | user key (1..MaxKeyLen bytes)
//	value: uvarint(version) | uvarint(createIndex) | uvarint(modIndex) | raw value
//
// The raw value is every byte after the third varint (possibly none).
//
// Transaction tables, keyed by transaction id (1..MaxTxnIDLen opaque bytes):
//
//	intent:   0x03 | id -> uvarint(prepared index) | opaque intent bytes
//	record:   0x04 | id -> opaque record bytes
//	finished: 0x05 | id -> 8 bytes, big-endian int64 (prepared, unix ms)
//
// Every decoder checks lengths, varint overflow and trailing bytes, and
// returns ErrCorrupt wrapped with the table and key; none panics.
package engine
