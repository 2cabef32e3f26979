package cut_test

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// This file is the scenario world's transactions: each cross-partition
// one runs the protocol's core (txn.Coordinator) and the world carries its
// messages as the node does (rpc/coordinate.go); recovery is rpc.resolve
// over txn.Recover; Finishes go through each leader's batcher
// (rpc/finishbatch.go).

// prepMs is every transaction's prepare time (Unix ms): the Finishes and
// statuses name it as the node's do.
const prepMs = 1000

// txnState is a transaction as the world knows it.
type txnState struct {
	id     string
	key    string
	coord  *node
	parts  []*part
	record *part
	fail   *part

	// A cross-partition transaction: its prepares (txn.PrepareOps), its
	// core, the calls carrying the core's messages (open until answered or
	// timed out) and what its client was told.
	ops      map[uint64]*internalpb.TxnPrepareOp
	c        *txn.Coordinator
	calls    []*call
	outcome  txn.Outcome
	answer   txn.Decision
	conflict bool // the core's Conflict was reported
	// decided is the first decision recorded on the record partition (a
	// STAGING record is none), kept when a Forget drops the record.
	decided *internalpb.TxnDecideOp

	// A one-partition transaction: its entry (nil: not applied yet).
	onePhase *part
	opEntry  *entry
}

// call is one message of a core being carried: open from the moment the
// core asks for it until its answer reaches the core or it times out.
type call struct {
	msg txn.Msg
	to  *part
	// attempts made so far; an answer counts only for the latest (an
	// earlier attempt was given up, as callLeader gives up an attempt
	// before it retries).
	attempts int
	// reply is a prepare's vote on its way back ("vote T P" delivers it).
	reply *voteReply
}

type voteReply struct {
	v      txn.Vote
	marker uint64
}

// waiter is a Finish waiting in a leader's batcher, with its sender's
// answer.
type waiter struct {
	op   *internalpb.TxnFinishOp
	done func()
}

func (t *txnState) value(succeeded bool) string {
	if succeeded {
		return t.id
	}
	return t.id + "/failure"
}

func (t *txnState) share(p *part) *internalpb.TxnShare {
	s := &internalpb.TxnShare{
		Success:      []*kvpb.RequestOp{reqPut(t.key, t.value(true))},
		SuccessIndex: []uint32{0},
	}
	if t.onePhase != nil {
		return s
	}
	s.Failure, s.FailureIndex = []*kvpb.RequestOp{reqPut(t.key, t.value(false))}, []uint32{0}
	if t.fail == p {
		// The key is written only by this transaction: version 0 now.
		s.Compares = []*kvpb.Compare{{Key: []byte(t.key), Result: kvpb.Compare_GREATER, Target: kvpb.Compare_VERSION, TargetUnion: &kvpb.Compare_Version{Version: 0}}}
	}
	return s
}

