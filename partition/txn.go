package partition

import (
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// MaxTxnScan bounds the keys one partition returns for a scan op inside a
// transaction (the op's limit, when smaller, wins).
const MaxTxnScan = 10000

// Vote is a participant's answer to Prepare.
type Vote struct {
	// Prepared is false when the prepare was refused (nothing was locked):
	// by a lock conflict (Conflicts names the holders), or because the id
	// was finished here before (Finished: this vote is not that prepare's
	// own refusal; the transaction record says what became of it).
	Prepared  bool
	Conflicts []string
	Finished  bool
	// Version of the prepare entry that created the intent (the effective
	// prepare): the transaction's stamp is the maximum over its
	// participants' (DESIGN.md, consistent cut rule 3).
	Version uint64
	// ComparesHold: every compare of the share holds.
	ComparesHold bool
	// Reads of each branch's ops of the share, in share order: GetResponse
	// and ScanResponse carry data; PutResponse is empty; DeleteResponse
	// says whether the key existed.
	SuccessReads []*kvpb.ResponseOp
	FailureReads []*kvpb.ResponseOp
}

// OnePhaseResult is the result of a single-partition transaction.
type OnePhaseResult struct {
	Conflicts []string // non-empty: refused by a lock, nothing applied
	Succeeded bool
	Responses []*kvpb.ResponseOp // of the branch that ran, in share order
}

// Status is what this partition's log says of a transaction, settled by
// a TxnStatusOp (DESIGN.md, "Transactions", recovery).
type Status struct {
	State        internalpb.TxnState
	ComparesHold bool
	Version      uint64
	SuccessReads []*kvpb.ResponseOp
	FailureReads []*kvpb.ResponseOp
}

// Intent is a transaction prepared on this partition and not yet finished.
type Intent struct {
	Op    *internalpb.TxnPrepareOp
	Vote  Vote
	Index uint64 // raft index of the prepare entry
}

func isTxnCommand(cmd *internalpb.Command) bool {
	switch cmd.GetOp().(type) {
	case *internalpb.Command_TxnPrepare, *internalpb.Command_TxnFinish, *internalpb.Command_TxnDecide, *internalpb.Command_TxnOnePhase,
		*internalpb.Command_TxnForget, *internalpb.Command_TxnHorizon, *internalpb.Command_TxnStatus, *internalpb.Command_TxnFinishes:
		return true
	}
	return false
}

// applyTxnLocked applies a transaction command. REQUIRES: mu held.
func (p *Partition) applyTxnLocked(index uint64, cmd *internalpb.Command) any {
	switch op := cmd.GetOp().(type) {
	case *internalpb.Command_TxnPrepare:
		return p.prepareLocked(index, cmd.GetCutVersion(), op.TxnPrepare)
	case *internalpb.Command_TxnFinish:
		p.finishLocked(index, op.TxnFinish)
		return nil
	case *internalpb.Command_TxnFinishes:
		for _, f := range op.TxnFinishes.GetFinishes() {
			p.finishLocked(index, f)
		}
		return nil
	case *internalpb.Command_TxnDecide:
		return p.decideLocked(index, op.TxnDecide)
	case *internalpb.Command_TxnStatus:
		return p.statusLocked(op.TxnStatus)
	case *internalpb.Command_TxnOnePhase:
		return p.onePhaseLocked(index, op.TxnOnePhase)
	case *internalpb.Command_TxnForget:
		for _, id := range op.TxnForget.GetTxnIds() {
			if rec := p.records[string(id)]; rec != nil && !rec.GetStaging() {
				delete(p.records, string(id)) // a STAGING record is not done with: its transaction may be committed
				p.touch(frameRecord, string(id))
			}
		}
		return nil
	case *internalpb.Command_TxnHorizon:
		p.horizonLocked(op.TxnHorizon.GetUnixMs())
		return nil
	}
	return nil
}

// Transaction ids. An id names one transaction for as long as this
// partition remembers it (DESIGN.md, "Transactions (2PC)": no reuse).
// Ids are the coordinator's, 16 random bytes, and the services' doors
// check their shape (txn.ValidatePrepare and friends); the rules below
// keep the state machine right should an id arrive twice all the same —
// a buggy or replayed coordinator, a forged request — so that no
// prepare answers "prepared" for writes that will not apply and no
// finish applies or drops another transaction's writes:
//
//   - A prepare of an id that holds an intent here answers the intent's
//     vote only if it is the same prepare (equal op: a retry, or a
//     delayed copy of the proposal); any other prepare under that id is
//     refused. Answering the first vote to a second transaction would
//     let it report success with the first one's reads while its own
//     writes are never applied.
//   - A prepare of an id finished here, or whose decision this partition
//     records (it is the id's record partition: the decision came
//     first, as recovery's presumed abort does), or stamped before the
//     horizon, is refused and locks nothing; so is one whose locks
//     conflict. A refusal leaves a tombstone: the first applied prepare
//     decides this partition's vote for good (parallel commits: a
//     transaction is committed when every participant's effective
//     prepare created an intent, so a later copy must never create one).
//   - A finish names the transaction's prepare time (the coordinator
//     its own, recovery the intent's); one that names a time other than
//     the intent's is another transaction's under the same id and
//     changes nothing (0, unknown, matches any).
//   - A finish with no intent applies no writes. An abort leaves a
//     tombstone (a finished id with the finish's prepare time) so that
//     a prepare still on its way never locks: the coordinator gave up
//     on it. A commit leaves nothing. Committing needs every
//     participant's prepare applied first, so a commit with no intent
//     here is either a copy of a finish already applied (its finished
//     id, or the horizon, refuses any late prepare already) or a sign
//     that something decided without this partition's vote; then a
//     tombstone would only make sure this share is lost for good, where
//     without one a late prepare can still lock and recovery, reading
//     the commit in the record (while it is kept), apply it. Leaving
//     nothing also means a stray commit cannot block a future
//     transaction, nor grow the finished ids.
//
// Finished ids stay until the horizon passes their prepare time
// (horizonLocked); a prepare older than the horizon is refused instead,
// so memory stays bounded by the transactions of the last horizon
// interval. A tombstone already behind the horizon is not kept.

// prepareLocked takes the share's locks (all or none), evaluates its
// compares and reads what either branch reads. The first prepare of an id
// that applies is its effective prepare (DESIGN.md, "Transactions"): it
// creates the intent, or refuses and leaves a tombstone, and later
// prepares change nothing. See "Transaction ids" for when a prepare is
// refused. On the record partition (the op lists the participants) a
// prepare that creates the intent also writes the record as STAGING.
func (p *Partition) prepareLocked(index, version uint64, op *internalpb.TxnPrepareOp) Vote {
	id := string(op.GetTxnId())
	if in := p.intents[id]; in != nil {
		if proto.Equal(in.Op, op) {
			return in.Vote
		}
		return Vote{} // another transaction under a prepared id
	}
	if _, done := p.finished[id]; done {
		return Vote{Finished: true} // finished already (a late prepare): never lock again
	}
	if _, decided := p.records[id]; decided {
		p.tombstoneLocked(id, op.GetPreparedUnixMs())
		return Vote{} // decided before this prepare applied (no reuse)
	}
	if op.GetPreparedUnixMs() < p.horizon {
		return Vote{} // older than the horizon: a late copy, perhaps finished and forgotten
	}
	if c := p.locks.Acquire(id, txn.Wants(op.GetShare())); len(c) > 0 {
		p.tombstoneLocked(id, op.GetPreparedUnixMs())
		return Vote{Conflicts: c}
	}
	v := Vote{
		Prepared:     true,
		Version:      version,
		ComparesHold: p.holdsLocked(op.GetShare().GetCompares()),
		SuccessReads: p.readsLocked(op.GetShare().GetSuccess()),
		FailureReads: p.readsLocked(op.GetShare().GetFailure()),
	}
	p.intents[id] = &Intent{Op: op, Vote: v, Index: index}
	p.touch(frameIntent, id)
	if parts := op.GetParticipants(); len(parts) > 0 && op.GetRecordPartition() == p.id {
		p.records[id] = &internalpb.TxnDecideOp{TxnId: op.GetTxnId(), Staging: true, Participants: parts, PreparedUnixMs: op.GetPreparedUnixMs()}
		p.touch(frameRecord, id)
	}
	return v
}

// statusLocked settles what this partition's log says of a transaction:
// PREPARED with the intent's vote, FINISHED when the id finished here or
// its record is decided here, else REFUSED — leaving a tombstone so that
// no later prepare of it creates an intent (recovery's "prevented").
func (p *Partition) statusLocked(op *internalpb.TxnStatusOp) Status {
	id := string(op.GetTxnId())
	if in := p.intents[id]; in != nil {
		v := in.Vote
		return Status{State: internalpb.TxnState_TXN_STATE_PREPARED, ComparesHold: v.ComparesHold, Version: v.Version,
			SuccessReads: v.SuccessReads, FailureReads: v.FailureReads}
	}
	if _, done := p.finished[id]; done {
		return Status{State: internalpb.TxnState_TXN_STATE_FINISHED}
	}
	if rec := p.records[id]; rec != nil && !rec.GetStaging() {
		return Status{State: internalpb.TxnState_TXN_STATE_FINISHED}
	}
	if at := op.GetPreparedUnixMs(); at == 0 || at >= p.horizon {
		p.tombstoneLocked(id, at)
	}
	return Status{State: internalpb.TxnState_TXN_STATE_REFUSED}
}

// finishLocked applies (commit) or drops (abort) an intent and releases
// its locks. A finish without an intent applies nothing; an abort leaves
// a tombstone ("Transaction ids"). On the record partition a STAGING
// record takes the finish's decision (only a decided transaction, or an
// abort by whoever holds a refusal, is finished).
func (p *Partition) finishLocked(index uint64, op *internalpb.TxnFinishOp) {
	id := string(op.GetTxnId())
	in := p.intents[id]
	if in == nil {
		if !op.GetCommit() {
			p.tombstoneLocked(id, op.GetPreparedUnixMs())
		}
		return
	}
	if at := op.GetPreparedUnixMs(); at != 0 && at != in.Op.GetPreparedUnixMs() {
		return // another transaction's finish under this id
	}
	if rec := p.records[id]; rec != nil && rec.GetStaging() {
		p.records[id] = &internalpb.TxnDecideOp{TxnId: rec.GetTxnId(), Commit: op.GetCommit(), Succeeded: op.GetSucceeded(),
			Stamp: op.GetStamp(), Participants: rec.GetParticipants()}
		p.touch(frameRecord, id)
	}
	p.cut.TxnFinished(id, op.GetCommit(), op.GetSucceeded(), op.GetStamp())
	if op.GetCommit() {
		ops := in.Op.GetShare().GetFailure()
		if op.GetSucceeded() {
			ops = in.Op.GetShare().GetSuccess()
		}
		p.writeLocked(index, ops)
	}
	p.locks.Release(id)
	delete(p.intents, id)
	p.finished[id] = in.Op.GetPreparedUnixMs()
	p.touch(frameIntent, id)
	p.touch(frameFinished, id)
}

// tombstoneLocked remembers id, finished here without an intent, with
// its prepare time at (0: unknown). A tombstone behind the horizon is
// not kept: the horizon refuses that prepare already. The first time
// recorded stays, except that a known one replaces an unknown one.
func (p *Partition) tombstoneLocked(id string, at int64) {
	if at != 0 && at < p.horizon {
		return
	}
	if old, ok := p.finished[id]; ok && (old != 0 || at == 0) {
		return
	}
	p.finished[id] = at
	p.touch(frameFinished, id)
}

// horizonLocked raises the horizon to ms (never lowers it) and drops the
// finished ids prepared before it: their prepares are refused anyway. An
// id whose prepare time is unknown (0) is kept.
func (p *Partition) horizonLocked(ms int64) {
	if ms <= p.horizon {
		return
	}
	p.horizon = ms
	p.touch(rowHorizon, "")
	for id, at := range p.finished {
		if at > 0 && at < ms {
			delete(p.finished, id)
			p.touch(frameFinished, id)
		}
	}
}

// FinishedBefore says whether a prepare of id stamped preparedUnixMs,
// applied now, would find the transaction already over here (prepareLocked's
// first refusals): no intent holds it and the id finished here, this partition
// holds its record, or the stamp is behind the horizon. Such a prepare is a late
// copy and says nothing of whether the state includes the transaction:
// cut/verify asks it of a replica's base before counting a prepare after
// the base as making the transaction known.
func (p *Partition) FinishedBefore(id string, preparedUnixMs int64) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.intents[id] != nil {
		return false // prepared and not finished: not over
	}
	if _, done := p.finished[id]; done {
		return true
	}
	if _, decided := p.records[id]; decided {
		return true
	}
	return preparedUnixMs < p.horizon
}

