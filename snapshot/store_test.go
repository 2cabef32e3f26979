package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
)

// cutMark is where cut v fell in a partition's log: pos and the index of
// its CutFinish.
type cutMark struct{ v, pos, end uint64 }

// partitionLog returns a partition's committed log 1 … n shaped by the
// cuts: every command carries the highest version whose pos it is at or
// past, the entry at pos is CutStart(v), the one at end CutFinish(v).
func partitionLog(n uint64, cuts ...cutMark) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := uint64(1); i <= n; i++ {
		cmd := &internalpb.Command{}
		for _, c := range cuts {
			if i >= c.pos {
				cmd.CutVersion = c.v
			}
			switch i {
			case c.pos:
				cmd.Op = &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: c.v}}
			case c.end:
				cmd.Op = &internalpb.Command_CutFinish{CutFinish: &internalpb.CutFinishOp{Version: c.v, Pos: c.pos}}
			}
		}
		data, err := proto.Marshal(cmd)
		if err != nil {
			panic(err)
		}
		out = append(out, ent(i, 1+i/10, raftpb.EntryNormal, data))
	}
	return out
}

// world holds the source data of the tests' snapshots: partition logs and
// materialization files, and the pieces made of them, by name.
type world struct {
	t     *testing.T
	logs  map[uint64][]*raftpb.Entry
	dir   string            // materialization files
	bytes map[string][]byte // every piece made, by name
}

func newWorld(t *testing.T) *world {
	return &world{t: t, logs: map[uint64][]*raftpb.Entry{}, dir: t.TempDir(), bytes: map[string][]byte{}}
}

// logPiece makes the changelog piece of partition p with entries lo … hi.
func (w *world) logPiece(p, lo, hi uint64) string {
	var b bytes.Buffer
	if err := EncodePiece(&b, p, w.logs[p][lo-1:hi]); err != nil {
		w.t.Fatal(err)
	}
	name := PieceName(p, lo, hi)
	w.bytes[name] = b.Bytes()
	return name
}