func reqPut(k, v string) *kvpb.RequestOp {
	return &kvpb.RequestOp{Request: &kvpb.RequestOp_Put{Put: &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
}

// told is what T's client heard.
func (t *txnState) told() string {
	if t.outcome == txn.Pending {
		return "not told yet"
	}
	return "told " + describeOutcome(t.outcome, t.answer)
}

// describeOutcome is a client's answer: committed with the decision's
// branch and stamp, or aborted, or unknown.
func describeOutcome(o txn.Outcome, d txn.Decision) string {
	if o == txn.Committed {
		return describeTxnDecision(d)
	}
	return o.String()
}

func describeTxnDecision(d txn.Decision) string {
	return fmt.Sprintf("%s stamp %d", outcome(d.Commit, d.Succeeded), d.Stamp)
}

func describeTxnVote(v txn.Vote) string {
	switch v.State {
	case txn.Prepared:
		c := "compares hold"
		if !v.ComparesHold {
			c = "compares fail"
		}
		return fmt.Sprintf("prepared, %s, version %d", c, v.Version)
	case txn.Refused:
		return "refused"
	case txn.Finished:
		return "finished before"
	}
	return "none"
}

func (w *world) describeRecord(rec txn.Record, found bool) string {
	switch {
	case !found:
		return "none (reads ABORTED)"
	case rec.Staging:
		return fmt.Sprintf("STAGING [%s], its own vote %s", w.partNames(rec.Participants), describeTxnVote(rec.Vote))
	}
	return describeTxnDecision(rec.Decision)
}

func (w *world) describeMsg(m txn.Msg) string {
	to := w.partByID(m.To).name
	switch m.Kind {
	case txn.ProposeDecision, txn.SendFinish:
		return fmt.Sprintf("%s %s (%s)", m.Kind, to, describeTxnDecision(m.Decision))
	}
	return fmt.Sprintf("%s %s", m.Kind, to)
}

func (w *world) declare(id string, kv map[string]string) error {
	if _, err := w.txn(id); err == nil {
		return fmt.Errorf("transaction %s declared twice", id)
	}
	t := &txnState{id: id, key: id}
	if k := kv["key"]; k != "" {
		t.key = k
	}
	var err error
	if t.coord, err = w.node(kv["coord"]); err != nil {
		return err
	}
	for _, name := range strings.Split(kv["parts"], ",") {
		p, err := w.part(name)
		if err != nil {
			return err
		}
		t.parts = append(t.parts, p)
	}
	if len(t.parts) < 2 {
		return fmt.Errorf("%s: a cross-partition transaction needs two parts or more", id)
	}
	t.record = t.parts[0]
	if r := kv["record"]; r != "" {
		if t.record, err = w.part(r); err != nil {
			return err
		}
	}
	if f := kv["fail"]; f != "" {
		if t.fail, err = w.part(f); err != nil {
			return err
		}
	}
	shares := map[uint64]*internalpb.TxnShare{}
	var ids []uint64
	for _, p := range t.parts {
		shares[p.id] = t.share(p)
		ids = append(ids, p.id)
	}
	t.ops = txn.PrepareOps([]byte(id), 0, prepMs, shares, t.record.id)
	t.c = txn.NewCoordinator(t.record.id, ids)
	if w.opts.answerEarly {
		t.c.WithAnswerBeforeDurable()
	}
	w.txns = append(w.txns, t)
	w.pump(t)
	return nil
}

// pump takes the core's Ready: the messages become open calls, and the
// client hears the outcome once it is known (rpc coordination.run).
func (w *world) pump(t *txnState) {
	rd := t.c.Ready()
	if rd.Outcome != txn.Pending {
		t.outcome, t.answer = rd.Outcome, rd.Decision
		w.say("%s answers %s's client: %s", t.coord.name, t.id, describeOutcome(rd.Outcome, rd.Decision))
		w.checkAnswer(t)
	}
	var asks []string
	for _, m := range rd.Msgs {
		t.calls = append(t.calls, &call{msg: m, to: w.partByID(m.To)})
		asks = append(asks, w.describeMsg(m))
	}
	if len(asks) > 0 {
		w.say("%s's core on %s asks for: %s", t.id, t.coord.name, strings.Join(asks, ", "))
	}
	if rd.Conflict && !t.conflict {
		t.conflict = true
		w.violation("%s's record holds a decision other than its coordinator's (Ready.Conflict)", t.id)
	}
}

// checkAnswer checks the client's answer against the logs at the moment
// it is given: committed only once every participant's effective prepare
// created an intent, with the branch and stamp they make and a reply
// marker (the coordinator's clock) at least the stamp (rule 8); aborted
// only when one did not.
func (w *world) checkAnswer(t *txnState) {
	ok, missing, logs := w.committedInLogs(t)
	switch t.outcome {
	case txn.Committed:
		switch {
		case !ok:
			w.violation("%s answered %s committed before %s's effective prepare created an intent", t.coord.name, t.id, missing.name)
		case logs.Stamp != t.answer.Stamp || logs.Succeeded != t.answer.Succeeded:
			w.violation("%s answered %s %s, but its effective prepares make %s (rule 3)", t.coord.name, t.id, describeTxnDecision(t.answer), describeTxnDecision(logs))
		}
		if known := t.coord.clock.Load(); known < t.answer.Stamp {
			w.violation("%s answered %s with marker %d, below its stamp %d (rule 8)", t.coord.name, t.id, known, t.answer.Stamp)
		}
	case txn.Aborted:
		if ok {
			w.violation("%s answered %s aborted, but every participant's effective prepare created an intent", t.coord.name, t.id)
		}
	}
}

// open finds T's open call of kind to p: the script may carry only what
// the core asked for.
func (w *world) open(t *txnState, kind txn.MsgKind, p *part) (*call, error) {
	for _, c := range t.calls {
		if c.msg.Kind == kind && c.to == p {
			return c, nil
		}
	}
	var asked []string
	for _, c := range t.calls {
		asked = append(asked, w.describeMsg(c.msg))
	}
	return nil, fmt.Errorf("%s's core has no %s call to %s open (open: %v)", t.id, kind, p.name, asked)
}

// attempt starts an attempt of call c and returns whether it is still
// the one whose answer counts.
func (w *world) attempt(t *txnState, c *call) func() bool {
	c.attempts++
	if c.attempts > 1 {
		w.say("%s retries %s's %s to %s (attempt %d; %s knows %d)", t.coord.name, t.id, c.msg.Kind, c.to.name, c.attempts, t.coord.name, t.coord.clock.Load())
	}
	n := c.attempts
	return func() bool { return c.attempts == n && slices.Contains(t.calls, c) }
}

func (t *txnState) close(c *call) {
	t.calls = slices.DeleteFunc(t.calls, func(x *call) bool { return x == c })
}

// carryPrepare carries T's SendPrepare to p (rpc ParticipantServer.Prepare):
// the marker first, then the prepare entry; once it applies the vote goes
// back with its entry's version and the leader's clock read then.
func (w *world) carryPrepare(t *txnState, p *part, m string, lost, late bool) error {
	l := p.leader
	prepare := &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: t.ops[p.id]}}
	if late {
		w.say("a late copy of %s's prepare reaches %s: nobody waits for its answer", t.id, p.name)
		w.raise(l, t.coord.clock.Load(), "Prepare marker from "+t.coord.name)
		w.propose(p, prepare, m, nil)
		return nil
	}
	c, err := w.open(t, txn.SendPrepare, p)
	if err != nil {
		return err
	}
	if c.reply != nil {
		return fmt.Errorf("%s's vote on %s is on its way already", p.name, t.id)
	}
	current := w.attempt(t, c)
	w.raise(l, t.coord.clock.Load(), "Prepare marker from "+t.coord.name)
	w.propose(p, prepare, m, func(res any) {
		if !current() {
			return
		}
		if lost {
			w.say("the reply to %s is lost", t.coord.name)
			return
		}
		v, _ := res.(partition.Vote)
		c.reply = &voteReply{v: v.TxnVote(), marker: l.clock.Load()}
		w.say("%s's vote on %s leaves %s with version %d, marker %d", p.name, t.id, l.name, v.Version, l.clock.Load())
	})
	return nil
}

