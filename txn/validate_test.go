package txn

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// keyIn returns a key starting with prefix that partition p of n holds,
// the i-th such key.
func keyIn(p uint64, n uint32, prefix string, i int) string {
	for j := 0; ; j++ {
		k := fmt.Sprintf("%s%d", prefix, j)
		if keyspace.PartitionOf([]byte(k), n) == p {
			if i == 0 {
				return k
			}
			i--
		}
	}
}

func checkErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("%s = %v, want nil", what, err)
	case want != "" && err == nil:
		t.Fatalf("%s = nil, want an error with %q", what, want)
	case want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want)):
		t.Fatalf("%s = %v, want ErrInvalid with %q", what, err, want)
	}
}

func testID(b byte) []byte { return bytes.Repeat([]byte{b}, IDSize) }

// Partition 2 of 4 in the share tests; k(i) are its keys, other a key
// of partition 3.
const (
	shareP     = 2
	shareParts = 4
)

func k(i int) string { return keyIn(shareP, shareParts, "k", i) }

func validShare() *internalpb.TxnShare {
	return &internalpb.TxnShare{
		Compares:     []*kvpb.Compare{cmpVersion(k(0), kvpb.Compare_GREATER, 1), cmpValue(k(1), kvpb.Compare_NOT_EQUAL, "x")},
		Success:      []*kvpb.RequestOp{opGet(k(0)), opScan("a", "b", 0), opPut(k(2), "v")},
		SuccessIndex: []uint32{0, 3, 7},
		Failure:      []*kvpb.RequestOp{opDel(k(2))},
		FailureIndex: []uint32{1},
	}
}

