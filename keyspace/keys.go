package keyspace

import (
	"bytes"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// SmallestKey returns the smallest key req names — compares, gets, puts,
// deletes, scan starts (even empty) — whose partition holds the
// transaction record; ok is false when it names none. Clients route a
// transaction by it.
func SmallestKey(req *kvpb.TxnRequest) (key []byte, ok bool) {
	note := func(k []byte) {
		if !ok || bytes.Compare(k, key) < 0 {
			key, ok = k, true
		}
	}
	for _, c := range req.GetCompare() {
		note(c.GetKey())
	}
	for _, ops := range [][]*kvpb.RequestOp{req.GetSuccess(), req.GetFailure()} {
		for _, op := range ops {
			if sc := op.GetScan(); sc != nil {
				note(sc.GetStart())
			} else {
				note(OpKey(op))
			}
		}
	}
	return key, ok
}

// OpKey returns the key of a point op (get, put, delete), nil for a scan.
func OpKey(op *kvpb.RequestOp) []byte {
	switch r := op.GetRequest().(type) {
	case *kvpb.RequestOp_Get:
		return r.Get.GetKey()
	case *kvpb.RequestOp_Put:
		return r.Put.GetKey()
	case *kvpb.RequestOp_Delete:
		return r.Delete.GetKey()
	}
	return nil
}

// Writes says whether either branch of req puts or deletes a key. A
// transaction that writes nothing is a read: the client retries it after
// an ambiguous failure, and the node gives it wait-die's head start.
func Writes(req *kvpb.TxnRequest) bool {
	for _, ops := range [][]*kvpb.RequestOp{req.GetSuccess(), req.GetFailure()} {
		for _, o := range ops {
			if o.GetPut() != nil || o.GetDelete() != nil {
				return true
			}
		}
	}
	return false
}
