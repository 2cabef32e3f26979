package rpc

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// This file carries a cross-partition transaction's messages for its
// coordinator core (txn.Coordinator): it turns each message the core asks
// for into a call to a participant's leader and each reply into an event.
// The core decides; nothing here does.

// coordination is one transaction being coordinated by this node.
type coordination struct {
	n      *Node
	id     []byte
	record uint64
	parts  []uint64
	ops    map[uint64]*internalpb.TxnPrepareOp
	ctx    context.Context // the client's request: bounds the prepares
	c      *txn.Coordinator
	events chan func()
	calls  int // calls in flight
	// reads of each participant's vote, for the client's answer.
	reads map[uint64]shareVote
	// answered carries the outcome to the waiting handler.
	answered chan coordAnswer
	// refused: a participant's vote refused (the abort's reason, for
	// the metrics).
	refused bool
}

type shareVote struct{ success, failure []*kvpb.ResponseOp }

type coordAnswer struct {
	outcome txn.Outcome
	d       txn.Decision
	reads   map[uint64]shareVote
	err     error
	// refused: the abort came from a participant's refusal, not from the
	// record.
	refused bool
}

// coordinate runs transaction id's coordination over ops (one prepare per
// participant, txn.PrepareOps) and returns the client's outcome once the
// core knows it; the rest (decision, finishes, forgetting) goes on in the
// background, bounded by decideWait and finishWait.
func (n *Node) coordinate(ctx context.Context, id []byte, record uint64, ops map[uint64]*internalpb.TxnPrepareOp) coordAnswer {
	parts := make([]uint64, 0, len(ops))
	for p := range ops {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	k := &coordination{n: n, id: id, record: record, ops: ops, ctx: ctx, c: txn.NewCoordinator(record, parts),
		events: make(chan func(), 4*len(ops)+4), reads: map[uint64]shareVote{}, answered: make(chan coordAnswer, 1)}
	k.parts = parts
	go k.run()
	select {
	case a := <-k.answered:
		return a
	case <-n.lifetime().Done():
		return stoppedAnswer(id)
	}
}

// stoppedAnswer is the client's answer when this node stops while it
// coordinates transaction id. Not ErrShuttingDown, which tells the client
// nothing applied: the prepares are out, and if every one applies,
// recovery commits the transaction.
func stoppedAnswer(id []byte) coordAnswer {
	return coordAnswer{outcome: txn.Unknown, err: fmt.Errorf("%w: transaction %x: this node is shutting down with its prepares sent; recovery decides it", ErrOutcomeUnknown, id)}
}

// run is the coordination's loop: one goroutine owns the core.
func (k *coordination) run() {
	answered := false
	for {
		rd := k.c.Ready()
		for _, m := range rd.Msgs {
			k.carry(m)
		}
		if rd.Outcome != txn.Pending && !answered {
			answered = true
			k.answered <- coordAnswer{outcome: rd.Outcome, d: rd.Decision, reads: maps.Clone(k.reads), refused: k.refused}
		}
		if rd.Conflict {
			k.n.logger().Error("transaction record holds a decision other than its coordinator's", "txn", fmt.Sprintf("%x", k.id))
		}
		if k.calls == 0 {
			if !answered {
				k.answered <- coordAnswer{outcome: txn.Unknown}
			}
			return
		}
		ev := <-k.events
		k.calls--
		ev()
	}
}

// call runs f in its own goroutine and hands its event to the loop.
func (k *coordination) call(f func() func()) {
	k.calls++
	go func() { k.events <- f() }()
}

// carry starts the call that message m asks for.
func (k *coordination) carry(m txn.Msg) {
	n, p := k.n, m.To
	switch m.Kind {
	case txn.SendPrepare:
		op := k.ops[p]
		k.call(func() func() {
			v, err := CallParticipant(k.ctx, n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.PrepareResponse, error) {
				return c.Prepare(cctx, &internalpb.PrepareRequest{Partition: p, Op: op, CutVersion: n.Clock.Load()})
			})
			if err == nil {
				err = checkEntryVersion(p, v.GetVersion(), v.GetCutVersion())
			}
			return func() {
				if err != nil {
					k.c.VoteLost(p)
					return
				}
				k.voted(p, prepareVote(v), v.GetSuccessReads(), v.GetFailureReads())
			}
		})
	case txn.AskStatus:
		k.call(func() func() {
			ctx, cancel := context.WithTimeout(n.lifetime(), decideWait)
			defer cancel()
			st, err := CallParticipant(ctx, n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.StatusResponse, error) {
				return c.Status(cctx, &internalpb.StatusRequest{Partition: p, CutVersion: n.Clock.Load(),
					Op: &internalpb.TxnStatusOp{TxnId: k.id, PreparedUnixMs: k.ops[p].GetPreparedUnixMs()}})
			})
			var v txn.Vote
			if err == nil {
				v, err = StatusVote(p, st)
			}
			return func() {
				if err != nil {
					k.c.StatusLost(p)
					return
				}
				k.voted(p, v, st.GetSuccessReads(), st.GetFailureReads())
			}
		})
	case txn.ReadRecord:
		k.call(func() func() {
			rec, err := n.ReadRecord(k.record, k.id)
			return func() {
				if err != nil {
					k.c.RecordLost()
					return
				}
				k.c.Recorded(rec)
			}
		})
	case txn.ProposeDecision:
		k.call(func() func() {
			if err := failpoint.Inject(failpoint.TxnAfterPrepare); err != nil {
				// "exit" kills the coordinator here: every vote is in, the
				// client is answered, nothing is decided; recovery settles it.
				return func() { k.c.RecordLost() }
			}
			ctx, cancel := context.WithTimeout(n.lifetime(), decideWait)
			defer cancel()
			d := m.Decision
			rec, err := CallParticipant(ctx, n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.DecideResponse, error) {
				return c.Decide(cctx, &internalpb.DecideRequest{Partition: p, CutVersion: n.Clock.Load(), Op: &internalpb.TxnDecideOp{
					TxnId: k.id, Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, Participants: k.parts,
					Finish: true, PreparedUnixMs: k.ops[p].GetPreparedUnixMs(),
				}})
			})
			if err == nil {
				err = failpoint.Inject(failpoint.TxnAfterDecide) // "exit": recovery finishes the others
			}
			return func() {
				if err != nil {
					k.c.RecordLost()
					return
				}
				k.c.Recorded(txn.RecordOf(rec.GetRecorded()))
			}
		})
	case txn.SendFinish:
		k.call(func() func() {
			ctx, cancel := context.WithTimeout(n.lifetime(), finishWait)
			defer cancel()
			d := m.Decision
			_, err := CallParticipant(ctx, n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.FinishResponse, error) {
				return c.Finish(cctx, &internalpb.FinishRequest{Partition: p, CutVersion: n.Clock.Load(),
					Op: &internalpb.TxnFinishOp{TxnId: k.id, Commit: d.Commit, Succeeded: d.Succeeded, Stamp: d.Stamp, PreparedUnixMs: k.ops[p].GetPreparedUnixMs()}})
			})
			return func() {
				if err != nil {
					k.c.FinishLost(p)
					return
				}
				k.c.Finished(p)
			}
		})
	case txn.Forget:
		n.forget.add(n, p, k.id)
	}
}

