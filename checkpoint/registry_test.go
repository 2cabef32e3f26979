package checkpoint

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
)

// walk is the world of the seed walk-through: one partition applying its
// raft entries, the changelog (its log), a store of pieces and a directory
// of materializations, and the Registry that says what may be deleted.
type walk struct {
	t      *testing.T
	reg    *Registry
	p      *partition.Partition
	log    map[uint64]*internalpb.Command // the committed entries by index
	images map[uint64][]byte              // encoded state at each checkpoint index, to compare recoveries with
	pieces map[Piece][]uint64             // stored pieces: the indexes they hold
	dir    string
	files  Files
}

const part = 1

// add applies ten entries that change key x: one "list.add(x)" of the seed.
func (w *walk) add(x string) {
	w.t.Helper()
	for i := 0; i < 10; i++ {
		idx := w.p.Applied() + 1
		cmd := &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{
			Key: []byte(fmt.Sprintf("%s%d", x, i%3)), Value: []byte(fmt.Sprint(idx)),
		}}}
		if _, err := w.p.Apply(idx, cmd); err != nil {
			w.t.Fatal(err)
		}
		w.log[idx] = cmd
	}
}

// checkpoint triggers checkpoint cp at the applied index: plan, store the
// new piece, retain. It returns the handle.
func (w *walk) checkpoint(cp uint64) Handle {
	w.t.Helper()
	n := w.p.Applied()
	var buf bytes.Buffer
	if err := w.p.Image().Encode(&buf); err != nil {
		w.t.Fatal(err)
	}
	w.images[n] = buf.Bytes()
	h, missing, err := w.reg.Plan(part, n)
	if err != nil {
		w.t.Fatal(err)
	}
	if missing != nil {
		for i := missing.Lo; i <= missing.Hi; i++ {
			w.pieces[*missing] = append(w.pieces[*missing], i)
		}
		if err := w.reg.AddPiece(*missing); err != nil {
			w.t.Fatal(err)
		}
	}
	if err := w.reg.Retain(cp, h); err != nil {
		w.t.Fatal(err)
	}
	return h
}

// collect deletes what the registry reports unheld, after checking it
// was stored and no retained handle names it.
func (w *walk) collect(g Garbage) {
	w.t.Helper()
	for _, p := range g.Pieces {
		if _, ok := w.pieces[p]; !ok {
			w.t.Fatalf("garbage piece %v was never stored", p)
		}
		delete(w.pieces, p)
	}
	for _, m := range g.Materializations {
		if err := w.files.Remove(w.dir, m); err != nil {
			w.t.Fatal(err)
		}
	}
}

