package rpc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// leaving the rest to recovery.
	finishWait = 3 * time.Second
	// RecoveryTimeout: a leader asks the record partition about intents
	// older than this (presumed abort).
	RecoveryTimeout = 2 * time.Second
	// RecoveryInterval is how often a leader looks for stale intents.
	RecoveryInterval = 500 * time.Millisecond
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
	if n.Draining() {
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
func (s *ParticipantServer) Prepare(ctx context.Context, req *internalpb.PrepareRequest) (*internalpb.PrepareResponse, error) {
	if err := s.n.checkPrepare(ctx, req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(req.GetPartition()))
	}
	p, op := req.GetPartition(), req.GetOp()
	if err := waitDie(ctx, s.n.Partitions[p], s.n.waitQueue(p), string(op.GetTxnId()), op.GetPriority(), op.GetShare()); err != nil {
		return &internalpb.PrepareResponse{Prepared: false, CutVersion: s.n.Clock.Load()}, nil
	}
	res, err := s.n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_TxnPrepare{TxnPrepare: op}})
	if err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	v, _ := res.(partition.Vote)
	// The marker is read after the prepare entry applied: it is at least
	// the entry's version, so a prepare after the cut's position raises
	// the coordinator to the cut before it stamps its decision (rule 4).
	return &internalpb.PrepareResponse{
		Prepared: v.Prepared, ComparesHold: v.ComparesHold,
		SuccessReads: v.SuccessReads, FailureReads: v.FailureReads,
		CutVersion: s.n.Clock.Load(),
	}, nil
}

// Finish applies or drops the prepared intent through raft.
func (s *ParticipantServer) Finish(ctx context.Context, req *internalpb.FinishRequest) (*internalpb.FinishResponse, error) {
	if err := s.n.checkFinish(ctx, req); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(req.GetPartition()))
	}
	p := req.GetPartition()
	if err := finishLocal(ctx, s.n, p, req.GetOp()); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	return &internalpb.FinishResponse{CutVersion: s.n.Clock.Load()}, nil
}

// finishLocal proposes a Finish on partition p, led by this node. Its
// entry's version is at least the decision's stamp, so a transaction
// stamped at or after a cut finishes after the cut's position (rule 4).
func finishLocal(ctx context.Context, n *Node, p uint64, op *internalpb.TxnFinishOp) error {
	_, err := n.Store.Propose(ctx, p, &internalpb.Command{CutVersion: op.GetStamp(), Op: &internalpb.Command_TxnFinish{TxnFinish: op}})
	return err
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
	res, err := s.n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_TxnDecide{TxnDecide: req.GetOp()}})
	if err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	rec, _ := res.(*internalpb.TxnDecideOp)
	if rec == nil {
		return nil, toStatus(fmt.Errorf("rpc: partition %d applied a decision but returned %T", p, res), "")
	}
	return &internalpb.DecideResponse{Recorded: rec, CutVersion: s.n.Clock.Load()}, nil
}

// waitDie lets transaction id (priority prio) wait, bounded, while only
// younger transactions hold conflicting locks; it returns ErrConflict at
// once when an older one holds one (the younger dies), or when the wait
// runs out. While it waits it reserves its wants in q, and a younger
// transaction that conflicts with an older waiter dies as it would against
// a holder (txn.WaitQueue): otherwise small transactions keep taking the
// keys a large one waits for, and it never gets them all. The state
// machine re-checks the locks: this only decides who waits and who dies.
// (A grace for older holders — a decided transaction's locks outlive its
// answer by a raft round — was tried and undone: under the bank load the
// younger waiters held their other locks meanwhile, and throughput fell
// to 0.65×, p99 doubled.)
func waitDie(ctx context.Context, part *partition.Partition, q *txn.WaitQueue, id string, prio int64, share *internalpb.TxnShare) error {
	wants := txn.Wants(share)
	var done func()
	defer func() {
		if done != nil {
			done()
		}
	}()
	err := awaitApply(ctx, part, dieWait, func() (bool, error) {
		if _, ok := q.OlderWaiter(id, prio, wants); ok {
			return false, ErrConflict // an older waiter reserved it: die
		}
		holders := part.LockConflicts(id, wants)
		for _, h := range holders {
			if in, ok := part.IntentOf(h); ok && !txn.Older(prio, id, in.Op.GetPriority(), h) {
				return false, ErrConflict // an older holder: die
			}
		}
		if len(holders) > 0 && done == nil {
			done = q.Wait(id, prio, wants)
		}
		return len(holders) == 0, nil
	})
	if errors.Is(err, errPollTimeout) {
		return ErrConflict
	}
	return err
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
	if prio := req.GetPriority(); prio != 0 {
		maxAge := MaxTxnAge
		if forwarded {
			maxAge = FinishedRetention
		}
		if err := checkPriority("priority", prio, maxAge); err != nil {
			return err
		}
	}
	return nil
}

