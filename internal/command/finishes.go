package command

import "github.com/cutkv/cutkv/proto/internalpb"

// Finishes returns the finishes cmd applies, in the order the partition
// state machine applies them (partition/txn.go):
//
//   - a TxnFinish: its op;
//   - a TxnFinishes batch: each of its ops, every one applying exactly as
//     a TxnFinish entry at the same index would;
//   - a TxnDecide with finish set: the finish of the record partition's
//     own intent of the transaction, with the recorded decision (the
//     first decision recorded wins) and the op's prepare time. rec
//     returns the transaction's record as it stands before the entry
//     applies (nil rec: there is none): a decided record is the recorded
//     decision; with none, or a STAGING one (not a decision), the op's
//     own decision becomes the record.
//
// Any other entry, a TxnDecide without finish (every one written before
// parallel commits) included, finishes nothing. A finish is only
// effective where the partition holds the transaction's intent, prepared
// at the finish's prepare time when it names one, and only the first
// finish of an id in an entry can be: the caller checks that against the
// partition's state before the entry applies.
func Finishes(cmd *internalpb.Command, rec func(id string) (*internalpb.TxnDecideOp, bool)) []*internalpb.TxnFinishOp {
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_TxnFinish:
		return []*internalpb.TxnFinishOp{op.TxnFinish}
	case *internalpb.Command_TxnFinishes:
		return op.TxnFinishes.GetFinishes()
	case *internalpb.Command_TxnDecide:
		d := op.TxnDecide
		if !d.GetFinish() {
			return nil
		}
		decided := d
		if rec != nil {
			if r, ok := rec(string(d.GetTxnId())); ok && IsDecision(r) {
				decided = r
			}
		}
		return []*internalpb.TxnFinishOp{{
			TxnId: d.GetTxnId(), Commit: decided.GetCommit(), Succeeded: decided.GetSucceeded(), Stamp: decided.GetStamp(),
			PreparedUnixMs: d.GetPreparedUnixMs(),
		}}
	}
	return nil
}

// IsDecision says whether a transaction record is a decision: a record
// written STAGING by the record partition's prepare is not one until a
// TxnDecide, or a TxnFinish of the record partition's intent, decides
// it.
func IsDecision(rec *internalpb.TxnDecideOp) bool { return rec != nil && !rec.GetStaging() }
