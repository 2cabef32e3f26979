package raftstore

import (
	"errors"
	"fmt"
)

// Errors returned by Store methods. All but ErrStopped and
// ErrLeadershipLost say the command was certainly not applied.
var (
	ErrNotLeader       = errors.New("raftstore: not leader")
	ErrNoLeader        = errors.New("raftstore: no leader")
	ErrProposalDropped = errors.New("raftstore: proposal dropped")
	ErrUnknownGroup    = errors.New("raftstore: unknown group")
	ErrNotServing      = errors.New("raftstore: not serving")
	ErrStopped         = errors.New("raftstore: stopped")
	// ErrLeadershipLost: the proposal's leader stepped down before it was
	// applied; it may or may not be committed later (outcome unknown).
	ErrLeadershipLost = errors.New("raftstore: leadership lost, outcome unknown")
)

// NotLeaderError carries the leader's raft id when it is known.
type NotLeaderError struct {
	Group  uint64
	Leader uint64 // 0 when unknown
}

func (e *NotLeaderError) Error() string {
	if e.Leader == 0 {
		return fmt.Sprintf("raftstore: group %d has no leader", e.Group)
	}
	return fmt.Sprintf("raftstore: not leader of group %d (leader is raft id %d)", e.Group, e.Leader)
}

// Is makes errors.Is(err, ErrNotLeader) and, without a known leader,
// errors.Is(err, ErrNoLeader) hold.
func (e *NotLeaderError) Is(target error) bool {
	return target == ErrNotLeader || (target == ErrNoLeader && e.Leader == 0)
}
