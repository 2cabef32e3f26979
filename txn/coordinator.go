package txn

import (
	"slices"

	"github.com/cutkv/cutkv/proto/internalpb"
)

// This file is the transaction protocol's core (DESIGN.md, "Transactions
// (2PC)", parallel commits): the coordinator of one cross-partition
// transaction as a state machine without I/O, and recovery's decision as
// a pure function. The node feeds them what arrived (votes, records,
// acknowledgements, lost calls) and carries out what they ask for (the
// messages in Ready), the way a raft node is driven through Ready.
//
// A transaction T with participants P and record partition r is
// committed exactly when r applied its STAGING prepare and every
// participant's effective prepare (the first TxnPrepare of T it applied)
// created an intent; it is aborted as soon as any effective prepare
// refused, or a status entry prevented one. Both are facts of the logs,
// so the coordinator can answer the client after one consensus round and
// a recovery that asks the same logs reaches the same outcome with the
// same stamp (the maximum version over the effective prepares, rule 3).

// VoteState is what a participant's log says of a transaction.
type VoteState int

const (
	// VoteNone: nothing known yet.
	VoteNone VoteState = iota
	// Prepared: the effective prepare created an intent.
	Prepared
	// Refused: the effective prepare refused, or a status entry prevented
	// any (a tombstone): the transaction can never commit.
	Refused
	// Finished: the id finished on that partition before this answer; the
	// transaction record says how.
	Finished
)

func (s VoteState) String() string {
	switch s {
	case Prepared:
		return "prepared"
	case Refused:
		return "refused"
	case Finished:
		return "finished"
	}
	return "none"
}

// Vote is one participant's answer, read from its log.
type Vote struct {
	State        VoteState
	ComparesHold bool
	// Version of the effective prepare entry (Prepared).
	Version uint64
}

// PrepareVote reads a prepare's answer: prepared (with its compares and
// entry version), refused because the id finished before, or refused.
func PrepareVote(prepared, finished, comparesHold bool, version uint64) Vote {
	switch {
	case prepared:
		return Vote{State: Prepared, ComparesHold: comparesHold, Version: version}
	case finished:
		return Vote{State: Finished}
	}
	return Vote{State: Refused}
}

// StatusVote reads a status settled through a participant's log (a
// TxnStatusOp); ok is false for a state it does not know, which must
// never be taken for a refusal: an abort finished on a refusal nobody
// made would drop a committed transaction's intents.
func StatusVote(state internalpb.TxnState, comparesHold bool, version uint64) (v Vote, ok bool) {
	switch state {
	case internalpb.TxnState_TXN_STATE_PREPARED:
		return Vote{State: Prepared, ComparesHold: comparesHold, Version: version}, true
	case internalpb.TxnState_TXN_STATE_FINISHED:
		return Vote{State: Finished}, true
	case internalpb.TxnState_TXN_STATE_REFUSED:
		return Vote{State: Refused}, true
	}
	return Vote{}, false
}

// RecordOf reads a transaction record (Vote, r's own, is the caller's to
// add to a STAGING one). A decided record without participants is
// Presumed: no record was found (the Record call answers ABORTED then),
// or one was recorded as presumed abort on finding none.
func RecordOf(d *internalpb.TxnDecideOp) Record {
	return Record{Staging: d.GetStaging(), Participants: d.GetParticipants(),
		Presumed: !d.GetStaging() && len(d.GetParticipants()) == 0,
		Decision: Decision{Commit: d.GetCommit(), Succeeded: d.GetSucceeded(), Stamp: d.GetStamp()}}
}

// Decision is a transaction's outcome as recorded: commit or abort, the
// branch that ran and the stamp.
type Decision struct {
	Commit    bool
	Succeeded bool
	Stamp     uint64
}

// Tally reads the outcome of transaction votes over parts: committed when
// every part is Prepared (the branch is success when every part's
// compares hold; the stamp is the maximum version), aborted when any is
// Refused. Otherwise it is not decided by the votes: ok is false, and
// finished says whether a Finished vote asks for the record.
func Tally(parts []uint64, votes map[uint64]Vote) (d Decision, ok, finished bool) {
	all := true
	d = Decision{Commit: true, Succeeded: true}
	for _, p := range parts {
		v := votes[p]
		switch v.State {
		case Refused:
			return Decision{}, true, false
		case Finished:
			finished = true
			all = false
		case Prepared:
			d.Succeeded = d.Succeeded && v.ComparesHold
			d.Stamp = max(d.Stamp, v.Version)
		default:
			all = false
		}
	}
	if !all {
		return Decision{}, false, finished
	}
	return d, true, false
}

