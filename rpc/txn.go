package rpc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/txn"
)

// Transaction errors.
var (
	// ErrConflict: a lock held by another transaction refused this one;
	// nothing was applied (clients see Aborted and retry).
	ErrConflict = errors.New("rpc: transaction conflict")
	// ErrLocked: a read met a prepared write that did not finish in time;
	// nothing was read (clients see Unavailable/LOCKED and retry).
	ErrLocked = errors.New("rpc: key locked by a prepared transaction")
)

// Timing of transactions.
const (
	// dieWait bounds how long an older transaction waits for younger lock
	// holders before it aborts too (wait-die, bounded).
	dieWait = 500 * time.Millisecond
	// readLockWait bounds how long a plain read waits for a prepared write
	// on its key to finish.
	readLockWait = time.Second
	// decideWait bounds how long a coordinator tries to record its decision.
	decideWait = 3 * time.Second
	// finishWait bounds how long a coordinator keeps sending Finish before
	// leaving the rest to recovery (package node).
	finishWait = 3 * time.Second
)

// --- participant side -------------------------------------------------

// ParticipantServer implements the node-to-node 2PC service: each call is
// served by the leader of the partition it names, through raft.
type ParticipantServer struct {
	internalrpc.UnimplementedParticipantServer
	n *Node
}

// NewParticipantServer returns the participant service of node n.
func NewParticipantServer(n *Node) *ParticipantServer { return &ParticipantServer{n: n} }

// leaderCheck says why this node cannot serve a request for partition p
// as its leader, nil when it can.
func (n *Node) leaderCheck(p uint64) error {
	if p == 0 || p > uint64(n.Layout.Partitions) {
		return fmt.Errorf("%w: partition %d not in 1..%d", ErrInvalidArgument, p, n.Layout.Partitions)
	}
	if n.Host.Draining() {
		return ErrShuttingDown
	}
	st, ok := n.Store.Status(p)
	if !ok || !st.IsLeader {
		return &raftstore.NotLeaderError{Group: p, Leader: st.Leader}
	}
	return nil
}

// leaderHintOf names the node this one believes leads p, "" if none.
func (n *Node) leaderHintOf(p uint64) string {
	st, _ := n.Store.Status(p)
	return n.memberID(st.Leader)
}

// Prepare locks, evaluates and reads the share through raft and votes.
// Every answer comes from an applied entry: a prepare that wait-die
// refuses before proposing is settled through a status entry instead
// (TxnStatus), so that a copy of it still on its way can never create an
// intent after the refusal reached the coordinator (parallel commits
// count only applied, effective prepares).
func (s *ParticipantServer) Prepare(ctx context.Context, req *internalpb.PrepareRequest) (*internalpb.PrepareResponse, error) {
	if err := s.n.checkPrepare(req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(req.GetPartition()))
	}
	p, op := req.GetPartition(), req.GetOp()
	admitted, err := waitDie(ctx, s.n.Partitions[p], s.n.waitQueue(p), string(op.GetTxnId()), op.GetPriority(), op.GetShare())
	if err != nil {
		if !errors.Is(err, ErrConflict) {
			return nil, toStatus(err, s.n.leaderHintOf(p))
		}
		st, err := s.n.proposeStatus(ctx, p, &internalpb.TxnStatusOp{TxnId: op.GetTxnId(), PreparedUnixMs: op.GetPreparedUnixMs()})
		if err != nil {
			return nil, toStatus(err, s.n.leaderHintOf(p))
		}
		return &internalpb.PrepareResponse{
			Prepared: st.State == internalpb.TxnState_TXN_STATE_PREPARED, ComparesHold: st.ComparesHold, Version: st.Version,
			Finished:     st.State == internalpb.TxnState_TXN_STATE_FINISHED,
			SuccessReads: st.SuccessReads, FailureReads: st.FailureReads, CutVersion: s.n.Clock.Load(),
		}, nil
	}
	res, err := s.n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: op}})
	admitted()
	if err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	v, _ := res.(partition.Vote)
	if err := failpoint.Inject(failpoint.TxnBeforeVote); err != nil {
		// The prepare applied; the vote is lost as on a dropped answer
		// (the coordinator asks again or recovery settles it).
		return nil, toStatus(fmt.Errorf("%w: the vote of %x on partition %d: %v", ErrUnavailable, op.GetTxnId(), p, err), "")
	}
	// The marker is read after the prepare entry applied: it is at least
	// the entry's version, which the vote carries apart as the stamp's
	// part (rule 3).
	return &internalpb.PrepareResponse{
		Prepared: v.Prepared, ComparesHold: v.ComparesHold, Version: v.Version, Finished: v.Finished,
		SuccessReads: v.SuccessReads, FailureReads: v.FailureReads,
		CutVersion: s.n.Clock.Load(),
	}, nil
}