// FinishedCount returns how many finished transaction ids the partition
// remembers, and its horizon (Unix ms).
func (p *Partition) FinishedCount() (int, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.finished), p.horizon
}

// decideLocked records a decision unless one exists (a STAGING record is
// not one); it returns the recorded one (first decision wins). With
// op.Finish it also finishes this partition's intent of the transaction
// with the recorded decision, in the same entry.
func (p *Partition) decideLocked(index uint64, op *internalpb.TxnDecideOp) *internalpb.TxnDecideOp {
	id := string(op.GetTxnId())
	rec := p.records[id]
	if rec == nil || rec.GetStaging() {
		d := &internalpb.TxnDecideOp{TxnId: op.GetTxnId(), Commit: op.GetCommit(), Succeeded: op.GetSucceeded(), Stamp: op.GetStamp(),
			Participants: op.GetParticipants()}
		if rec != nil && len(d.Participants) == 0 {
			d.Participants = rec.GetParticipants()
		}
		rec = d
		p.records[id] = rec
		p.touch(frameRecord, id)
	}
	if op.GetFinish() && p.intents[id] != nil {
		p.finishLocked(index, &internalpb.TxnFinishOp{TxnId: op.GetTxnId(), Commit: rec.GetCommit(), Succeeded: rec.GetSucceeded(),
			Stamp: rec.GetStamp(), PreparedUnixMs: op.GetPreparedUnixMs()})
	}
	return rec
}

