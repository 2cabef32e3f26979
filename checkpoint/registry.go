package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
)

// Registry counts the holders of stored pieces and materializations and
// reports those that lose their last holder (see the package doc for the
// protocol and the invariants). The zero value is not usable; call
// NewRegistry. Not safe for concurrent use; it does no I/O.
type Registry struct {
	pieces  map[Piece]*holders
	mats    map[Materialization]*holders
	handles map[handleKey]Handle
	bases   map[uint64]Materialization // partition → newest materialization
}

// holders of one piece or materialization.
type holders struct {
	handles int  // retained handles naming it
	held    bool // the changelog (a piece) or the partition (its base)
}

type handleKey struct{ checkpoint, partition uint64 }

// Garbage lists what a call left without holders: the caller deletes
// these, and may do so at once.
type Garbage struct {
	Pieces           []Piece           // sorted by group, Lo, Hi
	Materializations []Materialization // sorted by partition, index
}

// Empty says whether there is nothing to delete.
func (g Garbage) Empty() bool { return len(g.Pieces) == 0 && len(g.Materializations) == 0 }

func (g *Garbage) sort() {
	slices.SortFunc(g.Pieces, comparePieces)
	slices.SortFunc(g.Materializations, func(a, b Materialization) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Index, b.Index))
	})
}

func comparePieces(a, b Piece) int {
	return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Lo, b.Lo), cmp.Compare(a.Hi, b.Hi))
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		pieces:  map[Piece]*holders{},
		mats:    map[Materialization]*holders{},
		handles: map[handleKey]Handle{},
		bases:   map[uint64]Materialization{},
	}
}

// AddPiece records a piece the changelog stored; the changelog holds it
// until Truncate. Adding a piece the registry knows makes the changelog
// hold it (again); nothing else changes.
func (r *Registry) AddPiece(p Piece) error {
	if err := p.validate(); err != nil {
		return err
	}
	h := r.pieces[p]
	if h == nil {
		h = &holders{}
		r.pieces[p] = h
	}
	h.held = true
	return nil
}

// AddMaterialization records that m is durable: it becomes the base of
// the partition's next checkpoints, held by the partition, and the
// previous base loses that hold. m's index must not be below the current
// base's; adding the current base again changes nothing.
func (r *Registry) AddMaterialization(m Materialization) (Garbage, error) {
	var g Garbage
	old, ok := r.bases[m.Partition]
	if ok && m.Index < old.Index {
		return g, fmt.Errorf("%w: materialization %v is older than the base %v", ErrInvalid, m, old)
	}
	if ok && m == old {
		return g, nil
	}
	h := r.mats[m]
	if h == nil {
		h = &holders{}
		r.mats[m] = h
	}
	h.held = true
	r.bases[m.Partition] = m
	if ok {
		r.mats[old].held = false
		r.collectMat(old, &g)
	}
	g.sort()
	return g, nil
}

// Base returns the partition's newest materialization, if any.
func (r *Registry) Base(partition uint64) (Materialization, bool) {
	m, ok := r.bases[partition]
	return m, ok
}

// Truncate lets the changelog release the partition's pieces that end at
// or below upto (FLIP-158's truncate(before)): they are deleted once no
// retained handle names them. A piece that straddles upto stays, for
// later checkpoints to use from upto+1 on. upto must not be above the
// partition's base index (invariant 3).
func (r *Registry) Truncate(partition, upto uint64) (Garbage, error) {
	var g Garbage
	if base := r.bases[partition]; upto > base.Index {
		return g, fmt.Errorf("%w: truncating partition %d's changelog to %d, past its materialization at %d", ErrInvalid, partition, upto, base.Index)
	}
	for p, h := range r.pieces {
		if p.Group == partition && p.Hi <= upto && h.held {
			h.held = false
			r.collectPiece(p, &g)
		}
	}
	g.sort()
	return g, nil
}

// Plan returns the handle of a checkpoint of the partition at index n: its
// base, the stored pieces that cover the entries after the base up to n,
// and, when those stop short of n, a new piece for the rest, which it also
// returns. The caller stores the new piece, calls AddPiece, then Retain.
// n must not be below the base's index. Plan changes nothing.
//
// From each index on, Plan uses the stored piece of the partition that
// starts at or before it and reaches furthest without passing n; a piece
// reaching past n is not used (a handle ends exactly at n).
func (r *Registry) Plan(partition, n uint64) (Handle, *Piece, error) {
	h := Handle{Partition: partition}
	if base, ok := r.bases[partition]; ok {
		h.Base = &base
	}
	if n < h.BaseIndex() {
		return Handle{}, nil, fmt.Errorf("%w: checkpoint of partition %d at %d, below its materialization at %d", ErrInvalid, partition, n, h.BaseIndex())
	}
	var stored []Piece
	for p := range r.pieces {
		if p.Group == partition && p.Hi <= n {
			stored = append(stored, p)
		}
	}
	next := h.BaseIndex() + 1
	for next <= n {
		best, found := Piece{}, false
		for _, p := range stored {
			if p.Lo <= next && next <= p.Hi && (!found || p.Hi > best.Hi || (p.Hi == best.Hi && p.Lo > best.Lo)) {
				best, found = p, true
			}
		}
		if !found {
			break
		}
		h.Pieces = append(h.Pieces, PieceRef{Piece: best, From: next})
		next = best.Hi + 1
	}
	if next > n {
		return h, nil, nil
	}
	missing := Piece{Group: partition, Lo: next, Hi: n}
	h.Pieces = append(h.Pieces, PieceRef{Piece: missing, From: next})
	return h, &missing, nil
}