// recover rebuilds the partition from a handle — base file, then each
// piece's entries from its From — and checks it is the state the
// checkpoint was taken of.
func (w *walk) recover(h Handle) {
	w.t.Helper()
	p := partition.New(part)
	if h.Base != nil {
		r, err := w.files.Open(w.dir + "/" + h.Base.Name())
		if err != nil {
			w.t.Fatal(err)
		}
		if p, err = partition.Decode(part, r); err != nil {
			w.t.Fatalf("recovering %v: %v", h, err)
		}
		r.Close()
	}
	for _, ref := range h.Pieces {
		idxs, ok := w.pieces[ref.Piece]
		if !ok {
			w.t.Fatalf("recovering %v: piece %v is gone", h, ref.Piece)
		}
		for _, i := range idxs {
			if i < ref.From { // already in the base: filtered
				continue
			}
			if _, err := p.Apply(i, w.log[i]); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := p.Image().Encode(&buf); err != nil {
		w.t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), w.images[h.Index()]) {
		w.t.Fatalf("recovering %v does not give the state at %d", h, h.Index())
	}
}

// expect checks the stored pieces, the materializations held and the
// handle of every retained checkpoint.
func (w *walk) expect(step string, pieces string, handles ...string) {
	w.t.Helper()
	var ps []string
	for _, p := range w.reg.Pieces(part) {
		ps = append(ps, p.String())
	}
	if got := strings.Join(ps, " "); got != pieces {
		w.t.Fatalf("%s: pieces %q, want %q", step, got, pieces)
	}
	var stored []string
	for p := range w.pieces {
		stored = append(stored, p.String())
	}
	slices.Sort(stored)
	if got := strings.Join(stored, " "); got != pieces {
		w.t.Fatalf("%s: the store holds %q, the registry %q", step, got, pieces)
	}
	var hs []string
	for _, cp := range w.reg.Checkpoints(part) {
		h, _ := w.reg.Handle(cp, part)
		hs = append(hs, fmt.Sprintf("CP%d = %v", cp, h))
	}
	if !slices.Equal(hs, handles) {
		w.t.Fatalf("%s: handles\n  %s\nwant\n  %s", step, strings.Join(hs, "\n  "), strings.Join(handles, "\n  "))
	}
}

func expectNoGarbage(t *testing.T, step string, g Garbage, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if !g.Empty() {
		t.Fatalf("%s: garbage %+v, want none", step, g)
	}
}

// TestSeedWalkThrough is the walk-through of seeds/000 (FLIP-158's
// "Page History"), step by step, with raft indexes for the changelog's
// sequence numbers: T0 = 0, T1 = 10, T2 = 20, T3 = 30, T4 = 40, each
// list.add(x) being the ten entries after the previous T. The seed's
// (Ti:Tj) is the piece of entries Ti+1 … Tj; its "(T0:T1 = a,b) -
// consolidated changes" is the materialization at T2.
func TestSeedWalkThrough(t *testing.T) {
	w := &walk{
		t: t, reg: NewRegistry(), p: partition.New(part),
		log: map[uint64]*internalpb.Command{}, images: map[uint64][]byte{}, pieces: map[Piece][]uint64{},
		dir: t.TempDir(),
	}
	w.expect("on startup", "")

	w.add("a")
	w.expect("list.add(a)", "")

	// CP1: persistDurably(after = T0) stores (T0:T1 = a).
	cp1 := w.checkpoint(1)
	w.expect("CP1 triggered", "g1[1,10]",
		"CP1 = p1: empty + g1[1,10]")
	w.recover(cp1)

	w.add("b")
	// Materialization at T2: the image is taken now, in the apply loop,
	// and written while the partition goes on (after list.add(c) below).
	image := w.p.Image()
	if image.Applied() != 20 {
		t.Fatalf("materialization at %d, want T2 = 20", image.Applied())
	}
	w.expect("materialization triggered", "g1[1,10]",
		"CP1 = p1: empty + g1[1,10]")

	w.add("c")
	// CP2: persistDurably(after = T0, the last materialization still):
	// the stored (T0:T1 = a) is reused and (T1:T3 = b,c) stored.
	cp2 := w.checkpoint(2)
	w.expect("CP2 triggered", "g1[1,10] g1[11,30]",
		"CP1 = p1: empty + g1[1,10]",
		"CP2 = p1: empty + g1[1,10] + g1[11,30]")
	w.recover(cp2)

	// JM finalizes CP1, then CP2: CP1 is subsumed but nothing is removed,
	// CP2 names both pieces.
	g := w.reg.Subsume(1, part)
	expectNoGarbage(t, "CP1 finalized", g, nil)
	g = w.reg.Subsume(2, part)
	expectNoGarbage(t, "CP2 finalized", g, nil)
	w.expect("CP1 and CP2 finalized", "g1[1,10] g1[11,30]",
		"CP2 = p1: empty + g1[1,10] + g1[11,30]")

	// The materialization completes: (T0:T2 = a,b) is durable.
	if _, _, _, err := w.files.Write(w.dir, Meta{Partition: part, Index: image.Applied(), Term: 1}, image.Encode); err != nil {
		t.Fatal(err)
	}
	mat := Materialization{Partition: part, Index: 20}
	g, err := w.reg.AddMaterialization(mat)
	expectNoGarbage(t, "materialization done", g, err)
	if b, ok := w.reg.Base(part); !ok || b != mat {
		t.Fatalf("base %v %v, want %v", b, ok, mat)
	}
	w.expect("materialization done", "g1[1,10] g1[11,30]",
		"CP2 = p1: empty + g1[1,10] + g1[11,30]")

	// truncate(before = T2) drops the changelog's reference to
	// (T0:T1 = a); CP2 still names it, so it stays.
	g, err = w.reg.Truncate(part, 20)
	expectNoGarbage(t, "truncate", g, err)
	w.expect("truncate", "g1[1,10] g1[11,30]",
		"CP2 = p1: empty + g1[1,10] + g1[11,30]")

	w.add("d")
	// CP3: persistDurably(after = T2) finds (T1:T3 = b,c) and uses it from
	// T2 on (b filtered on recovery), then stores (T3:T4 = d).
	cp3 := w.checkpoint(3)
	w.expect("CP3 triggered", "g1[1,10] g1[11,30] g1[31,40]",
		"CP2 = p1: empty + g1[1,10] + g1[11,30]",
		"CP3 = p1: p1@20 + g1[11,30] from 21 + g1[31,40]")
	want := Handle{Partition: part, Base: &mat, Pieces: []PieceRef{
		{Piece: Piece{Group: part, Lo: 11, Hi: 30}, From: 21},
		{Piece: Piece{Group: part, Lo: 31, Hi: 40}, From: 31},
	}}
	if cp3.String() != want.String() || cp3.BaseIndex() != 20 || cp3.Index() != 40 {
		t.Fatalf("CP3 = %v, want %v", cp3, want)
	}
	w.recover(cp3)
	w.recover(cp2) // CP2 is retained still and recovers too

	// JM finalizes CP3: CP2 is subsumed, and the piece (T0:T1 = a) is
	// referenced by nothing any more: it is deleted.
	g = w.reg.Subsume(3, part)
	if len(g.Pieces) != 1 || g.Pieces[0] != (Piece{Group: part, Lo: 1, Hi: 10}) || len(g.Materializations) != 0 {
		t.Fatalf("CP2 subsumed: garbage %+v, want the piece (T0:T1) only", g)
	}
	w.collect(g)
	w.expect("CP3 finalized, CP2 subsumed", "g1[11,30] g1[31,40]",
		"CP3 = p1: p1@20 + g1[11,30] from 21 + g1[31,40]")
	w.recover(cp3) // without the deleted piece

	// Beyond the seed: the next materialization replaces the base; the old
	// one stays while CP3 names it, and goes with CP3.
	w.add("e")
	if _, _, _, err := w.files.Write(w.dir, Meta{Partition: part, Index: 50, Term: 1}, w.p.Image().Encode); err != nil {
		t.Fatal(err)
	}
	g, err = w.reg.AddMaterialization(Materialization{Partition: part, Index: 50})
	expectNoGarbage(t, "second materialization", g, err)
	g, err = w.reg.Truncate(part, 50)
	expectNoGarbage(t, "second truncate", g, err)
	cp4 := w.checkpoint(4)
	if cp4.String() != "p1: p1@50" {
		t.Fatalf("CP4 = %v, want the materialization alone", cp4)
	}
	g = w.reg.Subsume(4, part)
	w.collect(g)
	if fmt.Sprint(g.Pieces) != "[g1[11,30] g1[31,40]]" || fmt.Sprint(g.Materializations) != "[p1@20]" {
		t.Fatalf("CP3 subsumed: garbage %+v", g)
	}
	w.expect("CP4 finalized", "", "CP4 = p1: p1@50")
	if list, _ := w.files.List(w.dir); !slices.Equal(list[part], []Materialization{{part, 50}}) {
		t.Fatalf("materializations left: %v", list)
	}
	w.recover(cp4)
}

func TestHandleValidate(t *testing.T) {
	m := &Materialization{Partition: 1, Index: 20}
	pc := func(lo, hi uint64) Piece { return Piece{Group: 1, Lo: lo, Hi: hi} }
	for _, tc := range []struct {
		h  Handle
		ok bool
	}{
		{Handle{Partition: 1}, true},
		{Handle{Partition: 1, Base: m}, true},
		{Handle{Partition: 1, Pieces: []PieceRef{{pc(1, 5), 1}, {pc(6, 9), 6}}}, true},
		{Handle{Partition: 1, Base: m, Pieces: []PieceRef{{pc(11, 30), 21}, {pc(31, 31), 31}}}, true},
		{Handle{Partition: 2, Base: m}, false},                                                // base of another partition
		{Handle{Partition: 1, Pieces: []PieceRef{{pc(2, 5), 2}}}, false},                      // gap after 0
		{Handle{Partition: 1, Base: m, Pieces: []PieceRef{{pc(11, 30), 11}}}, false},          // overlaps the base
		{Handle{Partition: 1, Base: m, Pieces: []PieceRef{{pc(22, 30), 21}}}, false},          // From below Lo
		{Handle{Partition: 1, Base: m, Pieces: []PieceRef{{pc(11, 20), 21}}}, false},          // From above Hi
		{Handle{Partition: 1, Pieces: []PieceRef{{pc(1, 5), 1}, {pc(7, 9), 7}}}, false},       // gap
		{Handle{Partition: 1, Pieces: []PieceRef{{pc(1, 5), 1}, {pc(4, 9), 4}}}, false},       // overlap
		{Handle{Partition: 1, Pieces: []PieceRef{{Piece{Group: 2, Lo: 1, Hi: 5}, 1}}}, false}, // other group
		{Handle{Partition: 1, Pieces: []PieceRef{{pc(1, 0), 1}}}, false},                      // empty piece
		{Handle{Partition: 0, Pieces: []PieceRef{{Piece{Group: 0, Lo: 0, Hi: 3}, 0}}}, false}, // Lo 0
	} {
		err := tc.h.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("Validate(%v) = %v, want ok %v", tc.h, err, tc.ok)
		}
	}
}

