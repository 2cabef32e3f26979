package raftstore

import (
	"sync/atomic"
	"time"
)

// FailReason says why a proposal was not applied (Counters.Failed).
type FailReason int

const (
	// FailNotLeader: this replica did not lead the group.
	FailNotLeader FailReason = iota
	// FailDropped: raft refused the proposal (a leadership transfer, the
	// node shutting down).
	FailDropped
	// FailOverwritten: a later term's entry took the proposal's place.
	FailOverwritten
	// FailLeadershipLost: the leader stepped down and the log did not
	// tell in time whether the proposal committed (outcome unknown).
	FailLeadershipLost
	numFailReasons
)

// FailReasons names every FailReason, in order: the label values of the
// cutkv_raft_proposals_failed_total family.
func FailReasons() []string {
	return []string{"not_leader", "dropped", "overwritten", "leadership_lost"}
}

// Counters are one group's event counts since the store opened; they
// only grow.
type Counters struct {
	// LeaderChanges counts the times this replica saw a new known leader.
	LeaderChanges uint64
	// Proposals counts the commands raft took to propose (as leader).
	Proposals uint64
	// Failed counts the proposals not applied, by FailReason.
	Failed [numFailReasons]uint64
	// SnapshotsSent counts the raft snapshots this replica sent as the
	// group's leader: a follower too far behind the compacted log is told
	// to fetch a materialization.
	SnapshotsSent uint64
	// SnapshotsInstalled counts the leader's materializations this
	// replica installed (fetched, verified, swapped in, recorded in the
	// WAL) to catch up.
	SnapshotsInstalled uint64
}

// groupCounters are a group's Counters as the loop updates them: atomic
// adds on the loop, loads at scrape time, no lock.
type groupCounters struct {
	leaderChanges atomic.Uint64
	proposals     atomic.Uint64
	failed        [numFailReasons]atomic.Uint64
	snapsSent     atomic.Uint64
	snapsIn       atomic.Uint64
}

func (c *groupCounters) fail(r FailReason) { c.failed[r].Add(1) }

// Counters returns group's event counts; false for a group not held.
// Safe to call from any goroutine.
func (s *Store) Counters(group uint64) (Counters, bool) {
	g := s.groups[group] // the map is fixed after Open
	if g == nil {
		return Counters{}, false
	}
	out := Counters{LeaderChanges: g.counters.leaderChanges.Load(), Proposals: g.counters.proposals.Load(),
		SnapshotsSent: g.counters.snapsSent.Load(), SnapshotsInstalled: g.counters.snapsIn.Load()}
	for i := range out.Failed {
		out.Failed[i] = g.counters.failed[i].Load()
	}
	return out, true
}

// Materialized describes one materialization attempt (Config.OnMaterialize).
type Materialized struct {
	Group uint64
	// Bytes of the materialization (the checkpoint's files or the image
	// file); 0 on failure.
	Bytes int64
	// Took is the time from the start of the write to its end.
	Took time.Duration
	// Err is why it failed; nil when it is durable.
	Err error
}

// noteMaterialized reports a materialization attempt to the configured
// observer. Any goroutine.
func (s *Store) noteMaterialized(m Materialized) {
	if s.cfg.OnMaterialize != nil {
		s.cfg.OnMaterialize(m)
	}
}
