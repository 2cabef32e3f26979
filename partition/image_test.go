package partition

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// imgEntry is a raft entry as the log holds it: the command marshaled, so
// that every partition applying it decodes its own copy, as replicas do.
type imgEntry struct {
	index uint64
	data  []byte
	desc  string
}

func mkImgEntry(tb testing.TB, index uint64, cmd *internalpb.Command) imgEntry {
	tb.Helper()
	b, err := proto.Marshal(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	return imgEntry{index: index, data: b, desc: fmt.Sprintf("%d: %v", index, cmd)}
}

func (e imgEntry) apply(tb testing.TB, p *Partition) string {
	tb.Helper()
	cmd := &internalpb.Command{}
	if err := proto.Unmarshal(e.data, cmd); err != nil {
		tb.Fatal(err)
	}
	res, err := p.ApplyCommand(e.index, cmd)
	if err != nil {
		tb.Fatalf("imgEntry %s: %v", e.desc, err)
	}
	if idx, ok := res.(uint64); ok { // a HashOp's
		return fmt.Sprintf("hash at %d", idx)
	}
	if closed, ok := res.(bool); ok { // a CutFinish's
		return fmt.Sprintf("cut closed %v", closed)
	}
	return fmtApplyResult(res)
}

// imgWithCut sets the proposer's known cut version on cmd.
func imgWithCut(v uint64, cmd *internalpb.Command) *internalpb.Command {
	cmd.CutVersion = v
	return cmd
}

func imgCutStart(v uint64) *internalpb.Command {
	return &internalpb.Command{CutVersion: v, Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: v}}}
}

func imgCutFinish(v uint64, op *internalpb.CutFinishOp) *internalpb.Command {
	return &internalpb.Command{CutVersion: v, Op: &internalpb.Command_CutFinish{CutFinish: op}}
}

func imgFinishStamp(id string, commit, succeeded bool, stamp uint64) *internalpb.Command {
	c := cmdFinish(id, commit, succeeded)
	c.GetTxnFinish().Stamp = stamp
	return c
}

func imgShare(compares []*kvpb.Compare, success, failure []*kvpb.RequestOp) *internalpb.TxnShare {
	s := &internalpb.TxnShare{Compares: compares, Success: success, Failure: failure}
	for i := range success {
		s.SuccessIndex = append(s.SuccessIndex, uint32(i))
	}
	for i := range failure {
		s.FailureIndex = append(s.FailureIndex, uint32(i))
	}
	return s
}

// sameImagePartition fails unless a and b hold the same state in every respect
// the apply loop can observe, locks and cut progress included.
func sameImagePartition(tb testing.TB, a, b *Partition) {
	tb.Helper()
	if err := diffImagePartitions(a, b); err != nil {
		tb.Fatal(err)
	}
}

func diffImagePartitions(a, b *Partition) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	b.mu.RLock()
	defer b.mu.RUnlock()
	if a.id != b.id || a.applied != b.applied {
		return fmt.Errorf("partition %d applied %d, other: partition %d applied %d", a.id, a.applied, b.id, b.applied)
	}
	va, err := a.kvs.view()
	if err != nil {
		return err
	}
	defer va.close()
	vb, err := b.kvs.view()
	if err != nil {
		return err
	}
	defer vb.close()
	ha, ka, err := hashState(va, sortedKeys(a.intents))
	if err != nil {
		return err
	}
	hb, kb, err := hashState(vb, sortedKeys(b.intents))
	if err != nil {
		return err
	}
	if ha != hb || ka != kb {
		return fmt.Errorf("state hash %x (%d keys), other %x (%d keys):\n%s\nother:\n%s", ha, ka, hb, kb, imgDumpKVs(a), imgDumpKVs(b))
	}
	if !slices.Equal(sortedKeys(a.intents), sortedKeys(b.intents)) {
		return fmt.Errorf("intents %v, other %v", sortedKeys(a.intents), sortedKeys(b.intents))
	}
	for id, x := range a.intents {
		y := b.intents[id]
		if x.Index != y.Index || !proto.Equal(x.Op, y.Op) || fmtVote(x.Vote) != fmtVote(y.Vote) {
			return fmt.Errorf("intent %s at %d %v\n%s\nother at %d %v\n%s", id, x.Index, x.Op, fmtVote(x.Vote), y.Index, y.Op, fmtVote(y.Vote))
		}
		if (x.Vote.SuccessReads == nil) != (y.Vote.SuccessReads == nil) || (x.Vote.FailureReads == nil) != (y.Vote.FailureReads == nil) {
			return fmt.Errorf("intent %s: vote reads nil in one partition only", id)
		}
	}
	if !maps.EqualFunc(a.records, b.records, func(x, y *internalpb.TxnDecideOp) bool { return proto.Equal(x, y) }) {
		return fmt.Errorf("records %v, other %v", a.records, b.records)
	}
	if !maps.Equal(a.finished, b.finished) || a.horizon != b.horizon {
		return fmt.Errorf("finished %v (horizon %d), other %v (horizon %d)", a.finished, a.horizon, b.finished, b.horizon)
	}
	if !reflect.DeepEqual(a.locks, b.locks) {
		return fmt.Errorf("lock tables differ: holders %v, other %v", a.locks.Holders(), b.locks.Holders())
	}
	if !a.cut.State().Equal(b.cut.State()) {
		return fmt.Errorf("cut progress %+v, other %+v", a.cut.State(), b.cut.State())
	}
	return nil
}