func TestRegistryRefusals(t *testing.T) {
	r := NewRegistry()
	if err := r.AddPiece(Piece{Group: 1, Lo: 5, Hi: 4}); !errors.Is(err, ErrInvalid) {
		t.Errorf("AddPiece of an empty range: %v", err)
	}
	if _, err := r.Truncate(1, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("Truncate without a materialization: %v", err)
	}
	if _, err := r.AddMaterialization(Materialization{1, 20}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AddMaterialization(Materialization{1, 10}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an older materialization: %v", err)
	}
	if g, err := r.AddMaterialization(Materialization{1, 20}); err != nil || !g.Empty() {
		t.Errorf("the same materialization again: %v %v", g, err)
	}
	if _, err := r.Truncate(1, 21); !errors.Is(err, ErrInvalid) {
		t.Errorf("Truncate past the materialization: %v", err)
	}
	if _, _, err := r.Plan(1, 19); !errors.Is(err, ErrInvalid) {
		t.Errorf("Plan below the materialization: %v", err)
	}
	h, missing, err := r.Plan(1, 20)
	if err != nil || missing != nil || h.String() != "p1: p1@20" {
		t.Errorf("Plan at the materialization = %v, %v, %v", h, missing, err)
	}
	if err := r.Retain(1, h); err != nil {
		t.Fatal(err)
	}
	if err := r.Retain(1, h); !errors.Is(err, ErrInvalid) {
		t.Errorf("Retain twice: %v", err)
	}
	if err := r.Retain(2, Handle{Partition: 1, Pieces: []PieceRef{{Piece{Group: 1, Lo: 2, Hi: 3}, 2}}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Retain of a malformed handle: %v", err)
	}
	if _, err := r.Release(9, 1); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("Release of an unknown handle: %v", err)
	}
	// Retain copies the handle: changing the caller's does not change it.
	h2, _, _ := r.Plan(1, 25)
	if err := r.Retain(2, h2); err != nil {
		t.Fatal(err)
	}
	h2.Pieces[0].From = 99
	h2.Base.Index = 99
	if got, _ := r.Handle(2, 1); got.String() != "p1: p1@20 + g1[21,25]" {
		t.Errorf("retained handle changed with the caller's copy: %v", got)
	}
}

// TestPlanPrefersLongestStoredPiece: Plan covers with stored pieces,
// reaching furthest from each index, never past n, and stores only the
// rest.
func TestPlanPrefersLongestStoredPiece(t *testing.T) {
	r := NewRegistry()
	for _, p := range []Piece{{1, 1, 5}, {1, 1, 8}, {1, 3, 12}, {1, 9, 30}, {1, 13, 15}, {2, 16, 20}} {
		if err := r.AddPiece(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		n       uint64
		handle  string
		missing string
	}{
		{0, "p1: empty", "<nil>"},
		{8, "p1: empty + g1[1,8]", "<nil>"},
		{10, "p1: empty + g1[1,8] + g1[9,10]", "g1[9,10]"},
		{12, "p1: empty + g1[1,8] + g1[3,12] from 9", "<nil>"}, // [9,30] would pass 12
		{15, "p1: empty + g1[1,8] + g1[3,12] from 9 + g1[13,15]", "<nil>"},
		{30, "p1: empty + g1[1,8] + g1[9,30]", "<nil>"},
		{40, "p1: empty + g1[1,8] + g1[9,30] + g1[31,40]", "g1[31,40]"},
	} {
		h, missing, err := r.Plan(1, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		ms := "<nil>"
		if missing != nil {
			ms = missing.String()
		}
		if err := h.Validate(); err != nil || h.Index() != tc.n {
			t.Errorf("Plan(1, %d) = %v: %v, ends at %d", tc.n, h, err, h.Index())
		}
		if h.String() != tc.handle || ms != tc.missing {
			t.Errorf("Plan(1, %d) = %v, new %s; want %v, new %s", tc.n, h, ms, tc.handle, tc.missing)
		}
	}
}

// TestRegistryAgainstModel runs random checkpoints, materializations,
// truncations, releases and subsumptions on two partitions and checks,
// after every call, that exactly the pieces and materializations some
// holder names are kept and that each call's garbage is exactly what
// lost its last holder.
func TestRegistryAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0xc4ec))
	var collected [2]int
	for round := 0; round < 50; round++ {
		r := NewRegistry()
		held := map[Piece]bool{}              // the changelog's
		bases := map[uint64]Materialization{} // the partitions'
		handles := map[handleKey]Handle{}
		applied := map[uint64]uint64{}
		cp := uint64(0)
		live := func() (map[Piece]bool, map[Materialization]bool) {
			ps, ms := map[Piece]bool{}, map[Materialization]bool{}
			for p := range held {
				ps[p] = true
			}
			for _, m := range bases {
				ms[m] = true
			}
			for _, h := range handles {
				if h.Base != nil {
					ms[*h.Base] = true
				}
				for _, ref := range h.Pieces {
					ps[ref.Piece] = true
				}
			}
			return ps, ms
		}
		var steps []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("round %d after:\n  %s\n%s", round, strings.Join(steps, "\n  "), fmt.Sprintf(format, args...))
		}
		for step := 0; step < 200; step++ {
			p := uint64(1 + rnd.IntN(2))
			basePos := bases[p].Index
			beforeP, beforeM := live()
			var g Garbage
			switch op := rnd.IntN(8); op {
			case 0, 1:
				applied[p] += uint64(1 + rnd.IntN(10))
				steps = append(steps, fmt.Sprintf("p%d applies to %d", p, applied[p]))
			case 2, 3:
				n := applied[p]
				h, missing, err := r.Plan(p, n)
				if err != nil {
					fail("Plan(%d, %d): %v", p, n, err)
				}
				if err := h.Validate(); err != nil || h.Index() != n || h.BaseIndex() != basePos {
					fail("Plan(%d, %d) = %v: %v", p, n, h, err)
				}
				if missing != nil {
					if err := r.AddPiece(*missing); err != nil {
						fail("AddPiece: %v", err)
					}
					held[*missing] = true
				}
				cp++
				if err := r.Retain(cp, h); err != nil {
					fail("Retain: %v", err)
				}
				handles[handleKey{cp, p}] = h
				steps = append(steps, fmt.Sprintf("CP%d = %v", cp, h))
			case 4:
				if applied[p] == basePos {
					continue
				}
				m := Materialization{Partition: p, Index: basePos + 1 + uint64(rnd.IntN(int(applied[p]-basePos)))}
				var err error
				if g, err = r.AddMaterialization(m); err != nil {
					fail("AddMaterialization(%v): %v", m, err)
				}
				bases[p] = m
				steps = append(steps, fmt.Sprintf("materialized %v", m))
			case 5:
				upto := uint64(rnd.IntN(int(basePos) + 1))
				var err error
				if g, err = r.Truncate(p, upto); err != nil {
					fail("Truncate(%d, %d): %v", p, upto, err)
				}
				for pc := range held {
					if pc.Group == p && pc.Hi <= upto {
						delete(held, pc)
					}
				}
				steps = append(steps, fmt.Sprintf("truncate p%d to %d", p, upto))
			case 6:
				ks := r.Checkpoints(p)
				if len(ks) == 0 {
					continue
				}
				k := ks[rnd.IntN(len(ks))]
				var err error
				if g, err = r.Release(k, p); err != nil {
					fail("Release(%d, %d): %v", k, p, err)
				}
				delete(handles, handleKey{k, p})
				steps = append(steps, fmt.Sprintf("release CP%d of p%d", k, p))
			case 7:
				k := uint64(rnd.IntN(int(cp) + 2))
				g = r.Subsume(k, p)
				for hk := range handles {
					if hk.partition == p && hk.checkpoint < k {
						delete(handles, hk)
					}
				}
				steps = append(steps, fmt.Sprintf("CP%d subsumes p%d's older ones", k, p))
			}
			afterP, afterM := live()
			var wantP []Piece
			for pc := range beforeP {
				if !afterP[pc] {
					wantP = append(wantP, pc)
				}
			}
			var wantM []Materialization
			for m := range beforeM {
				if !afterM[m] {
					wantM = append(wantM, m)
				}
			}
			want := Garbage{Pieces: wantP, Materializations: wantM}
			want.sort()
			if fmt.Sprint(g) != fmt.Sprint(want) {
				fail("garbage %v, want %v", g, want)
			}
			collected[0] += len(g.Pieces)
			collected[1] += len(g.Materializations)
			for _, q := range []uint64{1, 2} {
				var ps []Piece
				for pc := range afterP {
					if pc.Group == q {
						ps = append(ps, pc)
					}
				}
				slices.SortFunc(ps, comparePieces)
				if got := r.Pieces(q); !slices.Equal(got, ps) {
					fail("p%d pieces %v, model %v", q, got, ps)
				}
				var ms []Materialization
				for m := range afterM {
					if m.Partition == q {
						ms = append(ms, m)
					}
				}
				slices.SortFunc(ms, func(a, b Materialization) int { return cmp.Compare(a.Index, b.Index) })
				if got := r.Materializations(q); !slices.Equal(got, ms) {
					fail("p%d materializations %v, model %v", q, got, ms)
				}
			}
		}
	}
	t.Logf("collected %d pieces and %d materializations", collected[0], collected[1])
	if collected[0] == 0 || collected[1] == 0 {
		t.Fatal("nothing was ever collected: the generator proves little")
	}
}

