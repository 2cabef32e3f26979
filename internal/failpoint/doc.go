// Package failpoint names crash points in the code and lets tests arm them.
//
// A failpoint is a call Inject("name") at a point where a crash or an I/O
// error matters. In a normal build Inject is a no-op that the compiler
// removes. Built with `-tags failpoints`, Inject consults the environment
// variable CUTKV_FAILPOINTS, a comma-separated list of
//
//	name=action[@after]
//
// where action is "error" (Inject returns ErrInjected), "panic",
// "exit" (the process exits at once with status 86, like a kill -9 at that
// point: nothing deferred runs), or "hold" (Inject blocks until the point
// is re-armed or disarmed with Arm, then returns nil), and after (default 0) is how many calls
// pass before the action fires; it fires on every later call too. Tests may
// also arm failpoints in-process with Arm.
//
// Every failpoint name is listed in Names, so a test can check it arms a
// point that exists.
package failpoint

import "errors"

// ErrInjected is returned by Inject for an armed "error" failpoint.
var ErrInjected = errors.New("failpoint: injected error")

// EnvVar is the environment variable a failpoints build arms from.
const EnvVar = "CUTKV_FAILPOINTS"

// ExitCode is the status a process exits with at an "exit" failpoint.
const ExitCode = 86

// Names of all failpoints in the code.
const (
	// WALBeforeSync fires before each WAL batch fsync.
	WALBeforeSync = "walBeforeSync"
	// RaftBeforeSave fires in the raft loop before a batch of entries and
	// hard states is written to the WAL.
	RaftBeforeSave = "raftBeforeSave"
	// RaftAfterSave fires after the batch is durable and before any
	// message is sent or entry applied.
	RaftAfterSave = "raftAfterSave"
	// TxnAfterPrepare fires in a 2PC coordinator after every participant
	// voted prepared (the transaction is committed, the client answered)
	// and before the decision is recorded.
	TxnAfterPrepare = "txnAfterPrepare"
	// WALBeforeTruncate fires after the hard states and materialization
	// marks are written again and before the WAL front is truncated.
	WALBeforeTruncate = "walBeforeTruncate"
	// MaterializeBeforeRename fires when a materialization file is
	// written and synced, before it is renamed into place.
	MaterializeBeforeRename = "materializeBeforeRename"
	// TxnAfterDecide fires in a 2PC coordinator after the decision is
	// recorded and before any Finish is sent.
	TxnAfterDecide = "txnAfterDecide"
	// TxnInFinishBatch fires on a partition leader about to propose an
	// entry of several transactions' Finishes.
	TxnInFinishBatch = "txnInFinishBatch"
	// RaftBeforeSend fires in the raft loop after a batch was saved and
	// before the messages it answers (appends acknowledged, votes) are
	// sent to other nodes.
	RaftBeforeSend = "raftBeforeSend"
	// RaftBeforeApply fires in the raft loop before a batch of committed
	// entries is applied to a group's state machine.
	RaftBeforeApply = "raftBeforeApply"
	// TxnBeforeVote fires on a 2PC participant's partition leader after
	// the prepare entry applied (intents and locks in place, the vote
	// decided) and before the vote is answered to the coordinator.
	TxnBeforeVote = "txnBeforeVote"
	// CutAfterStart fires on a partition leader after the CutStart entry
	// it proposed applied and before anything else is proposed for the
	// cut: the cut is open in the partition, its CutFinish is for
	// whoever leads next.
	CutAfterStart = "cutAfterStart"
	// CutAfterFinish fires on a partition leader after the CutFinish
	// entry it proposed applied: the cut is closed in the partition and
	// group 0 may not have heard.
	CutAfterFinish = "cutAfterFinish"
	// SnapshotBeforeManifest fires on the node creating a snapshot (group
	// 0's leader) after every partition's objects were uploaded, under
	// the store's upload lock, and before the manifest is written.
	SnapshotBeforeManifest = "snapshotBeforeManifest"
	// MaterializeBeforeCheckpoint fires in a Pebble materialization after
	// the flush made the partition's state durable in its SSTs and before
	// the checkpoint links them into the materialization directory.
	MaterializeBeforeCheckpoint = "materializeBeforeCheckpoint"
)

// Names lists every failpoint.
var Names = []string{WALBeforeSync, RaftBeforeSave, RaftAfterSave, TxnAfterPrepare, TxnAfterDecide, TxnInFinishBatch, WALBeforeTruncate, MaterializeBeforeRename,
	RaftBeforeSend, RaftBeforeApply, TxnBeforeVote, CutAfterStart, CutAfterFinish, SnapshotBeforeManifest, MaterializeBeforeCheckpoint}
