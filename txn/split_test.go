package txn

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

func opPut(k, v string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

func opDel(k string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Delete{Delete: &kvpb.DeleteRequest{Key: []byte(k)}}}
}

func opGet(k string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Get{Get: &kvpb.GetRequest{Key: []byte(k)}}}
}

// opScan scans [start, end); an empty end is nil, as a decoded request
// with no end has it.
func opScan(start, end string, limit int64) *kvpb.RequestOp {
	sc := &kvpb.ScanRequest{Start: []byte(start), Limit: limit}
	if end != "" {
		sc.End = []byte(end)
	}
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Scan{Scan: sc}}
}

func cmpVersion(k string, r kvpb.Compare_Result, v int64) *kvpb.Compare {
	return &kvpb.Compare{Key: []byte(k), Target: kvpb.Compare_VERSION, Result: r, TargetUnion: &kvpb.Compare_Version{Version: v}}
}

func cmpValue(k string, r kvpb.Compare_Result, v string) *kvpb.Compare {
	return &kvpb.Compare{Key: []byte(k), Target: kvpb.Compare_VALUE, Result: r, TargetUnion: &kvpb.Compare_Value{Value: []byte(v)}}
}

func TestValidate(t *testing.T) {
	ops := func(n int, mk func(i int) *kvpb.RequestOp) []*kvpb.RequestOp {
		out := make([]*kvpb.RequestOp, n)
		for i := range out {
			out[i] = mk(i)
		}
		return out
	}
	cmps := func(n int) []*kvpb.Compare {
		out := make([]*kvpb.Compare, n)
		for i := range out {
			out[i] = cmpVersion(fmt.Sprintf("k%d", i), kvpb.Compare_EQUAL, 0)
		}
		return out
	}
	puts := func(n int) []*kvpb.RequestOp {
		return ops(n, func(i int) *kvpb.RequestOp { return opPut(fmt.Sprintf("k%d", i), "v") })
	}
	eq := kvpb.Compare_EQUAL
	tests := []struct {
		name    string
		req     *kvpb.TxnRequest
		limits  Limits
		wantErr string // "" = valid; else a substring of the error
	}{
		{name: "empty", req: &kvpb.TxnRequest{}},
		{name: "cas", req: &kvpb.TxnRequest{
			Compare: []*kvpb.Compare{cmpValue("a", eq, "1")},
			Success: []*kvpb.RequestOp{opPut("a", "2")},
			Failure: []*kvpb.RequestOp{opGet("a")},
		}},

		// Op limits, per list.
		{name: "compares at limit", req: &kvpb.TxnRequest{Compare: cmps(2)}, limits: Limits{MaxOps: 2}},
		{name: "compares over limit", req: &kvpb.TxnRequest{Compare: cmps(3)}, limits: Limits{MaxOps: 2}, wantErr: "3 compares exceed the limit of 2"},
		{name: "success at limit", req: &kvpb.TxnRequest{Success: puts(2)}, limits: Limits{MaxOps: 2}},
		{name: "success over limit", req: &kvpb.TxnRequest{Success: puts(3)}, limits: Limits{MaxOps: 2}, wantErr: "3 success ops exceed"},
		{name: "failure over limit", req: &kvpb.TxnRequest{Failure: puts(3)}, limits: Limits{MaxOps: 2}, wantErr: "3 failure ops exceed"},
		{name: "limit per list, not total", req: &kvpb.TxnRequest{Compare: cmps(2), Success: puts(2), Failure: puts(2)}, limits: Limits{MaxOps: 2}},
		{name: "default limit 128", req: &kvpb.TxnRequest{Success: puts(128)}},
		{name: "default limit 128 exceeded", req: &kvpb.TxnRequest{Success: puts(129)}, wantErr: "129 success ops exceed the limit of 128"},
		{name: "negative limit means default", req: &kvpb.TxnRequest{Compare: cmps(129)}, limits: Limits{MaxOps: -1}, wantErr: "limit of 128"},

		// Empty and oversized keys and values.
		{name: "compare empty key", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{cmpVersion("", eq, 0)}}, wantErr: "compare 0: empty key"},
		{name: "put empty key", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("", "v")}}, wantErr: "success op 0: empty key"},
		{name: "delete empty key", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opGet("a"), opDel("")}}, wantErr: "failure op 1: empty key"},
		{name: "get empty key", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opGet("")}}, wantErr: "empty key"},
		{name: "keys at size limit", limits: Limits{MaxKeySize: 3}, req: &kvpb.TxnRequest{
			Compare: []*kvpb.Compare{cmpVersion("abc", eq, 0)},
			Success: []*kvpb.RequestOp{opPut("abd", "v"), opDel("abe"), opGet("abf")},
		}},
		{name: "compare key oversized", limits: Limits{MaxKeySize: 3}, req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{cmpVersion("abcd", eq, 0)}}, wantErr: "key of 4 bytes exceeds the limit of 3"},
		{name: "put key oversized", limits: Limits{MaxKeySize: 3}, req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("abcd", "")}}, wantErr: "key of 4 bytes"},
		{name: "delete key oversized", limits: Limits{MaxKeySize: 3}, req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opDel("abcd")}}, wantErr: "key of 4 bytes"},
		{name: "get key oversized", limits: Limits{MaxKeySize: 3}, req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opGet("abcd")}}, wantErr: "key of 4 bytes"},
		{name: "no key limit", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut(strings.Repeat("k", 10000), "v")}}},
		{name: "value at limit", limits: Limits{MaxValueSize: 2}, req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("a", "12")}}},
		{name: "value oversized", limits: Limits{MaxValueSize: 2}, req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opPut("a", "123")}}, wantErr: "value of 3 bytes exceeds the limit of 2"},
		{name: "empty value", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("a", "")}}},

		// A branch writes a key at most once.
		{name: "put put", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("a", "1"), opPut("b", "1"), opPut("a", "2")}}, wantErr: `success op 2: writes key "a" twice`},
		{name: "put delete", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opPut("a", "1"), opDel("a")}}, wantErr: `failure op 1: writes key "a" twice`},
		{name: "delete put", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opDel("a"), opPut("a", "1")}}, wantErr: "twice"},
		{name: "delete delete", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opDel("a"), opDel("a")}}, wantErr: "twice"},
		{name: "same key in both branches", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("a", "1")}, Failure: []*kvpb.RequestOp{opDel("a")}}},

		// A branch never reads what it writes.
		{name: "get then put", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opGet("a"), opPut("a", "1")}}, wantErr: `the success branch reads key "a", which it also writes`},
		{name: "put then get", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opPut("a", "1"), opGet("a")}}, wantErr: `the failure branch reads key "a"`},
		{name: "get then delete", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opGet("a"), opDel("a")}}, wantErr: "which it also writes"},
		{name: "scan covers put", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("a", "c", 0), opPut("b", "1")}}, wantErr: `reads key "b"`},
		{name: "scan start is inclusive", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("b", "c", 0), opPut("b", "1")}}, wantErr: `reads key "b"`},
		{name: "scan end is exclusive", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("a", "b", 0), opPut("b", "1")}}},
		{name: "scan to the end covers", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opDel("zz"), opScan("b", "", 0)}}, wantErr: `reads key "zz"`},
		{name: "scan to the end with an empty, non-nil end covers", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut("zz", "1"),
			{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{Start: []byte("b"), End: []byte{}}}}}}, wantErr: `reads key "zz"`},
		{name: "scan everything covers", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opPut("a", "1"), opScan("", "", 5)}}, wantErr: "which it also writes"},
		{name: "scan before write", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("a", "b", 0), opPut("c", "1")}}},
		{name: "read in the other branch", req: &kvpb.TxnRequest{
			Success: []*kvpb.RequestOp{opPut("a", "1"), opScan("b", "", 0)},
			Failure: []*kvpb.RequestOp{opGet("a"), opScan("", "", 0), opPut("b", "2")},
		}, wantErr: `the failure branch reads key "b"`},
		{name: "reads in the other branch only", req: &kvpb.TxnRequest{
			Success: []*kvpb.RequestOp{opPut("a", "1")},
			Failure: []*kvpb.RequestOp{opGet("a"), opScan("", "", 0)},
		}},
		{name: "compare on a written key", req: &kvpb.TxnRequest{
			Compare: []*kvpb.Compare{cmpVersion("a", eq, 0)},
			Success: []*kvpb.RequestOp{opPut("a", "1")},
		}},

		// Compare target and union.
		{name: "version compare carrying a value", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			{Key: []byte("a"), Target: kvpb.Compare_VERSION, TargetUnion: &kvpb.Compare_Value{Value: []byte("x")}},
		}}, wantErr: "compare 0: targets the version but carries a value"},
		{name: "version compare with no union is version 0", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			{Key: []byte("a"), Target: kvpb.Compare_VERSION},
		}}},
		{name: "value compare carrying a version", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			cmpVersion("b", eq, 1), {Key: []byte("a"), Target: kvpb.Compare_VALUE, TargetUnion: &kvpb.Compare_Version{Version: 1}},
		}}, wantErr: "compare 1: targets the value but carries none"},
		{name: "value compare with no union", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			{Key: []byte("a"), Target: kvpb.Compare_VALUE},
		}}, wantErr: "targets the value but carries none"},
		{name: "value compare with an empty value", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			{Key: []byte("a"), Target: kvpb.Compare_VALUE, TargetUnion: &kvpb.Compare_Value{}},
		}}},
		{name: "unknown target", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			{Key: []byte("a"), Target: kvpb.Compare_Target(7), TargetUnion: &kvpb.Compare_Version{}},
		}}, wantErr: "compare 0: unknown target 7"},
		// An unknown enum is refused, not read as a compare that fails
		// (Holds answers false for it).
		{name: "unknown result", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			cmpVersion("a", eq, 0), cmpVersion("b", eq, 0), cmpVersion("c", kvpb.Compare_Result(7), 0),
		}}, wantErr: "compare 2: unknown result 7"},
		{name: "negative result", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{cmpValue("a", kvpb.Compare_Result(-1), "x")}}, wantErr: "compare 0: unknown result -1"},
		{name: "every known result", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{
			cmpVersion("a", kvpb.Compare_EQUAL, 0), cmpVersion("a", kvpb.Compare_GREATER, 0), cmpVersion("a", kvpb.Compare_LESS, 0), cmpVersion("a", kvpb.Compare_NOT_EQUAL, 0),
		}}},
		{name: "nil compare", req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{nil}}, wantErr: "compare 0: empty key"},
		{name: "compare value at limit", limits: Limits{MaxValueSize: 2}, req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{cmpValue("a", eq, "12")}}},
		{name: "compare value oversized", limits: Limits{MaxValueSize: 2}, req: &kvpb.TxnRequest{Compare: []*kvpb.Compare{cmpValue("a", eq, "123")}}, wantErr: "compare 0: value of 3 bytes exceeds the limit of 2"},

		// Scans.
		{name: "scan with a limit", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("a", "b", 10)}}},
		{name: "scan with a negative limit", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("a", "b", -1)}}, wantErr: "success op 0: scan limit -1 is negative"},
		{name: "scan with a partition", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{
			{Request: &kvpb.RequestOp_Scan{Scan: &kvpb.ScanRequest{Start: []byte("a"), Partition: 2}}},
		}}, wantErr: "failure op 0: scan names partition 2"},
		{name: "scan bounds at key limit", limits: Limits{MaxKeySize: 2}, req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("ab", "ac", 0)}}},
		{name: "scan start oversized", limits: Limits{MaxKeySize: 2}, req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("abc", "", 0)}}, wantErr: "success op 0: scan start of 3 bytes exceeds the key limit of 2"},
		{name: "scan end oversized", limits: Limits{MaxKeySize: 2}, req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{opGet("a"), opScan("a", "abc", 0)}}, wantErr: "failure op 1: scan end of 3 bytes"},
		{name: "scan of an empty range", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("b", "b", 0)}}, wantErr: `success op 0: scan range ["b", "b") is empty`},
		{name: "scan of a reversed range", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("b", "a", 0)}}, wantErr: `success op 0: scan range ["b", "a") is empty`},
		{name: "scan from the start", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opScan("", "a", 0)}}},
		{name: "long keys are cut in errors", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut(strings.Repeat("k", 1000), "1"), opDel(strings.Repeat("k", 1000))}},
			wantErr: `writes key "` + strings.Repeat("k", 64) + `"... twice`},

		// Empty ops.
		{name: "empty op", req: &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opGet("a"), {}}}, wantErr: "success op 1: empty"},
		{name: "nil op", req: &kvpb.TxnRequest{Failure: []*kvpb.RequestOp{nil}}, wantErr: "failure op 0: empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.req, tt.limits)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("Validate = nil, want an error with %q", tt.wantErr)
			case tt.wantErr != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want ErrInvalid with %q", err, tt.wantErr)
			}
		})
	}
}