// deliverVote hands p's vote to T's coordinator: the marker and the
// vote's version are merged before the core counts it
// (coordination.voted).
func (w *world) deliverVote(t *txnState, p *part) error {
	c, err := w.open(t, txn.SendPrepare, p)
	if err != nil {
		return err
	}
	if c.reply == nil {
		return fmt.Errorf("%s's vote on %s is not on its way", p.name, t.id)
	}
	r := c.reply
	w.raise(t.coord, r.marker, "vote from "+p.name)
	w.raise(t.coord, r.v.Version, "the vote's version")
	w.say("%s counts %s's vote on %s: %s", t.coord.name, p.name, t.id, describeTxnVote(r.v))
	t.close(c)
	t.c.Voted(p.id, r.v)
	w.pump(t)
	return nil
}

func statusCmd(t *txnState) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_TxnStatus{TxnStatus: &internalpb.TxnStatusOp{TxnId: []byte(t.id), PreparedUnixMs: prepMs}}}
}

// askStatus is Participant.Status at q's leader, asked by n: a status
// entry settles T's effective prepare there; reply gets the vote and the
// replier's clock.
func (w *world) askStatus(n *node, t *txnState, q *part, m string, reply func(v txn.Vote, marker uint64)) {
	l := q.leader
	w.raise(l, n.clock.Load(), "Status marker from "+n.name)
	w.propose(q, statusCmd(t), m, func(res any) {
		st, _ := res.(partition.Status)
		reply(st.TxnVote(), l.clock.Load())
	})
}