func imgDumpKVs(p *Partition) string {
	var lines []string
	_ = p.kvs.ascend(nil, func(kv *KV) bool {
		lines = append(lines, "  "+fmtPartKV(kv))
		return true
	})
	return strings.Join(lines, "\n")
}

func encodeImage(tb testing.TB, im *Image) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := im.Encode(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// imageRoundTrip encodes p's image and decodes it.
func imageRoundTrip(tb testing.TB, p *Partition) *Partition {
	tb.Helper()
	q, err := Decode(p.ID(), bytes.NewReader(encodeImage(tb, p.Image())))
	if err != nil {
		tb.Fatal(err)
	}
	return q
}

// imgScriptedEntries is a mix of every kind of entry, ending with a cut in
// progress (v3 waits for t3), intents holding point and range locks, and
// decisions, finished transactions and a finished cut (v2) remembered.
func imgScriptedEntries(tb testing.TB) []imgEntry {
	cmpB := &kvpb.Compare{Key: []byte("b"), Target: kvpb.Compare_VERSION, TargetUnion: &kvpb.Compare_Version{Version: 1}}
	cmds := []*internalpb.Command{
		put("a", "1"),
		put("b", "2"),
		del("a"),
		put("e", ""),
		cmdPrepare("t1", imgShare([]*kvpb.Compare{cmpB}, []*kvpb.RequestOp{rPut("c", "3"), rGet("b")}, []*kvpb.RequestOp{rDel("b")})),
		cmdPrepare("t2", imgShare(nil, []*kvpb.RequestOp{rScan("d", "f", 0, false), rPut("a", "4")}, nil)),
		cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte("t1"), Commit: true, Succeeded: true, Stamp: 1, Participants: []uint64{1, 2}}),
		imgFinishStamp("t1", true, true, 1),
		imgCutStart(2), // pos of v2: t2 is active
		imgWithCut(2, cmdPrepare("t3", imgShare(nil, []*kvpb.RequestOp{rPut("g", "5"), rScan("f", "", 2, true)}, nil))),
		imgWithCut(2, imgFinishStamp("t2", true, true, 1)), // before v2
		nil, // CutFinish(v2), filled in below
		imgWithCut(2, cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte("t2"), Commit: true, Succeeded: true, Stamp: 1})),
		imgWithCut(2, put("d", "6")),
		imgWithCut(2, cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte("t9")})), // a presumed abort
		imgCutStart(3), // pos of v3: t3 is active
		imgWithCut(3, cmdPrepare("t4", imgShare([]*kvpb.Compare{cmpB}, []*kvpb.RequestOp{rPut("b", "7")}, []*kvpb.RequestOp{rGet("d")}))),
		imgWithCut(3, imgFinishStamp("t5", false, false, 0)), // never prepared here
		imgWithCut(3, cmdOnePhase("o1", imgShare(nil, []*kvpb.RequestOp{rPut("ca", "8")}, nil))),
		imgWithCut(3, put("b", "locked")),
	}
	var out []imgEntry
	p := New(1)
	index := uint64(0)
	for _, c := range cmds {
		index += 1 + index%3 // gaps: entries of other groups' kinds
		if c == nil {
			op, ok := p.CutPending()
			if !ok {
				tb.Fatalf("no CutFinish pending at %d", index)
			}
			c = imgCutFinish(2, op)
		}
		e := mkImgEntry(tb, index, c)
		e.apply(tb, p)
		out = append(out, e)
	}
	if v, active := p.CutActive(); v != 3 || !slices.Equal(active, []string{"t3"}) {
		tb.Fatalf("the script ends with cut %d waiting for %v, want 3 waiting for [t3]", v, active)
	}
	if _, ok := p.CutResult(2); !ok {
		tb.Fatal("cut 2 did not finish in the script")
	}
	return out
}

