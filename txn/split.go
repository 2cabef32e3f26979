package txn

import (
	"bytes"
	"slices"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// Split divides a valid transaction into per-partition shares and names
// the record partition (that of the smallest key the transaction names).
// A scan goes to every partition. Partitions with nothing to do have no
// share.
func Split(req *kvpb.TxnRequest, partitions uint32) (shares map[uint64]*internalpb.TxnShare, record uint64) {
	shares = map[uint64]*internalpb.TxnShare{}
	share := func(p uint64) *internalpb.TxnShare {
		s := shares[p]
		if s == nil {
			s = &internalpb.TxnShare{}
			shares[p] = s
		}
		return s
	}
	for _, c := range req.GetCompare() {
		s := share(keyspace.PartitionOf(c.GetKey(), partitions))
		s.Compares = append(s.Compares, c)
	}
	addOps := func(ops []*kvpb.RequestOp, success bool) {
		for i, op := range ops {
			var targets []uint64
			if sc := op.GetScan(); sc != nil {
				for p := uint64(1); p <= uint64(partitions); p++ {
					targets = append(targets, p)
				}
			} else {
				targets = []uint64{keyspace.PartitionOf(keyspace.OpKey(op), partitions)}
			}
			for _, p := range targets {
				s := share(p)
				if success {
					s.Success = append(s.Success, op)
					s.SuccessIndex = append(s.SuccessIndex, uint32(i))
				} else {
					s.Failure = append(s.Failure, op)
					s.FailureIndex = append(s.FailureIndex, uint32(i))
				}
			}
		}
	}
	addOps(req.GetSuccess(), true)
	addOps(req.GetFailure(), false)
	smallest, _ := keyspace.SmallestKey(req)
	return shares, keyspace.PartitionOf(smallest, partitions)
}

// Wants lists the locks a share needs: shared on compared and read keys
// and scanned ranges, exclusive on written keys, over both branches.
func Wants(s *internalpb.TxnShare) []Want {
	var ws []Want
	for _, c := range s.GetCompares() {
		ws = append(ws, Want{Start: c.GetKey(), Mode: Shared})
	}
	for _, ops := range [][]*kvpb.RequestOp{s.GetSuccess(), s.GetFailure()} {
		for _, op := range ops {
			switch r := op.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				ws = append(ws, Want{Start: r.Get.GetKey(), Mode: Shared})
			case *kvpb.RequestOp_Put:
				ws = append(ws, Want{Start: r.Put.GetKey(), Mode: Exclusive})
			case *kvpb.RequestOp_Delete:
				ws = append(ws, Want{Start: r.Delete.GetKey(), Mode: Exclusive})
			case *kvpb.RequestOp_Scan:
				ws = append(ws, Want{Start: r.Scan.GetStart(), End: nonNil(r.Scan.GetEnd()), Mode: Shared})
			}
		}
	}
	// A key both read and written in different branches: exclusive wins.
	excl := map[string]bool{}
	for _, w := range ws {
		if !w.isRange() && w.Mode == Exclusive {
			excl[string(w.Start)] = true
		}
	}
	out := ws[:0]
	for _, w := range ws {
		if !w.isRange() && w.Mode == Shared && excl[string(w.Start)] {
			continue
		}
		out = append(out, w)
	}
	return out
}

// Holds reports whether cmp holds for a key with the given version
// (0 = absent) and value. A result or target this binary does not know
// never holds: Validate and ValidateShare refuse them, so only an entry
// logged before they did can carry one, and replaying it must answer as
// it did then.
func Holds(cmp *kvpb.Compare, version int64, value []byte) bool {
	var c int
	switch cmp.GetTarget() {
	case kvpb.Compare_VERSION:
		c = compareInt(version, cmp.GetVersion())
	case kvpb.Compare_VALUE:
		if version == 0 {
			return false // etcd: the value of an absent key compares false
		}
		c = bytes.Compare(value, cmp.GetValue())
	default:
		return false
	}
	switch cmp.GetResult() {
	case kvpb.Compare_EQUAL:
		return c == 0
	case kvpb.Compare_NOT_EQUAL:
		return c != 0
	case kvpb.Compare_GREATER:
		return c > 0
	case kvpb.Compare_LESS:
		return c < 0
	}
	return false
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Older reports whether transaction a (priority pa, id ida) is older than
// b: wait-die lets the older one wait. Ties break on the id.
func Older(pa int64, ida string, pb int64, idb string) bool {
	if pa != pb {
		return pa < pb
	}
	return ida < idb
}

// PrepareOps builds each participant's prepare of a transaction with id
// and wait-die priority prio, prepared at preparedMs (Unix ms), over the
// shares Split made: the record partition's lists the participants, in
// order, so that its prepare writes the STAGING record (parallel commits).
func PrepareOps(id []byte, prio int64, preparedMs int64, shares map[uint64]*internalpb.TxnShare, record uint64) map[uint64]*internalpb.TxnPrepareOp {
	parts := make([]uint64, 0, len(shares))
	for p := range shares {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	ops := make(map[uint64]*internalpb.TxnPrepareOp, len(shares))
	for _, p := range parts {
		op := &internalpb.TxnPrepareOp{TxnId: id, Priority: prio, RecordPartition: record, Share: shares[p], PreparedUnixMs: preparedMs}
		if p == record {
			op.Participants = parts
		}
		ops[p] = op
	}
	return ops
}

// FinishEntry is the command of one Finish entry for ops (DESIGN.md,
// "Transactions": Finishes batched per partition): a TxnFinish for one, a
// TxnFinishBatchOp for several, at a version at least every stamp in it
// (consistent cut rule 4: a Finish stamped at or after a cut lies after
// its position).
func FinishEntry(ops []*internalpb.TxnFinishOp) *internalpb.Command {
	cmd := &internalpb.Command{}
	if len(ops) == 1 {
		cmd.Op = &internalpb.Command_TxnFinish{TxnFinish: ops[0]}
	} else {
		cmd.Op = &internalpb.Command_TxnFinishes{TxnFinishes: &internalpb.TxnFinishBatchOp{Finishes: ops}}
	}
	for _, op := range ops {
		cmd.CutVersion = max(cmd.CutVersion, op.GetStamp())
	}
	return cmd
}