// TestDecodeFromDamagedFile: a partition decoded straight from a damaged
// materialization file fails with the file's ErrCorrupt, wherever the
// damage is, the trailer included (Decode reads to the end).
func TestDecodeFromDamagedFile(t *testing.T) {
	p := partition.New(2)
	for i := uint64(1); i <= 3000; i++ {
		cmd := &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{
			Key: []byte(fmt.Sprintf("key%05d", i)), Value: bytes.Repeat([]byte{byte(i)}, 50),
		}}}
		if _, err := p.Apply(i, cmd); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	path, _, size, err := Write(dir, Meta{Partition: 2, Index: p.Applied(), Term: 3}, p.Image().Encode)
	if err != nil {
		t.Fatal(err)
	}
	if size < 2*chunkSize {
		t.Fatalf("file of %d bytes: want several chunks", size)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	q, err := partition.Decode(2, r)
	r.Close()
	if err != nil || q.Applied() != p.Applied() || q.Len() != p.Len() {
		t.Fatalf("decoded %v: %v", q, err)
	}
	for _, off := range []int{headerLen + 10, len(good) / 2, len(good) - trailerLen + 30, len(good) - 1} {
		bad := slices.Clone(good)
		bad[off] ^= 0x10
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = partition.Decode(2, r)
		r.Close()
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Path != path {
			t.Fatalf("damage at %d: Decode = %v, want the file's *CorruptError", off, err)
		}
	}
}