// TestSplit splits random transactions and checks every op landed in the
// share of its key's partition (scans in all of them), in order, with
// indexes pointing back at the original positions; and that the record
// partition is that of the smallest key.
func TestSplit(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	key := func() string { return fmt.Sprintf("k%02d", r.IntN(40)) }
	randOps := func() []*kvpb.RequestOp {
		ops := make([]*kvpb.RequestOp, r.IntN(8))
		for i := range ops {
			switch r.IntN(7) {
			case 0, 1:
				ops[i] = opPut(key(), "v")
			case 2:
				ops[i] = opDel(key())
			case 3, 4, 5:
				ops[i] = opGet(key())
			case 6:
				ops[i] = opScan(key(), key(), int64(r.IntN(3)))
			}
		}
		return ops
	}
	for trial := 0; trial < 500; trial++ {
		req := &kvpb.TxnRequest{Success: randOps(), Failure: randOps()}
		for i := r.IntN(5); i > 0; i-- {
			req.Compare = append(req.Compare, cmpVersion(key(), kvpb.Compare_EQUAL, 0))
		}
		partitions := uint32(1 + r.IntN(6))
		shares, record := Split(req, partitions)
		desc := fmt.Sprintf("trial %d, %d partitions, txn %v", trial, partitions, req)

		var smallest []byte
		seen := false
		note := func(k []byte) {
			if !seen || bytes.Compare(k, smallest) < 0 {
				smallest, seen = k, true
			}
		}
		for _, c := range req.Compare {
			note(c.Key)
		}
		// Where each compare/op should go.
		wantCmps := map[uint64][]*kvpb.Compare{}
		for _, c := range req.Compare {
			p := keyspace.PartitionOf(c.Key, partitions)
			wantCmps[p] = append(wantCmps[p], c)
		}
		wantIdx := func(ops []*kvpb.RequestOp) map[uint64][]uint32 {
			m := map[uint64][]uint32{}
			for i, op := range ops {
				if sc := op.GetScan(); sc != nil {
					note(sc.Start)
					for p := uint64(1); p <= uint64(partitions); p++ {
						m[p] = append(m[p], uint32(i))
					}
					continue
				}
				note(keyspace.OpKey(op))
				p := keyspace.PartitionOf(keyspace.OpKey(op), partitions)
				m[p] = append(m[p], uint32(i))
			}
			return m
		}
		wantSucc, wantFail := wantIdx(req.Success), wantIdx(req.Failure)

		if want := keyspace.PartitionOf(smallest, partitions); record != want {
			t.Fatalf("%s: record partition %d, want %d (of %q)", desc, record, want, smallest)
		}
		for p := uint64(1); p <= uint64(partitions); p++ {
			s, ok := shares[p]
			hasWork := len(wantCmps[p])+len(wantSucc[p])+len(wantFail[p]) > 0
			if ok != hasWork {
				t.Fatalf("%s: partition %d has share %v, want one: %v", desc, p, ok, hasWork)
			}
			if !ok {
				continue
			}
			if len(s.Compares) != len(wantCmps[p]) {
				t.Fatalf("%s: partition %d compares %v, want %v", desc, p, s.Compares, wantCmps[p])
			}
			for i := range s.Compares {
				if s.Compares[i] != wantCmps[p][i] {
					t.Fatalf("%s: partition %d compare %d is %v, want %v", desc, p, i, s.Compares[i], wantCmps[p][i])
				}
			}
			checkBranch := func(name string, got []*kvpb.RequestOp, gotIdx, want []uint32, orig []*kvpb.RequestOp) {
				if !slices.Equal(gotIdx, want) || len(got) != len(gotIdx) {
					t.Fatalf("%s: partition %d %s indexes %v (%d ops), want %v", desc, p, name, gotIdx, len(got), want)
				}
				for j, i := range gotIdx {
					if got[j] != orig[i] {
						t.Fatalf("%s: partition %d %s op %d is %v, but index %d is %v", desc, p, name, j, got[j], i, orig[i])
					}
				}
			}
			checkBranch("success", s.Success, s.SuccessIndex, wantSucc[p], req.Success)
			checkBranch("failure", s.Failure, s.FailureIndex, wantFail[p], req.Failure)
		}
		for p := range shares {
			if p < 1 || p > uint64(partitions) {
				t.Fatalf("%s: share for partition %d out of 1..%d", desc, p, partitions)
			}
		}
	}
}

