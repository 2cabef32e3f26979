package txn

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// Small limits, so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxOps: 6, MaxKeySize: 6, MaxValueSize: 6}

// fuzzSeedShares are shares of partition 2 of 4 for the fuzzers to start
// from: valid ones, and ones one field away from valid.
func fuzzSeedShares() []*internalpb.TxnShare {
	valid := func() *internalpb.TxnShare {
		return &internalpb.TxnShare{
			Compares:     []*kvpb.Compare{cmpVersion(k(0), kvpb.Compare_LESS, 2), cmpValue(k(1), kvpb.Compare_EQUAL, "v")},
			Success:      []*kvpb.RequestOp{opGet(k(0)), opScan("a", "b", 1), opPut(k(2), "x")},
			SuccessIndex: []uint32{0, 2, 5},
			Failure:      []*kvpb.RequestOp{opDel(k(2)), opScan("l", "", 0)},
			FailureIndex: []uint32{0, 1},
		}
	}
	wrongKey := valid()
	wrongKey.Success[2] = opPut(keyIn(3, shareParts, "o", 0), "x")
	badIndex := valid()
	badIndex.SuccessIndex = []uint32{0, 2, 2}
	unknownResult := valid()
	unknownResult.Compares[0].Result = 9
	readsWrite := valid()
	readsWrite.Failure = append(readsWrite.Failure, opGet(k(2)))
	readsWrite.FailureIndex = append(readsWrite.FailureIndex, 3)
	return []*internalpb.TxnShare{
		valid(),
		{Success: []*kvpb.RequestOp{opScan("c", "", 0)}, SuccessIndex: []uint32{4}},
		wrongKey, badIndex, unknownResult, readsWrite,
	}
}

// TestFuzzSeedShares: the first two seeds are valid, the others are not,
// so the fuzzers start on both sides of the line.
func TestFuzzSeedShares(t *testing.T) {
	for i, s := range fuzzSeedShares() {
		err := ValidateShare(shareP, shareParts, s, fuzzLimits)
		if (err == nil) != (i < 2) {
			t.Errorf("seed %d: %v", i, err)
		}
		if err == nil {
			checkShareInvariants(t, shareP, shareParts, s, fuzzLimits)
		}
	}
}

// FuzzValidateShare unmarshals a share and validates it for partition p
// of partitions: it never panics, and a share it accepts has every
// property checkShareInvariants states, checked here from scratch.
func FuzzValidateShare(f *testing.F) {
	for _, s := range fuzzSeedShares() {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(shareP), uint8(shareParts))
		f.Add(b, uint8(1), uint8(1)) // one partition: every key is its own
	}
	f.Add([]byte{}, uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, p, partitions uint8) {
		s := &internalpb.TxnShare{}
		if proto.Unmarshal(data, s) != nil {
			return
		}
		if ValidateShare(uint64(p), uint32(partitions), s, fuzzLimits) != nil {
			return
		}
		checkShareInvariants(t, uint64(p), uint32(partitions), s, fuzzLimits)
	})
}

// FuzzValidatePrepare is FuzzValidateShare for a whole prepare.
func FuzzValidatePrepare(f *testing.F) {
	for i, s := range fuzzSeedShares() {
		op := &internalpb.TxnPrepareOp{TxnId: testID(byte(i)), Priority: int64(i), RecordPartition: 1 + uint64(i%4), Share: s, PreparedUnixMs: 1_700_000_000_000}
		if i == 1 {
			op.TxnId = op.TxnId[1:]
		}
		b, err := proto.Marshal(op)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(shareP), uint8(shareParts))
		f.Add(b, uint8(1), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, p, partitions uint8) {
		op := &internalpb.TxnPrepareOp{}
		if proto.Unmarshal(data, op) != nil {
			return
		}
		if ValidatePrepare(uint64(p), uint32(partitions), op, fuzzLimits) != nil {
			return
		}
		if len(op.GetTxnId()) != IDSize {
			t.Fatalf("accepted a txn_id of %d bytes", len(op.GetTxnId()))
		}
		if r := op.GetRecordPartition(); r < 1 || r > uint64(partitions) {
			t.Fatalf("accepted record partition %d of %d", r, partitions)
		}
		if op.GetPreparedUnixMs() <= 0 {
			t.Fatalf("accepted prepare time %d", op.GetPreparedUnixMs())
		}
		checkShareInvariants(t, uint64(p), uint32(partitions), op.GetShare(), fuzzLimits)
	})
}

