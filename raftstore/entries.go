package raftstore

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/wal"
)

// ErrLogGone: entries asked for are no longer on this node (behind the
// WAL's front and raft's in-memory log, or never written here).
var ErrLogGone = errors.New("raftstore: entries not held by this node")

// LogFrom returns the lowest raft index of group whose entry this node can
// still read (ReadEntries), up to the group's last entry. Pin the group
// first to keep it from rising.
func (s *Store) LogFrom(group uint64) (uint64, error) {
	g := s.groups[group]
	if g == nil {
		return 0, fmt.Errorf("%w %d", ErrUnknownGroup, group)
	}
	from, err := g.storage.FirstIndex()
	if err != nil {
		return 0, err
	}
	s.persist.posMu.Lock()
	if ps := s.persist.pos[group]; len(ps) > 0 {
		from = min(from, ps[0].raft)
	}
	s.persist.posMu.Unlock()
	return from, nil
}

// ReadEntries returns group's entries lo … hi (inclusive), which must be
// committed on this node: raft's in-memory log serves what it holds, the
// node WAL the older ones. It is safe to call from any goroutine; pin the
// group (Pin) below lo first, or a truncation can take the entries away
// (ErrLogGone).
func (s *Store) ReadEntries(group, lo, hi uint64) ([]*raftpb.Entry, error) {
	g := s.groups[group]
	if g == nil {
		return nil, fmt.Errorf("%w %d", ErrUnknownGroup, group)
	}
	if lo == 0 || hi < lo {
		return nil, fmt.Errorf("raftstore: group %d: bad entry range [%d, %d]", group, lo, hi)
	}
	if st, ok := s.Status(group); ok && st.Commit < hi {
		return nil, fmt.Errorf("raftstore: group %d: entry %d is not committed here (commit %d)", group, hi, st.Commit)
	}
	out := make([]*raftpb.Entry, 0, hi-lo+1)
	for next := lo; next <= hi; {
		first, err := g.storage.FirstIndex()
		if err != nil {
			return nil, err
		}
		if next >= first {
			ents, err := g.storage.Entries(next, hi+1, math.MaxUint64)
			if errors.Is(err, raft.ErrCompacted) {
				continue // compacted meanwhile: the WAL has them
			}
			if err != nil {
				return nil, fmt.Errorf("raftstore: group %d: entries [%d, %d]: %w", group, next, hi, err)
			}
			out = append(out, ents...) // shared with raft's storage: read only
			next += uint64(len(ents))
			if len(ents) == 0 {
				return nil, fmt.Errorf("%w: group %d entry %d", ErrLogGone, group, next)
			}
			continue
		}
		e, err := s.readWALEntry(group, next)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		next++
	}
	return out, nil
}

// readWALEntry reads group's entry i from the node WAL.
func (s *Store) readWALEntry(group, i uint64) (*raftpb.Entry, error) {
	s.persist.posMu.Lock()
	ps := s.persist.pos[group]
	k := sort.Search(len(ps), func(k int) bool { return ps[k].raft >= i })
	var at uint64
	if k < len(ps) && ps[k].raft == i {
		at = ps[k].wal
	}
	s.persist.posMu.Unlock()
	if at == 0 {
		return nil, fmt.Errorf("%w: group %d entry %d is neither in memory nor in the WAL", ErrLogGone, group, i)
	}
	r, err := s.cfg.WAL.Read(at)
	if errors.Is(err, wal.ErrOutOfRange) {
		return nil, fmt.Errorf("%w: group %d entry %d (WAL record %d): %v", ErrLogGone, group, i, at, err)
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: group %d entry %d: %w", group, i, err)
	}
	e := &raftpb.Entry{}
	if r.Type != wal.RecordEntry || r.Group != group {
		return nil, fmt.Errorf("raftstore: WAL record %d holds %v of group %d, want an entry of group %d", at, r.Type, r.Group, group)
	}
	if err := proto.Unmarshal(r.Data, e); err != nil {
		return nil, fmt.Errorf("raftstore: WAL record %d: group %d entry: %w", at, group, err)
	}
	if e.GetIndex() != i {
		return nil, fmt.Errorf("raftstore: WAL record %d holds entry %d of group %d, want %d", at, e.GetIndex(), group, i)
	}
	return e, nil
}
