package verify

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// A synthetic cluster: partitions 1 and 2 hold accounts a and b (100 in
// all), and group 0 records the cuts. Transactions move money between
// them with two-phase commit, record in partition 1.

func put(key, value string) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte(key), Value: []byte(value)}}}
}

func prepare(id, key, value string) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: &internalpb.TxnPrepareOp{
		TxnId: []byte(id), RecordPartition: 1,
		Share: &internalpb.TxnShare{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(key), Value: []byte(value)}}}}},
	}}}
}

func decide(id string, commit bool, stamp uint64) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: &internalpb.TxnDecideOp{
		TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp, Participants: []uint64{1, 2},
	}}}
}

func finish(id string, commit bool, stamp uint64) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: &internalpb.TxnFinishOp{
		TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp,
	}}}
}

func cutStart(v uint64) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_CutStart{CutStart: &internalpb.CutStartOp{Version: v}}}
}

func cutFinish(v, pos uint64, before ...string) *internalpb.Command {
	op := &internalpb.CutFinishOp{Version: v, Pos: pos}
	for _, id := range before {
		op.Before = append(op.Before, &internalpb.CutTxn{TxnId: []byte(id), Succeeded: true})
	}
	return &internalpb.Command{Op: &internalpb.Command_CutFinish{CutFinish: op}}
}

func allocate() *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_CutAllocate{CutAllocate: &internalpb.CutAllocateOp{StartedUnixMs: 1}}}
}

func record(c *kvpb.CutInfo) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_CutRecord{CutRecord: &internalpb.CutRecordOp{Cut: c}}}
}

// step is one entry of a synthetic log: a command proposed with version
// v, or (cmd nil) raft's empty entry.
type step struct {
	v   uint64
	cmd *internalpb.Command
}

func entries(t *testing.T, steps []step) []*raftpb.Entry {
	t.Helper()
	out := make([]*raftpb.Entry, 0, len(steps))
	for i, s := range steps {
		e := &raftpb.Entry{Index: proto.Uint64(uint64(i + 1)), Term: proto.Uint64(1), Type: raftpb.EntryNormal.Enum()}
		if s.cmd != nil {
			c := proto.Clone(s.cmd).(*internalpb.Command)
			c.CutVersion = s.v
			data, err := proto.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			e.Data = data
		}
		out = append(out, e)
	}
	return out
}

// cluster is a synthetic cluster's logs, one replica list per node.
type cluster struct {
	p1, p2, g0 []step
}

func (c cluster) source(t *testing.T, nodes ...string) Static {
	t.Helper()
	var out Static
	for _, n := range nodes {
		for g, steps := range map[uint64][]step{0: c.g0, 1: c.p1, 2: c.p2} {
			ents := entries(t, steps)
			out = append(out, &Replica{Node: n, Group: g, Entries: ents, Commit: uint64(len(ents))})
		}
	}
	return out
}

// consistent is a cluster with one completed cut (1) and one failed (2):
//
//   - T1 (a=40, b=60) commits before the cut everywhere;
//   - T2 (a=30, b=70) is prepared before the cut in both partitions and
//     decided with stamp 0: it finishes before pos in partition 2 and is
//     active at pos in partition 1, where it joins the before set;
//   - T3 (a=20, b=80) is prepared after pos (stamp 1): after the cut.
//
// At cut 1: a=30, b=70.
func consistent() cluster {
	return cluster{
		p1: []step{
			{0, nil},                          // 1: a leader's empty entry
			{0, put("a", "100")},              // 2
			{0, prepare("T1", "a", "40")},     // 3
			{0, decide("T1", true, 0)},        // 4
			{0, finish("T1", true, 0)},        // 5
			{0, prepare("T2", "a", "30")},     // 6
			{1, cutStart(1)},                  // 7: pos; T2 is active
			{1, decide("T2", true, 0)},        // 8
			{1, finish("T2", true, 0)},        // 9: classified before
			{1, cutFinish(1, 7, "T2")},        // 10
			{1, prepare("T3", "a", "20")},     // 11
			{1, decide("T3", true, 1)},        // 12
			{1, finish("T3", true, 1)},        // 13
			{1, decide("T9", false, 1)},       // 14: an abort record
			{1, cutFinish(1, 7, "T2")},        // 15: a duplicate, ignored
			{2, cutStart(2)},                  // 16: the failed cut's pos
			{2, put("a-marker", "after cut")}, // 17
		},
		p2: []step{
			{0, put("b", "0")},            // 1
			{0, prepare("T1", "b", "60")}, // 2
			{0, finish("T1", true, 0)},    // 3
			{0, prepare("T2", "b", "70")}, // 4
			{0, finish("T2", true, 0)},    // 5: included before pos
			{1, cutStart(1)},              // 6: pos
			{1, cutFinish(1, 6)},          // 7
			{1, prepare("T3", "b", "80")}, // 8
			{1, finish("T3", true, 1)},    // 9
		},
		g0: []step{
			{0, nil},
			{0, allocate()},
			{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
				{Partition: 1, Pos: 7, FinishIndex: 10, Before: 1},
				{Partition: 2, Pos: 6, FinishIndex: 7},
			}})},
			// A second record of cut 1 loses: the first one wins.
			{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_FAILED})},
			{1, allocate()},
			{1, record(&kvpb.CutInfo{Version: 2, State: kvpb.CutState_CUT_STATE_FAILED, Error: "timeout"})},
		},
	}
}

// bankTotal is the invariant: the balances of a and b sum to total.
func bankTotal(total int64) Invariant {
	return func(v uint64, state map[string][]byte) error {
		var sum int64
		for _, k := range []string{"a", "b"} {
			n, err := strconv.ParseInt(string(state[k]), 10, 64)
			if err != nil {
				return fmt.Errorf("account %s: %q: %v", k, state[k], err)
			}
			sum += n
		}
		if sum != total {
			return fmt.Errorf("accounts sum to %d, want %d", sum, total)
		}
		return nil
	}
}

