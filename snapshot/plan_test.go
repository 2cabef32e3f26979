package snapshot

import (
	"fmt"
	"reflect"
	"testing"
)

func storedPiece(g, lo, hi uint64) Piece {
	return Piece{Object: Object{Name: PieceName(g, lo, hi), Size: int64(hi - lo + 1), SHA256: "aa"}, Lo: lo, Hi: hi, From: lo}
}

// TestPlanPartition: the base is the node's unless a newer stored one
// that its log can extend lies before pos; the chain reuses the stored
// pieces that reach furthest and adds one new piece to the end.
func TestPlanPartition(t *testing.T) {
	const g = 3
	mat := func(i uint64) string { return fmt.Sprintf("p%04d-%020d.mat", g, i) }
	base40 := Base{Object: Object{Name: mat(40), Size: 400, SHA256: "bb"}, Index: 40}
	stored := &Stored{
		Bases:  map[uint64]Base{40: base40, 90: {Object: Object{Name: mat(90), Size: 900}, Index: 90}},
		Pieces: []Piece{storedPiece(g, 41, 60), storedPiece(g, 41, 70), storedPiece(g, 61, 200), storedPiece(g, 71, 80)},
	}
	files := []BaseFile{{File: "000004.sst", Object: Object{Name: FileObjectName("cc"), Size: 7, SHA256: "cc"}}}
	ckpt50 := Base{Object: Object{Name: fmt.Sprintf("p%04d-%020d.ckpt", g, 50), Size: 90, SHA256: "dd"}, Index: 50, Files: files}
	for _, tc := range []struct {
		name   string
		pos    uint64
		end    uint64
		offer  Offer
		full   bool
		stored *Stored
		want   PartitionPlan
	}{
		{"nothing stored: the node's base and one new piece", 100, 110, Offer{Base: 50, LogFrom: 51}, false, nil,
			PartitionPlan{Base: 50, UploadBase: true, Pieces: []Piece{{Object: Object{Name: PieceName(g, 51, 110)}, Lo: 51, Hi: 110, From: 51}}, New: []int{0}}},
		{"no base at all: the log from 1", 5, 7, Offer{LogFrom: 1}, false, nil,
			PartitionPlan{Pieces: []Piece{{Object: Object{Name: PieceName(g, 1, 7)}, Lo: 1, Hi: 7, From: 1}}, New: []int{0}}},
		{"the node's base is stored: reused, pieces chained, the rest new", 85, 90, Offer{Base: 40, LogFrom: 30}, false,
			&Stored{Bases: map[uint64]Base{40: base40}, Pieces: stored.Pieces},
			PartitionPlan{Base: 40, BaseObject: Object{Name: mat(40), Size: 400, SHA256: "bb"}, Pieces: []Piece{
				storedPiece(g, 41, 70), storedPiece(g, 71, 80), {Object: Object{Name: PieceName(g, 81, 90)}, Lo: 81, Hi: 90, From: 81},
			}, New: []int{2}}},
		{"a newer stored base the node's log extends wins", 100, 130, Offer{Base: 20, LogFrom: 35}, false, stored,
			PartitionPlan{Base: 90, BaseObject: Object{Name: mat(90), Size: 900}, Pieces: []Piece{
				{Object: Object{Name: PieceName(g, 91, 130)}, Lo: 91, Hi: 130, From: 91},
			}, New: []int{0}}},
		{"a stored base at or after pos is not used", 90, 130, Offer{Base: 20, LogFrom: 35}, false, stored,
			PartitionPlan{Base: 40, BaseObject: Object{Name: mat(40), Size: 400, SHA256: "bb"}, Pieces: []Piece{
				storedPiece(g, 41, 70), storedPiece(g, 71, 80), {Object: Object{Name: PieceName(g, 81, 130)}, Lo: 81, Hi: 130, From: 81},
			}, New: []int{2}}},
		{"a stored base the node's log no longer reaches is not used", 100, 130, Offer{Base: 20, LogFrom: 95}, false, stored,
			PartitionPlan{Base: 20, UploadBase: true, Pieces: []Piece{{Object: Object{Name: PieceName(g, 21, 130)}, Lo: 21, Hi: 130, From: 21}}, New: []int{0}}},
		{"full: the node's own base even with a newer one stored", 100, 130, Offer{Base: 20, LogFrom: 35}, true, stored,
			PartitionPlan{Base: 20, UploadBase: true, Pieces: []Piece{{Object: Object{Name: PieceName(g, 21, 130)}, Lo: 21, Hi: 130, From: 21}}, New: []int{0}}},
		{"a stored checkpoint base: its manifest and files referenced", 60, 60, Offer{Base: 45, LogFrom: 46}, false, &Stored{Bases: map[uint64]Base{50: ckpt50}},
			PartitionPlan{Base: 50, BaseObject: ckpt50.Object, BaseFiles: files, Pieces: []Piece{{Object: Object{Name: PieceName(g, 51, 60)}, Lo: 51, Hi: 60, From: 51}}, New: []int{0}}},
		{"a stored piece used from inside it", 70, 80, Offer{Base: 65, LogFrom: 60}, false, &Stored{Pieces: stored.Pieces},
			PartitionPlan{Base: 65, UploadBase: true, Pieces: []Piece{{Object: storedPiece(g, 41, 70).Object, Lo: 41, Hi: 70, From: 66}, storedPiece(g, 71, 80)}}},
	} {
		got := PlanPartition(g, tc.pos, tc.end, tc.offer, tc.full, tc.stored)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestIndexStored: bases by index and each piece once, per partition.
func TestIndexStored(t *testing.T) {
	a, b := storedPiece(1, 1, 10), storedPiece(1, 11, 20)
	ms := []*Manifest{
		{Partitions: []Partition{{Partition: 1, Base: &Base{Index: 5, Object: Object{Name: "m5"}}, Pieces: []Piece{a}}, {Partition: 2}}},
		{Partitions: []Partition{{Partition: 1, Pieces: []Piece{a, b}}}},
	}
	got := IndexStored(ms)
	if len(got) != 2 || !reflect.DeepEqual(got[1].Pieces, []Piece{a, b}) || got[1].Bases[5].Name != "m5" || len(got[2].Pieces) != 0 {
		t.Fatalf("IndexStored = %+v", got)
	}
}
