package clienttest

import (
	"bytes"
	"context"

	"github.com/cutkv/cutkv/proto/kvpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Txn evaluates the compares on the map and applies the chosen branch, all
// under the cluster's lock, so every Txn is atomic and serializable. It
// refuses what the real server refuses with InvalidArgument, and answers
// NO_LEADER when a partition the Txn touches has no leader. Any node serves
// any Txn (it coordinates); the header names the partition's leader when
// one partition is involved, else the node that received the Txn (with raft
// term 0). The writes of one Txn to one partition share a raft index, as
// one raft entry would.
func (s kvServer) Txn(ctx context.Context, r *kvpb.TxnRequest) (*kvpb.TxnResponse, error) {
	if err := s.n.enter(ctx, MethodTxn, r.GetHeader(), r); err != nil {
		return nil, err
	}
	c := s.n.c
	if err := checkTxn(r, c.MaxTxnOps); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	parts := c.txnPartitions(r)
	for p := range parts {
		if c.leaderLocked(p) == nil {
			return nil, NotApplied(ReasonNoLeader, "")
		}
	}
	succeeded := true
	for _, cmp := range r.GetCompare() {
		if !c.holdsLocked(cmp) {
			succeeded = false
			break
		}
	}
	ops := r.GetSuccess()
	if !succeeded {
		ops = r.GetFailure()
	}
	idx := make(map[uint64]uint64) // partition → index of this Txn's entry
	for _, o := range ops {
		var key []byte
		switch x := o.GetRequest().(type) {
		case *kvpb.RequestOp_Put:
			key = x.Put.GetKey()
		case *kvpb.RequestOp_Delete:
			key = x.Delete.GetKey()
		default:
			continue
		}
		if p := c.PartitionOf(key); idx[p] == 0 {
			c.index[p]++
			idx[p] = c.index[p]
		}
	}
	resp := &kvpb.TxnResponse{Succeeded: succeeded}
	for _, o := range ops {
		var ro *kvpb.ResponseOp
		switch x := o.GetRequest().(type) {
		case *kvpb.RequestOp_Get:
			g := &kvpb.GetResponse{}
			if kv, ok := c.data[string(x.Get.GetKey())]; ok {
				g.Kv = proto.Clone(kv).(*kvpb.KeyValue)
			}
			ro = &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Get{Get: g}}
		case *kvpb.RequestOp_Put:
			c.writeLocked(x.Put.GetKey(), x.Put.GetValue(), idx[c.PartitionOf(x.Put.GetKey())])
			ro = &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Put{Put: &kvpb.PutResponse{}}}
		case *kvpb.RequestOp_Delete:
			d := &kvpb.DeleteResponse{}
			if _, ok := c.data[string(x.Delete.GetKey())]; ok {
				delete(c.data, string(x.Delete.GetKey()))
				d.Deleted = 1
			}
			ro = &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Delete{Delete: d}}
		case *kvpb.RequestOp_Scan:
			ro = &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Scan{Scan: c.scanLocked(x.Scan)}}
		}
		resp.Responses = append(resp.Responses, ro)
	}
	served, term := s.n, uint64(0)
	if len(parts) == 1 {
		for p := range parts {
			served, term = c.leaderLocked(p), 1
		}
	}
	resp.Header = c.headerLocked(served, term)
	return resp, nil
}

// txnPartitions lists the partitions r touches: those of its keys, or all
// when it scans.
func (c *Cluster) txnPartitions(r *kvpb.TxnRequest) map[uint64]bool {
	parts := make(map[uint64]bool)
	all := func() {
		for p := uint64(1); p <= uint64(c.Partitions); p++ {
			parts[p] = true
		}
	}
	for _, cmp := range r.GetCompare() {
		parts[c.PartitionOf(cmp.GetKey())] = true
	}
	for _, ops := range [][]*kvpb.RequestOp{r.GetSuccess(), r.GetFailure()} {
		for _, o := range ops {
			if sc := o.GetScan(); sc != nil {
				all()
				continue
			}
			parts[c.PartitionOf(opKey(o))] = true
		}
	}
	return parts
}

