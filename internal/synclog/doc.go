// Package synclog lets a test lose what a node wrote but never fsynced,
// as a power failure would, instead of only what a kill -9 loses (which is
// nothing the kernel already holds).
//
// Built with `-tags failpoints` and with the environment variable
// CUTKV_SYNCED_LOG naming a file, a node appends one line to that file
// each time one of its files becomes durable up to some length:
//
//	<device> <inode> <size>\n
//
// (decimal; the file's identity and the length fsynced). The WAL records
// every file of its directory after each batch it fsyncs (tidwall/wal
// fsyncs a segment it closes inside the batch write, so every segment but
// the tail is whole), and Pebble records each file it Syncs, SyncDatas or
// fully SyncTos through the vfs.FS WrapFS returns; a file Pebble creates
// is recorded at length 0 until it is synced. Files are named by inode
// rather than path, so a hard link (a materialization's SSTs) and a
// rename (a segment, a MANIFEST) keep their durable length. The lines are
// appended without fsync: they only need to survive the process, not the
// machine.
//
// After killing the node, the harness calls Truncate on its data
// directory: every file whose inode the log names and that is longer than
// its last recorded length is cut to it. Files the log does not name
// (written by other code, through package os) are left as they are, and
// directory entries (a creation or rename not yet made durable by a
// directory fsync) are not rolled back: the loss simulated is of file
// contents only.
//
// In a build without the tag, Enabled is false, WrapFS returns its
// argument and RecordDir does nothing.
package synclog