// Record is the transaction record as read from the record partition's
// log (through an entry, so a record found missing is recorded ABORTED
// there: the record partition's prepare can then never create one).
type Record struct {
	// Staging: written by r's prepare, not decided. Participants lists the
	// transaction's partitions and Vote is r's own intent's vote.
	Staging      bool
	Participants []uint64
	Vote         Vote
	// Decision, when not Staging.
	Decision Decision
	// Presumed: an abort nobody decided from the participants' votes —
	// the record was missing, or recorded ABORTED on being found missing.
	// A missing record is either a transaction whose record partition
	// never prepared it, or one that finished everywhere and whose
	// record was forgotten, committed or not: to whoever holds an intent
	// of it, the first (it is not finished everywhere); to anyone else, it
	// says nothing about the outcome.
	Presumed bool
}

// Recovery says what a recovery does next for a transaction whose record
// reads rec, given the participants' statuses learnt so far (each asked
// through the participant's log, TxnStatus, which prevents a missing
// prepare) and whether rec was read again after a Finished status.
type Recovery struct {
	// Decided: Decision is the outcome; propose it on r (the first
	// decision recorded there wins) and finish accordingly.
	Decided  bool
	Decision Decision
	// Ask: the participants whose status is still needed.
	Ask []uint64
	// Reread: a participant finished already while the record was
	// STAGING: read the record again (a commit is recorded on r before any
	// participant finishes with it).
	Reread bool
}

// Recover decides a recovery's next step (DESIGN.md, "Transactions",
// recovery): a decided record is followed; for a STAGING one every listed
// participant is asked; all prepared → committed with the votes' stamp,
// any refused or prevented → aborted. A participant that finished while
// the record still reads STAGING after a reread finished with an abort
// (only a refusal's holder finishes before the decision), so that is an
// abort too.
func Recover(rec Record, statuses map[uint64]Vote, reread bool) Recovery {
	if !rec.Staging {
		return Recovery{Decided: true, Decision: rec.Decision}
	}
	votes := make(map[uint64]Vote, len(statuses)+1)
	for p, v := range statuses {
		votes[p] = v
	}
	parts := slices.Clone(rec.Participants)
	slices.Sort(parts)
	var ask []uint64
	for _, p := range parts {
		if votes[p].State == VoteNone {
			ask = append(ask, p)
		}
	}
	d, ok, finished := Tally(parts, votes)
	switch {
	case ok:
		return Recovery{Decided: true, Decision: d}
	case finished && reread:
		return Recovery{Decided: true, Decision: Decision{}}
	case finished:
		return Recovery{Reread: true}
	}
	return Recovery{Ask: ask}
}

// MsgKind is what a coordinator asks the node to do.
type MsgKind int

const (
	// SendPrepare: send T's prepare to partition To.
	SendPrepare MsgKind = iota + 1
	// AskStatus: settle T's effective prepare on To (TxnStatus); answer
	// with Voted or StatusLost.
	AskStatus
	// ReadRecord: read T's record on To (r); answer with Recorded or
	// RecordLost.
	ReadRecord
	// ProposeDecision: record Decision on To (r), finishing r's intent in
	// the same entry; answer with Recorded or RecordLost.
	ProposeDecision
	// SendFinish: finish T on To with Decision; answer with Finished or
	// FinishLost.
	SendFinish
	// Forget: every participant finished; T's record on To (r) may go.
	Forget
)

func (k MsgKind) String() string {
	return [...]string{"?", "prepare", "status", "read-record", "decide", "finish", "forget"}[k]
}

// Msg is one thing a coordinator asks for.
type Msg struct {
	Kind     MsgKind
	To       uint64
	Decision Decision
}

// Outcome is what the client hears.
type Outcome int

