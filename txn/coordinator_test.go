package txn_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// The scenarios below run the coordinator core (txn.Coordinator) and
// recovery's decision (txn.Recover) against real partition state
// machines, one per participant, with the harness standing in for the
// node: it carries each message the core asks for as the entry the node
// would propose, in an order the scenario chooses, and loses the ones the
// scenario loses. At the end a checker compares what the client heard
// with what the logs applied: a transaction told committed applied its
// writes on every participant, one told aborted on none, and no
// participant keeps an intent or a lock.

const txnID = "T"

// pcEnv is one transaction over partitions 1 (the record partition) and 2.
type pcEnv struct {
	t        *testing.T
	parts    map[uint64]*partition.Partition
	version  map[uint64]uint64 // the version of the next entry on each partition
	c        *txn.Coordinator
	queue    []txn.Msg
	outcome  txn.Outcome
	answer   txn.Decision
	conflict bool // Ready reported a conflict
	trace    []string
}

func newPCEnv(t *testing.T) *pcEnv {
	e := &pcEnv{t: t, parts: map[uint64]*partition.Partition{1: partition.New(1), 2: partition.New(2)},
		version: map[uint64]uint64{1: 1, 2: 1}}
	e.c = txn.NewCoordinator(1, []uint64{1, 2})
	return e
}

func (e *pcEnv) apply(p uint64, op any) any {
	e.t.Helper()
	cmd := &internalpb.Command{CutVersion: e.version[p]}
	switch op := op.(type) {
	case *internalpb.TxnPrepareOp:
		cmd.Op = &internalpb.Command_TxnPrepare{TxnPrepare: op}
	case *internalpb.TxnFinishOp:
		cmd.Op = &internalpb.Command_TxnFinish{TxnFinish: op}
		cmd.CutVersion = max(cmd.CutVersion, op.GetStamp())
	case *internalpb.TxnDecideOp:
		cmd.Op = &internalpb.Command_TxnDecide{TxnDecide: op}
		cmd.CutVersion = max(cmd.CutVersion, op.GetStamp())
	case *internalpb.TxnStatusOp:
		cmd.Op = &internalpb.Command_TxnStatus{TxnStatus: op}
	case *internalpb.TxnForgetOp:
		cmd.Op = &internalpb.Command_TxnForget{TxnForget: op}
	case *internalpb.PutOp:
		cmd.Op = &internalpb.Command_Put{Put: op}
	default:
		e.t.Fatalf("apply %T", op)
	}
	part := e.parts[p]
	res, err := part.ApplyCommand(part.Applied()+1, cmd)
	if err != nil {
		e.t.Fatalf("partition %d: %v", p, err)
	}
	e.trace = append(e.trace, fmt.Sprintf("p%d@%d: %T", p, part.Applied(), cmd.GetOp()))
	return res
}

// prepareOp is T's prepare on p: it writes key "kP".
func prepareOp(p uint64) *internalpb.TxnPrepareOp {
	op := &internalpb.TxnPrepareOp{TxnId: []byte(txnID), RecordPartition: 1, PreparedUnixMs: 1000, Share: &internalpb.TxnShare{
		Success: []*kvpb.RequestOp{{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(fmt.Sprintf("k%d", p)), Value: []byte("T")}}}},
	}}
	if p == 1 {
		op.Participants = []uint64{1, 2}
	}
	return op
}

func (e *pcEnv) prepare(p uint64) txn.Vote {
	return e.apply(p, prepareOp(p)).(partition.Vote).TxnVote()
}

func (e *pcEnv) status(p uint64) txn.Vote {
	return e.apply(p, &internalpb.TxnStatusOp{TxnId: []byte(txnID), PreparedUnixMs: 1000}).(partition.Status).TxnVote()
}