// Retain registers h as the handle of checkpoint cp (any increasing id,
// such as the cut version) for its partition: every piece and the base it
// names are held until Release or Subsume drops it. Pieces and bases the
// registry did not know are recorded (as after a restart, when the
// retained handles are registered again from the catalogue). A
// checkpoint retains one handle per partition.
func (r *Registry) Retain(cp uint64, h Handle) error {
	if err := h.Validate(); err != nil {
		return err
	}
	k := handleKey{cp, h.Partition}
	if _, dup := r.handles[k]; dup {
		return fmt.Errorf("%w: checkpoint %d already has a handle of partition %d", ErrInvalid, cp, h.Partition)
	}
	h = h.clone()
	r.handles[k] = h
	if h.Base != nil {
		m := r.mats[*h.Base]
		if m == nil {
			m = &holders{}
			r.mats[*h.Base] = m
		}
		m.handles++
	}
	for _, ref := range h.Pieces {
		p := r.pieces[ref.Piece]
		if p == nil {
			p = &holders{}
			r.pieces[ref.Piece] = p
		}
		p.handles++
	}
	return nil
}

// Release drops the handle of checkpoint cp for the partition (the
// checkpoint failed, expired or was deleted).
func (r *Registry) Release(cp, partition uint64) (Garbage, error) {
	var g Garbage
	if _, ok := r.handles[handleKey{cp, partition}]; !ok {
		return g, fmt.Errorf("%w: checkpoint %d of partition %d", ErrUnknownHandle, cp, partition)
	}
	r.release(handleKey{cp, partition}, &g)
	g.sort()
	return g, nil
}

// Subsume drops every handle of the partition whose checkpoint is older
// than cp: checkpoint cp was finalized and replaces them.
func (r *Registry) Subsume(cp, partition uint64) Garbage {
	var g Garbage
	for k := range r.handles {
		if k.partition == partition && k.checkpoint < cp {
			r.release(k, &g)
		}
	}
	g.sort()
	return g
}

func (r *Registry) release(k handleKey, g *Garbage) {
	h := r.handles[k]
	delete(r.handles, k)
	if h.Base != nil {
		r.mats[*h.Base].handles--
		r.collectMat(*h.Base, g)
	}
	for _, ref := range h.Pieces {
		r.pieces[ref.Piece].handles--
		r.collectPiece(ref.Piece, g)
	}
}

func (r *Registry) collectPiece(p Piece, g *Garbage) {
	if h := r.pieces[p]; h.handles == 0 && !h.held {
		delete(r.pieces, p)
		g.Pieces = append(g.Pieces, p)
	}
}

func (r *Registry) collectMat(m Materialization, g *Garbage) {
	if h := r.mats[m]; h.handles == 0 && !h.held {
		delete(r.mats, m)
		g.Materializations = append(g.Materializations, m)
	}
}

// Handle returns the handle checkpoint cp retains for the partition.
func (r *Registry) Handle(cp, partition uint64) (Handle, bool) {
	h, ok := r.handles[handleKey{cp, partition}]
	return h.clone(), ok
}

// Checkpoints returns the checkpoints that retain a handle of the
// partition, sorted.
func (r *Registry) Checkpoints(partition uint64) []uint64 {
	var out []uint64
	for k := range r.handles {
		if k.partition == partition {
			out = append(out, k.checkpoint)
		}
	}
	slices.Sort(out)
	return out
}

// Pieces returns the partition's stored pieces that something holds,
// sorted by Lo, Hi.
func (r *Registry) Pieces(partition uint64) []Piece {
	var out []Piece
	for p := range r.pieces {
		if p.Group == partition {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, comparePieces)
	return out
}

// Materializations returns the partition's materializations that
// something holds, sorted by index.
func (r *Registry) Materializations(partition uint64) []Materialization {
	var out []Materialization
	for m := range r.mats {
		if m.Partition == partition {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Materialization) int { return cmp.Compare(a.Index, b.Index) })
	return out
}
