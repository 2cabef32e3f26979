package raftstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// seedWait bounds fetching one peer's materialization at start.
const seedWait = 2 * time.Minute

// errNoSeed: the store cannot ask peers (no Fetch, no MaterializeDir).
var errNoSeed = errors.New("no peer to ask")

// seedFromPeers starts group gc from another replica's newest
// materialization, when none of this node's own is usable and its WAL no
// longer holds the log from the start (a partition state found corrupt,
// a checkpoint sharing its damaged file). It asks each peer in turn and
// takes the first materialization the WAL's log continues: at or after
// the entry before the WAL's first, and not behind what this node
// committed. That is safe for the same reason a raft snapshot is: a
// replica's materialization is of applied, so committed, entries; this
// node's hard state (term, vote) and its WAL entries after the
// materialization are kept. The install is recorded in the WAL before
// the files move into MaterializeDir, as for a snapshot from a leader.
func (s *Store) seedFromPeers(gc GroupConfig, l *groupLog, st *raft.MemoryStorage, firstEntry, lastEntry uint64) (*baseInfo, error) {
	if s.cfg.Fetch == nil || s.cfg.MaterializeDir == "" {
		return nil, errNoSeed
	}
	_, dirOK := checkpointerOf(gc.SM)
	var why []string
	for _, peer := range gc.Peers {
		if peer == s.cfg.RaftID {
			continue
		}
		b, err := s.seedFrom(gc, l, st, peer, dirOK, firstEntry, lastEntry)
		if err == nil {
			return b, nil
		}
		why = append(why, fmt.Sprintf("raft id %d: %v", peer, err))
	}
	if len(why) == 0 {
		return nil, errNoSeed
	}
	return nil, errors.New(strings.Join(why, "; "))
}

func (s *Store) seedFrom(gc GroupConfig, l *groupLog, st *raft.MemoryStorage, peer uint64, dirOK bool, firstEntry, lastEntry uint64) (*baseInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), seedWait)
	defer cancel()
	start := time.Now()
	if err := s.cfg.Fetch(ctx, peer, gc.ID, 0, s.fetchedPath(gc.ID, 0), dirOK); err != nil {
		return nil, err
	}
	all, err := checkpoint.List(s.fetchedDir())
	if err != nil || len(all[gc.ID]) == 0 {
		return nil, fmt.Errorf("its materialization is not in %s after the fetch (%v)", s.fetchedDir(), err)
	}
	ms := all[gc.ID]
	m := ms[len(ms)-1]
	drop := func(err error) (*baseInfo, error) {
		if rerr := checkpoint.Remove(s.fetchedDir(), m); rerr != nil {
			s.log.Warn("removing a fetched materialization", "file", m.Name(), "err", rerr)
		}
		return nil, err
	}
	if firstEntry > m.Index+1 {
		return drop(fmt.Errorf("its newest materialization is at %d, and this node's WAL holds the log only from %d", m.Index, firstEntry))
	}
	if hc := l.HardState.GetCommit(); hc > max(m.Index, lastEntry) {
		return drop(fmt.Errorf("its newest materialization is at %d, and this node committed up to %d, past its WAL", m.Index, hc))
	}
	path := filepath.Join(s.fetchedDir(), m.Name())
	var meta checkpoint.Meta
	if m.Dir {
		meta, err = loadCheckpointDir(gc.SM, path, 0)
	} else {
		meta, err = loadImageFile(gc.SM, path, 0)
	}
	if err != nil {
		return drop(fmt.Errorf("%s: %w", path, err))
	}
	// This node's own materialization of the same name, if any, was
	// refused (damaged): the peer's replaces it.
	own := checkpoint.Materialization{Partition: m.Partition, Index: m.Index, Dir: m.Dir}
	if err := checkpoint.Remove(s.cfg.MaterializeDir, own); err != nil {
		return drop(err)
	}
	data, err := proto.Marshal(&internalpb.MaterializedMark{Index: meta.Index, Term: meta.Term, Installed: true})
	if err != nil {
		return drop(err)
	}
	if _, _, err := s.cfg.WAL.Append([]wal.Record{{Type: wal.RecordMaterialized, Group: gc.ID, Data: data}}); err != nil {
		return nil, fmt.Errorf("recording the seed in the WAL: %w", err)
	}
	if err := s.adoptFetched(m); err != nil {
		return drop(err) // the state is installed and the WAL says so: the next start seeds it again
	}
	snap := raftpb.Snapshot{
		Data:     snapshotData(gc.ID, m.Index),
		Metadata: &raftpb.SnapshotMetadata{Index: &meta.Index, Term: &meta.Term, ConfState: &raftpb.ConfState{Voters: gc.Peers}},
	}
	if err := st.ApplySnapshot(&snap); err != nil {
		return nil, fmt.Errorf("restore snapshot at %d: %w", m.Index, err)
	}
	s.log.Warn("no materialization of this node could start the group: seeded it from a peer's", "group", gc.ID, "peer", peer,
		"index", m.Index, "checkpoint", m.Dir, "took", time.Since(start))
	return &baseInfo{index: m.Index, term: meta.Term, keep: m.Index}, nil
}