func TestValidateShare(t *testing.T) {
	other := keyIn(3, shareParts, "o", 0)
	with := func(f func(s *internalpb.TxnShare)) *internalpb.TxnShare {
		s := validShare()
		f(s)
		return s
	}
	n := func(count int, mk func(i int) *kvpb.RequestOp) ([]*kvpb.RequestOp, []uint32) {
		ops, idx := make([]*kvpb.RequestOp, count), make([]uint32, count)
		for i := range ops {
			ops[i], idx[i] = mk(i), uint32(i)
		}
		return ops, idx
	}
	scan := func(op *kvpb.RequestOp) *internalpb.TxnShare {
		return &internalpb.TxnShare{Success: []*kvpb.RequestOp{op}, SuccessIndex: []uint32{0}}
	}
	long := keyIn(shareP, shareParts, "long", 0)
	eq := kvpb.Compare_EQUAL
	tests := []struct {
		name       string
		p          uint64
		partitions uint32
		raw        bool // p and partitions as they are, not defaulted
		share      *internalpb.TxnShare
		limits     Limits
		wantErr    string
	}{
		{name: "valid", share: validShare()},
		{name: "scans only, on any partition", p: 4, share: &internalpb.TxnShare{
			Success: []*kvpb.RequestOp{opScan("a", "b", 0)}, SuccessIndex: []uint32{2},
			Failure: []*kvpb.RequestOp{opScan(other, "", 3)}, FailureIndex: []uint32{0},
		}},
		{name: "compares only", share: &internalpb.TxnShare{Compares: []*kvpb.Compare{cmpVersion(k(0), eq, 0)}}},

		// Where the share was sent.
		{name: "partition 0", p: 0, partitions: shareParts, raw: true, share: validShare(), wantErr: "partition 0 not in 1..4"},
		{name: "partition past the count", p: 5, share: validShare(), wantErr: "partition 5 not in 1..4"},
		{name: "no partitions", p: 1, partitions: 0, raw: true, share: validShare(), wantErr: "partition 1 not in 1..0"},
		{name: "compare key of another partition", share: with(func(s *internalpb.TxnShare) { s.Compares[1].Key = []byte(other) }),
			wantErr: fmt.Sprintf("share: compare 1: key %q belongs to partition 3, not 2", other)},
		{name: "get key of another partition", share: with(func(s *internalpb.TxnShare) { s.Success[0] = opGet(other) }),
			wantErr: fmt.Sprintf("share: success op 0: key %q belongs to partition 3, not 2", other)},
		{name: "put key of another partition", share: with(func(s *internalpb.TxnShare) { s.Success[2] = opPut(other, "v") }),
			wantErr: "share: success op 2: key"},
		{name: "delete key of another partition", share: with(func(s *internalpb.TxnShare) { s.Failure[0] = opDel(other) }),
			wantErr: "share: failure op 0: key"},

		// Empty, nil and oversized.
		{name: "empty share", share: &internalpb.TxnShare{}, wantErr: "share: empty"},
		{name: "nil share", share: nil, wantErr: "share: empty"},
		{name: "empty compare key", share: with(func(s *internalpb.TxnShare) { s.Compares[0].Key = nil }), wantErr: "share: compare 0: empty key"},
		{name: "empty put key", share: with(func(s *internalpb.TxnShare) { s.Success[2] = opPut("", "v") }), wantErr: "share: success op 2: empty key"},
		{name: "empty delete key", share: with(func(s *internalpb.TxnShare) { s.Failure[0] = opDel("") }), wantErr: "share: failure op 0: empty key"},
		{name: "oversized key", limits: Limits{MaxKeySize: 3}, share: &internalpb.TxnShare{Compares: []*kvpb.Compare{cmpVersion(long, eq, 0)}},
			wantErr: fmt.Sprintf("share: compare 0: key of %d bytes exceeds the limit of 3", len(long))},
		{name: "oversized value", limits: Limits{MaxValueSize: 1}, share: with(func(s *internalpb.TxnShare) { s.Success[2] = opPut(k(2), "vv") }),
			wantErr: "share: success op 2: value of 2 bytes exceeds the limit of 1"},
		{name: "oversized compare value", limits: Limits{MaxValueSize: 1}, share: with(func(s *internalpb.TxnShare) { s.Compares[1] = cmpValue(k(1), eq, "xy") }),
			wantErr: "share: compare 1: value of 2 bytes"},
		{name: "oversized scan start", limits: Limits{MaxKeySize: 2}, share: scan(opScan("abc", "", 0)),
			wantErr: "share: success op 0: scan start of 3 bytes"},
		{name: "scan bounds at the limit", limits: Limits{MaxKeySize: 2}, share: scan(opScan("ab", "ac", 0))},
		{name: "oversized scan end", limits: Limits{MaxKeySize: 2}, share: scan(opScan("", "abc", 0)),
			wantErr: "share: success op 0: scan end of 3 bytes"},
		{name: "empty scan range", share: with(func(s *internalpb.TxnShare) { s.Success[1] = opScan("c", "b", 0) }),
			wantErr: `share: success op 1: scan range ["c", "b") is empty`},
		{name: "scan with a negative limit", share: with(func(s *internalpb.TxnShare) { s.Success[1] = opScan("", "", -1) }),
			wantErr: "share: success op 1: scan limit -1 is negative"},

		// Counts.
		{name: "lists at the limit", limits: Limits{MaxOps: 2}, share: &internalpb.TxnShare{
			Compares: []*kvpb.Compare{cmpVersion(k(0), eq, 0), cmpVersion(k(1), eq, 0)},
			Success:  []*kvpb.RequestOp{opPut(k(0), ""), opPut(k(1), "")}, SuccessIndex: []uint32{0, 1},
			Failure: []*kvpb.RequestOp{opGet(k(0)), opGet(k(1))}, FailureIndex: []uint32{0, 1},
		}},
		{name: "too many compares", limits: Limits{MaxOps: 1}, share: &internalpb.TxnShare{Compares: []*kvpb.Compare{cmpVersion(k(0), eq, 0), cmpVersion(k(1), eq, 0)}},
			wantErr: "share: 2 compares exceed the limit of 1"},
		{name: "too many success ops", share: with(func(s *internalpb.TxnShare) {
			s.Success, s.SuccessIndex = n(DefaultMaxOps+1, func(i int) *kvpb.RequestOp { return opGet(k(i)) })
		}), wantErr: "share: 129 success ops exceed the limit of 128"},
		{name: "too many failure ops", limits: Limits{MaxOps: 3}, share: with(func(s *internalpb.TxnShare) {
			s.Failure, s.FailureIndex = n(4, func(i int) *kvpb.RequestOp { return opDel(k(i)) })
		}), wantErr: "share: 4 failure ops exceed the limit of 3"},

		// Positions in the original branches.
		{name: "success_index too short", share: with(func(s *internalpb.TxnShare) { s.SuccessIndex = s.SuccessIndex[:2] }),
			wantErr: "share: success_index has 2 entries for 3 ops"},
		{name: "failure_index too long", share: with(func(s *internalpb.TxnShare) { s.FailureIndex = []uint32{1, 2} }),
			wantErr: "share: failure_index has 2 entries for 1 ops"},
		{name: "failure_index with no ops", share: with(func(s *internalpb.TxnShare) { s.Failure, s.FailureIndex = nil, []uint32{0} }),
			wantErr: "share: failure_index has 1 entries for 0 ops"},
		{name: "success_index repeats", share: with(func(s *internalpb.TxnShare) { s.SuccessIndex = []uint32{0, 3, 3} }),
			wantErr: "share: success_index[2] = 3 does not follow 3"},
		{name: "success_index decreasing", share: with(func(s *internalpb.TxnShare) { s.SuccessIndex = []uint32{5, 3, 7} }),
			wantErr: "share: success_index[1] = 3 does not follow 5"},
		{name: "success_index at the limit", limits: Limits{MaxOps: 7}, share: validShare(),
			wantErr: "share: success_index[2] = 7, not below the limit of 7 ops"},
		{name: "failure_index huge", share: with(func(s *internalpb.TxnShare) { s.FailureIndex = []uint32{1 << 31} }),
			wantErr: "share: failure_index[0] = 2147483648, not below the limit of 128 ops"},

		// What Validate refuses of a transaction.
		{name: "written twice", share: with(func(s *internalpb.TxnShare) { s.Success[0] = opDel(k(2)) }),
			wantErr: fmt.Sprintf("share: success op 2: writes key %q twice", k(2))},
		{name: "reads what it writes", share: with(func(s *internalpb.TxnShare) {
			s.Failure = append(s.Failure, opGet(k(2)))
			s.FailureIndex = append(s.FailureIndex, 2)
		}),
			wantErr: fmt.Sprintf("share: the failure branch reads key %q, which it also writes", k(2))},
		{name: "scans what it writes", share: with(func(s *internalpb.TxnShare) {
			s.Failure = append(s.Failure, opScan("", "", 0))
			s.FailureIndex = append(s.FailureIndex, 4)
		}),
			wantErr: "share: the failure branch reads key"},
		{name: "unknown result", share: with(func(s *internalpb.TxnShare) { s.Compares[1].Result = 7 }), wantErr: "share: compare 1: unknown result 7"},
		{name: "unknown target", share: with(func(s *internalpb.TxnShare) { s.Compares[0].Target = 2 }), wantErr: "share: compare 0: unknown target 2"},
		{name: "target and union disagree", share: with(func(s *internalpb.TxnShare) { s.Compares[0].Target = kvpb.Compare_VALUE }),
			wantErr: "share: compare 0: targets the value but carries none"},
		{name: "op not set", share: with(func(s *internalpb.TxnShare) { s.Success[1] = &kvpb.RequestOp{} }), wantErr: "share: success op 1: empty"},
		{name: "nil op", share: with(func(s *internalpb.TxnShare) { s.Failure[0] = nil }), wantErr: "share: failure op 0: empty"},
		{name: "nil put", share: with(func(s *internalpb.TxnShare) { s.Success[2] = &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{}} }), wantErr: "share: success op 2: empty key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, parts := tt.p, tt.partitions
			if !tt.raw && p == 0 {
				p = shareP
			}
			if !tt.raw && parts == 0 {
				parts = shareParts
			}
			checkErr(t, "ValidateShare", ValidateShare(p, parts, tt.share, tt.limits), tt.wantErr)
		})
	}
}