// imgLaterEntries continue imgScriptedEntries (which end at index < start).
func imgLaterEntries(tb testing.TB, start uint64) []imgEntry {
	cmds := []*internalpb.Command{
		imgWithCut(3, put("b", "still locked")),
		imgWithCut(3, put("c", "9")),
		imgWithCut(3, cmdPrepare("t1", imgShare(nil, []*kvpb.RequestOp{rPut("q", "1")}, nil))), // finished: refused
		imgWithCut(3, cmdPrepare("t4", imgShare(nil, []*kvpb.RequestOp{rPut("q", "1")}, nil))), // prepared: first vote
		imgWithCut(3, cmdPrepare("t6", imgShare(nil, []*kvpb.RequestOp{rPut("g", "x")}, nil))), // conflicts with t3
		imgWithCut(3, cmdPrepare("t7", imgShare(nil, []*kvpb.RequestOp{rPut("d", "x")}, nil))), // conflicts with t4's read
		imgWithCut(3, cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte("t1"), Commit: false})),  // first decision wins
		imgWithCut(3, imgFinishStamp("t3", true, true, 3)),                                     // after v3
		{CutVersion: 3, Op: &internalpb.Command_Hash{Hash: &internalpb.HashOp{}}},
		imgWithCut(3, imgFinishStamp("t4", true, false, 2)), // failure branch: reads only
		imgWithCut(3, put("b", "free")),
		imgWithCut(3, cmdOnePhase("o2", imgShare(nil, []*kvpb.RequestOp{rScan("", "", 0, false)}, nil))),
		imgWithCut(3, del("e")),
	}
	var out []imgEntry
	for i, c := range cmds {
		out = append(out, mkImgEntry(tb, start+uint64(i), c))
	}
	return out
}

func imgApplyAll(tb testing.TB, p *Partition, es []imgEntry) []string {
	tb.Helper()
	var out []string
	for _, e := range es {
		out = append(out, e.apply(tb, p))
	}
	return out
}

// TestImageRoundTrip decodes the image of a partition after the script and
// checks the copy is the same partition: same state now, and the same
// results and state after the same further entries (including the
// CutFinish of the running cut, which only a faithful cut progress and
// intent table allow).
func TestImageRoundTrip(t *testing.T) {
	es := imgScriptedEntries(t)
	p := New(1)
	imgApplyAll(t, p, es)
	q := imageRoundTrip(t, p)
	sameImagePartition(t, p, q)
	if q.Applied() != es[len(es)-1].index {
		t.Fatalf("decoded applied %d, want %d", q.Applied(), es[len(es)-1].index)
	}

	later := imgLaterEntries(t, p.Applied()+1)
	for _, e := range later {
		if got, want := e.apply(t, q), e.apply(t, p); got != want {
			t.Fatalf("imgEntry %s: decoded copy answered\n%s\noriginal\n%s", e.desc, got, want)
		}
		sameImagePartition(t, p, q)
	}
	// The running cut can now finish, identically in both.
	op, ok := p.CutPending()
	if !ok {
		t.Fatal("cut 3 not ready after its active transaction finished")
	}
	fin := mkImgEntry(t, p.Applied()+1, imgCutFinish(3, op))
	if got, want := fin.apply(t, q), fin.apply(t, p); got != want || want != "cut closed true" {
		t.Fatalf("CutFinish(3): decoded copy %s, original %s", got, want)
	}
	sameImagePartition(t, p, q)
	// Both images of the two now equal partitions encode to the same bytes.
	if !bytes.Equal(encodeImage(t, p.Image()), encodeImage(t, q.Image())) {
		t.Fatal("equal partitions encode differently")
	}
}