func TestSplitExamples(t *testing.T) {
	const n = 4
	pa, pb := keyspace.PartitionOf([]byte("a"), n), keyspace.PartitionOf([]byte("b"), n)
	req := &kvpb.TxnRequest{
		Compare: []*kvpb.Compare{cmpVersion("b", kvpb.Compare_EQUAL, 0)},
		Success: []*kvpb.RequestOp{opPut("b", "1"), opScan("x", "", 0)},
		Failure: []*kvpb.RequestOp{opGet("b"), opGet("a")},
	}
	shares, record := Split(req, n)
	if record != pa {
		t.Fatalf("record %d, want %d (partition of a, the smallest key)", record, pa)
	}
	if len(shares) != n {
		t.Fatalf("%d shares, want %d (the scan goes everywhere)", len(shares), n)
	}
	if pa == pb {
		t.Fatalf("test assumes a and b hash apart with %d partitions", n)
	}
	if s := shares[pb]; len(s.Compares) != 1 || !slices.Equal(s.SuccessIndex, []uint32{0, 1}) || !slices.Equal(s.FailureIndex, []uint32{0}) {
		t.Fatalf("share of b: %v", s)
	}
	if s := shares[pa]; len(s.Compares) != 0 || !slices.Equal(s.SuccessIndex, []uint32{1}) || !slices.Equal(s.FailureIndex, []uint32{1}) {
		t.Fatalf("share of a: %v", s)
	}

	// A scan's start counts as a key for the record partition.
	_, record = Split(&kvpb.TxnRequest{Success: []*kvpb.RequestOp{opGet("b"), opScan("a", "b", 0)}}, n)
	if record != pa {
		t.Fatalf("record %d, want %d (scan start a)", record, pa)
	}
	// One partition: everything in partition 1.
	shares, record = Split(req, 1)
	if record != 1 || len(shares) != 1 || !proto.Equal(shares[1], &internalpb.TxnShare{
		Compares: req.Compare, Success: req.Success, SuccessIndex: []uint32{0, 1}, Failure: req.Failure, FailureIndex: []uint32{0, 1},
	}) {
		t.Fatalf("one partition: record %d, shares %v", record, shares)
	}
	// Nothing to do: no shares.
	if shares, _ := Split(&kvpb.TxnRequest{}, n); len(shares) != 0 {
		t.Fatalf("empty txn has shares %v", shares)
	}
}