func TestValidatePrepare(t *testing.T) {
	valid := func() *internalpb.TxnPrepareOp {
		return &internalpb.TxnPrepareOp{TxnId: testID(1), Priority: 5, RecordPartition: 4, Share: validShare(), PreparedUnixMs: 1_700_000_000_000}
	}
	with := func(f func(op *internalpb.TxnPrepareOp)) *internalpb.TxnPrepareOp {
		op := valid()
		f(op)
		return op
	}
	tests := []struct {
		name    string
		p       uint64
		op      *internalpb.TxnPrepareOp
		wantErr string
	}{
		{name: "valid", op: valid()},
		{name: "record partition 1", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition = 1 })},
		{name: "any priority", op: with(func(op *internalpb.TxnPrepareOp) { op.Priority = -1 })},
		{name: "nil", op: nil, wantErr: "prepare: no op"},
		{name: "no id", op: with(func(op *internalpb.TxnPrepareOp) { op.TxnId = nil }), wantErr: "prepare: txn_id of 0 bytes, want 16"},
		{name: "short id", op: with(func(op *internalpb.TxnPrepareOp) { op.TxnId = op.TxnId[:15] }), wantErr: "prepare: txn_id of 15 bytes, want 16"},
		{name: "long id", op: with(func(op *internalpb.TxnPrepareOp) { op.TxnId = append(op.TxnId, 0) }), wantErr: "prepare: txn_id of 17 bytes, want 16"},
		{name: "partition out of range", p: 9, op: valid(), wantErr: "prepare: partition 9 not in 1..4"},
		{name: "no record partition", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition = 0 }), wantErr: "prepare: record_partition 0 not in 1..4"},
		{name: "record partition past the count", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition = 5 }), wantErr: "prepare: record_partition 5 not in 1..4"},
		{name: "no prepare time", op: with(func(op *internalpb.TxnPrepareOp) { op.PreparedUnixMs = 0 }), wantErr: "prepare: prepared_unix_ms 0, want > 0"},
		{name: "negative prepare time", op: with(func(op *internalpb.TxnPrepareOp) { op.PreparedUnixMs = -3 }), wantErr: "prepare: prepared_unix_ms -3, want > 0"},
		{name: "no share", op: with(func(op *internalpb.TxnPrepareOp) { op.Share = nil }), wantErr: "prepare: share: empty"},
		{name: "bad share", op: with(func(op *internalpb.TxnPrepareOp) { op.Share.Success[0] = opGet("") }), wantErr: "prepare: share: success op 0: empty key"},
		// Parallel commits: the record partition's prepare, and only it,
		// lists the participants (its own partition among them).
		{name: "record partition's prepare", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition, op.Participants = 2, []uint64{2, 3} })},
		{name: "record partition without participants", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition = 2 }),
			wantErr: "prepare: the record partition's prepare lists 0 participants, want at least 2"},
		{name: "one participant", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition, op.Participants = 2, []uint64{2} }),
			wantErr: "prepare: the record partition's prepare lists 1 participants, want at least 2"},
		{name: "participants elsewhere", op: with(func(op *internalpb.TxnPrepareOp) { op.Participants = []uint64{2, 4} }),
			wantErr: "prepare: participants on partition 2, which is not the record partition 4"},
		{name: "participants without the record partition", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition, op.Participants = 2, []uint64{1, 3} }),
			wantErr: "prepare: participants [1 3] do not name the record partition 2"},
		{name: "participants unsorted", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition, op.Participants = 2, []uint64{3, 2} }),
			wantErr: "prepare: participants[1] = 2 does not follow 3"},
		{name: "participant past the count", op: with(func(op *internalpb.TxnPrepareOp) { op.RecordPartition, op.Participants = 2, []uint64{2, 5} }),
			wantErr: "prepare: participants[1] 5 not in 1..4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			if p == 0 {
				p = shareP
			}
			checkErr(t, "ValidatePrepare", ValidatePrepare(p, shareParts, tt.op, Limits{}), tt.wantErr)
		})
	}
}