// proposeStatus settles a transaction's effective prepare on partition p
// through p's log (TxnStatusOp).
func (n *Node) proposeStatus(ctx context.Context, p uint64, op *internalpb.TxnStatusOp) (partition.Status, error) {
	res, err := n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_TxnStatus{TxnStatus: op}})
	if err != nil {
		return partition.Status{}, err
	}
	st, ok := res.(partition.Status)
	if !ok {
		return partition.Status{}, fmt.Errorf("%w: partition %d applied a status but returned %T", ErrInternal, p, res)
	}
	return st, nil
}

// Status settles a transaction's effective prepare here: recovery's and
// a coordinator's question for a participant whose vote it lacks.
func (s *ParticipantServer) Status(ctx context.Context, req *internalpb.StatusRequest) (*internalpb.StatusResponse, error) {
	p := req.GetPartition()
	if err := s.n.checkStatus(req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	st, err := s.n.proposeStatus(ctx, p, req.GetOp())
	if err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	return &internalpb.StatusResponse{State: st.State, ComparesHold: st.ComparesHold, Version: st.Version,
		SuccessReads: st.SuccessReads, FailureReads: st.FailureReads, CutVersion: s.n.Clock.Load()}, nil
}

// recordStatusTime is the time a Record read's status entry is stamped
// with, at now on a partition whose horizon is horizon (Unix ms): now,
// but no less than FinishedRetention past the horizon. The entry leaves
// its tombstone (the prevention of a prepare still on its way) only when
// its time is not behind the horizon, and the tombstone lasts until the
// horizon passes that time. On a leader whose clock ran more than
// FinishedRetention behind, now was behind the horizon, so no tombstone
// was left: a late prepare of the record partition could then write
// STAGING after recovery found no record and decided ABORTED (issue 17).
// The horizon follows the real time (node's horizon pacing), so its
// retention past it is about the real now.
func recordStatusTime(now time.Time, horizon int64) int64 {
	return max(now.UnixMilli(), horizon+FinishedRetention.Milliseconds())
}

// Record reads a transaction record through this partition's log: a
// status entry first (so the read follows every earlier entry, and a
// prepare of the record partition not yet applied is prevented by its
// tombstone), then the record. With none — the prepare refused or was
// prevented, or it was written before parallel commits (presumed abort)
// — the answer is ABORTED with no participants; recovery records it.
func (s *ParticipantServer) Record(ctx context.Context, req *internalpb.RecordRequest) (*internalpb.RecordResponse, error) {
	p := req.GetPartition()
	if err := s.n.checkRecord(req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	id := req.GetTxnId()
	part := s.n.Partitions[p]
	_, horizon := part.FinishedCount()
	if _, err := s.n.proposeStatus(ctx, p, &internalpb.TxnStatusOp{TxnId: id, PreparedUnixMs: recordStatusTime(clock.Now(), horizon)}); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	rec, ok := part.Record(string(id))
	if !ok {
		rec = &internalpb.TxnDecideOp{TxnId: id}
	}
	resp := &internalpb.RecordResponse{Record: rec, CutVersion: s.n.Clock.Load()}
	if rec.GetStaging() {
		if in, ok := part.IntentOf(string(id)); ok {
			resp.ComparesHold, resp.Version = in.Vote.ComparesHold, in.Vote.Version
		}
	}
	return resp, nil
}

// Finish applies or drops the prepared intent through raft: Finishes
// waiting for the same partition share one entry (finishBatcher).
func (s *ParticipantServer) Finish(ctx context.Context, req *internalpb.FinishRequest) (*internalpb.FinishResponse, error) {
	if err := s.n.checkFinish(ctx, req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(req.GetPartition()))
	}
	p := req.GetPartition()
	if err := s.n.finishes(p).finish(ctx, req.GetOp()); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	return &internalpb.FinishResponse{CutVersion: s.n.Clock.Load()}, nil
}

// Forget drops the records of transactions every participant finished.
func (s *ParticipantServer) Forget(ctx context.Context, req *internalpb.ForgetRequest) (*internalpb.ForgetResponse, error) {
	p := req.GetPartition()
	if err := s.n.checkForget(req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	if _, err := s.n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_TxnForget{TxnForget: req.GetOp()}}); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	return &internalpb.ForgetResponse{}, nil
}