// record reads T's record on r as the node's Record call does: through a
// status entry, and an ABORTED decision when there is none.
func (e *pcEnv) record() txn.Record {
	e.status(1)
	if rec, ok := e.parts[1].TxnRecord(txnID); ok {
		return rec
	}
	return txn.RecordOf(e.apply(1, &internalpb.TxnDecideOp{TxnId: []byte(txnID)}).(*internalpb.TxnDecideOp))
}

func (e *pcEnv) decide(d txn.Decision) txn.Record {
	rec := e.apply(1, &internalpb.TxnDecideOp{TxnId: []byte(txnID), Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp,
		Participants: []uint64{1, 2}, Finish: true, PreparedUnixMs: 1000}).(*internalpb.TxnDecideOp)
	return txn.Record{Decision: txn.Decision{Commit: rec.GetCommit(), Succeeded: rec.GetSucceeded(), Stamp: rec.GetStamp()}}
}

func (e *pcEnv) finish(p uint64, d txn.Decision) {
	e.apply(p, &internalpb.TxnFinishOp{TxnId: []byte(txnID), Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, PreparedUnixMs: 1000})
}

// pump collects the coordinator's messages into the queue.
func (e *pcEnv) pump() {
	rd := e.c.Ready()
	e.queue = append(e.queue, rd.Msgs...)
	e.conflict = e.conflict || rd.Conflict
	if rd.Outcome != txn.Pending {
		if e.outcome != txn.Pending {
			e.t.Fatalf("second outcome %v after %v", rd.Outcome, e.outcome)
		}
		e.outcome, e.answer = rd.Outcome, rd.Decision
	}
}

// take removes the first queued message of kind to p.
func (e *pcEnv) take(kind txn.MsgKind, p uint64) (txn.Msg, bool) {
	e.pump()
	for i, m := range e.queue {
		if m.Kind == kind && m.To == p {
			e.queue = slices.Delete(e.queue, i, i+1)
			return m, true
		}
	}
	return txn.Msg{}, false
}

// deliver carries the first queued message of kind to p and feeds the
// answer back.
func (e *pcEnv) deliver(kind txn.MsgKind, p uint64) {
	e.t.Helper()
	m, ok := e.take(kind, p)
	if !ok {
		e.t.Fatalf("no %v to %d queued (queue %v)", kind, p, e.queue)
	}
	switch kind {
	case txn.SendPrepare, txn.AskStatus:
		v := txn.Vote{}
		if kind == txn.SendPrepare {
			v = e.prepare(p)
		} else {
			v = e.status(p)
		}
		e.c.Voted(p, v)
	case txn.ReadRecord:
		e.c.Recorded(e.record())
	case txn.ProposeDecision:
		e.c.Recorded(e.decide(m.Decision))
	case txn.SendFinish:
		e.finish(p, m.Decision)
		e.c.Finished(p)
	case txn.Forget:
	}
	e.pump()
}

// lose drops the first queued message of kind to p: its sender hears
// nothing in time.
func (e *pcEnv) lose(kind txn.MsgKind, p uint64) {
	e.t.Helper()
	if _, ok := e.take(kind, p); !ok {
		e.t.Fatalf("no %v to %d queued", kind, p)
	}
	switch kind {
	case txn.SendPrepare:
		e.c.VoteLost(p)
	case txn.AskStatus:
		e.c.StatusLost(p)
	case txn.ReadRecord, txn.ProposeDecision:
		e.c.RecordLost()
	case txn.SendFinish:
		e.c.FinishLost(p)
	}
	e.pump()
}

// drain delivers everything queued, in order.
func (e *pcEnv) drain() {
	for e.pump(); len(e.queue) > 0; e.pump() {
		m := e.queue[0]
		e.deliver(m.Kind, m.To)
	}
}

