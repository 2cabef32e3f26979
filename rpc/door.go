package rpc

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/txn"
)

// The doors of the node-to-node services: each request is checked here,
// field by field, before anything else runs — before its marker raises
// the clock, before it reaches raft (DESIGN.md, "Trust"). The state
// machines may assume what the doors checked. Errors wrap
// ErrInvalidArgument and name the field.

// Priority bounds (wait-die). A client names its transaction's first
// attempt's time; a transaction older than this has long passed any
// client deadline, and one from the future would win every conflict.
var (
	MaxTxnAge   = time.Minute
	MaxPrioSkew = time.Second
	// PeerClockSkew bounds how far ahead of this node's clock a peer's
	// wall-clock time may be (a prepare time in the future would keep its
	// intent from ever looking stale to recovery).
	PeerClockSkew = 30 * time.Second
	// SettleClockSkew bounds how far ahead of this node's clock the
	// prepare time in a Status or Finish may be. Those name a
	// transaction some leader already prepared, perhaps one whose clock
	// ran ahead (it accepts prepare times up to PeerClockSkew ahead of
	// its own clock): refusing them at PeerClockSkew left its intents
	// unsettled, their locks held and every cut failing, until the real
	// time caught up (issue 17, chaos clock-skew). The bound only limits
	// how long a tombstone so stamped is kept.
	SettleClockSkew = time.Hour
)

// checkPeerTime bounds a peer's Unix ms to [now-maxAge, now+ahead]
// (maxAge 0: no lower bound).
func checkPeerTime(field string, ms int64, maxAge, ahead time.Duration) error {
	now := clock.Now()
	if ms > now.Add(ahead).UnixMilli() || (maxAge > 0 && ms < now.Add(-maxAge).UnixMilli()) {
		return fmt.Errorf("%w: %s %d (Unix ms) is more than %v ahead of this node's clock or older than %v", ErrInvalidArgument, field, ms, ahead, maxAge)
	}
	return nil
}

// checkPriority bounds a wait-die priority (Unix nanoseconds) to
// [now-maxAge, now+MaxPrioSkew].
func checkPriority(field string, prio int64, maxAge time.Duration) error {
	now := clock.Now()
	if lo, hi := now.Add(-maxAge).UnixNano(), now.Add(MaxPrioSkew).UnixNano(); prio < lo || prio > hi {
		return fmt.Errorf("%w: %s %d is not within the last %v (now is %d): a transaction's priority is the Unix nanoseconds of its first attempt",
			ErrInvalidArgument, field, prio, maxAge, now.UnixNano())
	}
	return nil
}

func (n *Node) txnLimits() txn.Limits {
	return txn.Limits{MaxOps: n.Limits.MaxTxnOps, MaxKeySize: n.Limits.MaxKeySize, MaxValueSize: n.Limits.MaxValueSize}
}

// invalid wraps a validator's error as the door's.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
}

// checkPrepare is Participant.Prepare's door. A peer's priority gets the
// retention horizon's bound: a prepare arriving late is refused by the
// horizon, not here.
func (n *Node) checkPrepare(req *internalpb.PrepareRequest) error {
	p, op := req.GetPartition(), req.GetOp()
	if err := n.leaderCheck(p); err != nil {
		return err
	}
	if err := invalid(txn.ValidatePrepare(p, n.Layout.Partitions, op, n.txnLimits())); err != nil {
		return err
	}
	if err := checkPriority("op.priority", op.GetPriority(), FinishedRetention); err != nil {
		return err
	}
	if err := checkPeerTime("op.prepared_unix_ms", op.GetPreparedUnixMs(), FinishedRetention, PeerClockSkew); err != nil {
		return err
	}
	return nil
}

// checkFinish is Participant.Finish's door. The stamp becomes the
// version of the Finish entry, so it is admitted like a marker.
func (n *Node) checkFinish(ctx context.Context, req *internalpb.FinishRequest) error {
	if err := n.leaderCheck(req.GetPartition()); err != nil {
		return err
	}
	if err := invalid(txn.ValidateFinish(req.GetOp())); err != nil {
		return err
	}
	if err := checkPeerTime("op.prepared_unix_ms", req.GetOp().GetPreparedUnixMs(), 0, SettleClockSkew); err != nil {
		return err
	}
	return n.admitVersion(ctx, "op.stamp", req.GetOp().GetStamp())
}

// checkDecide is Participant.Decide's door.
func (n *Node) checkDecide(ctx context.Context, req *internalpb.DecideRequest) error {
	if err := n.leaderCheck(req.GetPartition()); err != nil {
		return err
	}
	if err := invalid(txn.ValidateDecide(n.Layout.Partitions, req.GetOp())); err != nil {
		return err
	}
	if op := req.GetOp(); op.GetCommit() && !slices.Contains(op.GetParticipants(), req.GetPartition()) {
		return fmt.Errorf("%w: op.participants %v of a commit do not name the record partition %d", ErrInvalidArgument, op.GetParticipants(), req.GetPartition())
	}
	return n.admitVersion(ctx, "op.stamp", req.GetOp().GetStamp())
}

// checkStatus is Participant.Status's door.
func (n *Node) checkStatus(req *internalpb.StatusRequest) error {
	if err := n.leaderCheck(req.GetPartition()); err != nil {
		return err
	}
	if err := invalid(txn.ValidateStatus(req.GetOp())); err != nil {
		return err
	}
	// No lower bound: recovery asks about intents of any age (the
	// horizon keeps an old tombstone from being left).
	if err := checkPeerTime("op.prepared_unix_ms", req.GetOp().GetPreparedUnixMs(), 0, SettleClockSkew); err != nil {
		return err
	}
	return nil
}

// checkRecord is Participant.Record's door.
func (n *Node) checkRecord(req *internalpb.RecordRequest) error {
	if err := n.leaderCheck(req.GetPartition()); err != nil {
		return err
	}
	if err := invalid(txn.ValidateRecordRead(req.GetTxnId())); err != nil {
		return err
	}
	return nil
}

// checkForget is Participant.Forget's door.
func (n *Node) checkForget(req *internalpb.ForgetRequest) error {
	if err := n.leaderCheck(req.GetPartition()); err != nil {
		return err
	}
	return invalid(txn.ValidateForget(req.GetOp(), forgetBatch))
}