func TestWants(t *testing.T) {
	share := &internalpb.TxnShare{
		Compares: []*kvpb.Compare{cmpVersion("a", kvpb.Compare_EQUAL, 0), cmpValue("c", kvpb.Compare_EQUAL, "x")},
		Success:  []*kvpb.RequestOp{opPut("a", "1"), opGet("b"), opScan("m", "p", 0), opScan("q", "", 1)},
		Failure:  []*kvpb.RequestOp{opGet("a"), opDel("b"), opGet("d"), opGet("d"), opPut("n", "2")},
	}
	got := Wants(share)
	var gs []string
	for _, w := range got {
		gs = append(gs, fmtWant(w))
	}
	sort.Strings(gs)
	want := []string{
		`S"c"`, `S"d"`, `S"d"`, // shared: compared or read only (duplicates are harmless)
		`S["m","p")`, `S["q","")`, // ranges are shared; an open end is empty, not nil
		`X"a"`, `X"b"`, `X"n"`, // written in either branch: exclusive beats shared
	}
	sort.Strings(want)
	if !slices.Equal(gs, want) {
		t.Fatalf("Wants = %v, want %v", gs, want)
	}
	for _, w := range got {
		if w.End != nil && w.Mode != Shared {
			t.Fatalf("range want %s is not shared", fmtWant(w))
		}
		if bytes.Equal(w.Start, []byte("q")) && w.End == nil {
			t.Fatalf("scan to the end became a point want")
		}
	}
	if ws := Wants(&internalpb.TxnShare{}); len(ws) != 0 {
		t.Fatalf("Wants of an empty share = %v", ws)
	}
}