// TestImageIsFrozen: an image taken before more entries apply still
// encodes the state at its own index, byte for byte what a partition that
// stopped there encodes, while the original goes on applying (run with
// -race: Encode reads the copy-on-write tree from another goroutine).
func TestImageIsFrozen(t *testing.T) {
	es := imgScriptedEntries(t)
	p := New(1)
	imgApplyAll(t, p, es)
	im := p.Image()

	done := make(chan []byte)
	go func() {
		var buf bytes.Buffer
		if err := im.Encode(&buf); err != nil {
			t.Error(err)
		}
		done <- buf.Bytes()
	}()
	imgApplyAll(t, p, imgLaterEntries(t, p.Applied()+1))
	for i := uint64(0); i < 500; i++ { // enough writes to copy many B-tree nodes
		mustApply(t, p, p.Applied()+1, put(fmt.Sprintf("k%03d", i), "v"))
	}
	concurrent := <-done
	after := encodeImage(t, im)

	stopped := New(1)
	imgApplyAll(t, stopped, es)
	want := encodeImage(t, stopped.Image())
	if !bytes.Equal(concurrent, want) || !bytes.Equal(after, want) {
		t.Fatal("the image changed with its partition")
	}
	q, err := Decode(1, bytes.NewReader(after))
	if err != nil {
		t.Fatal(err)
	}
	sameImagePartition(t, stopped, q)
	if im.Applied() != stopped.Applied() || im.Len() != stopped.Len() || im.ID() != 1 {
		t.Fatalf("image applied %d len %d, want %d %d", im.Applied(), im.Len(), stopped.Applied(), stopped.Len())
	}
}

// TestImageRandomRoundTrip applies random entries — plain writes,
// prepares, finishes, decisions, one-phase transactions, cut starts and
// CutFinish — and at random points decodes a copy from the image; every
// copy must answer every later entry as the original does and end in the
// same state.
func TestImageRandomRoundTrip(t *testing.T) {
	seed := txnSeed(t)
	r := rand.New(rand.NewPCG(seed, 0x1a9e))
	closed := 0
	for round := 0; round < 10; round++ {
		p := New(1)
		type cp struct {
			q    *Partition
			from int // first entry it applies
		}
		var copies []cp
		var es []imgEntry
		var version uint64
		ids := []string{"t0", "t1", "t2", "t3", "t4", "t5"}
		shares := map[string]*internalpb.TxnShare{}
		index := uint64(0)
		for step := 0; step < 300; step++ {
			index += 1 + uint64(r.IntN(2))
			var cmd *internalpb.Command
			switch r.IntN(12) {
			case 0, 1, 2:
				k := pick(r, modelKeys)
				if r.IntN(3) == 0 {
					cmd = del(k)
				} else {
					cmd = put(k, pick(r, modelValues))
				}
			case 3, 4:
				id := pick(r, ids)
				if shares[id] == nil || r.IntN(4) == 0 {
					shares[id] = genShare(t, r)
				}
				cmd = cmdPrepare(id, shares[id])
			case 5, 6:
				cmd = imgFinishStamp(pick(r, ids), r.IntN(3) > 0, r.IntN(2) == 0, uint64(r.IntN(int(version)+2)))
			case 7:
				cmd = cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte(pick(r, ids)), Commit: r.IntN(2) == 0, Stamp: version})
			case 8:
				cmd = cmdOnePhase(fmt.Sprintf("o%d", step), genShare(t, r))
			case 9:
				version++
				cmd = imgCutStart(version)
			default:
				if op, ok := p.CutPending(); ok {
					cmd = imgCutFinish(version, op)
				} else {
					cmd = &internalpb.Command{Op: &internalpb.Command_Noop{Noop: &internalpb.NoopOp{}}}
				}
			}
			cmd.CutVersion = version
			e := mkImgEntry(t, index, cmd)
			want := e.apply(t, p)
			if want == "cut closed true" {
				closed++
			}
			es = append(es, e)
			for _, c := range copies {
				if got := e.apply(t, c.q); got != want {
					t.Fatalf("round %d: imgEntry %s: copy from imgEntry %d answered\n%s\noriginal\n%s", round, e.desc, c.from, got, want)
				}
			}
			if r.IntN(10) == 0 {
				copies = append(copies, cp{q: imageRoundTrip(t, p), from: len(es)})
			}
		}
		for _, c := range copies {
			if err := diffImagePartitions(p, c.q); err != nil {
				var hist []string
				for _, e := range es[max(0, c.from-20):] {
					hist = append(hist, e.desc)
				}
				t.Fatalf("round %d: copy from imgEntry %d: %v\nentries from 20 before the copy:\n%s", round, c.from, err, strings.Join(hist, "\n"))
			}
		}
	}
	if closed == 0 {
		t.Fatal("no cut closed: the generator proves little")
	}
}