func TestVerifyConsistentCut(t *testing.T) {
	var seen map[string][]byte
	inv := bankTotal(100)
	rep, err := Verify(consistent().source(t, "n1", "n2"), Options{Invariant: func(v uint64, s map[string][]byte) error {
		seen = s
		return inv(v, s)
	}})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	t.Log(rep)
	if got := rep.Verified(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("verified %v, want [1]", got)
	}
	if len(rep.Failed) != 1 || rep.Failed[0] != 2 {
		t.Fatalf("failed %v, want [2]", rep.Failed)
	}
	want := map[string]string{"a": "30", "b": "70"}
	if len(seen) != len(want) {
		t.Fatalf("state at cut 1: %q, want %q", seen, want)
	}
	for k, v := range want {
		if string(seen[k]) != v {
			t.Fatalf("state at cut 1: %q, want %q", seen, want)
		}
	}
	c := rep.Cuts[0]
	// T1 and T2 are included, T3 is not; the abort record is not checked.
	if c.TxnsChecked != 3 || c.Included != 2 {
		t.Fatalf("txns checked %d, included %d; want 3, 2", c.TxnsChecked, c.Included)
	}
	for _, p := range c.Partitions {
		if len(p.Replicas) != 2 {
			t.Fatalf("partition %d rebuilt from %v, want both replicas", p.Partition, p.Replicas)
		}
	}
}

// kinds returns the distinct kinds of the violations in err.
func kinds(err error) map[error]int {
	out := map[error]int{}
	for _, k := range []error{ErrTorn, ErrStamp, ErrCutFinish, ErrReplicas, ErrInvariant, ErrLog} {
		var n int
		var walk func(error)
		walk = func(e error) {
			if j, ok := e.(interface{ Unwrap() []error }); ok {
				for _, x := range j.Unwrap() {
					walk(x)
				}
				return
			}
			if errors.Is(e, k) {
				n++
			}
		}
		walk(err)
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

// TestVerifyTornCut: in partition 2, T2's Finish carries stamp 1 (not the
// decision's 0) and lands after pos, so partition 2 puts T2 after the cut
// while partition 1 puts it before: the cut holds T2 in partition 1 only.
func TestVerifyTornCut(t *testing.T) {
	c := consistent()
	c.p2 = []step{
		{0, put("b", "0")},
		{0, prepare("T1", "b", "60")},
		{0, finish("T1", true, 0)},
		{0, prepare("T2", "b", "70")},
		{1, cutStart(1)},           // 5: pos; T2 active
		{1, finish("T2", true, 1)}, // 6: classified after
		{1, cutFinish(1, 5)},       // 7
		{1, prepare("T3", "b", "80")},
		{1, finish("T3", true, 1)},
	}
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 7, FinishIndex: 10},
		{Partition: 2, Pos: 5, FinishIndex: 7},
	}})}
	// The CutFinish entry must carry the after set the state machine
	// computes; the verifier checks that too.
	c.p2[6].cmd.GetCutFinish().After = []*internalpb.CutTxn{{TxnId: []byte("T2"), Succeeded: true, Stamp: 1}}
	rep, err := Verify(c.source(t, "n1"), Options{Invariant: bankTotal(100)})
	if err == nil {
		t.Fatalf("a torn cut verified:\n%v", rep)
	}
	t.Log(err)
	got := kinds(err)
	if got[ErrTorn] != 1 || got[ErrInvariant] != 1 || len(got) != 2 {
		t.Fatalf("violations %v, want one ErrTorn and one ErrInvariant", got)
	}
	var v *Violation
	if !errors.As(err, &v) || v.Version != 1 {
		t.Fatalf("first violation %v, want one of cut 1", v)
	}
	if !strings.Contains(err.Error(), "txn "+txnName("T2")) || !strings.Contains(err.Error(), "included in partitions [1], not in [2]") {
		t.Fatalf("the torn violation does not name T2 and its partitions: %v", err)
	}
	if len(rep.Verified()) != 0 {
		t.Fatalf("verified %v, want none", rep.Verified())
	}
}

// TestVerifyStampRule: a transaction stamped at the cut's version, whose
// Finish applied before pos in both partitions, is in both states (so not
// torn) but on the wrong side of the cut for its stamp.
func TestVerifyStampRule(t *testing.T) {
	c := consistent()
	c.p1[3] = step{0, decide("T1", true, 1)}
	c.p1[4] = step{0, finish("T1", true, 1)}
	c.p2[2] = step{0, finish("T1", true, 1)}
	_, err := Verify(c.source(t, "n1"), Options{Invariant: bankTotal(100)})
	got := kinds(err)
	if got[ErrStamp] != 1 || len(got) != 1 {
		t.Fatalf("violations %v (%v), want one ErrStamp", got, err)
	}
}

func TestVerifyBadInvariant(t *testing.T) {
	rep, err := Verify(consistent().source(t, "n1"), Options{Invariant: bankTotal(99)})
	got := kinds(err)
	if got[ErrInvariant] != 1 || len(got) != 1 {
		t.Fatalf("violations %v (%v), want one ErrInvariant", got, err)
	}
	if !strings.Contains(err.Error(), "accounts sum to 100, want 99") {
		t.Fatalf("the invariant's error is not reported: %v", err)
	}
	if len(rep.Cuts) != 1 || rep.Cuts[0].OK() {
		t.Fatalf("report: %v", rep)
	}
}

// TestVerifyReplicasDisagree: n2's replica of partition 2 wrote b=1 where
// n1's wrote b=0, then both agree on the cut's position; the values
// before the cut differ.
func TestVerifyReplicasDisagree(t *testing.T) {
	c := consistent()
	src := c.source(t, "n1")
	c.p2[0] = step{0, put("b", "1")}
	c.p2[1] = step{0, put("c", "1")} // and no T1 here
	for _, r := range c.source(t, "n2") {
		if r.Group == 2 {
			src = append(src, r)
		}
	}
	_, err := Verify(src, Options{})
	got := kinds(err)
	if got[ErrReplicas] != 1 {
		t.Fatalf("violations %v (%v), want ErrReplicas", got, err)
	}
	if !strings.Contains(err.Error(), `key "c" only on n2`) {
		t.Fatalf("the difference is not named: %v", err)
	}
}

