package rpc

import (
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/txn"
)

// TestCoordinationKeepsOnlyPreparedReads: a transaction can be committed
// with a participant's vote "finished before" (recovery committed it while
// the prepare's reply was lost; the coordinator learns the commit from the
// record). That vote carries no reads, so the client must not be answered
// with an empty share as if it were the reads (a chaos round saw a bank
// read with a missing Get, and list-append a G2 cycle from a read taken
// for empty): only Prepared votes' reads are kept, and twoPhase answers
// unknown for a share without them. The vote's entry version raises the
// clock (rule 8: the answer's marker is at least the stamp).
func TestCoordinationKeepsOnlyPreparedReads(t *testing.T) {
	k := &coordination{n: &Node{Clock: cut.NewClock()}, c: txn.NewCoordinator(1, []uint64{1, 2}), reads: map[uint64]shareVote{}}
	get := []*kvpb.ResponseOp{{Response: &kvpb.ResponseOp_Get{Get: &kvpb.GetResponse{}}}}
	k.voted(1, txn.Vote{State: txn.Prepared, ComparesHold: true, Version: 7}, get, nil)
	k.voted(2, txn.Vote{State: txn.Finished}, nil, nil)
	if _, ok := k.reads[2]; ok {
		t.Fatal("a finished vote's (empty) reads were kept as the share's answers")
	}
	if r, ok := k.reads[1]; !ok || len(r.success) != 1 {
		t.Fatalf("the prepared vote's reads: %+v, %v", r, ok)
	}
	if got := k.n.Clock.Load(); got != 7 {
		t.Fatalf("clock %d after a vote of entry version 7", got)
	}
	msgs := k.c.Ready().Msgs
	if len(msgs) == 0 || msgs[len(msgs)-1].Kind != txn.ReadRecord {
		t.Fatalf("after a finished vote the core asks %v, want the record read", msgs)
	}
}

// A peer's status reply is bounded where it enters: an unknown state or
// an entry version above the marker is an error (the call counts as
// lost), never a vote.
func TestStatusVoteBounded(t *testing.T) {
	if _, err := StatusVote(2, &internalpb.StatusResponse{State: 99, CutVersion: 5}); err == nil {
		t.Fatal("a status of unknown state read as a vote")
	}
	if _, err := StatusVote(2, &internalpb.StatusResponse{State: internalpb.TxnState_TXN_STATE_PREPARED, Version: 6, CutVersion: 5}); err == nil {
		t.Fatal("a status whose entry version is above its marker read as a vote")
	}
	v, err := StatusVote(2, &internalpb.StatusResponse{State: internalpb.TxnState_TXN_STATE_REFUSED, CutVersion: 5})
	if err != nil || v.State != txn.Refused {
		t.Fatalf("refused status: %+v, %v", v, err)
	}
}

// A coordinator that stops with its prepares out does not know the
// outcome, and must not say "not applied" (SHUTTING_DOWN): recovery
// commits the transaction if every prepare applies. The client reads an
// Unavailable without a reason as an unknown outcome.
func TestStoppedCoordinatorAnswersUnknown(t *testing.T) {
	a := stoppedAnswer([]byte{1, 2})
	if a.outcome != txn.Unknown {
		t.Fatalf("outcome %v, want unknown", a.outcome)
	}
	st, _ := status.FromError(toStatus(a.err, ""))
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			t.Fatalf("a stopped coordinator answers %v with reason %s: the client takes that for not applied", st.Code(), info.GetReason())
		}
	}
}