// recover runs a recovery of T to the end, as a participant's recovery
// loop does, and finishes every participant with the outcome.
func (e *pcEnv) recover() txn.Decision {
	e.t.Helper()
	rec := e.record()
	statuses := map[uint64]txn.Vote{}
	if rec.Staging {
		statuses[1] = rec.Vote
	}
	reread := false
	for range 5 {
		r := txn.Recover(rec, statuses, reread)
		switch {
		case r.Decided:
			got := e.decide(r.Decision).Decision
			for _, p := range []uint64{1, 2} {
				e.finish(p, got)
			}
			return got
		case r.Reread:
			rec, reread = e.record(), true
		default:
			for _, p := range r.Ask {
				statuses[p] = e.status(p)
			}
		}
	}
	e.t.Fatalf("recovery did not decide")
	return txn.Decision{}
}

// check is the history checker: the client's outcome against the state.
func (e *pcEnv) check() error {
	var applied []uint64
	for _, p := range []uint64{1, 2} {
		part := e.parts[p]
		if h := part.LockHolders(); len(h) > 0 {
			return fmt.Errorf("partition %d still locked by %v", p, h)
		}
		if _, ok, _ := part.Get([]byte(fmt.Sprintf("k%d", p))); ok {
			applied = append(applied, p)
		}
	}
	if len(applied) == 1 {
		return fmt.Errorf("torn: applied only on %v", applied)
	}
	switch e.outcome {
	case txn.Committed:
		if len(applied) != 2 {
			return fmt.Errorf("client told committed, nothing applied")
		}
	case txn.Aborted:
		if len(applied) != 0 {
			return fmt.Errorf("client told aborted, writes applied")
		}
	case txn.Pending:
		return fmt.Errorf("client never answered")
	}
	if e.conflict {
		return fmt.Errorf("the record holds a decision other than the coordinator's")
	}
	return nil
}

func (e *pcEnv) mustCheck(want txn.Outcome) {
	e.t.Helper()
	if err := e.check(); err != nil {
		e.t.Fatalf("%v\ntrace:\n  %s", err, strings.Join(e.trace, "\n  "))
	}
	if e.outcome != want {
		e.t.Fatalf("outcome %v, want %v\ntrace:\n  %s", e.outcome, want, strings.Join(e.trace, "\n  "))
	}
}

// lockOther makes another transaction hold key k2 on partition 2, so T's
// prepare there refuses; it is finished (abort) by the returned func.
func (e *pcEnv) lockOther() func() {
	op := prepareOp(2)
	op.TxnId, op.RecordPartition = []byte("other"), 2
	if v := e.apply(2, op).(partition.Vote); !v.Prepared {
		e.t.Fatalf("other did not prepare")
	}
	return func() { e.apply(2, &internalpb.TxnFinishOp{TxnId: []byte("other"), PreparedUnixMs: 1000}) }
}

func TestParallelCommitOneRound(t *testing.T) {
	e := newPCEnv(t)
	e.version[2] = 5 // a cut (version 5) started on 2 before T's prepare there
	e.deliver(txn.SendPrepare, 1)
	e.deliver(txn.SendPrepare, 2)
	// Answered after one round: both effective prepares applied.
	if e.outcome != txn.Committed || e.answer.Stamp != 5 || !e.answer.Succeeded {
		t.Fatalf("after the prepares: outcome %v %+v, want committed at stamp 5 (the highest prepare version)", e.outcome, e.answer)
	}
	e.drain()
	e.mustCheck(txn.Committed)
	if rec, _ := e.parts[1].Record(txnID); !rec.GetCommit() || rec.GetStamp() != 5 {
		t.Fatalf("record %v", rec)
	}
}

func TestParallelCommitRefusal(t *testing.T) {
	e := newPCEnv(t)
	release := e.lockOther()
	e.drain()
	release()
	e.mustCheck(txn.Aborted)
	if rec, _ := e.parts[1].TxnRecord(txnID); rec.Staging || rec.Decision.Commit {
		t.Fatalf("record %+v, want aborted", rec)
	}
	// A late copy of T's prepare on 2 never creates an intent.
	if v := e.prepare(2); v.State == txn.Prepared {
		t.Fatal("a late prepare after the refusal created an intent")
	}
}

