package txn

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// The door of each service that carries a transaction (DESIGN.md,
// "Trust") calls one function here before anything else runs: Validate
// for a client's Txn, ValidatePrepare, ValidateFinish, ValidateDecide and
// ValidateForget for the participant service's requests. They are pure:
// the limits, the partition count and the partition a request names are
// passed in. Every error wraps ErrInvalid and names the field.
//
// The peer validators accept exactly what this node's own coordinator
// sends (Split of a request Validate accepted, ids of IDSize bytes, the
// decision it records), so every node must run with the same Limits, or
// peers with larger ones.

// ErrInvalid is returned for a transaction, or a participant request,
// that can never run.
var ErrInvalid = errors.New("txn: invalid transaction")

// IDSize is the length of a transaction id. Ids are the server's: the
// coordinator draws IDSize random bytes for each transaction.
const IDSize = 16

// DefaultMaxOps is Limits.MaxOps when it is not set.
const DefaultMaxOps = 128

// Limits bound a transaction.
type Limits struct {
	MaxOps       int // per list (compares, success, failure); ≤ 0: DefaultMaxOps
	MaxKeySize   int // bytes of a key or scan bound; ≤ 0: no limit
	MaxValueSize int // bytes of a value; ≤ 0: no limit
}

func (l Limits) withDefaults() Limits {
	if l.MaxOps <= 0 {
		l.MaxOps = DefaultMaxOps
	}
	return l
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks a client's transaction against the limits and the
// rules every replica relies on: every enum a known value and every op
// set, keys non-empty, no key written twice in a branch, and no branch
// reading a key (or a range over a key) it writes, so reads taken at
// prepare time are what the branch would read. A scan's range is not
// empty. Split of a transaction Validate accepted gives shares that
// ValidateShare accepts.
func Validate(req *kvpb.TxnRequest, l Limits) error {
	if err := checkTxn(req.GetCompare(), req.GetSuccess(), req.GetFailure(), l.withDefaults(), nil); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// ValidateShare checks partition p's share of a transaction, as a peer
// sent it in a prepare: everything Validate checks of a transaction,
// and what Split guarantees of a share. Every key a compare or a get,
// put or delete names belongs to partition p of partitions (a scan goes
// to every partition, so its range is allowed on any); the share is not
// empty; success_index and failure_index hold one entry per op, strictly
// increasing (Split keeps branch order) and below MaxOps (the original
// branch had at most MaxOps ops, so no position is larger).
func ValidateShare(p uint64, partitions uint32, share *internalpb.TxnShare, l Limits) error {
	if err := checkPartition("partition", p, partitions); err != nil {
		return invalid("%v", err)
	}
	if err := checkShare(p, partitions, share, l.withDefaults()); err != nil {
		return invalid("share: %v", err)
	}
	return nil
}

// ValidatePrepare checks a prepare for partition p: a transaction id of
// IDSize bytes, a record partition in 1..partitions, a prepare time
// (Unix ms) above 0, and a share ValidateShare accepts. The priority is
// the door's to bound (it needs a clock).
func ValidatePrepare(p uint64, partitions uint32, op *internalpb.TxnPrepareOp, l Limits) error {
	if op == nil {
		return invalid("prepare: no op")
	}
	if err := checkID("txn_id", op.GetTxnId()); err != nil {
		return invalid("prepare: %v", err)
	}
	if err := checkPartition("partition", p, partitions); err != nil {
		return invalid("prepare: %v", err)
	}
	if err := checkPartition("record_partition", op.GetRecordPartition(), partitions); err != nil {
		return invalid("prepare: %v", err)
	}
	if ms := op.GetPreparedUnixMs(); ms <= 0 {
		return invalid("prepare: prepared_unix_ms %d, want > 0", ms)
	}
	if err := checkShare(p, partitions, op.GetShare(), l.withDefaults()); err != nil {
		return invalid("prepare: share: %v", err)
	}
	// The record partition's prepare writes the STAGING record with the
	// participant list; nobody else's carries one.
	ps := op.GetParticipants()
	if p != op.GetRecordPartition() {
		if len(ps) > 0 {
			return invalid("prepare: participants on partition %d, which is not the record partition %d", p, op.GetRecordPartition())
		}
		return nil
	}
	if len(ps) < 2 {
		return invalid("prepare: the record partition's prepare lists %d participants, want at least 2", len(ps))
	}
	if err := checkParticipants(ps, partitions); err != nil {
		return invalid("prepare: %v", err)
	}
	if !slices.Contains(ps, p) {
		return invalid("prepare: participants %v do not name the record partition %d", ps, p)
	}
	return nil
}

// checkParticipants: in 1..partitions, strictly increasing (so at most
// partitions of them).
func checkParticipants(ps []uint64, partitions uint32) error {
	if len(ps) > int(partitions) {
		return fmt.Errorf("%d participants, more than the %d partitions", len(ps), partitions)
	}
	for i, q := range ps {
		if err := checkPartition(fmt.Sprintf("participants[%d]", i), q, partitions); err != nil {
			return err
		}
		if i > 0 && q <= ps[i-1] {
			return fmt.Errorf("participants[%d] = %d does not follow %d", i, q, ps[i-1])
		}
	}
	return nil
}

// ValidateStatus checks a status request: a transaction id of IDSize
// bytes and its prepare time (Unix ms) above 0 (the tombstone it may
// leave is dropped by the horizon after that time).
func ValidateStatus(op *internalpb.TxnStatusOp) error {
	if op == nil {
		return invalid("status: no op")
	}
	if err := checkID("txn_id", op.GetTxnId()); err != nil {
		return invalid("status: %v", err)
	}
	if ms := op.GetPreparedUnixMs(); ms <= 0 {
		return invalid("status: prepared_unix_ms %d, want > 0", ms)
	}
	return nil
}

// ValidateFinish checks a finish: a transaction id of IDSize bytes,
// succeeded only with commit, and the transaction's prepare time (Unix
// ms) above 0. Every sender names that time (the coordinator its own,
// recovery the intent's); a finish without one would leave a finished
// id that no horizon ever drops.
func ValidateFinish(op *internalpb.TxnFinishOp) error {
	if op == nil {
		return invalid("finish: no op")
	}
	if err := checkID("txn_id", op.GetTxnId()); err != nil {
		return invalid("finish: %v", err)
	}
	if op.GetSucceeded() && !op.GetCommit() {
		return invalid("finish: succeeded without commit")
	}
	if ms := op.GetPreparedUnixMs(); ms <= 0 {
		return invalid("finish: prepared_unix_ms %d, want > 0", ms)
	}
	return nil
}

// ValidateDecide checks a decision: a transaction id of IDSize bytes,
// succeeded only with commit, and participants in 1..partitions,
// strictly increasing (so at most partitions of them), and at least one
// for a commit. An abort may name none: recovery's presumed abort does
// not know them.
func ValidateDecide(partitions uint32, op *internalpb.TxnDecideOp) error {
	if op == nil {
		return invalid("decide: no op")
	}
	if err := checkID("txn_id", op.GetTxnId()); err != nil {
		return invalid("decide: %v", err)
	}
	if op.GetSucceeded() && !op.GetCommit() {
		return invalid("decide: succeeded without commit")
	}
	if op.GetStaging() {
		return invalid("decide: staging is a record's state, never a decision")
	}
	if op.GetFinish() && op.GetPreparedUnixMs() <= 0 {
		return invalid("decide: a decision that finishes needs prepared_unix_ms > 0, got %d", op.GetPreparedUnixMs())
	}
	ps := op.GetParticipants()
	if op.GetCommit() && len(ps) == 0 {
		return invalid("decide: a commit with no participants")
	}
	if err := checkParticipants(ps, partitions); err != nil {
		return invalid("decide: %v", err)
	}
	return nil
}

// ValidateRecordRead checks a record read: a transaction id of IDSize
// bytes.
func ValidateRecordRead(id []byte) error {
	if err := checkID("txn_id", id); err != nil {
		return invalid("record: %v", err)
	}
	return nil
}

// ValidateForget checks a forget: at most max ids, each of IDSize bytes.
func ValidateForget(op *internalpb.TxnForgetOp, max int) error {
	ids := op.GetTxnIds()
	if len(ids) > max {
		return invalid("forget: %d txn_ids, more than %d", len(ids), max)
	}
	for i, id := range ids {
		if err := checkID(fmt.Sprintf("txn_ids[%d]", i), id); err != nil {
			return invalid("forget: %v", err)
		}
	}
	return nil
}

func checkID(field string, id []byte) error {
	if len(id) != IDSize {
		return fmt.Errorf("%s of %d bytes, want %d", field, len(id), IDSize)
	}
	return nil
}

func checkPartition(field string, p uint64, partitions uint32) error {
	if p == 0 || p > uint64(partitions) {
		return fmt.Errorf("%s %d not in 1..%d", field, p, partitions)
	}
	return nil
}

// checkShare is ValidateShare once p is known to be in 1..partitions.
// REQUIRES: l.withDefaults().
func checkShare(p uint64, partitions uint32, s *internalpb.TxnShare, l Limits) error {
	if len(s.GetCompares())+len(s.GetSuccess())+len(s.GetFailure()) == 0 {
		return errors.New("empty (no compare and no op)")
	}
	owns := func(key []byte) error {
		if q := keyspace.PartitionOf(key, partitions); q != p {
			return fmt.Errorf("key %s belongs to partition %d, not %d", showKey(key), q, p)
		}
		return nil
	}
	if err := checkTxn(s.GetCompares(), s.GetSuccess(), s.GetFailure(), l, owns); err != nil {
		return err
	}
	if err := checkIndex("success_index", s.GetSuccessIndex(), len(s.GetSuccess()), l.MaxOps); err != nil {
		return err
	}
	return checkIndex("failure_index", s.GetFailureIndex(), len(s.GetFailure()), l.MaxOps)
}

// checkIndex checks a share's positions of its n ops in the original
// branch, which had at most max ops.
func checkIndex(field string, idx []uint32, n, max int) error {
	if len(idx) != n {
		return fmt.Errorf("%s has %d entries for %d ops", field, len(idx), n)
	}
	for i, at := range idx {
		if int64(at) >= int64(max) {
			return fmt.Errorf("%s[%d] = %d, not below the limit of %d ops", field, i, at, max)
		}
		if i > 0 && at <= idx[i-1] {
			return fmt.Errorf("%s[%d] = %d does not follow %d", field, i, at, idx[i-1])
		}
	}
	return nil
}

// checkTxn checks the lists of a transaction or of a share. owns, when
// set, checks that a compare's or a point op's key belongs where the
// lists were sent. REQUIRES: l.withDefaults().
func checkTxn(cmps []*kvpb.Compare, success, failure []*kvpb.RequestOp, l Limits, owns func(key []byte) error) error {
	for _, list := range []struct {
		name string
		n    int
	}{{"compares", len(cmps)}, {"success ops", len(success)}, {"failure ops", len(failure)}} {
		if list.n > l.MaxOps {
			return fmt.Errorf("%d %s exceed the limit of %d", list.n, list.name, l.MaxOps)
		}
	}
	for i, c := range cmps {
		if err := checkCompare(c, l, owns); err != nil {
			return fmt.Errorf("compare %d: %w", i, err)
		}
	}
	if err := checkBranch("success", success, l, owns); err != nil {
		return err
	}
	return checkBranch("failure", failure, l, owns)
}

func checkKey(k []byte, l Limits, owns func(key []byte) error) error {
	if len(k) == 0 {
		return errors.New("empty key")
	}
	if l.MaxKeySize > 0 && len(k) > l.MaxKeySize {
		return fmt.Errorf("key of %d bytes exceeds the limit of %d", len(k), l.MaxKeySize)
	}
	if owns != nil {
		return owns(k)
	}
	return nil
}

// checkCompare refuses unknown enum values rather than let Holds read
// them as false: a value this binary does not know is a request from a
// newer or a broken sender, and its meaning is not ours to guess.
func checkCompare(c *kvpb.Compare, l Limits, owns func(key []byte) error) error {
	if err := checkKey(c.GetKey(), l, owns); err != nil {
		return err
	}
	switch c.GetResult() {
	case kvpb.Compare_EQUAL, kvpb.Compare_GREATER, kvpb.Compare_LESS, kvpb.Compare_NOT_EQUAL:
	default:
		return fmt.Errorf("unknown result %d", int32(c.GetResult()))
	}
	switch c.GetTarget() {
	case kvpb.Compare_VERSION:
		if _, ok := c.GetTargetUnion().(*kvpb.Compare_Version); !ok && c.GetTargetUnion() != nil {
			return errors.New("targets the version but carries a value")
		}
	case kvpb.Compare_VALUE:
		if _, ok := c.GetTargetUnion().(*kvpb.Compare_Value); !ok {
			return errors.New("targets the value but carries none")
		}
		if l.MaxValueSize > 0 && len(c.GetValue()) > l.MaxValueSize {
			return fmt.Errorf("value of %d bytes exceeds the limit of %d", len(c.GetValue()), l.MaxValueSize)
		}
	default:
		return fmt.Errorf("unknown target %d", int32(c.GetTarget()))
	}
	return nil
}

// checkBranch checks one branch's ops: each set and bounded, no key
// written twice, and no key written that the branch also reads.
func checkBranch(name string, ops []*kvpb.RequestOp, l Limits, owns func(key []byte) error) error {
	writes := map[string]bool{}
	var reads []Want
	for i, op := range ops {
		var err error
		switch r := op.GetRequest().(type) {
		case *kvpb.RequestOp_Put:
			k := r.Put.GetKey()
			if err = checkKey(k, l, owns); err != nil {
				break
			}
			if l.MaxValueSize > 0 && len(r.Put.GetValue()) > l.MaxValueSize {
				err = fmt.Errorf("value of %d bytes exceeds the limit of %d", len(r.Put.GetValue()), l.MaxValueSize)
				break
			}
			err = noteWrite(writes, k)
		case *kvpb.RequestOp_Delete:
			k := r.Delete.GetKey()
			if err = checkKey(k, l, owns); err != nil {
				break
			}
			err = noteWrite(writes, k)
		case *kvpb.RequestOp_Get:
			if err = checkKey(r.Get.GetKey(), l, owns); err != nil {
				break
			}
			reads = append(reads, Want{Start: r.Get.GetKey()})
		case *kvpb.RequestOp_Scan:
			if err = checkScan(r.Scan, l); err != nil {
				break
			}
			reads = append(reads, Want{Start: r.Scan.GetStart(), End: nonNil(r.Scan.GetEnd())})
		default:
			err = errors.New("empty (no get, put, delete or scan)")
		}
		if err != nil {
			return fmt.Errorf("%s op %d: %w", name, i, err)
		}
	}
	for k := range writes {
		for _, r := range reads {
			if (r.isRange() && r.covers([]byte(k))) || (!r.isRange() && string(r.Start) == k) {
				return fmt.Errorf("the %s branch reads key %s, which it also writes", name, showKey([]byte(k)))
			}
		}
	}
	return nil
}

func noteWrite(writes map[string]bool, k []byte) error {
	if writes[string(k)] {
		return fmt.Errorf("writes key %s twice", showKey(k))
	}
	writes[string(k)] = true
	return nil
}

// checkScan checks a scan inside a transaction: [start, end), an empty
// end meaning to the end of the key space; an empty start is the start
// of the key space.
func checkScan(sc *kvpb.ScanRequest, l Limits) error {
	start, end := sc.GetStart(), sc.GetEnd()
	switch {
	case l.MaxKeySize > 0 && len(start) > l.MaxKeySize:
		return fmt.Errorf("scan start of %d bytes exceeds the key limit of %d", len(start), l.MaxKeySize)
	case l.MaxKeySize > 0 && len(end) > l.MaxKeySize:
		return fmt.Errorf("scan end of %d bytes exceeds the key limit of %d", len(end), l.MaxKeySize)
	case len(end) > 0 && bytes.Compare(start, end) >= 0:
		return fmt.Errorf("scan range [%s, %s) is empty", showKey(start), showKey(end))
	case sc.GetLimit() < 0:
		return fmt.Errorf("scan limit %d is negative", sc.GetLimit())
	case sc.GetPartition() != 0:
		return fmt.Errorf("scan names partition %d (a transaction's scan covers all)", sc.GetPartition())
	}
	return nil
}

// showKey quotes a key for an error, cut to its first 64 bytes: a
// message must stay short whatever a request carries.
func showKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return fmt.Sprintf("%q...", k[:max])
	}
	return fmt.Sprintf("%q", k)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