func TestHolds(t *testing.T) {
	results := []kvpb.Compare_Result{kvpb.Compare_EQUAL, kvpb.Compare_NOT_EQUAL, kvpb.Compare_GREATER, kvpb.Compare_LESS}
	// For a key at version 3 with value "m", against targets below, at
	// and above: EQUAL, NOT_EQUAL, GREATER, LESS.
	truth := map[kvpb.Compare_Result][3]bool{
		kvpb.Compare_EQUAL:     {false, true, false},
		kvpb.Compare_NOT_EQUAL: {true, false, true},
		kvpb.Compare_GREATER:   {true, false, false},
		kvpb.Compare_LESS:      {false, false, true},
	}
	for _, res := range results {
		for i, v := range []int64{2, 3, 4} {
			if got := Holds(cmpVersion("k", res, v), 3, []byte("m")); got != truth[res][i] {
				t.Errorf("version 3 %v %d = %v, want %v", res, v, got, truth[res][i])
			}
		}
		for i, v := range []string{"l", "m", "n"} {
			if got := Holds(cmpValue("k", res, v), 3, []byte("m")); got != truth[res][i] {
				t.Errorf("value m %v %q = %v, want %v", res, v, got, truth[res][i])
			}
		}
		// Values compare as bytes: a prefix is smaller.
		if got, want := Holds(cmpValue("k", res, "ma"), 1, []byte("m")), truth[res][2]; got != want {
			t.Errorf("value m %v \"ma\" = %v, want %v", res, got, want)
		}
		// An absent key has version 0 ...
		for i, v := range []int64{-1, 0, 1} {
			if got := Holds(cmpVersion("k", res, v), 0, nil); got != truth[res][i] {
				t.Errorf("absent %v version %d = %v, want %v", res, v, got, truth[res][i])
			}
		}
		// ... and no value: every value compare is false, NOT_EQUAL too.
		for _, v := range []string{"", "m"} {
			if Holds(cmpValue("k", res, v), 0, nil) {
				t.Errorf("absent %v value %q holds", res, v)
			}
		}
	}
	// A present key with an empty value is not absent.
	if !Holds(cmpValue("k", kvpb.Compare_EQUAL, ""), 1, nil) {
		t.Errorf("empty value of a present key does not equal \"\"")
	}
	// A version compare with no union compares against 0.
	if !Holds(&kvpb.Compare{Key: []byte("k"), Target: kvpb.Compare_VERSION}, 0, nil) {
		t.Errorf("version compare without a union does not mean 0")
	}
	if Holds(&kvpb.Compare{Key: []byte("k"), Target: kvpb.Compare_Target(9), Result: kvpb.Compare_NOT_EQUAL}, 1, []byte("x")) {
		t.Errorf("unknown target holds")
	}
	if Holds(&kvpb.Compare{Key: []byte("k"), Target: kvpb.Compare_VERSION, Result: kvpb.Compare_Result(9)}, 1, nil) {
		t.Errorf("unknown result holds")
	}
}