// onePhaseLocked runs a whole single-partition transaction in one entry.
// An id that holds an intent here refuses it: a transaction never
// conflicts with its own locks, so a one-phase transaction under a
// prepared id would write past that transaction's locks.
func (p *Partition) onePhaseLocked(index uint64, op *internalpb.TxnOnePhaseOp) OnePhaseResult {
	s := op.GetShare()
	id := string(op.GetTxnId())
	if p.intents[id] != nil {
		return OnePhaseResult{Conflicts: []string{id}}
	}
	if c := p.locks.Conflicts(id, txn.Wants(s)); len(c) > 0 {
		return OnePhaseResult{Conflicts: c}
	}
	res := OnePhaseResult{Succeeded: p.holdsLocked(s.GetCompares())}
	ops := s.GetFailure()
	if res.Succeeded {
		ops = s.GetSuccess()
	}
	// Validation keeps a branch from reading what it writes, so reading
	// everything first and writing after is the branch's own order.
	res.Responses = p.readsLocked(ops)
	p.writeLocked(index, ops)
	return res
}

func (p *Partition) holdsLocked(cmps []*kvpb.Compare) bool {
	for _, c := range cmps {
		var version int64
		var value []byte
		if kv, ok := p.getLocked(c.GetKey()); ok {
			version, value = kv.Version, kv.Value
		}
		if !txn.Holds(c, version, value) {
			return false
		}
	}
	return true
}