// TestDecodeImageRefusesDamage: every truncation and a set of crafted
// damages give an error wrapping ErrBadImage (ErrImageVersion for a newer
// layout), and none panics.
func TestDecodeImageRefusesDamage(t *testing.T) {
	p := New(1)
	imgApplyAll(t, p, imgScriptedEntries(t))
	good := encodeImage(t, p.Image())

	for n := 0; n < len(good); n++ {
		if _, err := Decode(1, bytes.NewReader(good[:n])); !errors.Is(err, ErrBadImage) {
			t.Fatalf("image cut to %d of %d bytes: Decode = %v, want ErrBadImage", n, len(good), err)
		}
	}
	if _, err := Decode(2, bytes.NewReader(good)); !errors.Is(err, ErrBadImage) || !strings.Contains(err.Error(), "of partition 1") {
		t.Fatalf("image of partition 1 decoded as 2: %v", err)
	}
	if _, err := Decode(1, bytes.NewReader(append(slices.Clone(good), 0))); !errors.Is(err, ErrBadImage) {
		t.Fatalf("a byte after the end: %v", err)
	}

	// frames returns the image as frames, to damage one and reassemble.
	frames := func(b []byte) [][]byte {
		var out [][]byte
		for len(b) > 0 {
			l, n := protowire.ConsumeVarint(b)
			out = append(out, slices.Clone(b[n:n+int(l)]))
			b = b[n+int(l):]
		}
		return out
	}
	join := func(fs [][]byte) []byte {
		var out []byte
		for _, f := range fs {
			out = protowire.AppendVarint(out, uint64(len(f)))
			out = append(out, f...)
		}
		return out
	}
	frame := func(kind byte, fields ...[]byte) []byte {
		return append([]byte{kind}, slices.Concat(fields...)...)
	}
	vf := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	bf := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	msg := func(num protowire.Number, m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return bf(num, b)
	}
	fs := frames(good)
	kindAt := func(kind byte) int {
		for i, f := range fs {
			if f[0] == kind {
				return i
			}
		}
		t.Fatalf("no frame of kind %d", kind)
		return -1
	}
	edit := func(i int, f []byte) []byte {
		c := slices.Clone(fs)
		c[i] = f
		return join(c)
	}
	insert := func(i int, f ...[]byte) []byte {
		return join(slices.Insert(slices.Clone(fs), i, f...))
	}
	without := func(i int) []byte { return join(slices.Delete(slices.Clone(fs), i, i+1)) }
	end := len(fs) - 1
	kv, in := kindAt(frameKV), kindAt(frameIntent)
	endCounts := func(kvs, ins, recs, fin uint64) []byte {
		return frame(frameEnd, vf(1, kvs), vf(2, ins), vf(3, recs), vf(4, fin))
	}
	prep := func(id string, s *internalpb.TxnShare) *internalpb.TxnPrepareOp {
		return &internalpb.TxnPrepareOp{TxnId: []byte(id), Share: s}
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"zero length frame", []byte{0}},
		{"huge length", protowire.AppendVarint(nil, 1<<40)},
		{"length overflows", bytes.Repeat([]byte{0xff}, 11)},
		{"unknown kind", edit(0, []byte{9})},
		{"no header", without(0)},
		{"no cut progress", without(1)},
		{"no end", without(end)},
		{"two headers", insert(1, fs[0])},
		{"two cut frames", insert(2, fs[1])},
		{"key-value after intent", insert(in+1, fs[kv])},
		{"repeated key", insert(kv+1, fs[kv])},
		{"keys out of order", join(slices.Concat(fs[:kv], [][]byte{fs[kv+1], fs[kv]}, fs[kv+2:]))},
		{"unknown field", edit(kv, append(slices.Clone(fs[kv]), vf(9, 1)...))},
		{"repeated varint", edit(kv, append(slices.Clone(fs[kv]), vf(3, 1)...))},
		{"repeated bytes", edit(kv, append(slices.Clone(fs[kv]), bf(1, []byte("zz"))...))},
		{"wrong wire type", edit(kv, frame(frameKV, vf(1, 5), vf(3, 1)))},
		{"truncated field", edit(kv, append(frame(frameKV), bf(1, []byte("abc"))[:3]...))},
		{"key-value version 0", edit(kv, frame(frameKV, bf(1, []byte("a")), vf(3, 0)))},
		{"key-value from the future", edit(kv, frame(frameKV, bf(1, []byte("a")), vf(3, 1), vf(4, 1), vf(5, 1<<40)))},
		{"key-value created after changed", edit(kv, frame(frameKV, bf(1, []byte("a")), vf(3, 1), vf(4, 3), vf(5, 2)))},
		{"bad prepare", edit(in, frame(frameIntent, bf(1, []byte{0xff}), vf(2, 1), vf(3, 1)))},
		{"intent at index 0", edit(in, frame(frameIntent, msg(1, prep("t3", nil)), vf(3, 1)))},
		{"intent refused", edit(in, frame(frameIntent, msg(1, prep("t3", nil)), vf(2, 1)))},
		{"intent with conflicts", edit(in, frame(frameIntent, msg(1, prep("t3", nil)), vf(2, 1), vf(3, 1), bf(4, []byte("x"))))},
		{"bad vote read", edit(in, frame(frameIntent, msg(1, prep("t3", nil)), vf(2, 1), vf(3, 1), bf(6, []byte{0xff})))},
		{"intents out of order", join(slices.Concat(fs[:in], [][]byte{fs[in+1], fs[in]}, fs[in+2:]))},
		{"conflicting intents", edit(in, frame(frameIntent, msg(1, prep("t3", imgShare(nil, []*kvpb.RequestOp{rPut("b", "x")}, nil))), vf(2, 1), vf(3, 1)))},
		{"active without intent", edit(in, frame(frameIntent, msg(1, prep("t30", imgShare(nil, []*kvpb.RequestOp{rPut("zz", "x")}, nil))), vf(2, 1), vf(3, 1)))},
		{"finished and prepared", insert(kindAt(frameFinished)+2, frame(frameFinished, bf(1, []byte("t3"))))},
		{"bad record", edit(kindAt(frameRecord), frame(frameRecord, bf(1, []byte{0xff})))},
		{"horizon out of range", edit(0, append(slices.Clone(fs[0]), vf(4, 1<<63)...))},
		{"prepare time out of range", edit(kindAt(frameFinished), append(slices.Clone(fs[kindAt(frameFinished)]), vf(2, 1<<63)...))},
		{"bad cut transaction", edit(1, frame(frameCut, vf(1, 3), vf(2, 2), bf(4, []byte{0xff})))},
		{"bad finished cut", edit(1, frame(frameCut, vf(1, 3), vf(2, 2), bf(8, []byte{0xff})))},
		{"impossible cut", edit(1, frame(frameCut, vf(2, 2)))},
		{"cut past applied", edit(1, frame(frameCut, vf(1, 3), vf(2, 1<<40)))},
		{"wrong counts", edit(end, endCounts(0, 0, 0, 0))},
		{"end with unknown field", edit(end, append(slices.Clone(fs[end]), vf(5, 0)...))},
	} {
		_, err := Decode(1, bytes.NewReader(tc.data))
		if !errors.Is(err, ErrBadImage) {
			t.Errorf("%s: Decode = %v, want ErrBadImage", tc.name, err)
		}
		t.Logf("%s: %v", tc.name, err)
	}

	// A newer layout is refused by name, not as damage.
	newer := edit(0, frame(frameHeader, vf(1, ImageVersion+1), vf(2, 1), vf(3, 5)))
	_, err := Decode(1, bytes.NewReader(newer))
	if !errors.Is(err, ErrImageVersion) || !strings.Contains(err.Error(), fmt.Sprintf("version %d; this binary reads version %d", ImageVersion+1, ImageVersion)) {
		t.Fatalf("newer image: %v", err)
	}
}