// carryStatus carries T's AskStatus to p.
func (w *world) carryStatus(t *txnState, p *part, m string, lost bool) error {
	c, err := w.open(t, txn.AskStatus, p)
	if err != nil {
		return err
	}
	current := w.attempt(t, c)
	w.askStatus(t.coord, t, p, m, func(v txn.Vote, marker uint64) {
		if !current() {
			return
		}
		if lost {
			w.say("the reply to %s is lost", t.coord.name)
			return
		}
		w.raise(t.coord, marker, "Status reply from "+p.name)
		w.raise(t.coord, v.Version, "the status's version")
		w.say("%s counts %s's status of %s: %s", t.coord.name, p.name, t.id, describeTxnVote(v))
		t.close(c)
		t.c.Voted(p.id, v)
		w.pump(t)
	})
	return nil
}

// askRecord is Participant.Record at T's record partition, asked by n: a
// status entry through r's log first (preventing r's prepare if it has
// not applied), then the record; none reads ABORTED (rpc Node.ReadRecord).
func (w *world) askRecord(n *node, t *txnState, m string, reply func(rec txn.Record, found bool, marker uint64)) {
	r := t.record
	l := r.leader
	w.raise(l, n.clock.Load(), "Record marker from "+n.name)
	w.propose(r, statusCmd(t), m, func(any) {
		rec, ok := r.sm.TxnRecord(t.id)
		reply(rec, ok, l.clock.Load())
	})
}

// mergeRecord merges a Record reply into n as rpc.Node.ReadRecord does.
func (w *world) mergeRecord(n *node, t *txnState, rec txn.Record, found bool, marker uint64) {
	w.raise(n, marker, "Record reply from "+t.record.name)
	if rec.Staging {
		w.raise(n, rec.Vote.Version, "the STAGING record's version")
	}
	w.say("%s reads %s's record on %s: %s", n.name, t.id, t.record.name, w.describeRecord(rec, found))
}

// carryReadRecord carries T's ReadRecord.
func (w *world) carryReadRecord(t *txnState, m string, lost bool) error {
	c, err := w.open(t, txn.ReadRecord, t.record)
	if err != nil {
		return err
	}
	current := w.attempt(t, c)
	w.askRecord(t.coord, t, m, func(rec txn.Record, found bool, marker uint64) {
		if !current() {
			return
		}
		if lost {
			w.say("the reply to %s is lost", t.coord.name)
			return
		}
		w.mergeRecord(t.coord, t, rec, found, marker)
		t.close(c)
		t.c.Recorded(rec)
		w.pump(t)
	})
	return nil
}

// decideCmd is the decision d of T proposed on its record partition,
// finishing r's intent in the same entry, with a version >= the stamp
// (rpc ParticipantServer.Decide).
func decideCmd(t *txnState, d txn.Decision, parts []uint64) *internalpb.Command {
	return &internalpb.Command{CutVersion: d.Stamp, Op: &internalpb.Command_TxnDecide{TxnDecide: &internalpb.TxnDecideOp{
		TxnId: []byte(t.id), Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, Participants: parts,
		Finish: true, PreparedUnixMs: prepMs,
	}}}
}

func recordOf(d *internalpb.TxnDecideOp) txn.Record {
	return txn.Record{Staging: d.GetStaging(), Participants: d.GetParticipants(),
		Decision: txn.Decision{Commit: d.GetCommit(), Succeeded: d.GetSucceeded(), Stamp: d.GetStamp()}}
}

// carryDecide carries T's ProposeDecision to its record partition.
func (w *world) carryDecide(t *txnState, m string, lost bool) error {
	c, err := w.open(t, txn.ProposeDecision, t.record)
	if err != nil {
		return err
	}
	current := w.attempt(t, c)
	r := t.record
	l := r.leader
	w.raise(l, t.coord.clock.Load(), "Decide marker from "+t.coord.name)
	w.raise(l, c.msg.Decision.Stamp, "the decision's stamp")
	var ids []uint64
	for _, p := range t.parts {
		ids = append(ids, p.id)
	}
	slices.Sort(ids)
	w.propose(r, decideCmd(t, c.msg.Decision, ids), m, func(res any) {
		if !current() {
			return
		}
		if lost {
			w.say("the reply to %s is lost", t.coord.name)
			return
		}
		rec, _ := res.(*internalpb.TxnDecideOp)
		w.raise(t.coord, l.clock.Load(), "Decide reply from "+r.name)
		w.say("%s learns %s's decision: %s", t.coord.name, t.id, describeDecision(rec))
		t.close(c)
		t.c.Recorded(recordOf(rec))
		w.pump(t)
	})
	return nil
}