// Decide records a decision in the transaction record (first one wins)
// and returns the recorded decision.
func (s *ParticipantServer) Decide(ctx context.Context, req *internalpb.DecideRequest) (*internalpb.DecideResponse, error) {
	p := req.GetPartition()
	if err := s.n.checkDecide(ctx, req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	// The entry's version is at least the stamp (rule 4: a decision that
	// finishes r's intent is r's Finish).
	res, err := s.n.Store.Propose(ctx, p, &internalpb.Command{CutVersion: req.GetOp().GetStamp(), Op: &internalpb.Command_TxnDecide{TxnDecide: req.GetOp()}})
	if err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	rec, _ := res.(*internalpb.TxnDecideOp)
	if rec == nil {
		return nil, toStatus(fmt.Errorf("rpc: partition %d applied a decision but returned %T", p, res), "")
	}
	return &internalpb.DecideResponse{Recorded: rec, CutVersion: s.n.Clock.Load()}, nil
}

// waitDie is wait-die at partition p's leader, before transaction id
// (priority prio) proposes its entry there. It returns ErrConflict at
// once when an older transaction holds a conflicting lock, or has
// reserved one in q (txn.WaitQueue): the younger dies. It waits, bounded,
// while only younger transactions hold conflicting locks or have their
// conflicting entries on the way, and reserves its wants meanwhile, so
// that small transactions do not keep taking the keys a large one waits
// for. On success the caller proposes, then calls admitted once the
// entry applied (or failed): until then the transaction stays admitted
// in q, and an older one that conflicts waits for it instead of racing
// it to the log. The state machine re-checks the locks: this only decides
// who waits and who dies.
// (A grace for older holders — a decided transaction's locks outlive its
// answer by a raft round — was tried and undone: under the bank load the
// younger waiters held their other locks meanwhile, and throughput fell
// to 0.65×, p99 doubled.)
func waitDie(ctx context.Context, part *partition.Partition, q *txn.WaitQueue, id string, prio int64, share *internalpb.TxnShare) (admitted func(), err error) {
	wants := txn.Wants(share)
	t := q.Enter(id, prio, wants)
	held := func() txn.Verdict {
		holders := part.LockConflicts(id, wants)
		for _, h := range holders {
			if in, ok := part.IntentOf(h); ok && !txn.Older(prio, id, in.Op.GetPriority(), h) {
				return txn.Die // an older holder
			}
		}
		if len(holders) > 0 {
			return txn.Wait
		}
		return txn.Proceed
	}
	v := txn.Wait
	err = await(ctx, dieWait, func() (bool, error) {
		v = t.Admit(held)
		return v != txn.Wait, nil
	}, part.Changed, q.Changed)
	switch {
	case err == nil && v == txn.Proceed:
		return t.Leave, nil
	case err == nil, errors.Is(err, errPollTimeout):
		err = ErrConflict
	}
	t.Leave()
	return nil, err
}

// --- coordinator side -------------------------------------------------

// txnIDLen is the length of the transaction ids this node makes.
const txnIDLen = txn.IDSize

// checkTxn is the door of a Txn request. Transaction ids are the
// server's: a client's request must carry none (an id chosen by a client
// could be one used before, and a second transaction with it would never
// apply its writes). A request forwarded by a member (a one-partition
// transaction sent to its leader) carries the id that member made.
func (s *KVServer) checkTxn(ctx context.Context, req *kvpb.TxnRequest) error {
	if err := txn.Validate(req, s.n.txnLimits()); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	forwarded := forwardedHops(ctx) > 0
	switch id := req.GetTxnId(); {
	case !forwarded && len(id) > 0:
		return fmt.Errorf("%w: txn_id must be empty: transaction ids are assigned by the server", ErrInvalidArgument)
	case forwarded && len(id) != txnIDLen:
		return fmt.Errorf("%w: forwarded txn_id of %d bytes, not %d", ErrInvalidArgument, len(id), txnIDLen)
	}
	// The priority is not refused here but bounded by txnPriority.
	return nil
}

// Txn runs a transaction: one raft entry on the partition leader when all
// its keys live in one partition (1PC), else two-phase commit coordinated
// by this node.
func (s *KVServer) Txn(ctx context.Context, req *kvpb.TxnRequest) (*kvpb.TxnResponse, error) {
	if err := s.checkTxn(ctx, req); err != nil {
		return nil, toStatus(err, "")
	}
	if s.n.Host.Draining() {
		return nil, toStatus(ErrShuttingDown, "")
	}
	if len(req.GetTxnId()) == 0 {
		id := make([]byte, txnIDLen)
		_, _ = rand.Read(id)
		req.TxnId = id
	}
	maxAge := MaxTxnAge
	if forwardedHops(ctx) > 0 {
		maxAge = FinishedRetention
	}
	req.Priority = txnPriority(req, clock.Now(), maxAge)
	shares, record := txn.Split(req, s.n.Layout.Partitions)
	if len(shares) == 0 {
		return &kvpb.TxnResponse{Header: s.n.header(0), Succeeded: true}, nil
	}
	if len(shares) == 1 {
		for p, sh := range shares {
			return s.onePhase(ctx, req, p, sh)
		}
	}
	return s.twoPhase(ctx, req, shares, record)
}

// txnPriority is the wait-die priority of req arriving at now: the
// client's (the time of its first attempt), else now — bounded to
// [now-maxAge, now+MaxPrioSkew]: a transaction claiming to be older
// counts as maxAge old, one from the future as MaxPrioSkew ahead, so
// none wins every conflict. Bounded, not refused: the priority only
// orders conflicts, and a node whose clock is off by more than maxAge
// refused every transaction of every correct client as InvalidArgument
// (issue 17, chaos clock-skew: 20 bank transfers refused). Readers get no head
// start over writers: one of 10 s let a steady stream of full reads
// starve every transfer (tests/bank: 5 transfers committed beside 1,944
// reads of all accounts); with reservations (txn.WaitQueue) a reader or a
// writer that has waited longest wins, whichever it is.
func txnPriority(req *kvpb.TxnRequest, now time.Time, maxAge time.Duration) int64 {
	p := req.GetPriority()
	if p == 0 {
		return now.UnixNano()
	}
	return min(max(p, now.Add(-maxAge).UnixNano()), now.Add(MaxPrioSkew).UnixNano())
}

func (s *KVServer) onePhase(ctx context.Context, req *kvpb.TxnRequest, p uint64, sh *internalpb.TxnShare) (*kvpb.TxnResponse, error) {
	start := time.Now()
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.TxnResponse, error) {
		return c.Txn(fctx, req)
	}, func() (*kvpb.TxnResponse, error) {
		// Counted here, on the leader, once: a forwarding node only relays.
		m := s.n.Metrics
		admitted, err := waitDie(ctx, s.n.Partitions[p], s.n.waitQueue(p), string(req.GetTxnId()), req.GetPriority(), sh)
		if err != nil {
			if errors.Is(err, ErrConflict) {
				m.txnAborted(abortWaitDie)
			}
			return nil, err
		}
		cmd := &internalpb.Command{Op: &internalpb.Command_TxnOnePhase{TxnOnePhase: &internalpb.TxnOnePhaseOp{TxnId: req.GetTxnId(), Share: sh}}}
		res, err := s.n.Store.Propose(ctx, p, cmd)
		admitted()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, raftstore.ErrLeadershipLost) {
				m.txnOutcomeUnknown(txnOnePhase)
			}
			return nil, err
		}
		r, _ := res.(partition.OnePhaseResult)
		if len(r.Conflicts) > 0 {
			m.txnAborted(abortConflict)
			return nil, ErrConflict
		}
		m.txnCommitted(txnOnePhase, start)
		st, _ := s.n.Store.Status(p)
		resp := &kvpb.TxnResponse{Header: s.n.header(st.Term), Succeeded: r.Succeeded}
		idx := sh.GetFailureIndex()
		n := len(req.GetFailure())
		if r.Succeeded {
			idx, n = sh.GetSuccessIndex(), len(req.GetSuccess())
		}
		resp.Responses = assemble(n, []shareReads{{idx: idx, reads: r.Responses}}, int(DefaultScanLimit))
		return resp, nil
	})
}