func TestValidateFinish(t *testing.T) {
	tests := []struct {
		name    string
		op      *internalpb.TxnFinishOp
		wantErr string
	}{
		{name: "commit success", op: &internalpb.TxnFinishOp{TxnId: testID(1), Commit: true, Succeeded: true, Stamp: 3, PreparedUnixMs: 1}},
		{name: "commit failure", op: &internalpb.TxnFinishOp{TxnId: testID(1), Commit: true, PreparedUnixMs: 1}},
		{name: "abort", op: &internalpb.TxnFinishOp{TxnId: testID(1), PreparedUnixMs: 1}},
		{name: "nil", op: nil, wantErr: "finish: no op"},
		{name: "short id", op: &internalpb.TxnFinishOp{TxnId: []byte("T"), PreparedUnixMs: 1}, wantErr: "finish: txn_id of 1 bytes, want 16"},
		{name: "succeeded without commit", op: &internalpb.TxnFinishOp{TxnId: testID(1), Succeeded: true, PreparedUnixMs: 1}, wantErr: "finish: succeeded without commit"},
		{name: "no prepare time", op: &internalpb.TxnFinishOp{TxnId: testID(1), Commit: true}, wantErr: "finish: prepared_unix_ms 0, want > 0"},
		{name: "negative prepare time", op: &internalpb.TxnFinishOp{TxnId: testID(1), PreparedUnixMs: -1}, wantErr: "finish: prepared_unix_ms -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "ValidateFinish", ValidateFinish(tt.op), tt.wantErr)
		})
	}
}

