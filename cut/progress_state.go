package cut

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// ErrBadProgressState is returned by RestoreProgress for a state no
// Progress can be in (a damaged or hand-made materialization).
var ErrBadProgressState = errors.New("cut: invalid progress state")

// ProgressState is a Progress as plain data, for a partition's
// materialization (DESIGN.md, "Checkpoints": cut progress is state-machine
// state and survives materializations). State and RestoreProgress convert
// both ways; a restored Progress answers every call exactly as the one the
// state was taken from, and takes the same state on the same later calls.
//
// A ProgressState owns its data: State deep-copies out of the Progress and
// RestoreProgress deep-copies in, so neither side aliases the other.
type ProgressState struct {
	// Version and Pos are the newest cut whose position is in the log and
	// that position; both 0 when no cut has started yet.
	Version uint64
	Pos     uint64
	// Active lists the transactions the cut still waits for, sorted,
	// without duplicates.
	Active []string
	// Before, After and Aborted are the active transactions classified so
	// far, in the order their Finish entries applied.
	Before  []*internalpb.CutTxn
	After   []*internalpb.CutTxn
	Aborted [][]byte
	// Finished says CutFinish(Version) was applied.
	Finished bool
	// Done holds the remembered results of finished cuts, oldest first
	// (the order their CutFinish entries applied); at most keepFinished
	// of them, each version once.
	Done []Finished
}

// State returns a copy of p's state.
func (p *Progress) State() *ProgressState {
	s := &ProgressState{
		Version:  p.version,
		Pos:      p.pos,
		Before:   cloneTxns(p.before),
		After:    cloneTxns(p.after),
		Aborted:  cloneIDs(p.aborted),
		Finished: p.finished,
	}
	if len(p.active) > 0 {
		s.Active = p.Active()
	}
	for _, v := range p.doneOrder {
		f := p.done[v]
		s.Done = append(s.Done, Finished{Op: proto.Clone(f.Op).(*internalpb.CutFinishOp), Index: f.Index})
	}
	return s
}

// RestoreProgress returns the Progress whose state is s. It checks that s
// is one a Progress can be in and returns an error wrapping
// ErrBadProgressState when not; it never panics on bad input.
func RestoreProgress(s *ProgressState) (*Progress, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: no state", ErrBadProgressState)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadProgressState, err)
	}
	p := NewProgress()
	p.version, p.pos, p.finished = s.Version, s.Pos, s.Finished
	if s.Version != 0 {
		// Observe leaves a map behind once a cut started, even an empty one.
		p.active = make(map[string]struct{}, len(s.Active))
		for _, id := range s.Active {
			p.active[id] = struct{}{}
		}
	}
	p.before, p.after, p.aborted = cloneTxns(s.Before), cloneTxns(s.After), cloneIDs(s.Aborted)
	for _, f := range s.Done {
		v := f.Op.GetVersion()
		p.done[v] = Finished{Op: proto.Clone(f.Op).(*internalpb.CutFinishOp), Index: f.Index}
		p.doneOrder = append(p.doneOrder, v)
	}
	return p, nil
}

// validate checks what Observe, TxnFinished and ApplyFinish guarantee.
func (s *ProgressState) validate() error {
	if s.Version == 0 && (s.Pos != 0 || len(s.Active)+len(s.Before)+len(s.After)+len(s.Aborted) > 0 || s.Finished) {
		return errors.New("a position or transactions without a cut")
	}
	if s.Finished && len(s.Active) > 0 {
		return fmt.Errorf("cut %d finished with %d active transactions", s.Version, len(s.Active))
	}
	for i, id := range s.Active {
		if i > 0 && s.Active[i-1] >= id {
			return fmt.Errorf("active set not sorted or repeats %q", id)
		}
	}
	for _, ts := range [][]*internalpb.CutTxn{s.Before, s.After} {
		if slices.Contains(ts, nil) {
			return errors.New("a nil classified transaction")
		}
	}
	if len(s.Done) > keepFinished {
		return fmt.Errorf("%d finished cuts remembered, at most %d", len(s.Done), keepFinished)
	}
	seen := make(map[uint64]bool, len(s.Done))
	for _, f := range s.Done {
		if f.Op == nil {
			return errors.New("a finished cut without its CutFinish")
		}
		v := f.Op.GetVersion()
		if v == 0 || seen[v] {
			return fmt.Errorf("finished cut version %d is zero or repeated", v)
		}
		seen[v] = true
	}
	return nil
}

// Equal says whether s and o are the same state.
func (s *ProgressState) Equal(o *ProgressState) bool {
	if s == nil || o == nil {
		return s == o
	}
	eqTxns := func(a, b []*internalpb.CutTxn) bool {
		return slices.EqualFunc(a, b, func(x, y *internalpb.CutTxn) bool { return proto.Equal(x, y) })
	}
	return s.Version == o.Version && s.Pos == o.Pos && s.Finished == o.Finished &&
		slices.Equal(s.Active, o.Active) &&
		eqTxns(s.Before, o.Before) && eqTxns(s.After, o.After) &&
		slices.EqualFunc(s.Aborted, o.Aborted, func(x, y []byte) bool { return string(x) == string(y) }) &&
		slices.EqualFunc(s.Done, o.Done, func(x, y Finished) bool { return x.Index == y.Index && proto.Equal(x.Op, y.Op) })
}

func cloneTxns(ts []*internalpb.CutTxn) []*internalpb.CutTxn {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*internalpb.CutTxn, len(ts))
	for i, t := range ts {
		out[i] = proto.Clone(t).(*internalpb.CutTxn)
	}
	return out
}

func cloneIDs(ids [][]byte) [][]byte {
	if len(ids) == 0 {
		return nil
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		out[i] = slices.Clone(id)
	}
	return out
}