// TestVerifyOneReplica: OneReplica rebuilds one replica per partition,
// so two replicas that differ verify, and a torn cut is still found.
func TestVerifyOneReplica(t *testing.T) {
	c := consistent()
	src := c.source(t, "n1")
	c.p2[0] = step{0, put("b", "1")}
	c.p2[1] = step{0, put("c", "1")}
	for _, r := range c.source(t, "n2") {
		if r.Group == 2 {
			src = append(src, r)
		}
	}
	rep, err := Verify(src, Options{OneReplica: true})
	if err != nil {
		t.Fatalf("with one replica rebuilt: %v", err)
	}
	for _, cr := range rep.Cuts {
		for _, pr := range cr.Partitions {
			if len(pr.Replicas) != 1 {
				t.Fatalf("cut %d partition %d: rebuilt %v, want one replica", cr.Version, pr.Partition, pr.Replicas)
			}
		}
	}
	if _, err := Verify(src, Options{}); kinds(err)[ErrReplicas] != 1 {
		t.Fatalf("without OneReplica: %v, want ErrReplicas", err)
	}

	torn := consistent()
	torn.p2[1] = step{0, put("c", "1")} // T1 committed in partition 1 only
	if _, err := Verify(torn.source(t, "n1"), Options{OneReplica: true}); kinds(err)[ErrTorn] == 0 {
		t.Fatalf("a torn cut with OneReplica: %v, want ErrTorn", err)
	}
}

// TestVerifyBookkeeping: group 0 recorded a finish index whose CutFinish
// is the duplicate, not the entry that closed the cut.
func TestVerifyBookkeeping(t *testing.T) {
	c := consistent()
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 7, FinishIndex: 15},
		{Partition: 2, Pos: 6, FinishIndex: 7},
	}})}
	_, err := Verify(c.source(t, "n1"), Options{})
	if got := kinds(err); got[ErrCutFinish] != 1 || len(got) != 1 {
		t.Fatalf("violations %v (%v), want one ErrCutFinish", got, err)
	}
	// A position that is not the first entry with the cut's version.
	c = consistent()
	c.p2[4] = step{1, finish("T2", true, 0)}
	_, err = Verify(c.source(t, "n1"), Options{})
	if got := kinds(err); got[ErrCutFinish] != 1 {
		t.Fatalf("violations %v (%v), want ErrCutFinish", got, err)
	}
}