func finishOp(t *txnState, d txn.Decision) *internalpb.TxnFinishOp {
	return &internalpb.TxnFinishOp{TxnId: []byte(t.id), Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, PreparedUnixMs: prepMs}
}

// finishAt is Participant.Finish at p's leader, sent by n with marker:
// the marker and the stamp are admitted, and the Finish goes into the
// leader's batcher: proposed at once when no Finish entry of the leader
// is on its way, else queued behind it (rpc finishBatcher).
func (w *world) finishAt(p *part, n *node, marker uint64, op *internalpb.TxnFinishOp, m string, done func()) {
	l := p.leader
	w.raise(l, marker, "Finish marker from "+n.name)
	w.raise(l, op.GetStamp(), "the Finish's stamp")
	f := &waiter{op: op, done: done}
	if p.finishing != nil || len(p.queue) > 0 {
		p.queue = append(p.queue, f)
		behind := "the queue"
		if p.finishing != nil {
			behind = fmt.Sprintf("#%d, not applied yet", p.finishing.index)
		}
		w.say("%s queues %s's Finish behind %s", l.name, op.GetTxnId(), behind)
		return
	}
	w.proposeFinishes(p, []*waiter{f}, m)
}

// proposeFinishes proposes batch as one entry: a TxnFinish for one, a
// TxnFinishes for several, of version >= every stamp in it.
func (w *world) proposeFinishes(p *part, batch []*waiter, m string) {
	ops := make([]*internalpb.TxnFinishOp, 0, len(batch))
	for _, f := range batch {
		ops = append(ops, f.op)
	}
	cmd := txn.FinishEntry(ops)
	var e *entry
	e = w.propose(p, cmd, m, func(any) {
		if p.finishing == e {
			p.finishing = nil
		}
		for _, f := range batch {
			if f.done != nil {
				f.done()
			}
		}
	})
	if m == "pending" && e != nil {
		p.finishing = e
	}
	if m == "dropped" {
		w.say("(the Finishes' senders retry)")
	}
}

// flush has p's batcher propose the Finishes queued for it.
func (w *world) flush(p *part, m string) error {
	if p.finishing != nil {
		return fmt.Errorf("%s's Finish entry #%d has not applied yet", p.name, p.finishing.index)
	}
	if len(p.queue) == 0 {
		w.say("%s: no Finish queued", p.name)
		return nil
	}
	n := min(len(p.queue), 256)
	batch := p.queue[:n]
	p.queue = p.queue[n:]
	w.proposeFinishes(p, batch, m)
	return nil
}

// carryFinish carries T's SendFinish to p.
func (w *world) carryFinish(t *txnState, p *part, m string, lost bool) error {
	c, err := w.open(t, txn.SendFinish, p)
	if err != nil {
		return err
	}
	current := w.attempt(t, c)
	l := p.leader
	w.finishAt(p, t.coord, t.coord.clock.Load(), finishOp(t, c.msg.Decision), m, func() {
		if !current() {
			return
		}
		if lost {
			w.say("the reply to %s is lost", t.coord.name)
			return
		}
		w.raise(t.coord, l.clock.Load(), "Finish reply from "+p.name)
		t.close(c)
		t.c.Finished(p.id)
		w.pump(t)
	})
	return nil
}

// carryForget carries T's Forget (the node's forgetter, one TxnForget
// entry on the record partition).
func (w *world) carryForget(t *txnState, m string) error {
	c, err := w.open(t, txn.Forget, t.record)
	if err != nil {
		return err
	}
	t.close(c)
	w.propose(t.record, &internalpb.Command{Op: &internalpb.Command_TxnForget{TxnForget: &internalpb.TxnForgetOp{TxnIds: [][]byte{[]byte(t.id)}}}}, m, nil)
	return nil
}

// timeout ends T's open call of kind to p without an answer: the core
// hears that it was lost.
func (w *world) timeout(t *txnState, kind string, p *part) error {
	var k txn.MsgKind
	for _, x := range []txn.MsgKind{txn.SendPrepare, txn.AskStatus, txn.ReadRecord, txn.ProposeDecision, txn.SendFinish} {
		if x.String() == kind {
			k = x
		}
	}
	if k == 0 {
		return fmt.Errorf("no call kind %q", kind)
	}
	c, err := w.open(t, k, p)
	if err != nil {
		return err
	}
	w.say("%s's %s call to %s times out", t.id, kind, p.name)
	t.close(c)
	switch k {
	case txn.SendPrepare:
		t.c.VoteLost(p.id)
	case txn.AskStatus:
		t.c.StatusLost(p.id)
	case txn.ReadRecord, txn.ProposeDecision:
		t.c.RecordLost()
	case txn.SendFinish:
		t.c.FinishLost(p.id)
	}
	w.pump(t)
	return nil
}

