package partition

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized transaction tests (0: pick one)")

// source is where the model test draws its choices from: a seeded PRNG or
// the fuzzer's bytes.
type source interface {
	IntN(n int) int
}

// byteSource reads choices from fuzz input; once the bytes run out it
// answers 0 and sets eof.
type byteSource struct {
	data []byte
	eof  bool
}

func (b *byteSource) IntN(n int) int {
	if len(b.data) == 0 {
		b.eof = true
		return 0
	}
	c := b.data[0]
	b.data = b.data[1:]
	return int(c) % n
}

func pick[T any](src source, xs []T) T { return xs[src.IntN(len(xs))] }

var (
	modelKeys   = []string{"a", "b", "c", "d", "e"}
	modelEnds   = []string{"", "b", "c", "e", "f"} // "": to the end
	modelValues = []string{"", "x", "y", "z"}
)

// modelKV is a committed key in the model.
type modelKV struct {
	value       string
	version     int64
	create, mod uint64
}

// footprint is what a share touches, by meaning rather than by lock
// modes: the keys it reads (compares, gets), the keys it writes, the
// ranges it scans.
type footprint struct {
	reads, writes map[string]bool
	ranges        [][2]string
}

func footprintOf(s *internalpb.TxnShare) footprint {
	f := footprint{reads: map[string]bool{}, writes: map[string]bool{}}
	for _, c := range s.GetCompares() {
		f.reads[string(c.GetKey())] = true
	}
	for _, ops := range [][]*kvpb.RequestOp{s.GetSuccess(), s.GetFailure()} {
		for _, op := range ops {
			switch r := op.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				f.reads[string(r.Get.GetKey())] = true
			case *kvpb.RequestOp_Put:
				f.writes[string(r.Put.GetKey())] = true
			case *kvpb.RequestOp_Delete:
				f.writes[string(r.Delete.GetKey())] = true
			case *kvpb.RequestOp_Scan:
				f.ranges = append(f.ranges, [2]string{string(r.Scan.GetStart()), string(r.Scan.GetEnd())})
			}
		}
	}
	return f
}

func inModelRange(k string, r [2]string) bool { return r[0] <= k && (r[1] == "" || k < r[1]) }

// touches: the share reads, writes or scans over k.
func (f footprint) touches(k string) bool {
	if f.reads[k] || f.writes[k] {
		return true
	}
	for _, r := range f.ranges {
		if inModelRange(k, r) {
			return true
		}
	}
	return false
}

// clash: two shares cannot be prepared together when one writes what the
// other touches.
func clash(a, b footprint) bool {
	for k := range a.writes {
		if b.touches(k) {
			return true
		}
	}
	for k := range b.writes {
		if a.touches(k) {
			return true
		}
	}
	return false
}

// partModel is the obvious partition: a map of committed keys, the shares
// of prepared transactions and the first decision of each record.
type partModel struct {
	kvs     map[string]*modelKV
	applied uint64
	intents map[string]*internalpb.TxnShare
	votes   map[string]string // rendered first vote of each intent
	index   map[string]uint64 // index of each intent's (first) prepare
	records map[string]*internalpb.TxnDecideOp
	// finished: transactions finished here (an intent finished, or an
	// abort without one); a later prepare is refused without naming
	// conflicts and locks nothing. So is one with a record here.
	finished map[string]bool
}

func newPartModel() *partModel {
	return &partModel{kvs: map[string]*modelKV{}, intents: map[string]*internalpb.TxnShare{}, votes: map[string]string{}, index: map[string]uint64{}, records: map[string]*internalpb.TxnDecideOp{}, finished: map[string]bool{}}
}