// holdsLocked evaluates cmp against the map. REQUIRES c.mu.
func (c *Cluster) holdsLocked(cmp *kvpb.Compare) bool {
	kv, ok := c.data[string(cmp.GetKey())]
	var d int
	switch cmp.GetTarget() {
	case kvpb.Compare_VERSION:
		var v int64
		if ok {
			v = kv.GetVersion()
		}
		switch want := cmp.GetVersion(); {
		case v < want:
			d = -1
		case v > want:
			d = 1
		}
	case kvpb.Compare_VALUE:
		if !ok {
			return false // no value to compare: every value compare fails
		}
		d = bytes.Compare(kv.GetValue(), cmp.GetValue())
	}
	switch cmp.GetResult() {
	case kvpb.Compare_EQUAL:
		return d == 0
	case kvpb.Compare_NOT_EQUAL:
		return d != 0
	case kvpb.Compare_LESS:
		return d < 0
	case kvpb.Compare_GREATER:
		return d > 0
	}
	return false
}

// opKey returns the key of a get, put or delete, the start of a scan.
func opKey(o *kvpb.RequestOp) []byte {
	switch x := o.GetRequest().(type) {
	case *kvpb.RequestOp_Get:
		return x.Get.GetKey()
	case *kvpb.RequestOp_Put:
		return x.Put.GetKey()
	case *kvpb.RequestOp_Delete:
		return x.Delete.GetKey()
	case *kvpb.RequestOp_Scan:
		return x.Scan.GetStart()
	}
	return nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "cutkv: txn: "+format, args...)
}

// checkTxn refuses what the server refuses with InvalidArgument.
func checkTxn(r *kvpb.TxnRequest, maxOps int) error {
	if n := len(r.GetCompare()); n > maxOps {
		return invalid("%d compares exceed %d", n, maxOps)
	}
	for i, cmp := range r.GetCompare() {
		if err := checkKey(cmp.GetKey()); err != nil {
			return err
		}
		_, isValue := cmp.GetTargetUnion().(*kvpb.Compare_Value)
		switch cmp.GetTarget() {
		case kvpb.Compare_VERSION:
			if isValue {
				return invalid("compare %d targets the version but carries a value", i)
			}
		case kvpb.Compare_VALUE:
			if !isValue {
				return invalid("compare %d targets the value but carries none", i)
			}
		default:
			return invalid("compare %d: unknown target %v", i, cmp.GetTarget())
		}
	}
	for _, b := range []struct {
		name string
		ops  []*kvpb.RequestOp
	}{{"success", r.GetSuccess()}, {"failure", r.GetFailure()}} {
		if len(b.ops) > maxOps {
			return invalid("%d %s ops exceed %d", len(b.ops), b.name, maxOps)
		}
		writes := make(map[string]bool)
		for i, o := range b.ops {
			switch x := o.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				if err := checkKey(x.Get.GetKey()); err != nil {
					return err
				}
			case *kvpb.RequestOp_Put, *kvpb.RequestOp_Delete:
				k := opKey(o)
				if err := checkKey(k); err != nil {
					return err
				}
				if len(o.GetPut().GetValue()) > 1<<20 {
					return invalid("%s op %d: value of %d bytes exceeds 1 MiB", b.name, i, len(o.GetPut().GetValue()))
				}
				if writes[string(k)] {
					return invalid("%s ops write %q twice", b.name, k)
				}
				writes[string(k)] = true
			case *kvpb.RequestOp_Scan:
				if x.Scan.GetLimit() < 0 {
					return invalid("%s op %d: negative limit", b.name, i)
				}
			default:
				return invalid("%s op %d: empty", b.name, i)
			}
		}
		for i, o := range b.ops {
			switch x := o.GetRequest().(type) {
			case *kvpb.RequestOp_Get:
				if writes[string(x.Get.GetKey())] {
					return invalid("%s op %d reads %q, which the branch writes", b.name, i, x.Get.GetKey())
				}
			case *kvpb.RequestOp_Scan:
				for k := range writes {
					if inRange([]byte(k), x.Scan.GetStart(), x.Scan.GetEnd()) {
						return invalid("%s op %d scans %q, which the branch writes", b.name, i, k)
					}
				}
			}
		}
	}
	return nil
}
