// Package restoretest stores synthetic snapshots of a made-up cluster in
// a file:// snapshot store, for the tests of package restore and of
// restored clusters. Everything stored is real: partitions driven by the
// commands a cluster's raft logs hold (plain writes, two-phase commit,
// cut starts and finishes), changelog pieces (snapshot.EncodePiece),
// materializations (checkpoint files of partition images) and manifests
// that snapshot.Store.Check accepts.
//
// # The scenario
//
// Every partition g holds keys Key(g, 0 … 4), written first ("a0" … "a4").
// Cut 1 starts and never finishes (a failed cut). Partitions 1 and 2 take
// part in three transactions, recorded in partition 1:
//
//   - TF prepares Key(g, 5) before cut 1 and aborts after cut 2's pos;
//   - TB prepares Key(g, 2) = "tb<g>", is decided with stamp 1 and
//     finishes before cut 2's pos in partition 2 and after it in partition
//     1, where it is in cut 2's before set: in the state at cut 2;
//   - TA prepares Key(g, 3) = "ta<g>" before cut 2's pos and commits with
//     stamp 2 after it: its intent is at the cut in both partitions and
//     must be dropped (in the state at cut 3, not at cut 2).
//
// Before cut 2 every partition overwrites Key(g, 1) with "b1" and Key(g, 4)
// with "c4"; after cut 2's pos Key(g, 0) becomes "after2", after cut 3's
// pos Key(g, 1) becomes "after3". Snapshot 1 is cut 2, snapshot 2 cut 3
// (an hour later), sharing pieces: partition 1 starts from a base inside
// the first transactions (intents, a record and the failed cut in it),
// partition 3 from a base inside its only piece of the first range
// (a piece used from an index above its first), partition 2 from a base
// after cut 2 in the second snapshot only, partition 4 from none. The
// entries have terms 2 and then 3, as after an election.
//
// # Parallel commits
//
// By default the transactions are written as before parallel commits: a
// TxnDecide that only records, then a TxnFinish in every participant.
// Options.ParallelCommits writes the same scenario with parallel
// commits' entries, so that restore is tested on both kinds of log (old
// WALs must still replay): partition 1's prepares list the participants
// and write STAGING records (partition 1's base holds all three STAGING);
// TB is decided by partition 1's decision entry that also finishes it
// there (TxnDecide with finish, after cut 2's pos: the before set), TA
// likewise with stamp 2; partition 2 finishes TB before pos and TA with
// TF's abort in TxnFinishes batches; partition 1 aborts TF in a batch,
// which decides its STAGING record. The states at the cuts are the same.
package restoretest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/checkpoint"
	"github.com/cutkv/cutkv/cut/verify"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/snapshot"
)

// Options shape the synthetic cluster.
type Options struct {
	// Partitions is the partition count, at least 4. Default 4.
	Partitions uint32
	// Cluster is the source cluster's id. Default 0xc0ffee.
	Cluster uint64
	// Time is the first snapshot's time; the second is an hour later.
	// Default 2026-01-02T03:04:05Z.
	Time time.Time
	// Dir is the store's directory, which may hold other clusters'
	// snapshots already. Default: a new t.TempDir().
	Dir string
	// ParallelCommits writes the transactions with parallel commits'
	// entries (package doc).
	ParallelCommits bool
}

// Fixture is a store holding the scenario's two snapshots.
type Fixture struct {
	// URL is the store's URL, Dir its directory.
	URL, Dir string
	// Cluster and Partitions are the source cluster's.
	Cluster    uint64
	Partitions uint32
	// Snapshots are the stored manifests: cut 2, then cut 3.
	Snapshots []*snapshot.Manifest
	// Logs[g] is partition g's whole log, from index 1.
	Logs map[uint64][]*raftpb.Entry
}

// Key returns the i-th key of partition g of a cluster with n
// partitions: a key that keyspace.PartitionOf maps to g.
func Key(g uint64, n uint32, i int) string {
	for j := 0; ; j++ {
		k := fmt.Sprintf("k%d-%d-%d", g, i, j)
		if keyspace.PartitionOf([]byte(k), n) == g {
			return k
		}
	}
}

