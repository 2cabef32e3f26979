package checkpoint

import (
	"fmt"
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