func TestOlder(t *testing.T) {
	tests := []struct {
		pa   int64
		ida  string
		pb   int64
		idb  string
		want bool
	}{
		{1, "b", 2, "a", true}, // priority first
		{2, "a", 1, "b", false},
		{-5, "z", 0, "a", true},
		{7, "a", 7, "b", true}, // tie: smaller id
		{7, "b", 7, "a", false},
		{7, "a", 7, "a", false}, // not older than itself
	}
	for _, tt := range tests {
		if got := Older(tt.pa, tt.ida, tt.pb, tt.idb); got != tt.want {
			t.Errorf("Older(%d %q, %d %q) = %v, want %v", tt.pa, tt.ida, tt.pb, tt.idb, got, tt.want)
		}
		// Exactly one of two distinct transactions is older.
		if tt.pa != tt.pb || tt.ida != tt.idb {
			if Older(tt.pa, tt.ida, tt.pb, tt.idb) == Older(tt.pb, tt.idb, tt.pa, tt.ida) {
				t.Errorf("Older is not antisymmetric on (%d %q) (%d %q)", tt.pa, tt.ida, tt.pb, tt.idb)
			}
		}
	}
}

func TestFinishEntry(t *testing.T) {
	one := FinishEntry([]*internalpb.TxnFinishOp{{TxnId: testID(1), Commit: true, Stamp: 4}})
	if one.GetTxnFinish().GetStamp() != 4 || one.GetCutVersion() != 4 {
		t.Fatalf("one finish: %v, want a TxnFinish at version 4", one)
	}
	many := FinishEntry([]*internalpb.TxnFinishOp{{TxnId: testID(1), Stamp: 2}, {TxnId: testID(2), Commit: true, Stamp: 7}, {TxnId: testID(3), Stamp: 5}})
	if n := len(many.GetTxnFinishes().GetFinishes()); n != 3 || many.GetCutVersion() != 7 {
		t.Fatalf("three finishes: %d in the entry at version %d, want 3 at version 7 (the highest stamp)", n, many.GetCutVersion())
	}
}
