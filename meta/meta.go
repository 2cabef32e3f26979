// Package meta is the state machine of group 0, the cluster's metadata
// group: the layout recorded at bootstrap (members and placement) and the
// consistent cuts (versions allocated, and how each ended). At most one cut
// runs at a time: allocating while one runs returns the running one.
package meta

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/internal/notify"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/topology"
)

// ErrLayoutConflict is returned when a second, different layout is
// proposed: group 0 keeps the first one.
var ErrLayoutConflict = errors.New("meta: cluster already bootstrapped with another layout")

// State is group 0's replicated state.
type State struct {
	mu      sync.RWMutex
	layout  *topology.Layout // nil until the bootstrap entry is applied
	applied uint64
	// cuts, oldest first, at most KeepCuts; versions strictly increase.
	cuts []*kvpb.CutInfo
	// lastCut is the newest version allocated (kept when cuts is trimmed).
	lastCut uint64
	// changed wakes the waiters at the next apply (Changed).
	changed notify.Signal
}

// Changed returns a channel that is closed when the next entry applies
// (or an image is loaded). A waiter for a cut's end takes it before it
// looks and waits on it when the cut still runs: the apply that records
// the end wakes it, so it never polls and never misses a change made
// between its look and its wait.
func (s *State) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed.Wait()
}

// KeepCuts bounds the cuts group 0 remembers (a cut a second: about 3 h).
const KeepCuts = 10000

// New returns an empty metadata state.
func New() *State { return &State{} }

// LastCut returns the highest cut version allocated.
func (s *State) LastCut() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.lastCut
}

// Layout returns the recorded layout, nil before bootstrap is applied.
func (s *State) Layout() *topology.Layout {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.layout
}

// ApplyCommand implements raftstore.StateMachine.
func (s *State) ApplyCommand(index uint64, cmd *internalpb.Command) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index <= s.applied {
		return nil, nil
	}
	s.applied = index
	defer s.changed.Notify() // runs before the unlock
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_Bootstrap:
		l, err := topology.FromProto(op.Bootstrap.GetLayout())
		if err != nil {
			// A bad layout in the log is refused, not fatal: group 0 stays as it was.
			return fmt.Errorf("meta: bootstrap at index %d: %w", index, err), nil
		}
		if s.layout != nil {
			if s.layout.ClusterID != l.ClusterID {
				return fmt.Errorf("%w: have %x, entry %d has %x", ErrLayoutConflict, s.layout.ClusterID, index, l.ClusterID), nil
			}
			return nil, nil
		}
		s.layout = l
		return nil, nil
	case *internalpb.Command_CutAllocate:
		return s.allocateLocked(op.CutAllocate), nil
	case *internalpb.Command_CutRecord:
		return s.recordLocked(op.CutRecord.GetCut()), nil
	case *internalpb.Command_Noop, nil:
		return nil, nil
	default:
		return nil, fmt.Errorf("meta: unknown command %T at index %d", op, index)
	}
}

// MaxCutVersion bounds the versions group 0 allocates: a floor above it
// (a log poisoned with a version near 2^64) is not followed, so that
// versions never wrap.
const MaxCutVersion = 1 << 62

// allocateLocked starts cut max(lastCut, floor)+1 unless a cut runs; it
// returns the running cut (a copy). The floor is the highest version the
// proposer saw in any partition's log: a cluster whose logs took a
// version that was never allocated (from a client, before versions were
// checked) allocates above it, and its cuts work again.
func (s *State) allocateLocked(op *internalpb.CutAllocateOp) *kvpb.CutInfo {
	if n := len(s.cuts); n > 0 && s.cuts[n-1].GetState() == kvpb.CutState_CUT_STATE_RUNNING {
		return proto.Clone(s.cuts[n-1]).(*kvpb.CutInfo)
	}
	if f := op.GetFloor(); f > s.lastCut && f < MaxCutVersion {
		s.lastCut = f
	}
	s.lastCut++
	c := &kvpb.CutInfo{Version: s.lastCut, State: kvpb.CutState_CUT_STATE_RUNNING, StartedUnixMs: op.GetStartedUnixMs()}
	s.cuts = append(s.cuts, c)
	if len(s.cuts) > KeepCuts {
		s.cuts = s.cuts[len(s.cuts)-KeepCuts:]
	}
	return proto.Clone(c).(*kvpb.CutInfo)
}

// recordLocked records how a running cut ended; the first record wins. It
// returns the cut as recorded, nil for an unknown version.
func (s *State) recordLocked(c *kvpb.CutInfo) *kvpb.CutInfo {
	i := s.findLocked(c.GetVersion())
	if i < 0 {
		return nil
	}
	if s.cuts[i].GetState() == kvpb.CutState_CUT_STATE_RUNNING && c.GetState() != kvpb.CutState_CUT_STATE_RUNNING {
		rec := proto.Clone(c).(*kvpb.CutInfo)
		rec.StartedUnixMs = s.cuts[i].GetStartedUnixMs()
		s.cuts[i] = rec
	}
	return proto.Clone(s.cuts[i]).(*kvpb.CutInfo)
}

func (s *State) findLocked(v uint64) int {
	i := sort.Search(len(s.cuts), func(i int) bool { return s.cuts[i].GetVersion() >= v })
	if i < len(s.cuts) && s.cuts[i].GetVersion() == v {
		return i
	}
	return -1
}

// Cut returns cut v (a copy), if remembered.
func (s *State) Cut(v uint64) (*kvpb.CutInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.findLocked(v); i >= 0 {
		return proto.Clone(s.cuts[i]).(*kvpb.CutInfo), true
	}
	return nil, false
}

// Cuts returns up to limit cuts (0: all), newest first, as copies.
func (s *State) Cuts(limit int) []*kvpb.CutInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*kvpb.CutInfo
	for i := len(s.cuts) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, proto.Clone(s.cuts[i]).(*kvpb.CutInfo))
	}
	return out
}

// RunningCut returns the cut in flight, if any.
func (s *State) RunningCut() (*kvpb.CutInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if n := len(s.cuts); n > 0 && s.cuts[n-1].GetState() == kvpb.CutState_CUT_STATE_RUNNING {
		return proto.Clone(s.cuts[n-1]).(*kvpb.CutInfo), true
	}
	return nil, false
}

// SetApplied implements raftstore.StateMachine.
func (s *State) SetApplied(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index > s.applied {
		s.applied = index
		s.changed.Notify()
	}
}
