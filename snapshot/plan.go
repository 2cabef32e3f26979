package snapshot

// Stored is what a store's snapshots hold of one partition: the bases, by
// index, and every distinct piece.
type Stored struct {
	Bases  map[uint64]Base
	Pieces []Piece
}

// IndexStored collects, per partition, the bases and pieces the manifests
// ms name (each piece once, in the order first seen).
func IndexStored(ms []*Manifest) map[uint64]*Stored {
	out := map[uint64]*Stored{}
	seen := map[string]bool{}
	for _, m := range ms {
		for _, p := range m.Partitions {
			so := out[p.Partition]
			if so == nil {
				so = &Stored{Bases: map[uint64]Base{}}
				out[p.Partition] = so
			}
			if p.Base != nil {
				so.Bases[p.Base.Index] = *p.Base
			}
			for _, pc := range p.Pieces {
				if !seen[pc.Name] {
					seen[pc.Name] = true
					so.Pieces = append(so.Pieces, pc)
				}
			}
		}
	}
	return out
}

// Offer is what the replica chosen to upload a partition's part can give:
// its newest materialization below the cut's pos (0: none) and the first
// index of the log it still holds.
type Offer struct {
	Base    uint64
	LogFrom uint64
}

// PartitionPlan is one partition's handle in a snapshot being made: the
// base and the chain of pieces base+1 … End, and which of them the
// uploading node must store.
type PartitionPlan struct {
	Base uint64 // 0: none
	// UploadBase: the node uploads the base; else BaseObject (and, for a
	// checkpoint base, BaseFiles) is stored.
	UploadBase bool
	BaseObject Object
	BaseFiles  []BaseFile
	// Pieces is the chain; the ones at the indexes in New are uploaded
	// and get their Object then.
	Pieces []Piece
	New    []int
}

// PlanPartition plans partition's part of a snapshot of a cut whose pos
// and CutFinish index (end) in the partition are given: a handle as
// DESIGN.md ("Snapshots") describes it, reusing what the store holds.
//
// The base is the offered one, or, unless full, a stored base newer than
// it that lies before pos and whose successor the node's log still holds
// (it costs nothing to upload). Then the chain from base+1 to end takes,
// at each point, the stored piece that covers it and reaches furthest
// without passing end; where none does, one new piece runs to end.
func PlanPartition(partition, pos, end uint64, offer Offer, full bool, stored *Stored) PartitionPlan {
	if stored == nil {
		stored = &Stored{}
	}
	p := PartitionPlan{Base: offer.Base}
	if !full {
		for idx := range stored.Bases {
			if idx > p.Base && idx < pos && idx+1 >= offer.LogFrom {
				p.Base = idx
			}
		}
	}
	if p.Base > 0 {
		o, ok := stored.Bases[p.Base]
		p.UploadBase = !ok
		if ok {
			p.BaseObject, p.BaseFiles = o.Object, o.Files
		}
	}
	for cur := p.Base + 1; cur <= end; {
		best := -1
		for i, pc := range stored.Pieces {
			if pc.Lo <= cur && cur <= pc.Hi && pc.Hi <= end && (best < 0 || pc.Hi > stored.Pieces[best].Hi) {
				best = i
			}
		}
		if best >= 0 {
			pc := stored.Pieces[best]
			p.Pieces = append(p.Pieces, Piece{Object: pc.Object, Lo: pc.Lo, Hi: pc.Hi, From: cur})
			cur = pc.Hi + 1
			continue
		}
		p.New = append(p.New, len(p.Pieces))
		p.Pieces = append(p.Pieces, Piece{Object: Object{Name: PieceName(partition, cur, end)}, Lo: cur, Hi: end, From: cur})
		cur = end + 1
	}
	return p
}