// mat makes a materialization file of partition p at index m.
func (w *world) mat(p, m uint64) string {
	path, _, _, err := checkpoint.Write(w.dir, checkpoint.Meta{Partition: p, Index: m, Term: 1}, func(wr io.Writer) error {
		_, err := fmt.Fprintf(wr, "state of partition %d at %d\n%s", p, m, strings.Repeat("x", int(m)*100))
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	name := filepath.Base(path)
	w.bytes[name] = b
	return name
}

func (w *world) object(name string) Object {
	sum := sha256.Sum256(w.bytes[name])
	return Object{Name: name, Size: int64(len(w.bytes[name])), SHA256: hex.EncodeToString(sum[:])}
}

// handle is a partition's handle in a test snapshot.
type handle struct {
	p, pos, end uint64
	base        uint64      // 0: none
	pieces      [][2]uint64 // lo, hi of each piece; the first is used from base+1
}

// manifest makes the pieces of the handles and the manifest naming them.
func (w *world) manifest(id string, v uint64, at time.Time, hs ...handle) *Manifest {
	m := &Manifest{ID: id, CutVersion: v, Time: at, PartitionCount: uint32(len(hs)), KeyHash: "fnv1a64-mod"}
	for _, h := range hs {
		p := Partition{Partition: h.p, Pos: h.pos, End: h.end}
		if h.base > 0 {
			p.Base = &Base{Object: w.object(w.mat(h.p, h.base)), Index: h.base}
		}
		next := h.base + 1
		for _, r := range h.pieces {
			p.Pieces = append(p.Pieces, Piece{Object: w.object(w.logPiece(h.p, r[0], r[1])), Lo: r[0], Hi: r[1], From: next})
			next = r[1] + 1
		}
		m.Partitions = append(m.Partitions, p)
	}
	return m
}

// upload stores m the way a node would: reserve, upload what the store
// lacks, finish. It returns the pieces it uploaded.
func (w *world) upload(ctx context.Context, s *Store, m *Manifest) []string {
	w.t.Helper()
	var names []string
	for _, o := range m.Objects() {
		names = append(names, o.Name)
	}
	u, err := s.BeginUpload(ctx, m.ID, names)
	if err != nil {
		w.t.Fatalf("BeginUpload %s: %v", m.ID, err)
	}
	var uploaded []string
	for _, o := range m.Objects() {
		ok, err := s.HasPiece(ctx, o.Name)
		if err != nil {
			w.t.Fatal(err)
		}
		if ok {
			continue
		}
		sha, size, err := u.PutPiece(ctx, o.Name, bytes.NewReader(w.bytes[o.Name]))
		if err != nil {
			w.t.Fatalf("PutPiece %s: %v", o.Name, err)
		}
		if sha != o.SHA256 || size != o.Size {
			w.t.Fatalf("PutPiece %s: sha %s size %d, want %s %d", o.Name, sha, size, o.SHA256, o.Size)
		}
		uploaded = append(uploaded, o.Name)
	}
	if err := u.Finish(ctx, m); err != nil {
		w.t.Fatalf("Finish %s: %v", m.ID, err)
	}
	return uploaded
}

// fakeClock is a settable clock for locks.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// openFileStore opens a file:// store in a new directory.
func openFileStore(t *testing.T, cluster uint64, opts Options) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	url := "file://" + filepath.ToSlash(dir)
	s, err := OpenStoreOptions(context.Background(), url, cluster, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, url
}

func pieceNames(t *testing.T, s *Store) []string {
	t.Helper()
	names, err := s.listNames(context.Background(), piecesDir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(names, func(n string) bool { return !isPieceName(n) })
}

func sorted(names ...string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}

func sameNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(sorted(got...), sorted(want...)) {
		t.Fatalf("%s:\n got %v\nwant %v", what, sorted(got...), sorted(want...))
	}
}

func mustCheck(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.Check(context.Background(), id); err != nil {
			t.Fatalf("Check %s: %v", id, err)
		}
	}
}

// damage replaces a stored piece's bytes by change(old) and returns a
// function that puts the old bytes back.
func damage(t *testing.T, s *Store, name string, change func([]byte) []byte) (restore func()) {
	t.Helper()
	ctx := context.Background()
	key := s.pieceKey(name)
	old, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.bucket.WriteAll(ctx, key, change(bytes.Clone(old)), nil); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := s.bucket.WriteAll(ctx, key, old, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func wantCheckError(t *testing.T, err error, piece string, partition uint64, kind error) {
	t.Helper()
	var ce *CheckError
	if !errors.As(err, &ce) || ce.Piece != piece || ce.Partition != partition || !errors.Is(err, kind) {
		t.Fatalf("Check: %v; want a CheckError naming piece %s of partition %d, %v", err, piece, partition, kind)
	}
	if !strings.Contains(err.Error(), piece) {
		t.Fatalf("Check: %q does not name %s", err, piece)
	}
	t.Logf("as expected: %v", err)
}

// roundTrip is the store test both drivers run: three incremental
// snapshots of cluster A and one of cluster B in the same bucket; check;
// damage; prune and delete. openStore opens the bucket for a cluster.
func roundTrip(t *testing.T, openStore func(cluster uint64) *Store) {
	ctx := context.Background()
	a, b := openStore(0xA1), openStore(0xB2)
	w := newWorld(t)
	// Partition 1: cuts 5, 6, 7 at (8, 10), (15, 20), (23, 25).
	// Partition 2: at (9, 12), (16, 18), (21, 24).
	w.logs[1] = partitionLog(30, cutMark{5, 8, 10}, cutMark{6, 15, 20}, cutMark{7, 23, 25})
	w.logs[2] = partitionLog(30, cutMark{5, 9, 12}, cutMark{6, 16, 18}, cutMark{7, 21, 24})

	s1 := w.manifest(IDForCut(5), 5, t0,
		handle{p: 1, pos: 8, end: 10, pieces: [][2]uint64{{1, 10}}},
		handle{p: 2, pos: 9, end: 12, base: 4, pieces: [][2]uint64{{5, 12}}})
	s2 := w.manifest(IDForCut(6), 6, t0.Add(time.Hour),
		handle{p: 1, pos: 15, end: 20, pieces: [][2]uint64{{1, 10}, {11, 20}}},
		handle{p: 2, pos: 16, end: 18, base: 12, pieces: [][2]uint64{{13, 18}}})
	s3 := w.manifest(IDForCut(7), 7, t0.Add(2*time.Hour),
		handle{p: 1, pos: 23, end: 25, base: 20, pieces: [][2]uint64{{21, 25}}},
		handle{p: 2, pos: 21, end: 24, base: 12, pieces: [][2]uint64{{13, 18}, {19, 24}}})
	// Cluster B holds pieces of the same names (and the same bytes).
	sb := w.manifest(IDForCut(5), 5, t0,
		handle{p: 1, pos: 8, end: 10, pieces: [][2]uint64{{1, 10}}},
		handle{p: 2, pos: 9, end: 12, base: 4, pieces: [][2]uint64{{5, 12}}})

	sameNames(t, "uploaded for s1", w.upload(ctx, a, s1), []string{"g0001-00000000000000000001-00000000000000000010.log", "p0002-00000000000000000004.mat", "g0002-00000000000000000005-00000000000000000012.log"})
	// Incremental: g1[1,10] is stored already.
	sameNames(t, "uploaded for s2", w.upload(ctx, a, s2), []string{PieceName(1, 11, 20), "p0002-00000000000000000012.mat", PieceName(2, 13, 18)})
	sameNames(t, "uploaded for s3", w.upload(ctx, a, s3), []string{"p0001-00000000000000000020.mat", PieceName(1, 21, 25), PieceName(2, 19, 24)})
	w.upload(ctx, b, sb)

	// The catalogue is the store's: a fresh Store lists and checks it.
	fresh := openStore(0xA1)
	ms, err := fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if want := []string{s1.ID, s2.ID, s3.ID}; !slices.Equal(ids, want) {
		t.Fatalf("List: %v, want %v", ids, want)
	}
	if p := ms[1].Partitions[1]; p.Partition != 2 || p.BaseIndex() != 12 || len(p.Pieces) != 1 || p.Pieces[0].Lo != 13 || p.Pieces[0].Hi != 18 || ms[0].Cluster != "00000000000000a1" {
		t.Fatalf("listed manifest: %+v", ms[1])
	}
	mustCheck(t, fresh, s1.ID, s2.ID, s3.ID)
	mustCheck(t, b, sb.ID)
	if got, err := fresh.IDs(ctx); err != nil || !slices.Equal(got, ids) {
		t.Fatalf("IDs = %v, %v; want %v", got, err, ids)
	}
	if o, err := fresh.StatPiece(ctx, PieceName(1, 11, 20)); err != nil || o != w.object(PieceName(1, 11, 20)) {
		t.Fatalf("StatPiece = %+v, %v; want %+v", o, err, w.object(PieceName(1, 11, 20)))
	}
	if _, err := fresh.StatPiece(ctx, PieceName(1, 90, 99)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("StatPiece of a piece not stored: %v", err)
	}

	// Stored pieces and manifests are never overwritten.
	if _, _, err := a.PutPiece(ctx, PieceName(1, 1, 10), bytes.NewReader([]byte("other"))); !errors.Is(err, ErrExists) {
		t.Fatalf("PutPiece over a stored piece: %v", err)
	}
	if err := a.PutManifest(ctx, s1); !errors.Is(err, ErrExists) {
		t.Fatalf("PutManifest over a stored manifest: %v", err)
	}
	// The driver's conditional write itself refuses, should a piece
	// appear between PutPiece's look-up and its write.
	if _, _, err := a.write(ctx, a.pieceKey(PieceName(1, 1, 10)), strings.NewReader("other"), "application/octet-stream", true); !errors.Is(err, ErrExists) {
		t.Fatalf("conditional write over a stored piece: %v", err)
	}
	// A failed upload leaves nothing under the piece's name.
	boom := errors.New("boom")
	half := PieceName(1, 26, 30)
	if _, _, err := a.PutPiece(ctx, half, io.MultiReader(strings.NewReader("half a piece"), iotestErr{boom})); !errors.Is(err, boom) {
		t.Fatalf("PutPiece from a failing reader: %v", err)
	}
	if ok, err := a.HasPiece(ctx, half); ok || err != nil {
		t.Fatalf("a failed PutPiece left the piece: %v, %v", ok, err)
	}

	// A flipped byte in a changelog piece, in a materialization; a piece
	// cut short; a piece gone.
	g := PieceName(1, 11, 20)
	restore := damage(t, a, g, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
	wantCheckError(t, a.Check(ctx, s2.ID), g, 1, ErrCorrupt)
	mustCheck(t, a, s1.ID, s3.ID)
	restore()
	mat := "p0002-00000000000000000012.mat"
	restore = damage(t, a, mat, func(b []byte) []byte { b[60] ^= 1; return b })
	wantCheckError(t, a.Check(ctx, s3.ID), mat, 2, ErrCorrupt)
	restore()
	restore = damage(t, a, g, func(b []byte) []byte { return b[:len(b)-1] })
	wantCheckError(t, a.Check(ctx, s2.ID), g, 1, ErrCorrupt)
	restore()
	if err := a.bucket.Delete(ctx, a.pieceKey(PieceName(2, 19, 24))); err != nil {
		t.Fatal(err)
	}
	wantCheckError(t, a.Check(ctx, s3.ID), PieceName(2, 19, 24), 2, ErrMissing)
	if _, _, err := a.PutPiece(ctx, PieceName(2, 19, 24), bytes.NewReader(w.bytes[PieceName(2, 19, 24)])); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, a, s1.ID, s2.ID, s3.ID)

	// Prune: s3 is the newest, s2 within 90 minutes of t0+2h; s1 goes,
	// with the pieces only it names.
	gc, err := a.Prune(ctx, 1, 90*time.Minute, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, "pruned snapshots", gc.Snapshots, []string{s1.ID})
	sameNames(t, "pruned pieces", gc.Pieces, []string{"p0002-00000000000000000004.mat", PieceName(2, 5, 12)})
	if _, err := a.Get(ctx, s1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a pruned snapshot: %v", err)
	}
	mustCheck(t, a, s2.ID, s3.ID)

	// Delete s2: g1[1,10] and g1[11,20] go; p2@12 and g2[13,18] stay for s3.
	gc, err = a.Delete(ctx, s2.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, "deleted pieces", gc.Pieces, []string{PieceName(1, 1, 10), PieceName(1, 11, 20)})
	mustCheck(t, a, s3.ID)
	sameNames(t, "cluster A's pieces", pieceNames(t, a), []string{
		"p0001-00000000000000000020.mat", PieceName(1, 21, 25),
		"p0002-00000000000000000012.mat", PieceName(2, 13, 18), PieceName(2, 19, 24),
	})
	if _, err := a.Delete(ctx, s2.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}

	// Cluster B's objects are untouched, though A deleted pieces of the
	// same names.
	sameNames(t, "cluster B's pieces", pieceNames(t, b), []string{
		PieceName(1, 1, 10), "p0002-00000000000000000004.mat", PieceName(2, 5, 12),
	})
	mustCheck(t, b, sb.ID)
	ms, err = b.List(ctx)
	if err != nil || len(ms) != 1 || ms[0].ID != sb.ID || ms[0].Cluster != "00000000000000b2" {
		t.Fatalf("cluster B's list: %v, %v", ms, err)
	}
}

func TestFileStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	roundTrip(t, func(cluster uint64) *Store {
		s, err := OpenStore(context.Background(), "file://"+filepath.ToSlash(dir), cluster)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
	// Everything lies under the clusters' directories.
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range es {
		top = append(top, e.Name())
	}
	sameNames(t, "top-level entries", top, []string{"00000000000000a1", "00000000000000b2"})
}

// An upload in flight reserves its pieces: a prune keeps them, even
// unreferenced; once its lock goes stale, they are fair game and the
// upload learns it lost the lock.
func TestUploadReservesPieces(t *testing.T) {
	clk := &fakeClock{now: t0}
	s, _ := openFileStore(t, 7, Options{Now: clk.Now, LockTTL: time.Minute})
	uploadReserves(t, s, clk)
}

// uploadReserves is TestUploadReservesPieces on a store of cluster 7 with
// a LockTTL of a minute on clock clk.
func uploadReserves(t *testing.T, s *Store, clk *fakeClock) {
	ctx := context.Background()
	w := newWorld(t)
	w.logs[1] = partitionLog(20, cutMark{3, 5, 8}, cutMark{4, 12, 15})
	s3 := w.manifest(IDForCut(3), 3, t0, handle{p: 1, pos: 5, end: 8, pieces: [][2]uint64{{1, 8}}})
	s4 := w.manifest(IDForCut(4), 4, t0, handle{p: 1, pos: 12, end: 15, pieces: [][2]uint64{{1, 8}, {9, 15}}})
	w.upload(ctx, s, s3)

	// Upload of s4 begins; it reuses g1[1,8] and stores g1[9,15].
	u, err := s.BeginUpload(ctx, s4.ID, []string{PieceName(1, 1, 8), PieceName(1, 9, 15)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginUpload(ctx, s4.ID, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("second BeginUpload of the same id: %v", err)
	}
	if _, _, err := u.PutPiece(ctx, PieceName(1, 16, 20), bytes.NewReader(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PutPiece of an unreserved piece: %v", err)
	}
	if _, _, err := u.PutPiece(ctx, PieceName(1, 9, 15), bytes.NewReader(w.bytes[PieceName(1, 9, 15)])); err != nil {
		t.Fatal(err)
	}
	// Deleting s3 leaves g1[1,8] unreferenced, and g1[9,15] is not yet
	// referenced: the upload's reservation keeps both.
	gc, err := s.Delete(ctx, s3.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, "deleted with an upload in flight", gc.Pieces, nil)
	sameNames(t, "reserved", gc.Reserved, []string{PieceName(1, 1, 8), PieceName(1, 9, 15)})
	clk.now = clk.now.Add(30 * time.Second)
	if err := u.Finish(ctx, s4); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s, s4.ID)
	if names, _ := s.listNames(ctx, uploadingDir); len(names) != 0 {
		t.Fatalf("Finish left locks: %v", names)
	}

	if _, _, err := u.PutPiece(ctx, PieceName(1, 9, 15), bytes.NewReader(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PutPiece after Finish: %v", err)
	}

	// A holder whose lock went stale stops, even before a sweep removed
	// the lock: a sweep may have ignored it already.
	u, err = s.BeginUpload(ctx, "stale", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(61 * time.Second)
	if err := u.Refresh(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Refresh of a stale lock: %v", err)
	}
	if err := u.Abort(ctx); err != nil {
		t.Fatal(err)
	}

	// An aborted upload's piece is collected by the next prune.
	s5 := w.manifest("next", 5, t0, handle{p: 1, pos: 17, end: 20, pieces: [][2]uint64{{16, 20}}})
	u, err = s.BeginUpload(ctx, s5.ID, []string{PieceName(1, 16, 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.PutPiece(ctx, PieceName(1, 16, 20), bytes.NewReader(w.bytes[PieceName(1, 16, 20)])); err != nil {
		t.Fatal(err)
	}
	if err := u.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	gc, err = s.Prune(ctx, 1, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, "after an abort", gc.Pieces, []string{PieceName(1, 16, 20)})

	// An upload that stops refreshing goes stale: prune ignores and
	// removes its lock, deletes its piece, and Finish reports the loss.
	u, err = s.BeginUpload(ctx, s5.ID, []string{PieceName(1, 16, 20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.PutPiece(ctx, PieceName(1, 16, 20), bytes.NewReader(w.bytes[PieceName(1, 16, 20)])); err != nil {
		t.Fatal(err)
	}
	clk.now = clk.now.Add(2 * time.Minute)
	gc, err = s.Prune(ctx, 1, 0, t0)
	if err != nil {
		t.Fatal(err)
	}
	sameNames(t, "pieces of a stale upload", gc.Pieces, []string{PieceName(1, 16, 20)})
	sameNames(t, "stale locks", gc.StaleLocks, []string{"0000000000000007/uploading/next.json"})
	if err := u.Finish(ctx, s5); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Finish after the lock went stale: %v", err)
	}
	if _, err := s.Get(ctx, s5.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a lost upload stored its manifest: %v", err)
	}
}

// BeginUpload waits while a prune holds the store, and gives up with
// ErrBusy when its context ends; a stale prune lock does not hold it.
func TestBeginUploadWaitsForPrune(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: t0}
	s, _ := openFileStore(t, 7, Options{Now: clk.Now, LockTTL: time.Minute, PollInterval: time.Millisecond})
	pl, err := s.createLock(ctx, s.prefix+pruningDir+"x.json", lockRecord{Kind: kindPrune, Token: "x", Created: t0, Refreshed: t0})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = s.BeginUpload(wctx, "a", nil)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "pruning/x.json") {
		t.Fatalf("BeginUpload during a prune: %v", err)
	}
	if names, _ := s.listNames(ctx, uploadingDir); len(names) != 0 {
		t.Fatalf("a refused upload left its lock: %v", names)
	}

	// Released while BeginUpload waits: it goes on.
	done := make(chan error, 1)
	go func() {
		u, err := s.BeginUpload(ctx, "b", nil)
		if err == nil {
			err = u.Abort(ctx)
		}
		done <- err
	}()
	if err := pl.release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("BeginUpload after the prune: %v", err)
	}

	// A stale prune lock is ignored.
	if _, err := s.createLock(ctx, s.prefix+pruningDir+"y.json", lockRecord{Kind: kindPrune, Token: "y", Created: t0, Refreshed: t0}); err != nil {
		t.Fatal(err)
	}
	clk.now = t0.Add(2 * time.Minute)
	u, err := s.BeginUpload(ctx, "c", nil)
	if err != nil {
		t.Fatalf("BeginUpload beside a stale prune lock: %v", err)
	}
	if err := u.Abort(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCheckChain(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t, 9, Options{})
	w := newWorld(t)
	w.logs[1] = partitionLog(20, cutMark{3, 5, 8}, cutMark{4, 12, 15})

	// The manifest's own chain: a gap is named by the piece that would
	// fill it, before any piece is read.
	m := w.manifest("gap", 4, t0, handle{p: 1, pos: 12, end: 15, pieces: [][2]uint64{{1, 8}, {9, 15}}})
	m.Partitions[0].Pieces = slices.Delete(m.Partitions[0].Pieces, 0, 1)
	m.Format, m.Cluster = ManifestVersion, clusterHex(9)
	err := m.Validate()
	wantCheckError(t, err, PieceName(1, 1, 8), 1, ErrIncomplete)

	// A chain that stops short of the cut's CutFinish.
	m = w.manifest("short", 4, t0, handle{p: 1, pos: 12, end: 15, pieces: [][2]uint64{{1, 8}, {9, 14}}})
	m.Partitions[0].End = 14
	w.upload(ctx, s, m)
	wantCheckError(t, s.Check(ctx, "short"), PieceName(1, 9, 14), 1, ErrIncomplete)

	// A manifest whose pos is not the cut's.
	m = w.manifest("pos", 4, t0, handle{p: 1, pos: 11, end: 15, pieces: [][2]uint64{{1, 15}}})
	w.upload(ctx, s, m)
	wantCheckError(t, s.Check(ctx, "pos"), PieceName(1, 1, 15), 1, ErrIncomplete)

	// A piece uploaded with the wrong content under a right name (the
	// manifest's SHA-256 is of those bytes, so only decoding catches it).
	m = w.manifest("swapped", 3, t0, handle{p: 1, pos: 5, end: 8, pieces: [][2]uint64{{1, 8}}})
	m.ID = "swapped"
	name := PieceName(1, 1, 8)
	good := w.bytes[name]
	w.bytes[name] = w.bytes[w.logPiece(1, 1, 9)]
	m.Partitions[0].Pieces[0].Object = w.object(name)
	u, err := s.BeginUpload(ctx, m.ID, []string{name})
	if err != nil {
		t.Fatal(err)
	}
	// g1[1,8] is stored already (by "short"): replace it for this test.
	if err := s.bucket.Delete(ctx, s.pieceKey(name)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.PutPiece(ctx, name, bytes.NewReader(w.bytes[name])); err != nil {
		t.Fatal(err)
	}
	if err := u.Finish(ctx, m); err != nil {
		t.Fatal(err)
	}
	wantCheckError(t, s.Check(ctx, "swapped"), name, 1, ErrCorrupt)
	w.bytes[name] = good
}

func TestManifestFormat(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t, 9, Options{})
	w := newWorld(t)
	w.logs[1] = partitionLog(10, cutMark{3, 5, 8})
	m := w.manifest(IDForCut(3), 3, t0, handle{p: 1, pos: 5, end: 8, pieces: [][2]uint64{{1, 8}}})
	w.upload(ctx, s, m)
	key := s.manifestKey(m.ID)
	b, err := s.bucket.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"format": 1`, `"cluster": "0000000000000009"`, `"cut_version": 3`, `"partition_count": 1`,
		`"key_hash": "fnv1a64-mod"`, `"name": "g0001-00000000000000000001-00000000000000000008.log"`, `"sha256": "`, `"from": 1`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Fatalf("manifest lacks %s:\n%s", want, b)
		}
	}
	for _, tc := range []struct {
		name   string
		change func(string) string
		want   error
	}{
		{"newer format", func(s string) string { return strings.Replace(s, `"format": 1`, `"format": 3`, 1) }, ErrVersion},
		{"not json", func(s string) string { return s[:len(s)/2] }, ErrCorrupt},
		{"unknown field", func(s string) string { return strings.Replace(s, `"format": 1`, `"format": 1, "extra": 1`, 1) }, ErrCorrupt},
		{"other cluster", func(s string) string { return strings.Replace(s, "0000000000000009", "0000000000000008", 1) }, ErrCorrupt},
		{"bad sha", func(s string) string { return strings.Replace(s, `"sha256": "`, `"sha256": "zz`, 1) }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.bucket.WriteAll(ctx, key, []byte(tc.change(string(b))), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, m.ID); !errors.Is(err, tc.want) {
				t.Fatalf("Get: %v, want %v", err, tc.want)
			}
			// A manifest that cannot be read stops Prune before it
			// deletes anything.
			if _, err := s.Prune(ctx, 1, 0, t0); !errors.Is(err, tc.want) {
				t.Fatalf("Prune: %v, want %v", err, tc.want)
			}
			if len(pieceNames(t, s)) != 1 {
				t.Fatalf("Prune deleted pieces beside an unreadable manifest")
			}
		})
	}
}

func TestManifestValidate(t *testing.T) {
	w := newWorld(t)
	w.logs[1] = partitionLog(20, cutMark{3, 5, 8})
	w.logs[2] = partitionLog(20, cutMark{3, 6, 9})
	good := func() *Manifest {
		m := w.manifest("m", 3, t0,
			handle{p: 1, pos: 5, end: 8, base: 2, pieces: [][2]uint64{{1, 4}, {5, 8}}},
			handle{p: 2, pos: 6, end: 9, pieces: [][2]uint64{{1, 9}}})
		m.Format, m.Cluster = ManifestVersion, clusterHex(1)
		m.Partitions[0].Pieces[0].From = 3 // the base at 2 lies inside g1[1,4]
		return m
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Manifest)
		want   error
	}{
		{"bad id", func(m *Manifest) { m.ID = "a/b" }, ErrInvalid},
		{"dot id", func(m *Manifest) { m.ID = ".." }, ErrInvalid},
		{"no cut", func(m *Manifest) { m.CutVersion = 0 }, ErrInvalid},
		{"no time", func(m *Manifest) { m.Time = time.Time{} }, ErrInvalid},
		{"count", func(m *Manifest) { m.PartitionCount = 3 }, ErrInvalid},
		{"order", func(m *Manifest) { m.Partitions[0], m.Partitions[1] = m.Partitions[1], m.Partitions[0] }, ErrInvalid},
		{"no hash", func(m *Manifest) { m.KeyHash = "" }, ErrInvalid},
		{"cluster", func(m *Manifest) { m.Cluster = "1" }, ErrInvalid},
		{"base name", func(m *Manifest) { m.Partitions[0].Base.Index = 3 }, ErrInvalid},
		{"pos at base", func(m *Manifest) { m.Partitions[0].Pos = 2 }, ErrInvalid},
		{"pos past end", func(m *Manifest) { m.Partitions[0].Pos = 9 }, ErrInvalid},
		{"piece name", func(m *Manifest) { m.Partitions[1].Pieces[0].Hi = 10 }, ErrInvalid},
		{"piece of another partition", func(m *Manifest) { m.Partitions[1].Pieces[0].Name = PieceName(1, 1, 9) }, ErrInvalid},
		{"from outside", func(m *Manifest) { m.Partitions[0].Pieces[0].From = 5 }, ErrInvalid},
		{"overlap", func(m *Manifest) { m.Partitions[0].Pieces[1].From = 5; m.Partitions[0].Pieces[0].From = 2 }, ErrInvalid},
		{"gap", func(m *Manifest) { m.Partitions[1].Pieces = nil }, ErrIncomplete},
		{"past end", func(m *Manifest) { m.Partitions[1].End = 8; m.Partitions[1].Pos = 8 }, ErrInvalid},
		{"size", func(m *Manifest) { m.Partitions[1].Pieces[0].Size = 0 }, ErrInvalid},
		{"sha case", func(m *Manifest) { p := &m.Partitions[1].Pieces[0]; p.SHA256 = strings.ToUpper(p.SHA256) }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := good()
			tc.change(m)
			if err := m.Validate(); !errors.Is(err, tc.want) {
				t.Fatalf("Validate: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestOpenStoreErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		cluster uint64
		want    error
	}{
		{"ftp://host/dir", 1, ErrInvalid},
		{"file://" + dir, 0, ErrInvalid},
		{"file://", 1, ErrInvalid},
		{"s3://", 1, ErrInvalid},
		{"%zz", 1, ErrInvalid},
		{"file://" + dir + "?bogus=1", 1, ErrInvalid},
		{"file://" + dir + "/missing", 1, ErrNotFound},
		{"file://" + dir + "/plain", 1, ErrInvalid},
	} {
		_, err := OpenStore(ctx, tc.url, tc.cluster)
		if err == nil {
			t.Fatalf("OpenStore(%q) opened", tc.url)
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Fatalf("OpenStore(%q): %v, want %v", tc.url, err, tc.want)
		}
		if !strings.Contains(err.Error(), strings.SplitN(tc.url, "?", 2)[0]) && tc.url != "%zz" {
			t.Fatalf("OpenStore(%q): %q does not name the URL", tc.url, err)
		}
		t.Logf("as expected: %v", err)
	}
	s, err := OpenStore(ctx, "file://"+dir+"/made?create_dir=1", 1)
	if err != nil {
		t.Fatalf("create_dir: %v", err)
	}
	s.Close()
}

func TestStoreRefusesBadNames(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t, 1, Options{})
	for _, name := range []string{"", "../x", "g1-1-2.log", "pieces/" + PieceName(1, 1, 2), "p0001-1.mat"} {
		if _, _, err := s.PutPiece(ctx, name, bytes.NewReader(nil)); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutPiece(%q): %v", name, err)
		}
		if _, err := s.OpenPiece(ctx, name); !errors.Is(err, ErrInvalid) {
			t.Errorf("OpenPiece(%q): %v", name, err)
		}
	}
	for _, id := range []string{"", "a/b", "../x", strings.Repeat("a", 129), "a b"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q): %v", id, err)
		}
	}
	if _, err := s.OpenPiece(ctx, PieceName(1, 1, 2)); !errors.Is(err, ErrNotFound) {
		t.Errorf("OpenPiece of a missing piece: %v", err)
	}
	if _, err := s.Prune(ctx, 0, 0, t0); !errors.Is(err, ErrInvalid) {
		t.Errorf("Prune(0, 0): %v", err)
	}
}

// Restore reads pieces back: a materialization through
// OpenMaterialization, a changelog piece through NewPieceReader.
func TestReadPiecesBack(t *testing.T) {
	ctx := context.Background()
	s, _ := openFileStore(t, 3, Options{})
	w := newWorld(t)
	w.logs[1] = partitionLog(12, cutMark{2, 9, 11})
	m := w.manifest(IDForCut(2), 2, t0, handle{p: 1, pos: 9, end: 11, base: 6, pieces: [][2]uint64{{7, 11}}})
	w.upload(ctx, s, m)
	r, err := s.OpenMaterialization(ctx, m.Partitions[0].Base.Name)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(r)
	r.Close()
	if err != nil || !strings.HasPrefix(string(body), "state of partition 1 at 6\n") || r.Meta().Index != 6 {
		t.Fatalf("materialization: %q, %v", body[:min(len(body), 40)], err)
	}
	rc, err := s.OpenPiece(ctx, PieceName(1, 7, 11))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	pr, err := NewPieceReader(rc, PieceName(1, 7, 11))
	if err != nil {
		t.Fatal(err)
	}
	var got []*raftpb.Entry
	for {
		e, err := pr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	sameEntries(t, got, w.logs[1][6:11])
}

// Pieces of one upload go up in parallel.
func TestUploadParallel(t *testing.T) {
	ctx := context.Background()
	// Each reading of the clock moves it a second on: the lock is
	// refreshed every few PutPieces, by whichever goroutine finds it due.
	var ticks atomic.Int64
	tick := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Second) }
	s, _ := openFileStore(t, 5, Options{LockTTL: 10 * time.Second, Now: tick})
	w := newWorld(t)
	w.logs[1] = partitionLog(40, cutMark{2, 35, 40})
	var hs [][2]uint64
	for lo := uint64(1); lo <= 40; lo += 5 {
		hs = append(hs, [2]uint64{lo, lo + 4})
	}
	m := w.manifest(IDForCut(2), 2, t0, handle{p: 1, pos: 35, end: 40, pieces: hs})
	var names []string
	for _, o := range m.Objects() {
		names = append(names, o.Name)
	}
	u, err := s.BeginUpload(ctx, m.ID, names)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(names))
	for _, name := range names {
		go func() {
			_, _, err := u.PutPiece(ctx, name, bytes.NewReader(w.bytes[name]))
			errs <- err
		}()
	}
	for range names {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := u.Finish(ctx, m); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, s, m.ID)
}

// TestListDuringUploads lists the pieces, and opens the store, while
// other goroutines store pieces: the file:// driver lists their
// temporary files, which vanish (renamed) before it looks at them;
// neither a listing nor another node's opening of the store (once
// refused as "the bucket does not exist") may fail for that.
func TestListDuringUploads(t *testing.T) {
	s, url := openFileStore(t, 9, Options{})
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte(w)}, 64<<10)
			for i := uint64(1); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := s.PutPiece(ctx, PieceName(uint64(w+1), i, i), bytes.NewReader(body)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 300 {
		if _, err := s.listNames(ctx, piecesDir); err != nil {
			t.Errorf("listing during uploads: %v", err)
			break
		}
		other, err := OpenStore(ctx, url, 10)
		if err != nil {
			t.Errorf("opening the store during uploads: %v", err)
			break
		}
		other.Close()
	}
	close(stop)
	wg.Wait()
}

// TestPutPieceSameFileAtOnce: many writers (stores of their own, as the
// partitions of one snapshot upload the same OPTIONS file) putting one
// piece at the same moment into a file:// store each get either success
// or ErrExists, never a failed read-back, and the piece holds the bytes.
func TestPutPieceSameFileAtOnce(t *testing.T) {
	dir := t.TempDir()
	const writers, rounds = 16, 40
	stores := make([]*Store, writers)
	for i := range stores {
		s, err := OpenStore(context.Background(), "file://"+filepath.ToSlash(dir), 0xc1)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	for r := range rounds {
		data := bytes.Repeat([]byte{byte(r)}, 4096+r)
		sum := sha256.Sum256(data)
		name := FileObjectName(hex.EncodeToString(sum[:]))
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = s.PutPiece(context.Background(), name, bytes.NewReader(data))
			}()
		}
		wg.Wait()
		stored := 0
		for i, err := range errs {
			switch {
			case err == nil:
				stored++
			case errors.Is(err, ErrExists):
			default:
				t.Fatalf("round %d writer %d: %v", r, i, err)
			}
		}
		if stored == 0 {
			t.Fatalf("round %d: no writer stored the piece", r)
		}
		rd, err := stores[0].OpenPiece(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rd)
		rd.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: piece reads %d bytes, %v", r, len(got), err)
		}
	}
}

func TestResolveID(t *testing.T) {
	for in, want := range map[string]string{
		"7":                        "cut-00000000000000000007",
		"0042":                     "cut-00000000000000000042",
		"cut-00000000000000000007": "cut-00000000000000000007",
		"nightly-1":                "nightly-1",
		"":                         "",
		"99999999999999999999999":  "99999999999999999999999",
	} {
		if got := ResolveID(in); got != want {
			t.Errorf("ResolveID(%q) = %q, want %q", in, got, want)
		}
	}
}