func TestValidateDecide(t *testing.T) {
	tests := []struct {
		name    string
		op      *internalpb.TxnDecideOp
		wantErr string
	}{
		{name: "commit", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Succeeded: true, Stamp: 2, Participants: []uint64{1, 3}}},
		{name: "commit everywhere", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{1, 2, 3, 4}}},
		{name: "abort with participants", op: &internalpb.TxnDecideOp{TxnId: testID(1), Participants: []uint64{2, 4}}},
		{name: "presumed abort", op: &internalpb.TxnDecideOp{TxnId: testID(1), Stamp: 9}},
		{name: "nil", op: nil, wantErr: "decide: no op"},
		{name: "long id", op: &internalpb.TxnDecideOp{TxnId: make([]byte, 32)}, wantErr: "decide: txn_id of 32 bytes, want 16"},
		{name: "succeeded without commit", op: &internalpb.TxnDecideOp{TxnId: testID(1), Succeeded: true}, wantErr: "decide: succeeded without commit"},
		{name: "commit with no participants", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true}, wantErr: "decide: a commit with no participants"},
		{name: "participant 0", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{0, 1}}, wantErr: "decide: participants[0] 0 not in 1..4"},
		{name: "participant past the count", op: &internalpb.TxnDecideOp{TxnId: testID(1), Participants: []uint64{1, 5}}, wantErr: "decide: participants[1] 5 not in 1..4"},
		{name: "participants repeat", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{1, 2, 2}}, wantErr: "decide: participants[2] = 2 does not follow 2"},
		{name: "participants unsorted", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{3, 1}}, wantErr: "decide: participants[1] = 1 does not follow 3"},
		{name: "more participants than partitions", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{1, 1, 1, 1, 1}},
			wantErr: "decide: 5 participants, more than the 4 partitions"},
		{name: "decision that finishes", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{1, 3}, Finish: true, PreparedUnixMs: 5}},
		{name: "finish without prepare time", op: &internalpb.TxnDecideOp{TxnId: testID(1), Commit: true, Participants: []uint64{1, 3}, Finish: true},
			wantErr: "decide: a decision that finishes needs prepared_unix_ms > 0, got 0"},
		{name: "staging", op: &internalpb.TxnDecideOp{TxnId: testID(1), Staging: true, Participants: []uint64{1, 3}},
			wantErr: "decide: staging is a record's state, never a decision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "ValidateDecide", ValidateDecide(shareParts, tt.op), tt.wantErr)
		})
	}
}