// TestVerifyFromBase rebuilds from a materialization: n2's partition 1
// starts from a partition at index 6 (T2 prepared, T1 finished inside the
// base) and holds only the entries after it.
func TestVerifyFromBase(t *testing.T) {
	c := consistent()
	src := c.source(t, "n1")
	full := entries(t, c.p1)
	const m = 6
	baseAt := func(m int) func() (*partition.Partition, error) {
		return func() (*partition.Partition, error) {
			p := partition.New(1)
			for _, e := range full[:m] {
				if len(e.Data) == 0 {
					p.SetApplied(e.GetIndex())
					continue
				}
				cmd := &internalpb.Command{}
				if err := proto.Unmarshal(e.Data, cmd); err != nil {
					return nil, err
				}
				if _, err := p.ApplyCommand(e.GetIndex(), cmd); err != nil {
					return nil, err
				}
			}
			return p, nil
		}
	}
	base := baseAt(m)
	// n2 is the most advanced replica, so its base is the reference.
	src = append(src, &Replica{Node: "n2", Group: 1, BaseIndex: m, Start: base, Entries: full[m:], Commit: uint64(len(full)) + 1})
	rep, err := Verify(src, Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	p := rep.Cuts[0].Partitions[0]
	if len(p.Replicas) != 2 || p.Replicas[0] != "n2" {
		t.Fatalf("partition 1 rebuilt from %v, want n2 (the base) first", p.Replicas)
	}
	// T1 finished inside the base in partition 1: not checked there, but
	// in partition 2; T2 and T3 are seen in both.
	if c := rep.Cuts[0]; c.TxnsChecked != 3 || c.Included != 2 {
		t.Fatalf("txns checked %d, included %d; want 3, 2", c.TxnsChecked, c.Included)
	}
	// A base at or after pos cannot give the cut: that replica is passed
	// over when another one gives it, and the cut fails when none does.
	n3 := &Replica{Node: "n3", Group: 1, BaseIndex: 8, Start: baseAt(8), Entries: full[8:], Commit: uint64(len(full)) + 5}
	withLate := append(append(Static{}, src[:len(src)-1]...), n3)
	rep, err = Verify(withLate, Options{Invariant: bankTotal(100)})
	if err != nil || rep.Skipped != 1 || rep.Cuts[0].Partitions[0].Replicas[0] != "n1" {
		t.Fatalf("a late base beside a usable replica: %v, skipped %d, replicas %v; want n1 used and n3 skipped", err, rep.Skipped, rep.Cuts[0].Partitions[0].Replicas)
	}
	// The most advanced replica truncated past the cut's CutFinish: how
	// the cut closed is read from a replica truncated less.
	n4 := &Replica{Node: "n4", Group: 1, BaseIndex: 11, Start: baseAt(11), Entries: full[11:], Commit: uint64(len(full)) + 9}
	rep, err = Verify(append(append(Static{}, src[:len(src)-1]...), n4), Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("the most advanced replica truncated past the CutFinish: %v\n%v", err, rep)
	}
	var only Static
	for _, r := range src[:len(src)-1] {
		if r.Group != 1 {
			only = append(only, r)
		}
	}
	_, err = Verify(append(only, n3), Options{})
	if got := kinds(err); got[ErrLog] == 0 {
		t.Fatalf("violations %v (%v), want ErrLog when only a base past pos is left", got, err)
	}
}

// TestVerifyKnownDecisions: a transaction a state includes, whose record
// the logs no longer show (forgotten and truncated away), is judged by a
// decision an earlier verification saw (Options.Known), and Report
// carries the decisions forward.
func TestVerifyKnownDecisions(t *testing.T) {
	c := consistent()
	c.p1[7] = step{1, nil} // T2's decision is gone from partition 1's log
	_, err := Verify(c.source(t, "n1", "n2"), Options{Invariant: bankTotal(100)})
	if got := kinds(err); got[ErrTorn] == 0 {
		t.Fatalf("violations %v (%v), want ErrTorn for a transaction without a decision", got, err)
	}
	full, err := Verify(consistent().source(t, "n1", "n2"), Options{})
	if err != nil || full.Decisions["T2"] == nil || !full.Decisions["T2"].GetCommit() {
		t.Fatalf("decisions %v (%v), want T2's commit", full.Decisions, err)
	}
	// With every log of the record partition truncated, a missing record
	// is unknown (counted), not torn.
	truncated := c.source(t, "n1", "n2")
	for _, r := range truncated {
		if r.Group == 1 {
			r.BaseIndex, r.Entries = 1, r.Entries[1:]
			r.Start = func() (*partition.Partition, error) {
				p := partition.New(1)
				p.SetApplied(1)
				return p, nil
			}
		}
	}
	rep, err := Verify(truncated, Options{Invariant: bankTotal(100)})
	if rep == nil || rep.Cuts[0].UnknownRecords == 0 || kinds(err)[ErrTorn] != 0 {
		t.Fatalf("truncated record partition: %v, unknown %v; want the missing record counted, not torn", err, rep)
	}
	rep, err = Verify(c.source(t, "n1", "n2"), Options{Invariant: bankTotal(100), Known: full.Decisions})
	if err != nil {
		t.Fatalf("with the known decisions: %v\n%v", err, rep)
	}
	if rep.Decisions["T2"] == nil {
		t.Fatal("the known decisions are not carried forward")
	}
	// After a TxnForget a late recovery may decide a transaction anew (an
	// abort no participant sees); logs truncated since the original
	// commit show only that. The first decision, known earlier, wins.
	redecided := consistent()
	redecided.p1[7] = step{1, decide("T2", false, 1)}
	_, err = Verify(redecided.source(t, "n1", "n2"), Options{})
	if got := kinds(err); got[ErrTorn] == 0 {
		t.Fatalf("violations %v (%v), want ErrTorn for an included transaction decided abort", got, err)
	}
	rep, err = Verify(redecided.source(t, "n1", "n2"), Options{Known: full.Decisions})
	if err != nil {
		t.Fatalf("with the first decision known: %v\n%v", err, rep)
	}
	if d := rep.Decisions["T2"]; d == nil || !d.GetCommit() {
		t.Fatalf("decision carried forward %v, want the first one (commit)", d)
	}
}

// TestRebuildAlone uses Rebuild without Verify, as restore will.
func TestRebuildAlone(t *testing.T) {
	c := consistent()
	r := &Replica{Node: "n1", Group: 1, Entries: entries(t, c.p1)}
	st, err := Rebuild(r, 1, &kvpb.CutPartition{Partition: 1, Pos: 7, FinishIndex: 10})
	if err != nil {
		t.Fatal(err)
	}
	if string(st.KVs["a"]) != "30" || len(st.KVs) != 1 {
		t.Fatalf("state %q, want a=30", st.KVs)
	}
	if in, ok := st.Included["T2"]; !ok || in.Index != 0 || !in.Succeeded {
		t.Fatalf("T2 included as %+v, %v; want in the before set", in, ok)
	}
	if in := st.Included["T1"]; in.Index != 5 || in.RecordPartition != 1 {
		t.Fatalf("T1 included as %+v; want by its finish at 5", in)
	}
	if _, err := Rebuild(r, 1, &kvpb.CutPartition{Partition: 1, Pos: 7, FinishIndex: 9}); !errors.Is(err, ErrLog) {
		t.Fatalf("rebuild at a wrong finish index: %v, want ErrLog", err)
	}
}

// TestRebuildPartition rebuilds a partition from a base that holds an
// older cut which never finished (a failed one) and checks what restore
// relies on: the key-values are Rebuild's, nothing of the transactions or
// of the old cuts is left, and the partition takes later cuts as a new
// one does.
func TestRebuildPartition(t *testing.T) {
	full := entries(t, []step{
		{0, nil},                       // 1
		{0, put("a", "1")},             // 2
		{0, prepare("T0", "a", "x")},   // 3: never commits
		{1, cutStart(1)},               // 4: cut 1 starts, waits for T0 and fails
		{1, put("b", "2")},             // 5: the base is here
		{1, prepare("TB", "b", "3")},   // 6
		{2, cutStart(2)},               // 7: pos of cut 2; cut 1 is overtaken
		{2, finish("T0", false, 2)},    // 8: aborted
		{2, finish("TB", true, 1)},     // 9: before cut 2
		{2, cutFinish(2, 7, "TB")},     // 10
		{2, put("c", "after the cut")}, // 11
	})
	const m = 5
	start := baseOf(full, m)
	base, err := start()
	if err != nil {
		t.Fatal(err)
	}
	if v, active := base.CutActive(); v != 1 || len(active) != 1 {
		t.Fatalf("the base runs cut %d waiting for %q; the test wants a stale cut 1", v, active)
	}
	r := &Replica{Node: "snapshot", Group: 1, BaseIndex: m, Start: start, Entries: full[m:]}
	cp := &kvpb.CutPartition{Partition: 1, Pos: 7, FinishIndex: 10}
	p, err := RebuildPartition(r, 2, cp)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Rebuild(r, 2, cp)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	p.Each(func(kv *partition.KV) bool {
		got[string(kv.Key)] = string(kv.Value)
		return true
	})
	want := map[string]string{"a": "1", "b": "3"}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(st.KVs) != len(got) {
		t.Fatalf("partition holds %q, want %q (Rebuild: %q)", got, want, st.KVs)
	}
	for k, v := range st.KVs {
		if got[k] != string(v) {
			t.Fatalf("key %q: partition %q, Rebuild %q", k, got[k], v)
		}
	}
	if p.Applied() != cp.Pos-1 {
		t.Fatalf("applied %d, want pos-1 = %d", p.Applied(), cp.Pos-1)
	}
	if _, ok := p.IntentOf("T0"); ok {
		t.Fatal("T0's intent survived")
	}
	if v, active := p.CutActive(); v != 0 || p.CutVersion() != 0 || len(active) != 0 {
		t.Fatalf("cut progress left: version %d, running %d waiting for %q", p.CutVersion(), v, active)
	}
	if op, ok := p.CutPending(); ok {
		t.Fatalf("a CutFinish to propose: %v", op)
	}
	if _, ok := p.CutResult(1); ok {
		t.Fatal("cut 1 remembered")
	}
	// The image round-trips, as a materialization does.
	var buf strings.Builder
	if err := p.Image().Encode(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := partition.Decode(1, strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	if q.Applied() != p.Applied() || q.Len() != p.Len() {
		t.Fatalf("decoded image at %d with %d keys, want %d with %d", q.Applied(), q.Len(), p.Applied(), p.Len())
	}
	// The restored cluster's log goes on at pos: a leader's empty entry,
	// then cut 3 starts, and, nothing being active, finishes right there.
	q.SetApplied(7)
	if _, err := q.ApplyCommand(8, withVersion(cutStart(3), 3)); err != nil {
		t.Fatal(err)
	}
	if op, ok := q.CutPending(); ok {
		t.Fatalf("after CutStart(3): pending %v; want none (nothing active)", op)
	}
	if f, ok := q.CutResult(3); !ok || f.Index != 8 || f.Op.GetPos() != 8 {
		t.Fatalf("cut 3 result %v, %v; want closed at its position 8", f, ok)
	}
	// A wrong finish index is still refused.
	if _, err := RebuildPartition(r, 2, &kvpb.CutPartition{Partition: 1, Pos: 7, FinishIndex: 9}); !errors.Is(err, ErrLog) {
		t.Fatalf("rebuild at a wrong finish index: %v, want ErrLog", err)
	}
}

// baseOf returns a replica's Start: partition 1 with the first m
// entries of full applied, as a materialization at m would hold it.
func baseOf(full []*raftpb.Entry, m int) func() (*partition.Partition, error) {
	return func() (*partition.Partition, error) {
		p := partition.New(1)
		for _, e := range full[:m] {
			cmd, ok, err := decodeForTest(e)
			if err != nil {
				return nil, err
			}
			if !ok {
				p.SetApplied(e.GetIndex())
				continue
			}
			if _, err := p.ApplyCommand(e.GetIndex(), cmd); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
}

func decodeForTest(e *raftpb.Entry) (*internalpb.Command, bool, error) {
	if len(e.GetData()) == 0 {
		return nil, false, nil
	}
	cmd := &internalpb.Command{}
	return cmd, true, proto.Unmarshal(e.GetData(), cmd)
}

func withVersion(cmd *internalpb.Command, v uint64) *internalpb.Command {
	cmd.CutVersion = v
	return cmd
}

func forget(ids ...string) *internalpb.Command {
	op := &internalpb.TxnForgetOp{}
	for _, id := range ids {
		op.TxnIds = append(op.TxnIds, []byte(id))
	}
	return &internalpb.Command{Op: &internalpb.Command_TxnForget{TxnForget: op}}
}

// TestVerifyForgottenRecords: the coordinator has the records of T1-T3
// forgotten once every participant finished, and a late recovery decides
// T1 anew (abort). The verifier still judges each transaction by the
// decision its participants used, so the cut checks as it does with the
// records kept.
func TestVerifyForgottenRecords(t *testing.T) {
	c := consistent()
	c.p1 = append(c.p1,
		step{2, forget("T1", "T2", "T3")},
		step{2, decide("T1", false, 2)},
	)
	rep, err := Verify(c.source(t, "n1", "n2"), Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if got := rep.Verified(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("verified %v, want [1]", got)
	}
	if cr := rep.Cuts[0]; cr.TxnsChecked != 3 || cr.Included != 2 {
		t.Fatalf("txns checked %d, included %d; want 3, 2 as with the records kept", cr.TxnsChecked, cr.Included)
	}
}

// TestVerifyRecordOnALessTruncatedReplica: partition 1's most advanced
// replica (n2) starts from a base taken after the records of T1-T3 were
// forgotten, so its history knows none of them; the verifier finds them
// in the log of a replica truncated less (n1), and the cut checks as it
// does with every record in the reference log.
func TestVerifyRecordOnALessTruncatedReplica(t *testing.T) {
	c := consistent()
	c.p1 = append(c.p1,
		step{2, forget("T1", "T2", "T3")}, // 18: the base is here
		step{2, nil},                      // 19
	)
	full := entries(t, c.p1)
	const m = 18
	start := baseOf(full, m)
	src := append(c.source(t, "n1"), &Replica{Node: "n2", Group: 1, BaseIndex: m, Start: start, Entries: full[m:], Commit: uint64(len(full)) + 1})
	rep, err := Verify(src, Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if got := rep.Verified(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("verified %v, want [1]", got)
	}
	cr := rep.Cuts[0]
	if cr.Included != 2 || cr.UnknownRecords != 0 {
		t.Fatalf("included %d, unknown records %d; want T1 and T2 included, judged by n1's records", cr.Included, cr.UnknownRecords)
	}
	if p := cr.Partitions[0]; len(p.Replicas) != 1 || p.Replicas[0] != "n1" {
		t.Fatalf("partition 1 rebuilt from %v, want n1 alone (n2's base is past the cut)", p.Replicas)
	}
	for _, id := range []string{"T1", "T2"} {
		if d := rep.Decisions[id]; d == nil || !d.GetCommit() {
			t.Errorf("decision of %s %v, want its commit", id, d)
		}
	}
}

// TestVerifyDuplicateFinishAfterBase: T1 finished in partition 1 inside
// n2's base, and a second Finish of T1 (a coordinator's and a recovery's,
// both applied) lies after the base. That entry tells n2 nothing about
// whether its state includes T1, so n2 agrees with n1, which replayed
// the first Finish: no "included only on n1" (a false positive the fault
// harness met, seed 2939756093294894137).
func TestVerifyDuplicateFinishAfterBase(t *testing.T) {
	c := consistent()
	c.p1 = append(c.p1, step{2, finish("T1", true, 0)}) // 18: the second Finish
	full := entries(t, c.p1)
	const m = 6 // after T1's first Finish (5)
	start := baseOf(full, m)
	src := append(c.source(t, "n1"), &Replica{Node: "n2", Group: 1, BaseIndex: m, Start: start, Entries: full[m:], Commit: uint64(len(full)) + 1})
	rep, err := Verify(src, Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if p := rep.Cuts[0].Partitions[0]; len(p.Replicas) != 2 {
		t.Fatalf("partition 1 rebuilt from %v, want both replicas compared", p.Replicas)
	}
}

// TestVerifyLatePrepareAfterBase: a late copy of T1's prepare (a leader
// change re-proposed it) applies in partition 2 after T1's Finish, and is
// refused there as finished before. A replica whose base lies between the
// Finish and the copy includes T1 through its base; the copy after the
// base must not make T1 "known but not included" there, which would read
// as two replicas disagreeing at the cut (a chaos round reported it).
func TestVerifyLatePrepareAfterBase(t *testing.T) {
	c := consistent()
	c.p2 = append(c.p2, step{1, prepare("T1", "b", "60")}) // 10: the late copy
	full := entries(t, c.p2)
	const m = 3 // after T1's Finish (3)
	src := append(c.source(t, "n1"), &Replica{Node: "n2", Group: 2, BaseIndex: m, Start: baseOf(full, m), Entries: full[m:], Commit: uint64(len(full))})
	rep, err := Verify(src, Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if p := rep.Cuts[0].Partitions[1]; p.Partition != 2 || len(p.Replicas) != 2 {
		t.Fatalf("partition 2 report %+v, want both replicas compared", p)
	}
}

// TestVerifyCutClosedAtPos: partition 2 had nothing active at cut 1's
// position, so the cut closed there (rule 6) with no CutFinish entry and
// group 0 recorded the position as the finish index: it verifies. The
// same record for partition 1, where T2 was active at pos, contradicts
// its state machine.
func TestVerifyCutClosedAtPos(t *testing.T) {
	c := consistent()
	c.p2 = append(c.p2[:6:6], c.p2[7:]...) // no CutFinish at 7
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 7, FinishIndex: 10, Before: 1},
		{Partition: 2, Pos: 6, FinishIndex: 6},
	}})}
	rep, err := Verify(c.source(t, "n1", "n2"), Options{Invariant: bankTotal(100)})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if got := rep.Verified(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("verified %v, want [1]", got)
	}
	if p := rep.Cuts[0].Partitions[1]; p.Partition != 2 || p.FinishIndex != 6 || len(p.Replicas) != 2 {
		t.Fatalf("partition 2 report %+v", p)
	}

	// A replica of partition 2 cut off from its group holds, past its
	// commit index, an entry at pos that the group replaced (version 0,
	// not the CutStart): it is no holder, and the cut still verifies
	// from the others.
	diverged := append(slices.Clone(c.p2[:5]), step{0, put("b", "stale")})
	src := c.source(t, "n1", "n2")
	src = append(src, &Replica{Node: "n3", Group: 2, Entries: entries(t, diverged), Commit: 5})
	if rep, err := Verify(src, Options{Invariant: bankTotal(100)}); err != nil {
		t.Fatalf("a replica with an uncommitted entry at pos: %v\n%v", err, rep)
	}

	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 7, FinishIndex: 7},
		{Partition: 2, Pos: 6, FinishIndex: 6},
	}})}
	_, err = Verify(c.source(t, "n1"), Options{Invariant: bankTotal(100)})
	if got := kinds(err); got[ErrCutFinish] == 0 {
		t.Fatalf("partition 1 recorded closed at its position while T2 was active: %v, want ErrCutFinish", err)
	}
}