// checkEntryVersion refuses a reply of partition p whose prepare-entry
// version exceeds its marker: the marker is read after the entry applied,
// so it is at least the entry's version, and only the marker is admitted
// (Pool.SetMarker) — a version above it would raise the clock
// unchecked.
func checkEntryVersion(p, version, marker uint64) error {
	if version > marker {
		return fmt.Errorf("%w: partition %d's reply names entry version %d above its marker %d", ErrInvalidArgument, p, version, marker)
	}
	return nil
}

// voted feeds a vote to the core; the vote's version is merged into the
// clock first (rule 1: a reply is merged before it is acted on), so the
// answer's marker is at least the stamp (rule 8).
// Only a Prepared vote's reads are the share's answers: a refused or
// finished one carries none, and a transaction committed with such a vote
// (learnt from the record) is answered as unknown (twoPhase).
func (k *coordination) voted(p uint64, v txn.Vote, success, failure []*kvpb.ResponseOp) {
	switch v.State {
	case txn.Prepared:
		k.reads[p] = shareVote{success, failure}
	case txn.Refused:
		k.refused = true
	}
	k.n.Clock.Raise(v.Version)
	k.c.Voted(p, v)
}

func prepareVote(v *internalpb.PrepareResponse) txn.Vote {
	return txn.PrepareVote(v.GetPrepared(), v.GetFinished(), v.GetComparesHold(), v.GetVersion())
}

// StatusVote reads partition p's status reply: its entry version no
// higher than its marker, and a state the core knows.
func StatusVote(p uint64, st *internalpb.StatusResponse) (txn.Vote, error) {
	if err := checkEntryVersion(p, st.GetVersion(), st.GetCutVersion()); err != nil {
		return txn.Vote{}, err
	}
	v, ok := txn.StatusVote(st.GetState(), st.GetComparesHold(), st.GetVersion())
	if !ok {
		return txn.Vote{}, fmt.Errorf("%w: partition %d's status reply has state %v", ErrInvalidArgument, p, st.GetState())
	}
	return v, nil
}

// ReadRecord reads transaction id's record on partition r's leader
// (Participant.Record), bounded by decideWait; a STAGING record's vote
// is the record partition's, and its version is merged into the clock.
func (n *Node) ReadRecord(r uint64, id []byte) (txn.Record, error) {
	ctx, cancel := context.WithTimeout(n.lifetime(), decideWait)
	defer cancel()
	resp, err := CallParticipant(ctx, n, r, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.RecordResponse, error) {
		return c.Record(cctx, &internalpb.RecordRequest{Partition: r, TxnId: id, CutVersion: n.Clock.Load()})
	})
	if err == nil {
		err = checkEntryVersion(r, resp.GetVersion(), resp.GetCutVersion())
	}
	if err != nil {
		return txn.Record{}, err
	}
	rec := txn.RecordOf(resp.GetRecord())
	if rec.Staging {
		rec.Vote = txn.Vote{State: txn.Prepared, ComparesHold: resp.GetComparesHold(), Version: resp.GetVersion()}
		n.Clock.Raise(rec.Vote.Version)
	}
	return rec, nil
}
