// Package meta is the state machine of group 0, the cluster's metadata
// group: the layout recorded at bootstrap (members and placement). Later
// issues add cut versions and the snapshot schedule here.
package meta

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cutkv/cutkv/proto/internalpb"
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
}

// New returns an empty metadata state.
func New() *State { return &State{} }

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
	case *internalpb.Command_Noop, nil:
		return nil, nil
	default:
		return nil, fmt.Errorf("meta: unknown command %T at index %d", op, index)
	}
}

// SetApplied implements raftstore.StateMachine.
func (s *State) SetApplied(index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if index > s.applied {
		s.applied = index
	}
}