// shareReads are one partition's answers for a branch: reads[i] answers
// the branch's op idx[i].
type shareReads struct {
	idx   []uint32
	reads []*kvpb.ResponseOp
}

// assemble builds a branch's n responses from the partitions' answers;
// a scan answered by several partitions is merged in key order.
func assemble(n int, parts []shareReads, scanLimit int) []*kvpb.ResponseOp {
	out := make([]*kvpb.ResponseOp, n)
	scans := map[int][]*kvpb.ScanResponse{}
	for _, sr := range parts {
		for i, at := range sr.idx {
			if i >= len(sr.reads) || int(at) >= n {
				continue
			}
			r := sr.reads[i]
			if sc := r.GetScan(); sc != nil {
				scans[int(at)] = append(scans[int(at)], sc)
				continue
			}
			out[at] = r
		}
	}
	for at, shares := range scans {
		merged, _ := mergeScan(nil, shares, make([]error, len(shares)), scanLimit)
		out[at] = &kvpb.ResponseOp{Response: &kvpb.ResponseOp_Scan{Scan: merged}}
	}
	return out
}

// twoPhase runs a cross-partition transaction with parallel commits: the
// prepares (the record partition's writes the STAGING record) go out at
// once, and the client is answered when every effective prepare applied
// — one consensus round; the decision and the Finishes follow in the
// background (coordinate, txn.Coordinator). An abort is answered once its
// Finishes are done, so the client's retry does not meet its locks.
// Readers of a key a committed transaction wrote wait until its Finish
// applies (waitUnlocked); recovery finishes it should this node stop.
func (s *KVServer) twoPhase(ctx context.Context, req *kvpb.TxnRequest, shares map[uint64]*internalpb.TxnShare, record uint64) (*kvpb.TxnResponse, error) {
	start := time.Now() // the latency, on the monotonic clock
	ops := txn.PrepareOps(req.GetTxnId(), req.GetPriority(), clock.Now().UnixMilli(), shares, record)
	a := s.n.coordinate(ctx, req.GetTxnId(), record, ops)
	m := s.n.Metrics
	switch a.outcome {
	case txn.Aborted:
		if a.refused {
			m.txnAborted(abortRefused)
		} else {
			m.txnAborted(abortRecord)
		}
		return nil, toStatus(ErrConflict, "")
	case txn.Committed:
		m.txnCommitted(txnTwoPhase, start)
	default:
		m.txnOutcomeUnknown(txnTwoPhase)
		err := a.err
		if err == nil {
			err = fmt.Errorf("%w: transaction %x: a participant's prepare could not be settled; recovery decides it", ErrOutcomeUnknown, req.GetTxnId())
		}
		return nil, toStatus(err, "")
	}
	d := a.d
	resp := &kvpb.TxnResponse{Header: s.n.header(0), Succeeded: d.Succeeded}
	n := len(req.GetFailure())
	if d.Succeeded {
		n = len(req.GetSuccess())
	}
	var answers []shareReads
	for p, sh := range shares {
		r, ok := a.reads[p]
		if !ok {
			// Committed, learnt from the record after a participant
			// finished: its reads are gone with its intent.
			return nil, toStatus(fmt.Errorf("%w: transaction %x committed, but partition %d's reads were lost with its vote", ErrOutcomeUnknown, req.GetTxnId(), p), "")
		}
		if d.Succeeded {
			answers = append(answers, shareReads{idx: sh.GetSuccessIndex(), reads: r.success})
		} else {
			answers = append(answers, shareReads{idx: sh.GetFailureIndex(), reads: r.failure})
		}
	}
	resp.Responses = assemble(n, answers, DefaultScanLimit)
	return resp, nil
}