// readsLocked answers each op from the committed state.
func (p *Partition) readsLocked(ops []*kvpb.RequestOp) []*kvpb.ResponseOp {
	out := make([]*kvpb.ResponseOp, 0, len(ops))
	for _, op := range ops {
		switch r := op.GetRequest().(type) {
		case *kvpb.RequestOp_Get:
			resp := &kvpb.GetResponse{}
			if kv, ok := p.getLocked(r.Get.GetKey()); ok {
				resp.Kv = kv.Proto(false)
			}
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Get{Get: resp}})
		case *kvpb.RequestOp_Scan:
			limit := int(r.Scan.GetLimit())
			if limit <= 0 || limit > MaxTxnScan {
				limit = MaxTxnScan // a scan inside a transaction is bounded: it runs in the apply loop
			}
			var end []byte
			if len(r.Scan.GetEnd()) > 0 {
				end = r.Scan.GetEnd()
			}
			kvs, more := p.scanLocked(r.Scan.GetStart(), end, limit)
			resp := &kvpb.ScanResponse{More: more}
			for _, kv := range kvs {
				resp.Kvs = append(resp.Kvs, kv.Proto(r.Scan.GetKeysOnly()))
			}
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Scan{Scan: resp}})
		case *kvpb.RequestOp_Put:
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Put{Put: &kvpb.PutResponse{}}})
		case *kvpb.RequestOp_Delete:
			resp := &kvpb.DeleteResponse{}
			if _, ok := p.getLocked(r.Delete.GetKey()); ok {
				resp.Deleted = 1
			}
			out = append(out, &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Delete{Delete: resp}})
		}
	}
	return out
}