// Build stores the scenario's snapshots in a new file:// store under
// t.TempDir() and returns it.
func Build(t testing.TB, opts Options) *Fixture {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	if opts.Partitions < 4 {
		t.Fatalf("restoretest: %d partitions, want at least 4", opts.Partitions)
	}
	if opts.Cluster == 0 {
		opts.Cluster = 0xc0ffee
	}
	if opts.Time.IsZero() {
		opts.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	f := &Fixture{URL: "file://" + filepath.ToSlash(dir), Dir: dir, Cluster: opts.Cluster, Partitions: opts.Partitions,
		Logs: map[uint64][]*raftpb.Entry{}}
	ctx := context.Background()
	st, err := snapshot.OpenStore(ctx, f.URL, opts.Cluster)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	logs := map[uint64]*logBuilder{}
	for g := uint64(1); g <= uint64(opts.Partitions); g++ {
		logs[g] = buildLog(t, g, opts.Partitions, opts.ParallelCommits)
		f.Logs[g] = logs[g].ents
	}
	u := &uploader{t: t, st: st, dir: t.TempDir(), stored: map[string]snapshot.Object{}}
	for i, v := range []uint64{2, 3} {
		m := &snapshot.Manifest{
			ID: snapshot.IDForCut(v), CutVersion: v, Time: opts.Time.Add(time.Duration(i) * time.Hour),
			PartitionCount: opts.Partitions, KeyHash: keyspace.HashName,
		}
		for g := uint64(1); g <= uint64(opts.Partitions); g++ {
			m.Partitions = append(m.Partitions, u.handle(logs[g], v))
		}
		if err := st.PutManifest(ctx, m); err != nil {
			t.Fatalf("restoretest: manifest of cut %d: %v", v, err)
		}
		f.Snapshots = append(f.Snapshots, m)
	}
	return f
}

// PiecePath returns the file of a stored piece.
func (f *Fixture) PiecePath(name string) string {
	return filepath.Join(f.Dir, fmt.Sprintf("%016x", f.Cluster), "pieces", name)
}

// Want returns partition g's key-values at snapshot m's cut as
// verify.Rebuild computes them from the partition's whole log (no base).
func (f *Fixture) Want(t testing.TB, m *snapshot.Manifest, g uint64) map[string][]byte {
	t.Helper()
	p := m.Partitions[g-1]
	r := &verify.Replica{Node: "source", Group: g, Entries: f.Logs[g]}
	st, err := verify.Rebuild(r, m.CutVersion, &kvpb.CutPartition{Partition: g, Pos: p.Pos, FinishIndex: p.End})
	if err != nil {
		t.Fatalf("restoretest: rebuild partition %d at cut %d: %v", g, m.CutVersion, err)
	}
	return st.KVs
}

// logBuilder writes one partition's log and applies it as it goes.
type logBuilder struct {
	t      testing.TB
	g      uint64
	p      *partition.Partition
	ents   []*raftpb.Entry
	term   uint64
	images map[uint64]*partition.Image // bases, by index
	cuts   map[uint64][2]uint64        // cut version → pos, end
	// parallel: parallel commits' entries (the package doc).
	parallel bool
}

func (b *logBuilder) add(v uint64, cmd *internalpb.Command) uint64 {
	b.t.Helper()
	i := uint64(len(b.ents)) + 1
	e := &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(b.term), Type: raftpb.EntryNormal.Enum()}
	if cmd == nil {
		b.p.SetApplied(i)
	} else {
		cmd.CutVersion = v
		data, err := proto.Marshal(cmd)
		if err != nil {
			b.t.Fatal(err)
		}
		e.Data = data
		if _, err := b.p.ApplyCommand(i, cmd); err != nil {
			b.t.Fatalf("restoretest: partition %d entry %d: %v", b.g, i, err)
		}
	}
	b.ents = append(b.ents, e)
	return i
}

func (b *logBuilder) put(v uint64, key, value string) {
	b.add(v, &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte(key), Value: []byte(value)}}})
}

// prepare writes a prepare of id; with parallel commits the record
// partition's lists the participants (a STAGING record).
func (b *logBuilder) prepare(v uint64, id, key, value string) {
	op := &internalpb.TxnPrepareOp{
		TxnId: []byte(id), RecordPartition: 1,
		Share: &internalpb.TxnShare{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(key), Value: []byte(value)}}}}},
	}
	if b.parallel && b.g == op.GetRecordPartition() {
		op.Participants = []uint64{1, 2}
	}
	b.add(v, &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: op}})
}