// A vote reply lost: the status entry settles the prepare that applied.
func TestParallelCommitVoteLost(t *testing.T) {
	e := newPCEnv(t)
	e.deliver(txn.SendPrepare, 1)
	m, _ := e.take(txn.SendPrepare, 2)
	e.prepare(m.To) // applied, but the reply is lost
	e.c.VoteLost(2)
	e.drain()
	e.mustCheck(txn.Committed)
}

// A prepare that never applied (overwritten by a leader change, say):
// the status prevents it, the transaction aborts, and the prepare
// re-proposed later changes nothing.
func TestParallelCommitPrevented(t *testing.T) {
	e := newPCEnv(t)
	e.deliver(txn.SendPrepare, 1)
	e.lose(txn.SendPrepare, 2)
	e.drain()
	if v := e.prepare(2); v.State == txn.Prepared {
		t.Fatal("the re-proposed prepare created an intent after its prevention")
	}
	e.mustCheck(txn.Aborted)
}

// Recovery running while the coordinator still runs, after both prepares
// applied: it commits with the same stamp; the coordinator's decision
// meets the recorded one, and the Finishes race harmlessly.
func TestParallelCommitRecoveryRacesCoordinator(t *testing.T) {
	e := newPCEnv(t)
	e.version[1] = 3
	e.deliver(txn.SendPrepare, 1)
	e.deliver(txn.SendPrepare, 2)
	if got := e.recover(); !got.Commit || got.Stamp != 3 {
		t.Fatalf("recovery decided %+v, want commit at 3", got)
	}
	e.drain()
	e.mustCheck(txn.Committed)
}

// Recovery before the second prepare applied: it prevents the prepare
// and aborts; the coordinator then meets a finished id, reads the record
// and answers aborted.
func TestParallelCommitRecoveryPrevents(t *testing.T) {
	e := newPCEnv(t)
	e.deliver(txn.SendPrepare, 1)
	if got := e.recover(); got.Commit {
		t.Fatalf("recovery committed with a prepare missing")
	}
	e.drain()
	e.mustCheck(txn.Aborted)
}

// Recovery commits while the coordinator's vote from 2 is lost, finishes
// both participants and forgets the record; the coordinator's status then
// meets a finished id and a missing record. A missing record is no abort
// here (a chaos round's G1a: the client was told aborted, the writes
// were there): the answer is unknown.
func TestParallelCommitRecoveryForgetsBeforeCoordinator(t *testing.T) {
	e := newPCEnv(t)
	e.deliver(txn.SendPrepare, 1)
	m, _ := e.take(txn.SendPrepare, 2)
	e.prepare(m.To) // applied, the reply is lost
	if got := e.recover(); !got.Commit {
		t.Fatalf("recovery decided %+v with both prepares applied, want commit", got)
	}
	e.apply(1, &internalpb.TxnForgetOp{TxnIds: [][]byte{[]byte(txnID)}})
	if _, ok := e.parts[1].TxnRecord(txnID); ok {
		t.Fatal("the record was not forgotten")
	}
	e.c.VoteLost(2)
	e.drain()
	e.mustCheck(txn.Unknown)
}

// The commit is answered before any Finish; if the coordinator stops
// there, recovery finishes the transaction with the same decision.
func TestParallelCommitCoordinatorDiesAfterAnswer(t *testing.T) {
	e := newPCEnv(t)
	e.deliver(txn.SendPrepare, 1)
	e.deliver(txn.SendPrepare, 2)
	e.lose(txn.ProposeDecision, 1)
	if got := e.recover(); !got.Commit {
		t.Fatalf("recovery aborted a committed transaction")
	}
	e.mustCheck(txn.Committed)
}

