package checkpoint

import (
	"fmt"
	"slices"
	"strings"
)

// Piece is a stored changelog piece: the committed raft entries Lo … Hi
// (both inclusive, 1 ≤ Lo ≤ Hi) of raft group Group, which is a
// partition's group. A piece is immutable and named by its bounds; pieces
// of one group may overlap.
type Piece struct {
	Group uint64
	Lo    uint64
	Hi    uint64
}

// Name returns the piece's name for a store, e.g.
// g0003-00000000000000000011-00000000000000000030.log.
func (p Piece) Name() string {
	return fmt.Sprintf("g%04d-%020d-%020d.log", p.Group, p.Lo, p.Hi)
}

func (p Piece) String() string { return fmt.Sprintf("g%d[%d,%d]", p.Group, p.Lo, p.Hi) }

// validate checks the bounds.
func (p Piece) validate() error {
	if p.Lo == 0 || p.Lo > p.Hi {
		return fmt.Errorf("%w: piece %v: bounds must have 1 <= lo <= hi", ErrInvalid, p)
	}
	return nil
}

// PieceRef is a handle's use of a stored piece: its entries From … Hi
// (Lo ≤ From ≤ Hi). From is above Lo when a materialization newer than the
// piece's start is the handle's base: recovery skips the piece's entries
// below From, which the base already holds. References count on the
// stored Piece, whatever From is.
type PieceRef struct {
	Piece Piece
	From  uint64
}

func (r PieceRef) String() string {
	if r.From == r.Piece.Lo {
		return r.Piece.String()
	}
	return fmt.Sprintf("%v from %d", r.Piece, r.From)
}

// Handle is the state of one partition in one checkpoint: its base
// materialization at m plus the changelog entries (m, n] in pieces
// (DESIGN.md, "Checkpoints"). A handle without a base starts from the
// empty partition at index 0.
type Handle struct {
	Partition uint64
	Base      *Materialization // nil: the empty state at index 0
	// Pieces cover m+1 … n in order, without gaps or overlaps.
	Pieces []PieceRef
}

// BaseIndex returns m, the index of the base (0 without one).
func (h Handle) BaseIndex() uint64 {
	if h.Base == nil {
		return 0
	}
	return h.Base.Index
}

// Index returns n, the index the handle's state is at: the last piece's
// end, or m without pieces.
func (h Handle) Index() uint64 {
	if len(h.Pieces) == 0 {
		return h.BaseIndex()
	}
	return h.Pieces[len(h.Pieces)-1].Piece.Hi
}

// String renders the handle as, e.g., "p1: p1@20 + g1[11,30] from 21 + g1[31,40]".
func (h Handle) String() string {
	parts := []string{"empty"}
	if h.Base != nil {
		parts[0] = h.Base.String()
	}
	for _, r := range h.Pieces {
		parts = append(parts, r.String())
	}
	return fmt.Sprintf("p%d: %s", h.Partition, strings.Join(parts, " + "))
}

// Validate checks the handle's shape (invariant 2 of the package doc).
func (h Handle) Validate() error {
	if h.Base != nil && h.Base.Partition != h.Partition {
		return fmt.Errorf("%w: handle %v: base of partition %d", ErrInvalid, h, h.Base.Partition)
	}
	next := h.BaseIndex() + 1
	for _, r := range h.Pieces {
		if err := r.Piece.validate(); err != nil {
			return fmt.Errorf("handle %v: %w", h, err)
		}
		switch {
		case r.Piece.Group != h.Partition:
			return fmt.Errorf("%w: handle %v: piece %v of another group", ErrInvalid, h, r.Piece)
		case r.From < r.Piece.Lo || r.From > r.Piece.Hi:
			return fmt.Errorf("%w: handle %v: %v starts outside its piece", ErrInvalid, h, r)
		case r.From != next:
			return fmt.Errorf("%w: handle %v: %v does not start at %d", ErrInvalid, h, r, next)
		}
		next = r.Piece.Hi + 1
	}
	return nil
}

// clone returns a copy that shares nothing with h.
func (h Handle) clone() Handle {
	if h.Base != nil {
		b := *h.Base
		h.Base = &b
	}
	h.Pieces = slices.Clone(h.Pieces)
	return h
}