// decide writes a decision that only records (before parallel commits).
func (b *logBuilder) decide(v uint64, id string, commit bool, stamp uint64) {
	b.add(v, &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: &internalpb.TxnDecideOp{
		TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp, Participants: []uint64{1, 2},
	}}})
}

// decideFinish writes a decision that also finishes the record
// partition's own intent (parallel commits).
func (b *logBuilder) decideFinish(v uint64, id string, commit bool, stamp uint64) {
	b.add(v, &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: &internalpb.TxnDecideOp{
		TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp, Participants: []uint64{1, 2}, Finish: true,
	}}})
}

func finishOp(id string, commit bool, stamp uint64) *internalpb.TxnFinishOp {
	return &internalpb.TxnFinishOp{TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp}
}

func (b *logBuilder) finish(v uint64, id string, commit bool, stamp uint64) {
	b.add(v, &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: finishOp(id, commit, stamp)}})
}

// finishes writes a TxnFinishes batch (parallel commits); the entry's
// version v must be at least every stamp in it.
func (b *logBuilder) finishes(v uint64, ops ...*internalpb.TxnFinishOp) {
	b.t.Helper()
	for _, op := range ops {
		if op.GetStamp() > v {
			b.t.Fatalf("restoretest: partition %d: a batch at version %d finishes %s stamped %d", b.g, v, op.GetTxnId(), op.GetStamp())
		}
	}
	b.add(v, &internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{Finishes: ops}}})
}

func (b *logBuilder) cutStart(v uint64) {
	pos := b.add(v, &internalpb.Command{Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: v}}})
	b.cuts[v] = [2]uint64{pos, 0}
	if f, ok := b.p.CutResult(v); ok && f.Index == pos {
		b.cuts[v] = [2]uint64{pos, pos} // nothing active: closed at its position
	}
}

// cutFinish appends the CutFinish the partition computes, as a leader
// proposes it; nothing when the cut closed at its position.
func (b *logBuilder) cutFinish(v uint64) {
	b.t.Helper()
	if c := b.cuts[v]; c[1] != 0 && c[1] == c[0] {
		return
	}
	op, ok := b.p.CutPending()
	if !ok || op.GetVersion() != v {
		b.t.Fatalf("restoretest: partition %d: no CutFinish(%d) pending (%v)", b.g, v, op)
	}
	end := b.add(v, &internalpb.Command{Op: &internalpb.Command_CutFinish{CutFinish: op}})
	if f, ok := b.p.CutResult(v); !ok || f.Index != end {
		b.t.Fatalf("restoretest: partition %d: CutFinish(%d) at %d did not close the cut", b.g, v, end)
	}
	b.cuts[v] = [2]uint64{b.cuts[v][0], end}
}

// base records the partition's state now as a materialization.
func (b *logBuilder) base() { b.images[uint64(len(b.ents))] = b.p.Image() }

// buildLog writes partition g's log (see the package doc).
func buildLog(t testing.TB, g uint64, n uint32, parallel bool) *logBuilder {
	b := &logBuilder{t: t, g: g, p: partition.New(g), term: 2, images: map[uint64]*partition.Image{}, cuts: map[uint64][2]uint64{},
		parallel: parallel}
	key := func(i int) string { return Key(g, n, i) }
	txns := g == 1 || g == 2
	b.add(0, nil) // a leader's empty entry
	for i := 0; i < 5; i++ {
		b.put(0, key(i), fmt.Sprintf("a%d", i))
		if g == 3 && i == 2 {
			b.base()
		}
	}
	if txns {
		b.prepare(0, "TF", key(5), "tf")
	}
	b.cutStart(1) // fails: never finished
	b.term = 3
	b.put(1, key(1), "b1")
	if txns {
		b.prepare(1, "TB", key(2), fmt.Sprintf("tb%d", g))
		b.prepare(1, "TA", key(3), fmt.Sprintf("ta%d", g))
	}
	switch {
	case g == 1 && !parallel:
		b.decide(1, "TB", true, 1)
		b.base() // intents TF, TB, TA, TB's record, cut 1 running
	case g == 1:
		b.base() // intents TF, TB, TA with their STAGING records, cut 1 running
		for _, id := range []string{"TF", "TB", "TA"} {
			if r, ok := b.p.Record(id); !ok || !r.GetStaging() {
				t.Fatalf("restoretest: partition 1: %s's record %v, want STAGING", id, r)
			}
		}
	case g == 2 && !parallel:
		b.finish(1, "TB", true, 1) // before pos here
	case g == 2:
		b.finishes(1, finishOp("TB", true, 1)) // before pos here
	}
	b.put(1, key(4), "c4")
	b.cutStart(2)
	b.put(2, key(0), "after2")
	switch {
	case txns && !parallel:
		if g == 1 {
			b.decide(2, "TA", true, 2)
		}
		b.finish(2, "TA", true, 2)
		b.finish(2, "TF", false, 2)
		if g == 1 {
			b.finish(2, "TB", true, 1) // after pos: the before set
		}
	case g == 1:
		b.decideFinish(2, "TA", true, 2)
		b.finishes(2, finishOp("TF", false, 2)) // decides TF's STAGING record: abort
		if r, ok := b.p.Record("TF"); !ok || r.GetStaging() || r.GetCommit() {
			t.Fatalf("restoretest: partition 1: TF's record %v after its abort, want decided abort", r)
		}
		b.decideFinish(2, "TB", true, 1) // after pos: the before set
	case g == 2:
		b.finishes(2, finishOp("TA", true, 2), finishOp("TF", false, 2))
	}
	b.cutFinish(2)
	b.put(2, key(6), "d6")
	if g == 2 {
		b.base()
	}
	b.put(2, key(7), "d7")
	b.cutStart(3)
	b.put(3, key(1), "after3")
	b.cutFinish(3)
	return b
}