// Txn runs a transaction: one raft entry on the partition leader when all
// its keys live in one partition (1PC), else two-phase commit coordinated
// by this node.
func (s *KVServer) Txn(ctx context.Context, req *kvpb.TxnRequest) (*kvpb.TxnResponse, error) {
	if err := s.checkTxn(ctx, req); err != nil {
		return nil, toStatus(err, "")
	}
	if s.n.Draining() {
		return nil, toStatus(ErrShuttingDown, "")
	}
	if len(req.GetTxnId()) == 0 {
		id := make([]byte, txnIDLen)
		_, _ = rand.Read(id)
		req.TxnId = id
	}
	req.Priority = txnPriority(req, time.Now())
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
// client's (the time of its first attempt), else now. Readers get no head
// start over writers: one of 10 s let a steady stream of full reads
// starve every transfer (tests/bank: 5 transfers committed beside 1,944
// reads of all accounts); with reservations (txn.WaitQueue) a reader or a
// writer that has waited longest wins, whichever it is.
func txnPriority(req *kvpb.TxnRequest, now time.Time) int64 {
	if p := req.GetPriority(); p != 0 {
		return p
	}
	return now.UnixNano()
}

func (s *KVServer) onePhase(ctx context.Context, req *kvpb.TxnRequest, p uint64, sh *internalpb.TxnShare) (*kvpb.TxnResponse, error) {
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.TxnResponse, error) {
		return c.Txn(fctx, req)
	}, func() (*kvpb.TxnResponse, error) {
		if err := waitDie(ctx, s.n.Partitions[p], s.n.waitQueue(p), string(req.GetTxnId()), req.GetPriority(), sh); err != nil {
			return nil, err
		}
		cmd := &internalpb.Command{Op: &internalpb.Command_TxnOnePhase{TxnOnePhase: &internalpb.TxnOnePhaseOp{TxnId: req.GetTxnId(), Share: sh}}}
		res, err := s.n.Store.Propose(ctx, p, cmd)
		if err != nil {
			return nil, err
		}
		r, _ := res.(partition.OnePhaseResult)
		if len(r.Conflicts) > 0 {
			return nil, ErrConflict
		}
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

func (s *KVServer) twoPhase(ctx context.Context, req *kvpb.TxnRequest, shares map[uint64]*internalpb.TxnShare, record uint64) (*kvpb.TxnResponse, error) {
	parts := make([]uint64, 0, len(shares))
	for p := range shares {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	now := time.Now().UnixMilli()

	// Phase 1: every participant leader locks, evaluates, reads, votes.
	votes := make([]*internalpb.PrepareResponse, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Add(1)
		go func(i int, p uint64) {
			defer wg.Done()
			op := &internalpb.TxnPrepareOp{TxnId: req.GetTxnId(), Priority: req.GetPriority(), RecordPartition: record, Share: shares[p], PreparedUnixMs: now}
			votes[i], errs[i] = callParticipant(ctx, s.n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.PrepareResponse, error) {
				return c.Prepare(cctx, &internalpb.PrepareRequest{Partition: p, Op: op, CutVersion: s.n.Clock.Load()})
			})
		}(i, p)
	}
	wg.Wait()
	commit, succeeded, conflict := true, true, false
	for i := range parts {
		switch {
		case errs[i] != nil:
			commit = false
		case !votes[i].GetPrepared():
			commit, conflict = false, true
		case !votes[i].GetComparesHold():
			succeeded = false
		}
	}
	succeeded = succeeded && commit
	// Every vote's marker is merged (callLeader), so the clock is now
	// max(known, markers): the decision's stamp (rule 3). A retried
	// decision keeps the first one recorded.
	stamp := s.n.Clock.Load()
	if err := failpoint.Inject(failpoint.TxnAfterPrepare); err != nil {
		commit = false // an injected error aborts; "exit" kills the coordinator here
	}

	// The decision is durable in the record before any Finish is sent. It
	// gets its own time even when the client's deadline is spent on the
	// prepares: recording it, rather than leaving it to recovery, releases
	// the locks sooner and tells the client what happened.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decideWait)
	defer cancel()
	rec, err := callParticipant(dctx, s.n, record, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.DecideResponse, error) {
		return c.Decide(cctx, &internalpb.DecideRequest{Partition: record, CutVersion: s.n.Clock.Load(), Op: &internalpb.TxnDecideOp{
			TxnId: req.GetTxnId(), Commit: commit, Succeeded: succeeded, Participants: parts, Stamp: stamp,
		}})
	})
	if err != nil {
		if !commit {
			// Only an abort could ever be recorded for it: not applied.
			s.finishAll(s.n.lifetime(), req.GetTxnId(), now, parts, false, false, stamp)
			if conflict {
				return nil, toStatus(ErrConflict, "")
			}
			return nil, toStatus(fmt.Errorf("%w: a participant could not prepare: %v", raftstore.ErrProposalDropped, firstErr(errs)), "")
		}
		return nil, toStatus(fmt.Errorf("%w: transaction decision not confirmed: %v", ErrOutcomeUnknown, err), "")
	}
	d := rec.GetRecorded()
	if d.GetCommit() && !commit {
		// Only this coordinator, having every vote, decides commit: a
		// commit recorded against its abort belongs to another
		// transaction under this id, and none of this one's writes apply.
		return nil, toStatus(fmt.Errorf("%w: transaction %x: the record holds a commit this coordinator did not decide (a reused id); this transaction was not applied", ErrInternal, req.GetTxnId()), "")
	}
	if err := failpoint.Inject(failpoint.TxnAfterDecide); err != nil {
		// Leave Finish to recovery, as a coordinator dying here would.
		return nil, toStatus(fmt.Errorf("%w: coordinator failed after the decision: %v", ErrOutcomeUnknown, err), "")
	}

	// Phase 2: apply or drop everywhere. An abort is finished before the
	// answer, so the client's retry does not meet its own locks. A commit
	// is answered as soon as the decision is durable, which saves the
	// client a raft round: readers of a key it wrote wait until its
	// Finish applies (waitUnlocked; a plain write meets ErrConflict and
	// is retried), and recovery finishes it should this node stop first.
	if !d.GetCommit() {
		if s.finishAll(s.n.lifetime(), req.GetTxnId(), now, parts, false, false, d.GetStamp()) {
			s.n.forget.add(s.n, record, req.GetTxnId())
		}
		return nil, toStatus(ErrConflict, "")
	}
	go func() {
		if s.finishAll(s.n.lifetime(), req.GetTxnId(), now, parts, true, d.GetSucceeded(), d.GetStamp()) {
			s.n.forget.add(s.n, record, req.GetTxnId())
		}
	}()
	resp := &kvpb.TxnResponse{Header: s.n.header(0), Succeeded: d.GetSucceeded()}
	n := len(req.GetFailure())
	if d.GetSucceeded() {
		n = len(req.GetSuccess())
	}
	var answers []shareReads
	for i, p := range parts {
		if d.GetSucceeded() {
			answers = append(answers, shareReads{idx: shares[p].GetSuccessIndex(), reads: votes[i].GetSuccessReads()})
		} else {
			answers = append(answers, shareReads{idx: shares[p].GetFailureIndex(), reads: votes[i].GetFailureReads()})
		}
	}
	resp.Responses = assemble(n, answers, DefaultScanLimit)
	return resp, nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// finishAll sends Finish to every participant, each retried until it is
// applied, finishWait passes or parent ends (recovery finishes the rest).
// It says whether every Finish was applied. prepared is the transaction's
// prepare time (TxnPrepareOp.PreparedUnixMs).
func (s *KVServer) finishAll(parent context.Context, id []byte, prepared int64, parts []uint64, commit, succeeded bool, stamp uint64) bool {
	ctx, cancel := context.WithTimeout(parent, finishWait)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, p := range parts {
		wg.Add(1)
		go func(p uint64) {
			defer wg.Done()
			_, err := callParticipant(ctx, s.n, p, func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.FinishResponse, error) {
				return c.Finish(cctx, &internalpb.FinishRequest{Partition: p, CutVersion: s.n.Clock.Load(),
					Op: &internalpb.TxnFinishOp{TxnId: id, Commit: commit, Succeeded: succeeded, Stamp: stamp, PreparedUnixMs: prepared}})
			})
			if err != nil {
				failed.Store(true)
			}
		}(p)
	}
	wg.Wait()
	return !failed.Load()
}

// callParticipant calls the participant service of partition p's leader;
// see callLeader.
func callParticipant[R any](ctx context.Context, n *Node, p uint64, call func(internalrpc.ParticipantClient, context.Context) (R, error)) (R, error) {
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
// cut marker is merged into the clock before the caller sees it.
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
			if err := n.mergeReply(ctx, r); err != nil {
				return zero, err
			}
			return r, nil
		}
		target = leaderFromError(err)
		if c := status.Code(err); c == codes.InvalidArgument || c == codes.FailedPrecondition || ctx.Err() != nil {
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

// --- recovery ---------------------------------------------------------

// RunRecovery resolves, until ctx ends, the intents on partitions this
// node leads that are older than RecoveryTimeout: it asks the record
// partition for the decision, recording ABORT where none exists (presumed
// abort; the first decision wins), and finishes the intent accordingly.
// So no lock outlives a dead coordinator for long. It also raises each
// led partition's transaction horizon every HorizonInterval to
// FinishedRetention ago (TxnHorizonOp), so finished ids do not pile up.
func RunRecovery(ctx context.Context, n *Node) {
	t := time.NewTicker(RecoveryInterval)
	defer t.Stop()
	lastHorizon := map[uint64]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for p, part := range n.Partitions {
			if st, ok := n.Store.Status(p); !ok || !st.IsLeader {
				continue
			}
			for _, in := range part.StaleIntents(time.Now().Add(-RecoveryTimeout).UnixMilli()) {
				resolve(ctx, n, p, in)
			}
			if time.Since(lastHorizon[p]) >= HorizonInterval {
				lastHorizon[p] = time.Now()
				raiseHorizon(ctx, n, p)
			}
		}
	}
}

// Finished transaction ids are kept FinishedRetention after their
// prepare: a prepare older than that, still arriving, is a late copy of
// one whose coordinator stopped trying long ago (its request deadline),
// and is refused. Variables for tests.
var (
	FinishedRetention = 10 * time.Minute
	HorizonInterval   = time.Minute
)

// raiseHorizon proposes partition p's horizon FinishedRetention ago.
func raiseHorizon(ctx context.Context, n *Node, p uint64) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms := time.Now().Add(-FinishedRetention).UnixMilli()
	_, _ = n.Store.Propose(hctx, p, &internalpb.Command{Op: &internalpb.Command_TxnHorizon{TxnHorizon: &internalpb.TxnHorizonOp{UnixMs: ms}}})
}

func resolve(ctx context.Context, n *Node, p uint64, in *partition.Intent) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	id := in.Op.GetTxnId()
	rec, err := callParticipant(rctx, n, in.Op.GetRecordPartition(), func(c internalrpc.ParticipantClient, cctx context.Context) (*internalpb.DecideResponse, error) {
		return c.Decide(cctx, &internalpb.DecideRequest{Partition: in.Op.GetRecordPartition(), CutVersion: n.Clock.Load(),
			Op: &internalpb.TxnDecideOp{TxnId: id, Commit: false, Stamp: n.Clock.Load()}})
	})
	if err != nil {
		return // next round
	}
	d := rec.GetRecorded()
	_ = finishLocal(rctx, n, p, &internalpb.TxnFinishOp{TxnId: id, Commit: d.GetCommit(), Succeeded: d.GetSucceeded(), Stamp: d.GetStamp(),
		PreparedUnixMs: in.Op.GetPreparedUnixMs()})
}

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
