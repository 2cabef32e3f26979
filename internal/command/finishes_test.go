package command_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/internal/command"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func finishOp(id string, commit bool, stamp uint64) *internalpb.TxnFinishOp {
	return &internalpb.TxnFinishOp{TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp}
}

func decideCmd(id string, commit, finish bool, stamp uint64, at int64) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: &internalpb.TxnDecideOp{
		TxnId: []byte(id), Commit: commit, Succeeded: commit, Stamp: stamp, Participants: []uint64{1, 2}, Finish: finish, PreparedUnixMs: at,
	}}}
}

func records(recs ...*internalpb.TxnDecideOp) func(string) (*internalpb.TxnDecideOp, bool) {
	return func(id string) (*internalpb.TxnDecideOp, bool) {
		for _, r := range recs {
			if string(r.GetTxnId()) == id {
				return r, true
			}
		}
		return nil, false
	}
}

func TestFinishes(t *testing.T) {
	staging := &internalpb.TxnDecideOp{TxnId: []byte("T"), Staging: true, Participants: []uint64{1, 2}}
	aborted := &internalpb.TxnDecideOp{TxnId: []byte("T"), Stamp: 3, Participants: []uint64{1, 2}}
	for _, c := range []struct {
		name string
		cmd  *internalpb.Command
		rec  func(string) (*internalpb.TxnDecideOp, bool)
		want []*internalpb.TxnFinishOp
	}{
		{"a finish", &internalpb.Command{Op: &internalpb.Command_TxnFinish{TxnFinish: finishOp("T", true, 2)}}, nil,
			[]*internalpb.TxnFinishOp{finishOp("T", true, 2)}},
		{"a batch, in order", &internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{
			Finishes: []*internalpb.TxnFinishOp{finishOp("T", true, 2), finishOp("U", false, 0), finishOp("T", false, 0)}}}}, nil,
			[]*internalpb.TxnFinishOp{finishOp("T", true, 2), finishOp("U", false, 0), finishOp("T", false, 0)}},
		{"an empty batch", &internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{}}}, nil, nil},
		{"a decide without finish (before parallel commits)", decideCmd("T", true, false, 2, 7), nil, nil},
		{"a decide with finish, no record", decideCmd("T", true, true, 2, 7), records(),
			[]*internalpb.TxnFinishOp{{TxnId: []byte("T"), Commit: true, Succeeded: true, Stamp: 2, PreparedUnixMs: 7}}},
		{"a decide with finish, nil rec", decideCmd("T", true, true, 2, 7), nil,
			[]*internalpb.TxnFinishOp{{TxnId: []byte("T"), Commit: true, Succeeded: true, Stamp: 2, PreparedUnixMs: 7}}},
		{"a decide with finish over a STAGING record: the op decides", decideCmd("T", true, true, 2, 7), records(staging),
			[]*internalpb.TxnFinishOp{{TxnId: []byte("T"), Commit: true, Succeeded: true, Stamp: 2, PreparedUnixMs: 7}}},
		{"a decide with finish over a decided record: the recorded decision", decideCmd("T", true, true, 2, 7), records(aborted),
			[]*internalpb.TxnFinishOp{{TxnId: []byte("T"), Stamp: 3, PreparedUnixMs: 7}}},
		{"another record", decideCmd("T", true, true, 2, 7), records(&internalpb.TxnDecideOp{TxnId: []byte("U")}),
			[]*internalpb.TxnFinishOp{{TxnId: []byte("T"), Commit: true, Succeeded: true, Stamp: 2, PreparedUnixMs: 7}}},
		{"a prepare", &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: &internalpb.TxnPrepareOp{TxnId: []byte("T")}}}, records(aborted), nil},
		{"a status", &internalpb.Command{Op: &internalpb.Command_TxnStatus{TxnStatus: &internalpb.TxnStatusOp{TxnId: []byte("T")}}}, records(aborted), nil},
		{"no op", &internalpb.Command{}, nil, nil},
		{"nil", nil, nil, nil},
	} {
		got := command.Finishes(c.cmd, c.rec)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if !proto.Equal(got[i], c.want[i]) {
				t.Errorf("%s: finish %d is %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
	if command.IsDecision(nil) || command.IsDecision(staging) || !command.IsDecision(aborted) {
		t.Error("IsDecision: want only a record that is not STAGING")
	}
}

// TestFinishesAsThePartitionApplies drives a record partition: the
// finish Finishes computes from the record before each entry is the one
// the state machine applies.
func TestFinishesAsThePartitionApplies(t *testing.T) {
	p := partition.New(1)
	index := uint64(0)
	apply := func(cmd *internalpb.Command) []*internalpb.TxnFinishOp {
		t.Helper()
		fs := command.Finishes(cmd, p.Record)
		index++
		if _, err := p.ApplyCommand(index, cmd); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	prep := func(id, key string, at int64) *internalpb.Command {
		return &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: &internalpb.TxnPrepareOp{
			TxnId: []byte(id), RecordPartition: 1, Participants: []uint64{1, 2}, PreparedUnixMs: at,
			Share: &internalpb.TxnShare{Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(key), Value: []byte(id)}}}}},
		}}}
	}
	// T commits by its decision entry.
	apply(prep("T", "t", 5))
	if r, ok := p.Record("T"); !ok || command.IsDecision(r) {
		t.Fatalf("after the prepare: record %v, want STAGING", r)
	}
	if fs := apply(decideCmd("T", true, true, 4, 5)); len(fs) != 1 || !fs[0].GetCommit() || fs[0].GetStamp() != 4 {
		t.Fatalf("T's finishes %v, want its commit", fs)
	}
	if _, ok := p.IntentOf("T"); ok || p.Len() != 1 {
		t.Fatalf("T's intent left or not written (%d keys)", p.Len())
	}
	// U was decided abort first (a recovery); the coordinator's commit
	// with finish gets the recorded abort.
	apply(prep("U", "u", 6))
	apply(decideCmd("U", false, false, 0, 0))
	fs := apply(decideCmd("U", true, true, 9, 6))
	if len(fs) != 1 || fs[0].GetCommit() {
		t.Fatalf("U's finishes %v, want the recorded abort", fs)
	}
	if _, ok := p.IntentOf("U"); ok || p.Len() != 1 {
		t.Fatalf("U's intent left or written (%d keys)", p.Len())
	}
	// V is aborted by a finish: its STAGING record takes that decision.
	apply(prep("V", "v", 7))
	apply(&internalpb.Command{Op: &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{
		Finishes: []*internalpb.TxnFinishOp{finishOp("V", false, 0)}}}})
	if r, ok := p.Record("V"); !ok || !command.IsDecision(r) || r.GetCommit() {
		t.Fatalf("V's record %v, want decided abort", r)
	}
}