const (
	// Pending: not yet.
	Pending Outcome = iota
	// Committed: Decision holds the branch and the stamp.
	Committed
	// Aborted: nothing of T applied anywhere, and every participant was
	// asked to finish (the client's retry meets no lock of T's).
	Aborted
	// Unknown: the coordinator could not learn the outcome; recovery
	// settles it.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"pending", "committed", "aborted", "unknown"}[o]
}

type coordPhase int

const (
	voting    coordPhase = iota // prepares out
	reading                     // a Finished vote: reading the record
	deciding                    // committed, the decision is being recorded on r
	finishing                   // finishes out
	done
)

// Coordinator is the state of one cross-partition transaction at its
// coordinator. Create it with NewCoordinator, feed it events, and after
// each event carry out Ready's messages.
type Coordinator struct {
	record   uint64
	parts    []uint64 // sorted
	votes    map[uint64]Vote
	phase    coordPhase
	decision Decision
	// answerEarly is the mutation test's wrong rule: answer committed
	// when r's vote is in (see WithAnswerBeforeDurable).
	answerEarly bool

	outcome  Outcome
	answered bool
	pending  map[uint64]bool // finishes not yet acknowledged
	allDone  bool            // every finish acknowledged so far
	msgs     []Msg
	// conflict is set when the record holds a decision other than the
	// one this coordinator answered, until Ready reports it.
	conflict bool
}

// Ready is what the driver carries out after an event, as etcd raft's
// Ready: the messages to send, and, each reported once, the client's
// outcome and a conflict.
type Ready struct {
	Msgs []Msg
	// Outcome is the client's answer once known, with the decision it
	// answers; Pending before, and after it was reported.
	Outcome  Outcome
	Decision Decision
	// Conflict: the record holds a decision other than the one this
	// coordinator answered, a broken invariant the driver reports.
	Conflict bool
}

// NewCoordinator starts transaction coordination over parts (at least
// two) with record partition record: Ready asks for every prepare.
func NewCoordinator(record uint64, parts []uint64) *Coordinator {
	c := &Coordinator{record: record, parts: slices.Clone(parts), votes: map[uint64]Vote{}, allDone: true}
	slices.Sort(c.parts)
	for _, p := range c.parts {
		c.msgs = append(c.msgs, Msg{Kind: SendPrepare, To: p})
	}
	return c
}

// WithAnswerBeforeDurable makes c answer committed as soon as the record
// partition's vote is prepared, before the other prepares are known to
// be durable: wrong, and there only so that a test can show that the
// checks catch it (a mutation test).
func (c *Coordinator) WithAnswerBeforeDurable() *Coordinator {
	c.answerEarly = true
	return c
}

// Ready returns what to carry out since the last call: the messages, and
// the client's outcome and a conflict, each reported once.
func (c *Coordinator) Ready() Ready {
	rd := Ready{Msgs: c.msgs, Conflict: c.conflict}
	c.msgs, c.conflict = nil, false
	if c.outcome != Pending && !c.answered {
		c.answered = true
		rd.Outcome, rd.Decision = c.outcome, c.decision
	}
	return rd
}

// Voted feeds participant p's vote (the reply to a prepare or a status
// asked for it). Votes after the transaction is settled are ignored.
func (c *Coordinator) Voted(p uint64, v Vote) {
	if c.phase != voting || !slices.Contains(c.parts, p) {
		return
	}
	c.votes[p] = v
	if c.answerEarly && p == c.record && v.State == Prepared && c.outcome == Pending {
		c.outcome, c.decision = Committed, Decision{Commit: true, Succeeded: v.ComparesHold, Stamp: v.Version}
	}
	if v.State == Refused {
		// Aborted for good, whatever the other votes say: finish every
		// other participant with abort now. One whose prepare is still on
		// its way gets either order right: a Finish applied first leaves a
		// tombstone that refuses the prepare, a prepare applied first is
		// dropped by the Finish.
		c.abort()
		return
	}
	for _, q := range c.parts {
		if c.votes[q].State == VoteNone {
			return // wait for every vote
		}
	}
	d, ok, finished := Tally(c.parts, c.votes)
	switch {
	case ok && d.Commit:
		c.decision = d
		if c.outcome == Pending {
			c.outcome = Committed
		}
		c.phase = deciding
		c.msgs = append(c.msgs, Msg{Kind: ProposeDecision, To: c.record, Decision: d})
	case ok:
		c.abort()
	case finished:
		c.phase = reading
		c.msgs = append(c.msgs, Msg{Kind: ReadRecord, To: c.record})
	}
}