// checkShareInvariants states, without the validators' code, what the
// partition state machine may assume of a share the door accepted.
func checkShareInvariants(t *testing.T, p uint64, partitions uint32, s *internalpb.TxnShare, l Limits) {
	t.Helper()
	if partitions == 0 || p < 1 || p > uint64(partitions) {
		t.Fatalf("accepted partition %d of %d", p, partitions)
	}
	if len(s.GetCompares())+len(s.GetSuccess())+len(s.GetFailure()) == 0 {
		t.Fatal("accepted an empty share")
	}
	key := func(what string, k []byte) {
		t.Helper()
		if len(k) == 0 || len(k) > l.MaxKeySize {
			t.Fatalf("%s: accepted a key of %d bytes", what, len(k))
		}
		if q := keyspace.PartitionOf(k, partitions); q != p {
			t.Fatalf("%s: accepted key %q of partition %d in a share of %d", what, k, q, p)
		}
	}
	if len(s.GetCompares()) > l.MaxOps {
		t.Fatalf("accepted %d compares", len(s.GetCompares()))
	}
	for _, c := range s.GetCompares() {
		key("compare", c.GetKey())
		if r := c.GetResult(); r < kvpb.Compare_EQUAL || r > kvpb.Compare_NOT_EQUAL {
			t.Fatalf("accepted compare result %d", r)
		}
		switch c.GetTarget() {
		case kvpb.Compare_VERSION:
			if u := c.GetTargetUnion(); u != nil {
				if _, ok := u.(*kvpb.Compare_Version); !ok {
					t.Fatal("accepted a version compare carrying a value")
				}
			}
		case kvpb.Compare_VALUE:
			v, ok := c.GetTargetUnion().(*kvpb.Compare_Value)
			if !ok || len(v.Value) > l.MaxValueSize {
				t.Fatalf("accepted a value compare with union %T", c.GetTargetUnion())
			}
		default:
			t.Fatalf("accepted compare target %d", c.GetTarget())
		}
		Holds(c, 1, []byte("v")) // must not panic
	}
	branch := func(name string, ops []*kvpb.RequestOp, idx []uint32) {
		t.Helper()
		if len(ops) > l.MaxOps || len(idx) != len(ops) {
			t.Fatalf("%s: accepted %d ops with %d positions", name, len(ops), len(idx))
		}
		for i := range idx {
			if int(idx[i]) >= l.MaxOps || (i > 0 && idx[i] <= idx[i-1]) {
				t.Fatalf("%s: accepted positions %v", name, idx)
			}
		}
		written := map[string]bool{}
		var gets [][]byte
		var scans [][2][]byte
		for _, op := range ops {
			switch {
			case op.GetGet() != nil:
				key(name+" get", op.GetGet().GetKey())
				gets = append(gets, op.GetGet().GetKey())
			case op.GetPut() != nil:
				key(name+" put", op.GetPut().GetKey())
				if len(op.GetPut().GetValue()) > l.MaxValueSize {
					t.Fatalf("%s: accepted a value of %d bytes", name, len(op.GetPut().GetValue()))
				}
				if written[string(op.GetPut().GetKey())] {
					t.Fatalf("%s: accepted key %q written twice", name, op.GetPut().GetKey())
				}
				written[string(op.GetPut().GetKey())] = true
			case op.GetDelete() != nil:
				key(name+" delete", op.GetDelete().GetKey())
				if written[string(op.GetDelete().GetKey())] {
					t.Fatalf("%s: accepted key %q written twice", name, op.GetDelete().GetKey())
				}
				written[string(op.GetDelete().GetKey())] = true
			case op.GetScan() != nil:
				sc := op.GetScan()
				if len(sc.GetStart()) > l.MaxKeySize || len(sc.GetEnd()) > l.MaxKeySize || sc.GetLimit() < 0 || sc.GetPartition() != 0 {
					t.Fatalf("%s: accepted scan %v", name, sc)
				}
				if len(sc.GetEnd()) > 0 && bytes.Compare(sc.GetStart(), sc.GetEnd()) >= 0 {
					t.Fatalf("%s: accepted the empty scan range [%q, %q)", name, sc.GetStart(), sc.GetEnd())
				}
				scans = append(scans, [2][]byte{sc.GetStart(), sc.GetEnd()})
			default:
				t.Fatalf("%s: accepted an op with nothing set", name)
			}
		}
		for w := range written {
			for _, g := range gets {
				if string(g) == w {
					t.Fatalf("%s: accepted a read of written key %q", name, w)
				}
			}
			for _, r := range scans {
				if w >= string(r[0]) && (len(r[1]) == 0 || w < string(r[1])) {
					t.Fatalf("%s: accepted a scan [%q, %q) over written key %q", name, r[0], r[1], w)
				}
			}
		}
	}
	branch("success", s.GetSuccess(), s.GetSuccessIndex())
	branch("failure", s.GetFailure(), s.GetFailureIndex())
	// What the state machine does with it must not panic either.
	lt := NewLockTable()
	lt.Acquire("t", Wants(s))
	lt.Release("t")
}