// Parallel commits (DESIGN.md, "Transactions"): the record partition's
// prepare lists the participants and writes a STAGING record, its
// decision entry also finishes its own intent, and the other
// participants finish in batches.

func prepareRec(id, key, value string) *internalpb.Command {
	cmd := prepare(id, key, value)
	cmd.GetTxnPrepare().Participants = []uint64{1, 2}
	return cmd
}

func decideFinish(id string, commit bool, stamp uint64) *internalpb.Command {
	cmd := decide(id, commit, stamp)
	cmd.GetTxnDecide().Finish = true
	return cmd
}

func finishes(ops ...*internalpb.TxnFinishOp) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{Finishes: ops}}}
}

func finishOf(id string, commit bool, stamp uint64) *internalpb.TxnFinishOp {
	return finish(id, commit, stamp).GetTxnFinish()
}

// parallel is consistent() written with parallel commits' entries:
//
//   - T1 (a=40, b=60) commits before the cut: partition 1 by its
//     decision entry, partition 2 in a batch with an abort of TZ, which
//     it never prepared;
//   - T2 (a=30, b=70) finishes before pos in partition 2's batch and is
//     active at pos in partition 1, whose decision entry finishes it
//     after pos: the before set;
//   - T3 (a=20, b=80) and T4 (d, c) are prepared after pos (stamp 1) and
//     finish in one batch in partition 2;
//   - T9 is aborted by a finish in partition 1 (its record partition),
//     which decides its STAGING record; T8 stays STAGING (undecided).
//
// At cut 1: a=30, b=70.
func parallel() cluster {
	return cluster{
		p1: []step{
			{0, nil},                         // 1
			{0, put("a", "100")},             // 2
			{0, prepareRec("T1", "a", "40")}, // 3: STAGING
			{0, decideFinish("T1", true, 0)}, // 4: included before pos
			{0, prepareRec("T2", "a", "30")}, // 5
			{1, cutStart(1)},                 // 6: pos; T2 is active
			{1, decideFinish("T2", true, 0)}, // 7: classified before
			{1, cutFinish(1, 6, "T2")},       // 8
			{1, prepareRec("T3", "a", "20")}, // 9
			{1, prepareRec("T4", "d", "d4")}, // 10
			{1, decideFinish("T3", true, 1)}, // 11
			{1, decideFinish("T4", true, 1)}, // 12
			{1, prepareRec("T9", "x", "x9")}, // 13
			{1, finish("T9", false, 0)},      // 14: decides T9's record: abort
			{1, prepareRec("T8", "y", "y8")}, // 15: STAGING to the end
			{2, cutStart(2)},                 // 16: the failed cut's pos
		},
		p2: []step{
			{0, put("b", "0")},            // 1
			{0, prepare("T1", "b", "60")}, // 2
			{0, finishes(finishOf("T1", true, 0), finishOf("TZ", false, 0))}, // 3
			{0, prepare("T2", "b", "70")},                                    // 4
			{0, finishes(finishOf("T2", true, 0))},                           // 5: included before pos
			{1, cutStart(1)},                                                 // 6: pos
			{1, cutFinish(1, 6)},                                             // 7
			{1, prepare("T3", "b", "80")},                                    // 8
			{1, prepare("T4", "c", "c4")},                                    // 9
			{1, finishes(finishOf("T3", true, 1), finishOf("T4", true, 1))},  // 10
		},
		g0: []step{
			{0, nil},
			{0, allocate()},
			{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
				{Partition: 1, Pos: 6, FinishIndex: 8, Before: 1},
				{Partition: 2, Pos: 6, FinishIndex: 7},
			}})},
			{1, allocate()},
			{1, record(&kvpb.CutInfo{Version: 2, State: kvpb.CutState_CUT_STATE_FAILED, Error: "timeout"})},
		},
	}
}