// VoteLost says that p's prepare got no answer in time: its effective
// prepare is settled through its log instead (TxnStatus).
func (c *Coordinator) VoteLost(p uint64) {
	if c.phase == voting && c.votes[p].State == VoteNone {
		c.msgs = append(c.msgs, Msg{Kind: AskStatus, To: p})
	}
}

// StatusLost says that p's status could not be settled either: the
// outcome is left to recovery.
func (c *Coordinator) StatusLost(p uint64) {
	if c.phase == voting {
		c.giveUp()
	}
}

// Recorded feeds the record read on r (after ReadRecord) or the decision
// recorded there (after ProposeDecision).
func (c *Coordinator) Recorded(rec Record) {
	switch c.phase {
	case reading:
		switch {
		case rec.Staging, !rec.Decision.Commit && !rec.Presumed:
			// Staging with a participant finished: that finish was an
			// abort (Recover's rule); or the record says abort.
			c.abort()
			return
		case !rec.Decision.Commit:
			// No record, and a participant finished: a recovery may have
			// committed T, finished every participant and forgotten the
			// record while this coordinator's vote was on its way (a
			// chaos round's G1a when this answered aborted).
			c.giveUp()
			return
		}
		c.decision, c.outcome = rec.Decision, Committed
		c.finishAll(c.parts)
	case deciding:
		if rec.Staging || rec.Decision != c.decision {
			// Recovery computes the same decision from the same logs; a
			// different one recorded means a broken rule. Follow the
			// record: it is what every participant will apply.
			c.conflict = true
			if !rec.Staging {
				c.decision = rec.Decision
			}
		}
		var rest []uint64
		for _, p := range c.parts {
			if p != c.record {
				rest = append(rest, p)
			}
		}
		c.finishAll(rest)
	}
}

// RecordLost says that the record could not be read or written in time.
func (c *Coordinator) RecordLost() {
	switch c.phase {
	case reading:
		c.giveUp()
	case deciding:
		// Answered already (committed); recovery records the same decision
		// and finishes the participants.
		c.phase = done
	}
}

// Finished says that p applied its Finish; FinishLost that it did not in
// time (recovery finishes it).
func (c *Coordinator) Finished(p uint64) { c.finishAck(p, true) }

// FinishLost: see Finished.
func (c *Coordinator) FinishLost(p uint64) { c.finishAck(p, false) }

func (c *Coordinator) finishAck(p uint64, ok bool) {
	if c.phase != finishing || !c.pending[p] {
		return
	}
	delete(c.pending, p)
	c.allDone = c.allDone && ok
	if len(c.pending) == 0 {
		c.settled()
	}
}

// settled ends the coordination once every finish was acknowledged or
// lost.
func (c *Coordinator) settled() {
	if c.outcome == Pending {
		c.outcome = Aborted // an abort is answered once its finishes are out
	}
	if c.allDone {
		c.msgs = append(c.msgs, Msg{Kind: Forget, To: c.record})
	}
	c.phase = done
}

// abort finishes T with abort on every participant whose effective
// prepare did not refuse (a refusal left a tombstone already), r
// included: r's STAGING record then reads ABORTED.
func (c *Coordinator) abort() {
	c.decision = Decision{}
	var to []uint64
	for _, p := range c.parts {
		if c.votes[p].State != Refused {
			to = append(to, p)
		}
	}
	if c.outcome == Committed {
		c.conflict = true // answered committed (the mutation), now aborted
	}
	c.finishAll(to)
}

func (c *Coordinator) finishAll(to []uint64) {
	c.phase = finishing
	c.pending = map[uint64]bool{}
	for _, p := range to {
		c.pending[p] = true
		c.msgs = append(c.msgs, Msg{Kind: SendFinish, To: p, Decision: c.decision})
	}
	if len(to) == 0 {
		c.settled()
	}
}

func (c *Coordinator) giveUp() {
	if c.outcome == Pending {
		c.outcome = Unknown
	}
	c.phase = done
}
