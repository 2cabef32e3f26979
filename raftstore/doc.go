// Package raftstore hosts all raft groups of one node (multi-raft) over the
// node's single WAL.
//
// One goroutine, the loop, owns every group's raft.RawNode. Each turn it
// ticks or steps the groups, then collects the Ready of every group that
// has one and handles them in the order etcd's raft documents:
//
//  1. append the new entries and hard states of all groups to the WAL as
//     one batch with one fsync (group commit across groups);
//  2. append them to the in-memory raft storage;
//  3. send the messages, batched per peer node by the Transport;
//  4. apply the committed entries to each group's state machine and wake
//     the proposers and linearizable readers waiting on them;
//  5. Advance.
//
// Nothing is sent before it is durable, and nothing is applied (so nothing
// is acknowledged) before raft reports it committed, which requires it to
// be durable on a quorum: an acknowledged write survives any minority of
// kill -9s, and all of them (DESIGN.md invariant 1).
//
// Raft messages from peers come through one door, Receive: each is checked
// (group held, sender a member, this node the recipient, a type peers send,
// contents raft takes on trust) and dropped otherwise, counted by reason
// (Config.Rejected); a heartbeat committing past this node's log stops the
// node (ErrLogBehind) instead of raft's panic. See receive.go.
//
// On start the WAL is replayed: a later record for (group, index i)
// supersedes earlier ones for (group, >= i), exactly as raft overwrote its
// uncommitted tail; the state machines are rebuilt by re-applying the
// committed entries. A materialization naming an index past everything
// the WAL knows of its group means the WAL lost its newest part: Open
// refuses (ErrWALBehind).
//
// Callers outside the loop use Propose and ReadIndex, which block until the
// loop has done the work or the context ends. Every error they return says
// whether the command could have been applied: ErrNotLeader,
// ErrProposalDropped and ErrNotServing mean it was not.
package raftstore