// imgFailingReader returns data, then err.
type imgFailingReader struct {
	data []byte
	err  error
}

func (f *imgFailingReader) Read(b []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(b, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestDecodeImagePassesReadErrors: an error of the reader (a checksum
// failure found while streaming a file) reaches the caller, matchable,
// wherever it happens, even right after the end frame.
func TestDecodeImagePassesReadErrors(t *testing.T) {
	p := New(1)
	imgApplyAll(t, p, imgScriptedEntries(t))
	good := encodeImage(t, p.Image())
	damaged := errors.New("damaged file")
	for _, n := range []int{0, 1, 2, 10, len(good) / 2, len(good) - 1, len(good)} {
		_, err := Decode(1, &imgFailingReader{data: good[:n], err: damaged})
		if !errors.Is(err, damaged) {
			t.Errorf("read error after %d of %d bytes: Decode = %v", n, len(good), err)
		}
	}
}

// The seeds of FuzzDecodeImage: images of interesting states, kept in
// testdata/fuzz/FuzzDecodeImage and checked to be current (rewrite them
// with -rewrite after a layout change).
func imageSeeds(tb testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	seeds["empty"] = encodeImage(tb, New(1).Image())
	es := imgScriptedEntries(tb)
	p := New(1)
	imgApplyAll(tb, p, es[:9])
	seeds["cut-running"] = encodeImage(tb, p.Image())
	imgApplyAll(tb, p, es[9:])
	seeds["scripted"] = encodeImage(tb, p.Image())
	imgApplyAll(tb, p, imgLaterEntries(tb, p.Applied()+1))
	seeds["later"] = encodeImage(tb, p.Image())
	// Finished ids with prepare times, and a horizon.
	h := New(1)
	share := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("k", "v")}}
	for i, c := range []*internalpb.Command{
		prepareAt("A", 1000, share), finishAt("A", true, 0), finishAt("B", false, 3000), finishAt("C", false, 0), horizon(2000),
	} {
		mkImgEntry(tb, uint64(i+1), c).apply(tb, h)
	}
	seeds["horizon"] = encodeImage(tb, h.Image())
	return seeds
}

func imageFuzzSeedFile(data []byte) string {
	return fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
}

func TestImageFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeImage")
	seeds := imageSeeds(t)
	names := slices.Sorted(maps.Keys(seeds))
	for _, name := range names {
		path := filepath.Join(dir, "image-"+name)
		want := imageFuzzSeedFile(seeds[name])
		if *rewrite {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -rewrite to create the seeds)", err)
		}
		if string(got) != want {
			t.Errorf("%s is not the current encoding of its image; rerun with -rewrite", path)
		}
	}
}

// FuzzDecodeImage: Decode never panics, and whatever it accepts encodes
// back to an image that decodes to the same partition and bytes.
func FuzzDecodeImage(f *testing.F) {
	seeds := imageSeeds(f)
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		f.Add(seeds[name])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(1, bytes.NewReader(data))
		if err != nil {
			return
		}
		once := encodeImage(t, p.Image())
		q, err := Decode(1, bytes.NewReader(once))
		if err != nil {
			t.Fatalf("re-encoded image does not decode: %v", err)
		}
		sameImagePartition(t, p, q)
		if twice := encodeImage(t, q.Image()); !bytes.Equal(once, twice) {
			t.Fatal("encoding is not stable")
		}
	})
}