// CallParticipant calls the participant service of partition p's leader;
// see callLeader.
func CallParticipant[R any](ctx context.Context, n *Node, p uint64, call func(internalrpc.ParticipantClient, context.Context) (R, error)) (R, error) {
	return callLeader(ctx, n, p, func(cc *grpc.ClientConn, cctx context.Context) (R, error) {
		if cc == nil {
			return call(localParticipant{NewParticipantServer(n)}, cctx)
		}
		return call(internalrpc.NewParticipantClient(cc), cctx)
	})
}

// callLeader calls the leader of partition p (in process, with a nil
// connection, when it is this node), following NOT_LEADER hints and
// retrying while the request was certainly not applied, until ctx ends.
// Every node-to-node call is idempotent (prepare returns the first vote,
// finish and decide the first outcome, a cut start only raises a
// version), so a retry after an ambiguous failure is safe too. The reply's
// cut marker is merged into the clock before the caller sees it, by the
// pool's connections (Pool.SetMarker); a reply it refused is not
// retried.
func callLeader[R any](ctx context.Context, n *Node, p uint64, call func(*grpc.ClientConn, context.Context) (R, error)) (R, error) {
	var zero R
	backoff := 5 * time.Millisecond
	target := ""
	for attempt := 0; ; attempt++ {
		if target == "" {
			target = participantTarget(n, p, attempt)
		}
		var (
			r   R
			err error
		)
		if target == n.Self.ID {
			r, err = call(nil, ctx)
		} else if conn, cerr := n.peerConn(target); cerr != nil {
			err = cerr
		} else {
			r, err = call(conn, ctx)
		}
		if err == nil {
			return r, nil
		}
		target = leaderFromError(err)
		if c := status.Code(err); c == codes.InvalidArgument || c == codes.FailedPrecondition || isRefusedReply(err) || ctx.Err() != nil {
			return zero, err
		}
		select {
		case <-ctx.Done():
			return zero, err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// participantTarget picks the node to ask about partition p: the leader
// this node knows, else the replicas in turn.
func participantTarget(n *Node, p uint64, attempt int) string {
	if st, ok := n.Store.Status(p); ok && st.Leader != 0 {
		return n.memberID(st.Leader)
	}
	reps := n.Layout.Groups[p]
	return n.memberID(reps[attempt%len(reps)])
}

// leaderFromError reads the NOT_LEADER hint of a status, "" if none.
func leaderFromError(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if l := info.GetMetadata()["leader"]; l != "" {
				return l
			}
		}
	}
	return ""
}

// FinishedRetention: finished transaction ids are kept this long after
// their prepare. A prepare older than that, still arriving, is a late
// copy of one whose coordinator stopped trying long ago (its request
// deadline), and is refused (the doors, checkPrepare); recovery (package
// node) raises each partition's horizon to this long ago. A variable for
// tests.
var FinishedRetention = 10 * time.Minute

// localParticipant calls this node's participant service in process.
type localParticipant struct{ s *ParticipantServer }

func (l localParticipant) Prepare(ctx context.Context, in *internalpb.PrepareRequest, _ ...grpc.CallOption) (*internalpb.PrepareResponse, error) {
	return l.s.Prepare(ctx, in)
}

func (l localParticipant) Finish(ctx context.Context, in *internalpb.FinishRequest, _ ...grpc.CallOption) (*internalpb.FinishResponse, error) {
	return l.s.Finish(ctx, in)
}

func (l localParticipant) Decide(ctx context.Context, in *internalpb.DecideRequest, _ ...grpc.CallOption) (*internalpb.DecideResponse, error) {
	return l.s.Decide(ctx, in)
}

func (l localParticipant) Forget(ctx context.Context, in *internalpb.ForgetRequest, _ ...grpc.CallOption) (*internalpb.ForgetResponse, error) {
	return l.s.Forget(ctx, in)
}

func (l localParticipant) Status(ctx context.Context, in *internalpb.StatusRequest, _ ...grpc.CallOption) (*internalpb.StatusResponse, error) {
	return l.s.Status(ctx, in)
}

func (l localParticipant) Record(ctx context.Context, in *internalpb.RecordRequest, _ ...grpc.CallOption) (*internalpb.RecordResponse, error) {
	return l.s.Record(ctx, in)
}