// Mutation test: a coordinator that answers before every prepare is
// durable tells a client committed for a transaction that aborts, and
// the checker says so.
func TestParallelCommitMutationAnswerEarly(t *testing.T) {
	e := newPCEnv(t)
	e.c.WithAnswerBeforeDurable()
	release := e.lockOther()
	e.drain()
	release()
	err := e.check()
	if err == nil {
		t.Fatal("the checker found nothing wrong with an answer given before every prepare was durable")
	}
	t.Logf("caught as expected: %v", err)
}

func TestRecoverFinishedNeedsReread(t *testing.T) {
	rec := txn.Record{Staging: true, Participants: []uint64{1, 2}, Vote: txn.Vote{State: txn.Prepared}}
	r := txn.Recover(rec, map[uint64]txn.Vote{1: rec.Vote, 2: {State: txn.Finished}}, false)
	if !r.Reread || r.Decided {
		t.Fatalf("finished participant under STAGING: %+v, want a reread", r)
	}
	r = txn.Recover(rec, map[uint64]txn.Vote{1: rec.Vote, 2: {State: txn.Finished}}, true)
	if !r.Decided || r.Decision.Commit {
		t.Fatalf("still STAGING after the reread: %+v, want abort", r)
	}
	r = txn.Recover(rec, map[uint64]txn.Vote{1: rec.Vote}, false)
	if r.Decided || !slices.Equal(r.Ask, []uint64{2}) {
		t.Fatalf("status missing: %+v, want to ask 2", r)
	}
	r = txn.Recover(txn.Record{Decision: txn.Decision{Commit: true, Stamp: 4}}, nil, false)
	if !r.Decided || !r.Decision.Commit || r.Decision.Stamp != 4 {
		t.Fatalf("decided record not followed: %+v", r)
	}
}

// A refusal aborts at once, whatever the other votes: the other
// participant is finished with abort while its prepare is still on its
// way, and the prepare that arrives after that Finish is refused by the
// tombstone (the answer does not wait for the slowest prepare, nor is it
// "unknown" when that prepare's call is lost as well).
func TestParallelCommitEarlyAbort(t *testing.T) {
	e := newPCEnv(t)
	release := e.lockOther()
	m, _ := e.take(txn.SendPrepare, 1) // r's prepare is slow
	e.deliver(txn.SendPrepare, 2)      // refused by "other"
	e.deliver(txn.SendFinish, 1)       // the abort reaches r before its prepare
	if e.outcome != txn.Aborted {
		t.Fatalf("outcome %v after the refusal and the finishes, want aborted", e.outcome)
	}
	if v := e.prepare(m.To); v.State == txn.Prepared {
		t.Fatal("r's late prepare created an intent after the abort's tombstone")
	}
	release()
	e.mustCheck(txn.Aborted)
}

// The core's reading of statuses: a state it does not know is no vote at
// all (never a refusal, on which an abort would be finished).
func TestStatusVote(t *testing.T) {
	if v, ok := txn.StatusVote(internalpb.TxnState_TXN_STATE_PREPARED, true, 4); !ok || v.State != txn.Prepared || !v.ComparesHold || v.Version != 4 {
		t.Fatalf("prepared: %+v %v", v, ok)
	}
	if v, ok := txn.StatusVote(internalpb.TxnState_TXN_STATE_REFUSED, false, 0); !ok || v.State != txn.Refused {
		t.Fatalf("refused: %+v %v", v, ok)
	}
	if v, ok := txn.StatusVote(internalpb.TxnState_TXN_STATE_FINISHED, false, 0); !ok || v.State != txn.Finished {
		t.Fatalf("finished: %+v %v", v, ok)
	}
	for _, s := range []internalpb.TxnState{internalpb.TxnState_TXN_STATE_UNSPECIFIED, 99} {
		if v, ok := txn.StatusVote(s, false, 0); ok {
			t.Fatalf("state %v read as %+v", s, v)
		}
	}
}