func (p *Partition) writeLocked(index uint64, ops []*kvpb.RequestOp) {
	for _, op := range ops {
		switch r := op.GetRequest().(type) {
		case *kvpb.RequestOp_Put:
			p.putLocked(index, r.Put.GetKey(), r.Put.GetValue())
		case *kvpb.RequestOp_Delete:
			p.deleteLocked(r.Delete.GetKey())
		}
	}
}

// LockConflicts returns the transactions whose locks conflict with the
// share of txnID (for wait-die outside the state machine).
func (p *Partition) LockConflicts(txnID string, wants []txn.Want) []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.locks.Conflicts(txnID, wants)
}

// IntentOf returns the prepared intent of a transaction, if any.
func (p *Partition) IntentOf(txnID string) (*Intent, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	in, ok := p.intents[txnID]
	return in, ok
}

// ReadBlocker returns a transaction holding a prepared write on a key in
// [start, end) (end nil: start only; empty: to the end of the key space).
func (p *Partition) ReadBlocker(start, end []byte) (string, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.locks.ReadBlocker(start, end)
}

// WriteBlocker reports the transaction whose lock (shared or exclusive)
// keeps a plain write off key, if any.
func (p *Partition) WriteBlocker(key []byte) (string, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.locks.WriteBlocker(key)
}

// StaleIntents returns the intents prepared before unixMs, oldest first.
func (p *Partition) StaleIntents(unixMs int64) []*Intent {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []*Intent
	for _, in := range p.intents {
		if in.Op.GetPreparedUnixMs() < unixMs {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}

// LockHolders returns the transactions holding locks here.
func (p *Partition) LockHolders() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.locks.Holders()
}

// Record returns the recorded decision of a transaction, if any.
func (p *Partition) Record(txnID string) (*internalpb.TxnDecideOp, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	r, ok := p.records[txnID]
	return r, ok
}

// RecordCount returns how many transaction records the partition holds.
func (p *Partition) RecordCount() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.records)
}

// TxnVote is the vote as the transaction core (txn.Coordinator) reads it.
func (v Vote) TxnVote() txn.Vote {
	return txn.PrepareVote(v.Prepared, v.Finished, v.ComparesHold, v.Version)
}

// TxnVote is the status as the transaction core reads it.
func (s Status) TxnVote() txn.Vote {
	v, _ := txn.StatusVote(s.State, s.ComparesHold, s.Version) // the state machine makes only known states
	return v
}

// TxnRecord returns transaction id's record as the transaction core reads
// it (a STAGING one with this partition's own vote), if there is one.
func (p *Partition) TxnRecord(id string) (txn.Record, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	rec := p.records[id]
	if rec == nil {
		return txn.Record{}, false
	}
	out := txn.RecordOf(rec)
	if in := p.intents[id]; in != nil && out.Staging {
		out.Vote = in.Vote.TxnVote()
	}
	return out, true
}