func TestVerifyParallelCommits(t *testing.T) {
	var seen map[string][]byte
	inv := bankTotal(100)
	rep, err := Verify(parallel().source(t, "n1", "n2"), Options{Invariant: func(v uint64, s map[string][]byte) error {
		seen = s
		return inv(v, s)
	}})
	if err != nil {
		t.Fatalf("%v\n%v", err, rep)
	}
	if got := rep.Verified(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("verified %v, want [1]", got)
	}
	if fmt.Sprint(seen) != fmt.Sprint(map[string][]byte{"a": []byte("30"), "b": []byte("70")}) {
		t.Fatalf("state at cut 1: %q, want a=30 b=70", seen)
	}
	// T1 and T2 are in, T3 and T4 out: each checked in both partitions.
	if c := rep.Cuts[0]; c.TxnsChecked != 4 || c.Included != 2 {
		t.Fatalf("txns checked %d, included %d; want 4, 2", c.TxnsChecked, c.Included)
	}
	for _, id := range []string{"T1", "T2", "T3", "T4"} {
		if d := rep.Decisions[id]; d == nil || !d.GetCommit() || d.GetStaging() {
			t.Errorf("decision of %s: %v, want its commit", id, d)
		}
	}
	if d := rep.Decisions["T9"]; d == nil || d.GetCommit() || d.GetStaging() {
		t.Errorf("decision of T9: %v, want the abort its finish recorded", d)
	}
	for _, id := range []string{"T8", "TZ"} {
		if d, ok := rep.Decisions[id]; ok {
			t.Errorf("decision of %s: %v, want none (STAGING, or no record)", id, d)
		}
	}

	// How each partition included them.
	c := parallel()
	st, err := Rebuild(&Replica{Node: "n1", Group: 1, Entries: entries(t, c.p1)}, 1, &kvpb.CutPartition{Partition: 1, Pos: 6, FinishIndex: 8})
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := st.Included["T1"]; !ok || in.Index != 4 || in.RecordPartition != 1 || !in.Succeeded {
		t.Errorf("partition 1: T1 included as %+v, %v; want by its decision entry at 4", in, ok)
	}
	if in, ok := st.Included["T2"]; !ok || in.Index != 0 {
		t.Errorf("partition 1: T2 included as %+v, %v; want in the before set", in, ok)
	}
	st, err = Rebuild(&Replica{Node: "n1", Group: 2, Entries: entries(t, c.p2)}, 1, &kvpb.CutPartition{Partition: 2, Pos: 6, FinishIndex: 7})
	if err != nil {
		t.Fatal(err)
	}
	if in := st.Included["T1"]; in.Index != 3 || len(st.Included) != 2 || st.Included["T2"].Index != 5 {
		t.Errorf("partition 2: included %+v; want T1 by the batch at 3, T2 by the one at 5", st.Included)
	}

	// A STAGING record passed in Known is no decision: it does not win
	// over the commit the logs show.
	staging := &internalpb.TxnDecideOp{TxnId: []byte("T2"), Staging: true, Participants: []uint64{1, 2}}
	rep, err = Verify(c.source(t, "n1"), Options{Known: map[string]*internalpb.TxnDecideOp{"T2": staging}})
	if err != nil {
		t.Fatalf("with a STAGING record known: %v\n%v", err, rep)
	}
	if d := rep.Decisions["T2"]; d == nil || !d.GetCommit() {
		t.Fatalf("decision of T2 %v, want the commit, not the STAGING record", d)
	}

	// From a base holding T2's STAGING record (partition 1 at 5): its
	// decision comes from the entries after it.
	full := entries(t, c.p1)
	src := append(c.source(t, "n1"), &Replica{Node: "n2", Group: 1, BaseIndex: 5, Start: baseOf(full, 5), Entries: full[5:], Commit: uint64(len(full)) + 1})
	if rep, err := Verify(src, Options{Invariant: bankTotal(100)}); err != nil {
		t.Fatalf("from a base with a STAGING record: %v\n%v", err, rep)
	}
}