// recover is rpc.resolve run by p's leader for its intent of T: read the
// record through r's log, ask each listed participant's status through its
// log, and follow txn.Recover until it decides; then finishDecided.
func (w *world) recover(t *txnState, p *part) {
	l := p.leader
	if _, ok := p.sm.IntentOf(t.id); !ok {
		w.say("%s holds no intent of %s: nothing in doubt", p.name, t.id)
		return
	}
	w.say("%s (leading %s) recovers %s", l.name, p.name, t.id)
	read := func() txn.Record {
		var got txn.Record
		w.askRecord(l, t, "", func(rec txn.Record, found bool, marker uint64) {
			w.mergeRecord(l, t, rec, found, marker)
			got = rec
		})
		return got
	}
	rec := read()
	statuses := map[uint64]txn.Vote{}
	if rec.Staging {
		statuses[t.record.id] = rec.Vote
	}
	reread := false
	for range 3 {
		step := txn.Recover(rec, statuses, reread)
		switch {
		case step.Decided:
			w.say("%s's recovery decides %s: %s", l.name, t.id, describeTxnDecision(step.Decision))
			w.finishDecided(l, t, p, rec, step.Decision)
			return
		case step.Reread:
			w.say("a participant finished %s while its record reads STAGING: %s reads it again", t.id, l.name)
			rec, reread = read(), true
		default:
			for _, id := range step.Ask {
				q := w.partByID(id)
				w.askStatus(l, t, q, "", func(v txn.Vote, marker uint64) {
					w.raise(l, marker, "Status reply from "+q.name)
					w.raise(l, v.Version, "the status's version")
					w.say("%s learns %s's status of %s: %s", l.name, q.name, t.id, describeTxnVote(v))
					statuses[id] = v
				})
			}
		}
	}
	w.say("%s's recovery of %s did not decide: it tries again at its next round", l.name, t.id)
}

// finishDecided records d on T's record partition unless rec, as read,
// is decided already (first decision wins, finishing r's intent), and
// finishes every participant, p always among them, with the decision
// recorded there (rpc finishDecided).
func (w *world) finishDecided(l *node, t *txnState, p *part, rec txn.Record, d txn.Decision) {
	parts := rec.Participants
	if rec.Staging || len(parts) == 0 {
		r := t.record
		rl := r.leader
		w.raise(rl, max(l.clock.Load(), d.Stamp), "Decide marker from "+l.name)
		w.propose(r, decideCmd(t, d, parts), "", func(res any) {
			got, _ := res.(*internalpb.TxnDecideOp)
			w.raise(l, rl.clock.Load(), "Decide reply from "+r.name)
			d = recordOf(got).Decision
			if len(parts) == 0 {
				parts = got.GetParticipants()
			}
		})
	}
	if !slices.Contains(parts, p.id) {
		parts = append(slices.Clone(parts), p.id)
	}
	for _, id := range parts {
		q := w.partByID(id)
		w.finishAt(q, l, max(l.clock.Load(), d.Stamp), finishOp(t, d), "", func() {
			w.raise(l, q.leader.clock.Load(), "Finish reply from "+q.name)
		})
	}
}

func (w *world) onePhase(id string, p *part, key, m string) error {
	if _, err := w.txn(id); err == nil {
		return fmt.Errorf("transaction %s declared twice", id)
	}
	t := &txnState{id: id, key: id, parts: []*part{p}, onePhase: p}
	if key != "" {
		t.key = key
	}
	w.txns = append(w.txns, t)
	cmd := &internalpb.Command{Op: &internalpb.Command_TxnOnePhase{TxnOnePhase: &internalpb.TxnOnePhaseOp{TxnId: []byte(id), Share: t.share(p)}}}
	w.propose(p, cmd, m, func(any) {
		t.opEntry = p.log[len(p.log)-1]
	})
	return nil
}