func TestValidateForget(t *testing.T) {
	ids := func(n int) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = testID(byte(i))
		}
		return out
	}
	tests := []struct {
		name    string
		op      *internalpb.TxnForgetOp
		max     int
		wantErr string
	}{
		{name: "at the limit", op: &internalpb.TxnForgetOp{TxnIds: ids(3)}, max: 3},
		{name: "none", op: &internalpb.TxnForgetOp{}, max: 3},
		{name: "nil", op: nil, max: 3},
		{name: "too many", op: &internalpb.TxnForgetOp{TxnIds: ids(4)}, max: 3, wantErr: "forget: 4 txn_ids, more than 3"},
		{name: "bad id", op: &internalpb.TxnForgetOp{TxnIds: append(ids(2), []byte("short"))}, max: 3, wantErr: "forget: txn_ids[2] of 5 bytes, want 16"},
		{name: "empty id", op: &internalpb.TxnForgetOp{TxnIds: [][]byte{nil}}, max: 3, wantErr: "forget: txn_ids[0] of 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "ValidateForget", ValidateForget(tt.op, tt.max), tt.wantErr)
		})
	}
}

// TestSplitSharesValidate: the shares Split makes of any transaction
// Validate accepts pass ValidateShare with the same limits, and prepares
// of them pass ValidatePrepare — the peer door never refuses what this
// node's coordinator sends.
func TestSplitSharesValidate(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	key := func() []byte {
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = "abc\x00\xff"[r.IntN(5)]
		}
		return b
	}
	op := func() *kvpb.RequestOp {
		switch r.IntN(5) {
		case 0:
			return opPut(string(key()), strings.Repeat("v", r.IntN(4)))
		case 1:
			return opDel(string(key()))
		case 2, 3:
			return opGet(string(key()))
		}
		return opScan(string(key()), string(key()), int64(r.IntN(3)))
	}
	accepted := 0
	for trial := 0; trial < 20000; trial++ {
		req := &kvpb.TxnRequest{}
		for i := r.IntN(4); i > 0; i-- {
			req.Compare = append(req.Compare, cmpVersion(string(key()), kvpb.Compare_Result(r.IntN(4)), 0))
		}
		for i := r.IntN(6); i > 0; i-- {
			req.Success = append(req.Success, op())
		}
		for i := r.IntN(6); i > 0; i-- {
			req.Failure = append(req.Failure, op())
		}
		l := Limits{MaxOps: 1 + r.IntN(6), MaxKeySize: 2 + r.IntN(2), MaxValueSize: 2}
		if Validate(req, l) != nil {
			continue
		}
		accepted++
		partitions := uint32(1 + r.IntN(5))
		shares, record := Split(req, partitions)
		if len(shares) > 1 {
			if _, ok := shares[record]; !ok {
				t.Fatalf("seed %d trial %d: record partition %d has no share of %v", seed, trial, record, req)
			}
		}
		ops := PrepareOps(testID(7), 1, 1, shares, record)
		for p, s := range shares {
			if err := ValidateShare(p, partitions, s, l); err != nil {
				t.Fatalf("seed %d trial %d: the share of partition %d of %v refused: %v", seed, trial, p, req, err)
			}
			if len(shares) < 2 {
				continue // one partition: 1PC, no prepare
			}
			op := ops[p]
			if err := ValidatePrepare(p, partitions, op, l); err != nil {
				t.Fatalf("seed %d trial %d: the prepare of partition %d refused: %v", seed, trial, p, err)
			}
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d of the random transactions were valid: the test proves little", accepted)
	}
}

func TestValidateStatus(t *testing.T) {
	tests := []struct {
		name    string
		op      *internalpb.TxnStatusOp
		wantErr string
	}{
		{name: "valid", op: &internalpb.TxnStatusOp{TxnId: testID(1), PreparedUnixMs: 7}},
		{name: "nil", op: nil, wantErr: "status: no op"},
		{name: "short id", op: &internalpb.TxnStatusOp{TxnId: testID(1)[:3], PreparedUnixMs: 7}, wantErr: "status: txn_id of 3 bytes, want 16"},
		{name: "no prepare time", op: &internalpb.TxnStatusOp{TxnId: testID(1)}, wantErr: "status: prepared_unix_ms 0, want > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, "ValidateStatus", ValidateStatus(tt.op), tt.wantErr)
		})
	}
}

func TestValidateRecordRead(t *testing.T) {
	checkErr(t, "ValidateRecordRead", ValidateRecordRead(testID(1)), "")
	checkErr(t, "ValidateRecordRead", ValidateRecordRead(nil), "record: txn_id of 0 bytes, want 16")
}