func (m *partModel) conflicts(id string, s *internalpb.TxnShare) []string {
	f := footprintOf(s)
	var out []string
	for h, hs := range m.intents {
		if h != id && clash(f, footprintOf(hs)) {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

// writeBlocker: the smallest prepared transaction touching key.
func (m *partModel) writeBlocker(key string) string {
	var ids []string
	for h, s := range m.intents {
		if footprintOf(s).touches(key) {
			ids = append(ids, h)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// readBlocker: the prepared transaction writing key.
func (m *partModel) readBlocker(key string) string {
	var ids []string
	for h, s := range m.intents {
		if footprintOf(s).writes[key] {
			ids = append(ids, h)
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}

// put: a write bumps the version; a key created again starts at 1.
func (m *partModel) put(index uint64, k, v string) {
	if kv := m.kvs[k]; kv != nil {
		kv.value, kv.version, kv.mod = v, kv.version+1, index
		return
	}
	m.kvs[k] = &modelKV{value: v, version: 1, create: index, mod: index}
}

func (m *partModel) kvProto(k string) *kvpb.KeyValue {
	kv := m.kvs[k]
	if kv == nil {
		return nil
	}
	return &kvpb.KeyValue{Key: []byte(k), Value: []byte(kv.value), Version: kv.version, CreateIndex: kv.create, ModIndex: kv.mod}
}

func (m *partModel) holds(cmps []*kvpb.Compare) bool {
	for _, c := range cmps {
		kv := m.kvs[string(c.GetKey())]
		var cmp int
		switch c.GetTarget() {
		case kvpb.Compare_VERSION:
			var v int64
			if kv != nil {
				v = kv.version
			}
			switch {
			case v < c.GetVersion():
				cmp = -1
			case v > c.GetVersion():
				cmp = 1
			}
		case kvpb.Compare_VALUE:
			if kv == nil {
				return false
			}
			cmp = strings.Compare(kv.value, string(c.GetValue()))
		}
		ok := map[kvpb.Compare_Result]bool{
			kvpb.Compare_EQUAL: cmp == 0, kvpb.Compare_NOT_EQUAL: cmp != 0,
			kvpb.Compare_GREATER: cmp > 0, kvpb.Compare_LESS: cmp < 0,
		}[c.GetResult()]
		if !ok {
			return false
		}
	}
	return true
}

func (m *partModel) sortedKeys() []string {
	ks := make([]string, 0, len(m.kvs))
	for k := range m.kvs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (m *partModel) reads(ops []*kvpb.RequestOp) []*kvpb.ResponseOp {
	out := []*kvpb.ResponseOp{}
	for _, op := range ops {
		switch r := op.GetRequest().(type) {
		case *kvpb.RequestOp_Get:
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Get{Get: &kvpb.GetResponse{Kv: m.kvProto(string(r.Get.GetKey()))}}})
		case *kvpb.RequestOp_Put:
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Put{Put: &kvpb.PutResponse{}}})
		case *kvpb.RequestOp_Delete:
			var n int64
			if m.kvs[string(r.Delete.GetKey())] != nil {
				n = 1
			}
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Delete{Delete: &kvpb.DeleteResponse{Deleted: n}}})
		case *kvpb.RequestOp_Scan:
			resp := &kvpb.ScanResponse{}
			rg := [2]string{string(r.Scan.GetStart()), string(r.Scan.GetEnd())}
			for _, k := range m.sortedKeys() {
				if !inModelRange(k, rg) {
					continue
				}
				l := r.Scan.GetLimit()
				if l <= 0 || l > MaxTxnScan {
					l = MaxTxnScan
				}
				if int64(len(resp.Kvs)) == l {
					resp.More = true
					break
				}
				kv := m.kvProto(k)
				if r.Scan.GetKeysOnly() {
					kv.Value = nil
				}
				resp.Kvs = append(resp.Kvs, kv)
			}
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Scan{Scan: resp}})
		}
	}
	return out
}

func (m *partModel) write(index uint64, ops []*kvpb.RequestOp) {
	for _, op := range ops {
		switch r := op.GetRequest().(type) {
		case *kvpb.RequestOp_Put:
			m.put(index, string(r.Put.GetKey()), string(r.Put.GetValue()))
		case *kvpb.RequestOp_Delete:
			delete(m.kvs, string(r.Delete.GetKey()))
		}
	}
}

// genBranch makes a valid branch: no key written twice, none read.
func genBranch(src source) []*kvpb.RequestOp {
	var ops []*kvpb.RequestOp
	writes := map[string]bool{}
	f := footprint{reads: map[string]bool{}, writes: map[string]bool{}}
	for n := src.IntN(4); n > 0; n-- {
		switch src.IntN(6) {
		case 0, 1, 2:
			k := pick(src, modelKeys)
			if writes[k] || f.touches(k) {
				continue
			}
			writes[k] = true
			if src.IntN(3) == 0 {
				ops = append(ops, rDel(k))
			} else {
				ops = append(ops, rPut(k, pick(src, modelValues)))
			}
		case 3, 4:
			k := pick(src, modelKeys)
			if writes[k] {
				continue
			}
			f.reads[k] = true
			ops = append(ops, rGet(k))
		case 5:
			rg := [2]string{pick(src, append([]string{""}, modelKeys...)), pick(src, modelEnds)}
			ok := rg[1] == "" || rg[0] < rg[1] // txn.Validate refuses an empty range
			for k := range writes {
				ok = ok && !inModelRange(k, rg)
			}
			if !ok {
				continue
			}
			f.ranges = append(f.ranges, rg)
			ops = append(ops, rScan(rg[0], rg[1], int64(src.IntN(3)), src.IntN(4) == 0))
		}
	}
	return ops
}

func genCompare(src source) *kvpb.Compare {
	c := &kvpb.Compare{Key: []byte(pick(src, modelKeys)), Result: kvpb.Compare_Result(src.IntN(4))}
	if src.IntN(2) == 0 {
		c.Target = kvpb.Compare_VERSION
		c.TargetUnion = &kvpb.Compare_Version{Version: int64(src.IntN(3))}
	} else {
		c.Target = kvpb.Compare_VALUE
		c.TargetUnion = &kvpb.Compare_Value{Value: []byte(pick(src, modelValues))}
	}
	return c
}

// genShare makes a share that passes txn.Validate and touches at least
// one key.
func genShare(tb testing.TB, src source) *internalpb.TxnShare {
	tb.Helper()
	for {
		s := &internalpb.TxnShare{Success: genBranch(src), Failure: genBranch(src)}
		for n := src.IntN(3); n > 0; n-- {
			s.Compares = append(s.Compares, genCompare(src))
		}
		for i := range s.Success {
			s.SuccessIndex = append(s.SuccessIndex, uint32(i))
		}
		for i := range s.Failure {
			s.FailureIndex = append(s.FailureIndex, uint32(i))
		}
		if err := txn.Validate(&kvpb.TxnRequest{Compare: s.Compares, Success: s.Success, Failure: s.Failure}, txn.Limits{}); err != nil {
			tb.Fatalf("generated an invalid share: %v", err)
		}
		if len(s.Compares)+len(s.Success)+len(s.Failure) > 0 {
			return s
		}
		if bs, ok := src.(*byteSource); ok && bs.eof {
			return &internalpb.TxnShare{Success: []*kvpb.RequestOp{rGet("a")}, SuccessIndex: []uint32{0}}
		}
	}
}

func fmtShare(s *internalpb.TxnShare) string {
	var parts []string
	for _, c := range s.GetCompares() {
		target := fmt.Sprint(c.GetVersion())
		if c.GetTarget() == kvpb.Compare_VALUE {
			target = fmt.Sprintf("%q", c.GetValue())
		}
		parts = append(parts, fmt.Sprintf("cmp(%s %v %v %s)", c.GetKey(), c.GetTarget(), c.GetResult(), target))
	}
	for _, br := range []struct {
		name string
		ops  []*kvpb.RequestOp
	}{{"S", s.GetSuccess()}, {"F", s.GetFailure()}} {
		for _, op := range br.ops {
			switch r := op.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				parts = append(parts, fmt.Sprintf("%s:get(%s)", br.name, r.Get.GetKey()))
			case *kvpb.RequestOp_Put:
				parts = append(parts, fmt.Sprintf("%s:put(%s=%s)", br.name, r.Put.GetKey(), r.Put.GetValue()))
			case *kvpb.RequestOp_Delete:
				parts = append(parts, fmt.Sprintf("%s:del(%s)", br.name, r.Delete.GetKey()))
			case *kvpb.RequestOp_Scan:
				parts = append(parts, fmt.Sprintf("%s:scan[%q,%q) limit %d keys-only %v", br.name, r.Scan.GetStart(), r.Scan.GetEnd(), r.Scan.GetLimit(), r.Scan.GetKeysOnly()))
			}
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// logicalTxn is one transaction of the test, prepared on this partition
// at most once (a prepare refused by a conflict may be retried).
type logicalTxn struct {
	id    string
	share *internalpb.TxnShare
	done  bool // finished after being prepared
}

type partHarness struct {
	tb    testing.TB
	p     *Partition
	m     *partModel
	pool  []*logicalTxn // transactions in play
	old   []*logicalTxn // finished ones
	ids   int
	steps []string
	stats map[string]int // outcomes seen, so that a test run can tell it covered them
}

func newPartHarness(tb testing.TB, src source) *partHarness {
	h := &partHarness{tb: tb, p: New(1), m: newPartModel(), stats: map[string]int{}}
	for i := 0; i < 4; i++ {
		h.pool = append(h.pool, h.newTxn(src))
	}
	return h
}

func (h *partHarness) newTxn(src source) *logicalTxn {
	h.ids++
	return &logicalTxn{id: fmt.Sprintf("t%02d", h.ids), share: genShare(h.tb, src)}
}

func (h *partHarness) fatalf(format string, args ...any) {
	h.tb.Helper()
	tail := h.steps
	if len(tail) > 40 {
		tail = tail[len(tail)-40:]
	}
	h.tb.Fatalf("after steps (last %d of %d):\n  %s\n%s", len(tail), len(h.steps), strings.Join(tail, "\n  "), fmt.Sprintf(format, args...))
}

func (h *partHarness) nextIndex(src source) uint64 {
	idx := h.m.applied + 1
	if src.IntN(8) == 0 {
		idx += uint64(1 + src.IntN(3)) // entries of other kinds in between
	}
	return idx
}

func (h *partHarness) apply(idx uint64, cmd *internalpb.Command) any {
	h.tb.Helper()
	res, err := h.p.ApplyCommand(idx, cmd)
	if err != nil {
		h.fatalf("ApplyCommand(%d): %v", idx, err)
	}
	return res
}

func (h *partHarness) step(src source) {
	h.tb.Helper()
	idx := h.nextIndex(src)
	switch src.IntN(16) {
	case 0, 1, 2, 3: // prepare
		t := pick(src, h.pool)
		_, prepared := h.m.intents[t.id]
		if prepared && src.IntN(4) == 0 {
			// Another transaction under a prepared id (a reused or
			// replayed id): refused, and the intent stays as it was.
			c := cmdPrepare(t.id, genShare(h.tb, src))
			c.GetTxnPrepare().Priority = 1
			h.steps = append(h.steps, fmt.Sprintf("%d: prepare %s again, another op %s", idx, t.id, fmtShare(c.GetTxnPrepare().GetShare())))
			got := fmtApplyResult(h.apply(idx, c))
			h.m.applied = idx
			h.stats["prepare under a prepared id"]++
			if w := fmtVote(Vote{}); got != w {
				h.fatalf("prepare of prepared %s with another op: vote\n%s\nwant a refusal that locks nothing\n%s", t.id, got, w)
			}
			break
		}
		h.steps = append(h.steps, fmt.Sprintf("%d: prepare %s %s", idx, t.id, fmtShare(t.share)))
		want := h.m.conflicts(t.id, t.share)
		if got := h.p.LockConflicts(t.id, txn.Wants(t.share)); !slices.Equal(got, want) {
			h.fatalf("LockConflicts(%s) = %v, model %v", t.id, got, want)
		}
		v, ok := h.apply(idx, cmdPrepare(t.id, t.share)).(Vote)
		if !ok {
			h.fatalf("prepare returned no Vote")
		}
		h.m.applied = idx
		got := fmtVote(v)
		switch {
		case !prepared && h.m.finished[t.id]:
			h.stats["prepare after finish or decision"]++
			if w := fmtVote(Vote{Finished: true}); got != w {
				h.fatalf("prepare %s after its finish or refusal: vote\n%s\nwant a refusal that locks nothing\n%s", t.id, got, w)
			}
		case !prepared && h.m.records[t.id] != nil:
			h.stats["prepare after finish or decision"]++
			if w := fmtVote(Vote{}); got != w {
				h.fatalf("prepare %s after its decision: vote\n%s\nwant a refusal that locks nothing\n%s", t.id, got, w)
			}
			h.m.finished[t.id] = true // a tombstone: the effective prepare refused
		case prepared:
			h.stats["prepare again"]++
			if got != h.m.votes[t.id] {
				h.fatalf("prepare %s again: vote\n%s\nfirst vote\n%s", t.id, got, h.m.votes[t.id])
			}
		case len(want) > 0:
			h.stats["prepare refused"]++
			if w := fmtVote(Vote{Conflicts: want}); got != w {
				h.fatalf("prepare %s: vote\n%s\nmodel\n%s", t.id, got, w)
			}
			h.m.finished[t.id] = true // a tombstone: the effective prepare refused
		default:
			mv := Vote{Prepared: true, ComparesHold: h.m.holds(t.share.Compares), SuccessReads: h.m.reads(t.share.Success), FailureReads: h.m.reads(t.share.Failure)}
			if w := fmtVote(mv); got != w {
				h.fatalf("prepare %s: vote\n%s\nmodel\n%s", t.id, got, w)
			}
			h.m.intents[t.id], h.m.votes[t.id], h.m.index[t.id] = t.share, got, idx
			h.stats[fmt.Sprintf("prepared, compares hold=%v", mv.ComparesHold)]++
		}
	case 4, 5, 6: // finish
		t := h.anyTxn(src)
		if prepared := h.preparedTxns(); len(prepared) > 0 && src.IntN(3) > 0 {
			t = pick(src, prepared)
		}
		commit, succeeded := src.IntN(3) > 0, src.IntN(2) == 0
		if h.m.intents[t.id] != nil && src.IntN(5) == 0 {
			// The finish of another transaction under this id (its
			// prepare time is not the intent's, 0): changes nothing.
			h.steps = append(h.steps, fmt.Sprintf("%d: finish %s commit=%v succeeded=%v of another prepare time", idx, t.id, commit, succeeded))
			c := cmdFinish(t.id, commit, succeeded)
			c.GetTxnFinish().PreparedUnixMs = 77
			if res := h.apply(idx, c); res != nil {
				h.fatalf("finish returned %v", fmtApplyResult(res))
			}
			h.m.applied = idx
			h.stats["finish under a prepared id"]++
			break
		}
		h.steps = append(h.steps, fmt.Sprintf("%d: finish %s commit=%v succeeded=%v", idx, t.id, commit, succeeded))
		if res := h.apply(idx, cmdFinish(t.id, commit, succeeded)); res != nil {
			h.fatalf("finish returned %v", fmtApplyResult(res))
		}
		h.m.applied = idx
		h.stats[fmt.Sprintf("finish with intent %v", h.m.intents[t.id] != nil)]++
		if h.m.intents[t.id] != nil || !commit {
			h.m.finished[t.id] = true // a commit with no intent leaves nothing
		}
		if s, ok := h.m.intents[t.id]; ok {
			if commit {
				ops := s.Failure
				if succeeded {
					ops = s.Success
				}
				h.m.write(idx, ops)
			}
			delete(h.m.intents, t.id)
			delete(h.m.votes, t.id)
			t.done = true
			h.replaceDone(src)
		}
	case 7: // decide
		t := h.anyTxn(src)
		op := &internalpb.TxnDecideOp{TxnId: []byte(t.id), Commit: src.IntN(2) == 0, Stamp: uint64(src.IntN(3))}
		op.Succeeded = op.Commit && src.IntN(2) == 0
		for p := src.IntN(3); p > 0; p-- {
			op.Participants = append(op.Participants, uint64(1+src.IntN(4)))
		}
		h.steps = append(h.steps, fmt.Sprintf("%d: decide %s %s", idx, t.id, fmtDecision(op)))
		rec, ok := h.apply(idx, cmdDecide(op)).(*internalpb.TxnDecideOp)
		if !ok {
			h.fatalf("decide returned no decision")
		}
		h.m.applied = idx
		first := h.m.records[t.id]
		h.stats[fmt.Sprintf("decide first %v", first == nil)]++
		if first == nil {
			first = proto.Clone(op).(*internalpb.TxnDecideOp)
			h.m.records[t.id] = first
		}
		if !proto.Equal(rec, first) {
			h.fatalf("decide %s = %s, want the first decision %s", t.id, fmtDecision(rec), fmtDecision(first))
		}
		// The record must not alias the proposer's op.
		op.Commit, op.Participants = !op.Commit, append(op.Participants, 99)
	case 8, 9, 10: // plain put or delete
		k := pick(src, modelKeys)
		isPut := src.IntN(3) > 0
		v := pick(src, modelValues)
		cmd := del(k)
		if isPut {
			cmd = put(k, v)
		}
		h.steps = append(h.steps, fmt.Sprintf("%d: plain %v", idx, cmd))
		res, ok := h.apply(idx, cmd).(Result)
		if !ok {
			h.fatalf("plain write returned no Result")
		}
		h.m.applied = idx
		want := Result{LockedBy: h.m.writeBlocker(k)}
		h.stats[fmt.Sprintf("plain write locked %v", want.LockedBy != "")]++
		if want.LockedBy == "" {
			if kv := h.m.kvs[k]; kv != nil {
				want.Prev = &KV{Key: []byte(k), Value: []byte(kv.value), Version: kv.version, CreateIndex: kv.create, ModIndex: kv.mod}
				if !isPut {
					want.Deleted = 1
				}
			}
			if isPut {
				h.m.put(idx, k, v)
			} else {
				delete(h.m.kvs, k)
			}
		}
		if got, w := fmtResult(res), fmtResult(want); got != w {
			h.fatalf("plain write %v = %s, model %s", cmd, got, w)
		}
	case 11, 12: // one-phase transaction
		h.ids++
		id := fmt.Sprintf("o%02d", h.ids)
		reused := false
		if prepared := h.preparedTxns(); len(prepared) > 0 && src.IntN(6) == 0 {
			id, reused = pick(src, prepared).id, true // under a prepared id: refused by it
		}
		s := genShare(h.tb, src)
		h.steps = append(h.steps, fmt.Sprintf("%d: one-phase %s %s", idx, id, fmtShare(s)))
		res, ok := h.apply(idx, cmdOnePhase(id, s)).(OnePhaseResult)
		if !ok {
			h.fatalf("one-phase returned no OnePhaseResult")
		}
		h.m.applied = idx
		want := OnePhaseResult{Conflicts: h.m.conflicts(id, s)}
		if reused {
			h.stats["one-phase under a prepared id"]++
			want.Conflicts = []string{id}
		}
		h.stats[fmt.Sprintf("one-phase refused %v", len(want.Conflicts) > 0)]++
		if len(want.Conflicts) == 0 {
			want.Succeeded = h.m.holds(s.Compares)
			ops := s.Failure
			if want.Succeeded {
				ops = s.Success
			}
			want.Responses = h.m.reads(ops)
			h.m.write(idx, ops)
		}
		if got, w := fmtOnePhase(res), fmtOnePhase(want); got != w {
			h.fatalf("one-phase %s:\n%s\nmodel:\n%s", id, got, w)
		}
	case 13: // an entry already applied
		if h.m.applied == 0 {
			return
		}
		old := uint64(1 + src.IntN(int(h.m.applied)))
		t := h.anyTxn(src)
		cmd := pick(src, []*internalpb.Command{
			put(pick(src, modelKeys), "replayed"), del(pick(src, modelKeys)),
			cmdPrepare(t.id, t.share), cmdPrepare("fresh", genShare(h.tb, src)),
			cmdFinish(t.id, true, true), cmdFinish(t.id, false, false),
			cmdDecide(&internalpb.TxnDecideOp{TxnId: []byte(t.id), Commit: true}),
			cmdOnePhase("fresh", genShare(h.tb, src)),
		})
		h.steps = append(h.steps, fmt.Sprintf("%d (replay, applied %d): %v", old, h.m.applied, cmd))
		h.stats["replay"]++
		res := h.apply(old, cmd)
		if r, ok := res.(Result); res != nil && (!ok || fmtResult(r) != "ok") {
			h.fatalf("replayed entry %d returned %s", old, fmtApplyResult(res))
		}
	case 14: // an entry changing no key
		h.steps = append(h.steps, fmt.Sprintf("%d: noop", idx))
		if src.IntN(2) == 0 {
			h.apply(idx, &internalpb.Command{Op: &internalpb.Command_Noop{Noop: &internalpb.NoopOp{}}})
		} else {
			h.p.SetApplied(idx)
		}
		h.m.applied = idx
	case 15: // SetApplied going backwards
		if h.m.applied == 0 {
			return
		}
		old := uint64(src.IntN(int(h.m.applied)))
		h.steps = append(h.steps, fmt.Sprintf("SetApplied(%d) with applied %d", old, h.m.applied))
		h.p.SetApplied(old)
	}
	h.check()
}

// anyTxn picks a transaction in any state, finished ones included.
func (h *partHarness) anyTxn(src source) *logicalTxn {
	if len(h.old) > 0 && src.IntN(4) == 0 {
		return pick(src, h.old)
	}
	return pick(src, h.pool)
}

func (h *partHarness) preparedTxns() []*logicalTxn {
	var out []*logicalTxn
	for _, t := range h.pool {
		if h.m.intents[t.id] != nil {
			out = append(out, t)
		}
	}
	return out
}

func (h *partHarness) replaceDone(src source) {
	for i, t := range h.pool {
		if t.done {
			h.old = append(h.old, t)
			h.pool[i] = h.newTxn(src)
		}
	}
}

// check compares everything the partition exposes with the model.
func (h *partHarness) check() {
	h.tb.Helper()
	if got := h.p.Applied(); got != h.m.applied {
		h.fatalf("Applied = %d, model %d", got, h.m.applied)
	}
	kvs, more, _ := h.p.Scan(nil, nil, 0)
	var got, want []string
	for _, kv := range kvs {
		got = append(got, fmtPartKV(kv))
	}
	for _, k := range h.m.sortedKeys() {
		want = append(want, fmtKV(h.m.kvProto(k)))
	}
	if more || !slices.Equal(got, want) || h.p.Len() != len(want) {
		h.fatalf("committed state (len %d, more %v):\n  %s\nmodel:\n  %s", h.p.Len(), more, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	var ids []string
	for id := range h.m.intents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if got := h.p.LockHolders(); !slices.Equal(got, ids) {
		h.fatalf("LockHolders = %v, model intents %v", got, ids)
	}
	recent := h.old[max(0, len(h.old)-8):]
	for _, t := range append(slices.Clone(h.pool), recent...) {
		in, ok := h.p.IntentOf(t.id)
		_, want := h.m.intents[t.id]
		if ok != want {
			h.fatalf("IntentOf(%s) = %v, model %v", t.id, ok, want)
		}
		if ok && fmtVote(in.Vote) != h.m.votes[t.id] {
			h.fatalf("intent %s vote\n%s\nmodel\n%s", t.id, fmtVote(in.Vote), h.m.votes[t.id])
		}
		if ok && (in.Index != h.m.index[t.id] || string(in.Op.GetTxnId()) != t.id || !proto.Equal(in.Op.GetShare(), t.share)) {
			h.fatalf("intent %s prepared at %d with share %s, model: at %d with %s", t.id, in.Index, fmtShare(in.Op.GetShare()), h.m.index[t.id], fmtShare(t.share))
		}
		rec, ok := h.p.Record(t.id)
		if mrec := h.m.records[t.id]; ok != (mrec != nil) || (ok && !proto.Equal(rec, mrec)) {
			h.fatalf("Record(%s) = %s %v, model %s", t.id, fmtDecision(rec), ok, fmtDecision(mrec))
		}
		if !t.done {
			if got, want := h.p.LockConflicts(t.id, txn.Wants(t.share)), h.m.conflicts(t.id, t.share); !slices.Equal(got, want) {
				h.fatalf("LockConflicts(%s) = %v, model %v", t.id, got, want)
			}
		}
	}
	for id, mrec := range h.m.records {
		if rec, ok := h.p.Record(id); !ok || !proto.Equal(rec, mrec) {
			h.fatalf("Record(%s) = %s %v, model %s", id, fmtDecision(rec), ok, fmtDecision(mrec))
		}
	}
	for _, k := range modelKeys {
		got, _ := h.p.ReadBlocker([]byte(k), nil)
		if want := h.m.readBlocker(k); got != want {
			h.fatalf("ReadBlocker(%s) = %q, model %q", k, got, want)
		}
	}
}

// finishAll aborts whatever is still prepared and checks no lock is left.
func (h *partHarness) finishAll() {
	h.tb.Helper()
	for id := range h.m.intents {
		h.m.applied++
		h.apply(h.m.applied, cmdFinish(id, false, false))
		delete(h.m.intents, id)
		delete(h.m.votes, id)
	}
	h.steps = append(h.steps, "abort all")
	h.check()
	if hs := h.p.LockHolders(); len(hs) != 0 {
		h.fatalf("locks left after every transaction finished: %v", hs)
	}
}

// TestTxnStateMachineModel interleaves prepares, finishes, decisions,
// plain writes and one-phase transactions on one partition and compares
// every result and the whole state after each step with partModel.
func TestTxnStateMachineModel(t *testing.T) {
	seed := txnSeed(t)
	r := rand.New(rand.NewPCG(seed, seed^0x7a11))
	stats := map[string]int{}
	for round := 0; round < 20; round++ {
		h := newPartHarness(t, r)
		for i := 0; i < 400; i++ {
			h.step(r)
		}
		h.finishAll()
		for k, n := range h.stats {
			stats[k] += n
		}
	}
	t.Logf("outcomes: %v", stats)
	// The generator must reach every case, or the comparisons above
	// prove little.
	for _, k := range []string{
		"prepare again", "prepare refused", "prepared, compares hold=true", "prepared, compares hold=false",
		"finish with intent true", "finish with intent false", "decide first true", "decide first false",
		"plain write locked true", "plain write locked false", "one-phase refused true", "one-phase refused false", "replay",
		"prepare after finish or decision", "prepare under a prepared id", "finish under a prepared id", "one-phase under a prepared id",
	} {
		if stats[k] == 0 {
			t.Errorf("no step had outcome %q", k)
		}
	}
}

// FuzzTxnStateMachine is TestTxnStateMachineModel with the choices taken
// from the fuzzer's bytes.
func FuzzTxnStateMachine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("prepare\x00\x01finish\x04\x05plain\x08one\x0b\x0creplay\x0d"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 8192 {
			return
		}
		src := &byteSource{data: data}
		h := newPartHarness(t, src)
		for !src.eof {
			h.step(src)
		}
		h.finishAll()
	})
}

// TestTxnVoteReadsCommittedState checks by hand what the model test checks
// at random: reads in a vote are the committed state at prepare time,
// including versions and indexes, and stay so while later entries change
// keys outside the share.
func TestTxnVoteReadsCommittedState(t *testing.T) {
	p := New(1)
	mustApply(t, p, 1, put("a", "1"))
	mustApply(t, p, 2, put("a", "2"))
	mustApply(t, p, 3, put("c", "3"))
	share := &internalpb.TxnShare{
		Compares: []*kvpb.Compare{{Key: []byte("a"), Target: kvpb.Compare_VERSION, Result: kvpb.Compare_EQUAL, TargetUnion: &kvpb.Compare_Version{Version: 2}}},
		Success:  []*kvpb.RequestOp{rGet("a"), rPut("b", "new"), rDel("c")},
		Failure:  []*kvpb.RequestOp{rScan("a", "d", 1, true), rDel("zz")},
	}
	res, err := p.ApplyCommand(4, cmdPrepare("T", share))
	if err != nil {
		t.Fatal(err)
	}
	want := `prepared, compares hold
  success[0]: get a=2 v2 c1 m2
  success[1]: put
  success[2]: delete 1
  failure[0]: scan [a= v2 c1 m2] more
  failure[1]: delete 0`
	if got := fmtApplyResult(res); got != want {
		t.Fatalf("vote:\n%s\nwant:\n%s", got, want)
	}
	// A one-phase write elsewhere does not change the recorded vote.
	if res, _ := p.ApplyCommand(5, cmdOnePhase("O", &internalpb.TxnShare{Success: []*kvpb.RequestOp{rPut("d", "4")}})); fmtApplyResult(res) != "succeeded\n  resp[0]: put" {
		t.Fatalf("one-phase on d: %s", fmtApplyResult(res))
	}
	if res, _ := p.ApplyCommand(6, cmdPrepare("T", share)); fmtApplyResult(res) != want {
		t.Fatalf("second prepare:\n%s\nwant the first vote", fmtApplyResult(res))
	}
	mustApply(t, p, 7, del("d"))
	if _, err := p.ApplyCommand(8, cmdFinish("T", true, true)); err != nil {
		t.Fatal(err)
	}
	kvs, _, _ := p.Scan(nil, nil, 0)
	var got []string
	for _, kv := range kvs {
		got = append(got, fmtPartKV(kv))
	}
	if w := []string{"a=2 v2 c1 m2", "b=new v1 c8 m8"}; !slices.Equal(got, w) {
		t.Fatalf("after commit: %v, want %v", got, w)
	}
	if len(p.LockHolders()) != 0 {
		t.Fatalf("locks left: %v", p.LockHolders())
	}
}

// TestTxnScanBounded: a scan inside a transaction returns at most
// MaxTxnScan keys of a partition, or its own smaller limit, and says
// there are more.
func TestTxnScanBounded(t *testing.T) {
	p := New(1)
	for i := 1; i <= MaxTxnScan+1; i++ {
		mustApply(t, p, uint64(i), put(fmt.Sprintf("k%05d", i), "v"))
	}
	idx := uint64(MaxTxnScan + 1)
	for _, tt := range []struct {
		limit int64
		want  int
	}{{0, MaxTxnScan}, {-1, MaxTxnScan}, {MaxTxnScan + 5, MaxTxnScan}, {MaxTxnScan + 1, MaxTxnScan}, {7, 7}} {
		idx++
		s := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rScan("k", "", tt.limit, true)}}
		res, err := p.ApplyCommand(idx, cmdOnePhase(fmt.Sprintf("o%d", idx), s))
		if err != nil {
			t.Fatal(err)
		}
		r := res.(OnePhaseResult)
		sc := r.Responses[0].GetScan()
		if len(sc.GetKvs()) != tt.want || !sc.GetMore() {
			t.Fatalf("one-phase scan with limit %d: %d keys, more %v; want %d and more", tt.limit, len(sc.GetKvs()), sc.GetMore(), tt.want)
		}
		idx++
		res, err = p.ApplyCommand(idx, cmdPrepare(fmt.Sprintf("t%d", idx), s))
		if err != nil {
			t.Fatal(err)
		}
		v := res.(Vote)
		if sc := v.SuccessReads[0].GetScan(); len(sc.GetKvs()) != tt.want || !sc.GetMore() {
			t.Fatalf("prepared scan with limit %d: %d keys, more %v; want %d and more", tt.limit, len(sc.GetKvs()), sc.GetMore(), tt.want)
		}
	}
	// Exactly the limit left in range: no more.
	s := &internalpb.TxnShare{Success: []*kvpb.RequestOp{rScan(fmt.Sprintf("k%05d", 2), "", 0, true)}}
	res, _ := p.ApplyCommand(idx+1, cmdOnePhase("last", s))
	if sc := res.(OnePhaseResult).Responses[0].GetScan(); len(sc.GetKvs()) != MaxTxnScan || sc.GetMore() {
		t.Fatalf("scan of exactly %d keys: %d keys, more %v", MaxTxnScan, len(sc.GetKvs()), sc.GetMore())
	}
}