// uploader stores pieces once and describes them for manifests.
type uploader struct {
	t      testing.TB
	st     *snapshot.Store
	dir    string // materialization files before upload
	stored map[string]snapshot.Object
}

func (u *uploader) put(name string, data []byte) snapshot.Object {
	u.t.Helper()
	if o, ok := u.stored[name]; ok {
		return o
	}
	sha, size, err := u.st.PutPiece(context.Background(), name, bytes.NewReader(data))
	if err != nil {
		u.t.Fatalf("restoretest: store %s: %v", name, err)
	}
	o := snapshot.Object{Name: name, Size: size, SHA256: sha}
	u.stored[name] = o
	return o
}

func (u *uploader) piece(b *logBuilder, lo, hi, from uint64) snapshot.Piece {
	u.t.Helper()
	var buf bytes.Buffer
	if err := snapshot.EncodePiece(&buf, b.g, b.ents[lo-1:hi]); err != nil {
		u.t.Fatal(err)
	}
	return snapshot.Piece{Object: u.put(snapshot.PieceName(b.g, lo, hi), buf.Bytes()), Lo: lo, Hi: hi, From: from}
}

func (u *uploader) base(b *logBuilder, m uint64) *snapshot.Base {
	u.t.Helper()
	img := b.images[m]
	path, _, _, err := checkpoint.Files{}.Write(u.dir, checkpoint.Meta{Partition: b.g, Index: m, Term: b.ents[m-1].GetTerm()}, img.Encode)
	if err != nil {
		u.t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		u.t.Fatal(err)
	}
	return &snapshot.Base{Object: u.put(filepath.Base(path), data), Index: m}
}

// handle stores (or reuses) partition b's pieces for the snapshot at cut
// v and returns its handle. The pieces are [1 or base+1, end of cut 2]
// (partition 1: in two) and [end of cut 2 + 1, end of cut 3].
func (u *uploader) handle(b *logBuilder, v uint64) snapshot.Partition {
	u.t.Helper()
	pos, end := b.cuts[v][0], b.cuts[v][1]
	end2 := b.cuts[2][1]
	h := snapshot.Partition{Partition: b.g, Pos: pos, End: end}
	var bases []uint64
	for m := range b.images {
		bases = append(bases, m)
	}
	var m uint64 // the newest base before pos
	for _, i := range bases {
		if i < pos && i > m {
			m = i
		}
	}
	if m > 0 {
		h.Base = u.base(b, m)
	}
	switch {
	case m > end2: // partition 2 at cut 3
		h.Pieces = append(h.Pieces, u.piece(b, end2+1, end, m+1))
		return h
	case b.g == 1:
		mid := (m + 1 + end2) / 2
		h.Pieces = append(h.Pieces, u.piece(b, m+1, mid, m+1), u.piece(b, mid+1, end2, mid+1))
	default:
		h.Pieces = append(h.Pieces, u.piece(b, 1, end2, m+1))
	}
	if v == 3 {
		h.Pieces = append(h.Pieces, u.piece(b, end2+1, end, end2+1))
	}
	return h
}