// TestVerifyParallelCommitsTorn: partition 2's batch before pos misses
// T2's finish, which comes after pos stamped 1, while partition 1 holds
// T2 in its before set: the cut holds T2 in partition 1 only.
func TestVerifyParallelCommitsTorn(t *testing.T) {
	c := parallel()
	c.p2 = []step{
		{0, put("b", "0")},
		{0, prepare("T1", "b", "60")},
		{0, finishes(finishOf("T1", true, 0), finishOf("TZ", false, 0))},
		{0, prepare("T2", "b", "70")},
		{0, finishes(finishOf("TY", false, 0))}, // 5: T2's finish is missing
		{1, cutStart(1)},                        // 6: pos; T2 active
		{1, finishes(finishOf("T2", true, 1))},  // 7: classified after
		{1, cutFinish(1, 6)},                    // 8
		{1, prepare("T3", "b", "80")},
		{1, prepare("T4", "c", "c4")},
		{1, finishes(finishOf("T3", true, 1), finishOf("T4", true, 1))},
	}
	c.p2[7].cmd.GetCutFinish().After = []*internalpb.CutTxn{{TxnId: []byte("T2"), Succeeded: true, Stamp: 1}}
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 6, FinishIndex: 8, Before: 1},
		{Partition: 2, Pos: 6, FinishIndex: 8},
	}})}
	_, err := Verify(c.source(t, "n1"), Options{Invariant: bankTotal(100)})
	got := kinds(err)
	if got[ErrTorn] != 1 || got[ErrInvariant] != 1 || len(got) != 2 {
		t.Fatalf("violations %v (%v), want one ErrTorn and one ErrInvariant", got, err)
	}
	if !strings.Contains(err.Error(), "txn "+txnName("T2")) || !strings.Contains(err.Error(), "included in partitions [1], not in [2]") {
		t.Fatalf("the torn violation does not name T2 and its partitions: %v", err)
	}
}

// TestVerifyParallelCommitsRecordedDecision: a recovery recorded T1's
// abort first, so the coordinator's commit with finish finishes
// partition 1's intent with the recorded abort (nothing written there),
// while partition 2's batch committed T1: partition 2 holds a
// transaction decided abort, partition 1 does not.
func TestVerifyParallelCommitsRecordedDecision(t *testing.T) {
	c := parallel()
	copy(c.p1, []step{
		{0, put("a", "100")},             // 1
		{0, prepareRec("T1", "a", "40")}, // 2
		{0, decide("T1", false, 0)},      // 3: a recovery's abort, recorded first
		{0, decideFinish("T1", true, 0)}, // 4: finishes T1 with the abort
	})
	rep, err := Verify(c.source(t, "n1"), Options{})
	got := kinds(err)
	if got[ErrTorn] != 1 || len(got) != 1 {
		t.Fatalf("violations %v (%v), want one ErrTorn", got, err)
	}
	var v *Violation
	if !errors.As(err, &v) || v.Partition != 2 || v.Txn != txnName("T1") || !strings.Contains(v.Detail, "decided abort in partition 1") {
		t.Fatalf("violation %v, want T1 included in partition 2 though decided abort", v)
	}
	if d := rep.Decisions["T1"]; d == nil || d.GetCommit() {
		t.Fatalf("decision of T1 %v, want the abort recorded first", d)
	}
}

// TestVerifyParallelCommitsStagingIsNoDecision: partition 2 committed T5
// before pos while T5's record in partition 1 is still STAGING (its
// prepare there came after the cut and nothing decided it): partition 2
// holds a transaction without a decision, which a STAGING record is not.
func TestVerifyParallelCommitsStagingIsNoDecision(t *testing.T) {
	c := parallel()
	c.p1 = append(c.p1, step{2, prepareRec("T5", "f", "f5")}) // 17: STAGING to the end
	c.p2 = []step{
		{0, put("b", "0")},
		{0, prepare("T1", "b", "60")},
		{0, prepare("T5", "e", "e5")},
		{0, finishes(finishOf("T1", true, 0), finishOf("T5", true, 0))}, // 4
		{0, prepare("T2", "b", "70")},
		{0, finishes(finishOf("T2", true, 0))},
		{1, cutStart(1)},     // 7: pos
		{1, cutFinish(1, 7)}, // 8
	}
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 6, FinishIndex: 8, Before: 1},
		{Partition: 2, Pos: 7, FinishIndex: 8},
	}})}
	rep, err := Verify(c.source(t, "n1"), Options{Invariant: bankTotal(100)})
	got := kinds(err)
	if got[ErrTorn] != 1 || len(got) != 1 {
		t.Fatalf("violations %v (%v), want one ErrTorn", got, err)
	}
	var v *Violation
	if !errors.As(err, &v) || v.Partition != 2 || v.Txn != txnName("T5") || !strings.Contains(v.Detail, "without a decision in record partition 1") {
		t.Fatalf("violation %v, want T5 included in partition 2 without a decision", v)
	}
	if d, ok := rep.Decisions["T5"]; ok {
		t.Fatalf("decision of T5: %v, want none (STAGING)", d)
	}
}

// TestRebuildBatchFinishes: a finish in a batch takes effect as the
// state machine applies it: one naming another prepare time is another
// transaction's and applies nothing, and of two finishes of an id in a
// batch only the first ends the intent.
func TestRebuildBatchFinishes(t *testing.T) {
	for _, c := range []struct {
		name  string
		batch *internalpb.Command
		b     string // T2 prepares once T1's lock is gone
	}{
		{"another prepare time", finishes(&internalpb.TxnFinishOp{TxnId: []byte("T1"), Commit: true, Succeeded: true, PreparedUnixMs: 99}), "0"},
		{"abort, then commit", finishes(finishOf("T1", false, 0), finishOf("T1", true, 0)), "70"},
	} {
		cl := parallel()
		cl.p2[2] = step{0, c.batch}
		st, err := Rebuild(&Replica{Node: "n1", Group: 2, Entries: entries(t, cl.p2)}, 1, &kvpb.CutPartition{Partition: 2, Pos: 6, FinishIndex: 7})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if in, ok := st.Included["T1"]; ok {
			t.Errorf("%s: T1 included as %+v, want not", c.name, in)
		}
		if string(st.KVs["b"]) != c.b {
			t.Errorf("%s: b = %q, want %q", c.name, st.KVs["b"], c.b)
		}
	}
}

// TestVerifyNotWhole: copies of live logs taken just after a cut
// completed may not reach the entry that closed it (the replicas had not
// persisted their commit index that far). That is ErrNotWhole — ask again
// with newer copies — and only that; a replica whose committed log holds
// another entry at the finish index is still ErrLog.
func TestVerifyNotWhole(t *testing.T) {
	src := consistent().source(t, "n1", "n2")
	for _, r := range src {
		if r.Group == 1 {
			r.Commit = 9 // the cut closed at 10 in partition 1
		}
	}
	rep, err := Verify(src, Options{})
	if len(rep.Cuts) != 1 || !rep.Cuts[0].NotWhole() {
		t.Fatalf("partition 1's logs committed up to 9, cut closed at 10: %v (%v), want the cut not whole yet", rep, err)
	}
	// A committed entry at the finish index that is not CutFinish(1).
	c := consistent()
	c.g0[2] = step{0, record(&kvpb.CutInfo{Version: 1, State: kvpb.CutState_CUT_STATE_COMPLETED, Partitions: []*kvpb.CutPartition{
		{Partition: 1, Pos: 7, FinishIndex: 9, Before: 1},
		{Partition: 2, Pos: 6, FinishIndex: 7},
	}})}
	rep, err = Verify(c.source(t, "n1"), Options{})
	if len(rep.Cuts) != 1 || rep.Cuts[0].NotWhole() || kinds(err)[ErrLog] == 0 {
		t.Fatalf("finish index 9 holds another entry: %v (%v), want ErrLog", rep, err)
	}
}
