package rpc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// Timing of cuts.
const (
	// startCutWait is how long one StartCut call waits for the partition's
	// CutFinish before answering "not yet" (the driver calls again).
	startCutWait = 500 * time.Millisecond
	// DefaultCutTimeout fails a cut that has not finished in every
	// partition; it exceeds the transaction deadline (decide and finish
	// waits), the recovery timeout and interval, and an election.
	DefaultCutTimeout = 10 * time.Second
)

// SetCutPoke sets the channel that wakes the cut agent (package node;
// buffered, size 1); call it before the node serves.
func (n *Node) SetCutPoke(ch chan struct{}) { n.cutPoke = ch }

// PokeCuts wakes the cut agent (a partition's cut became ready to finish,
// or a version was learned).
func (n *Node) PokeCuts() {
	select {
	case n.cutPoke <- struct{}{}:
	default:
	}
}

// overtakenError: partition p started cut by, newer than v.
type overtakenError struct{ p, v, by uint64 }

func (e *overtakenError) Error() string {
	return fmt.Sprintf("partition %d already started cut %d, after %d", e.p, e.by, e.v)
}

// CutServer implements the node-to-node cut service.
type CutServer struct {
	internalrpc.UnimplementedCutServiceServer
	n *Node
}

// NewCutServer returns the cut service of node n.
func NewCutServer(n *Node) *CutServer { return &CutServer{n: n} }

// StartCut raises this node's clock to the cut's version, which makes the
// agent propose CutStart in the partition (this node must lead it), and
// waits a little for the partition's CutFinish.
func (s *CutServer) StartCut(ctx context.Context, req *internalpb.StartCutRequest) (*internalpb.StartCutResponse, error) {
	p, v := req.GetPartition(), req.GetVersion()
	if err := s.n.leaderCheck(p); err != nil {
		return nil, toStatus(err, s.n.leaderHintOf(p))
	}
	// The cut's version raises the clock as the marker does: one of the
	// two is admitted, the higher, and the error names that one.
	field, adm := "cut_version", req.GetCutVersion()
	if v > adm {
		field, adm = "version", v
	}
	if err := s.n.admitVersion(ctx, field, adm); err != nil {
		return nil, toStatus(err, "")
	}
	part := s.n.Partitions[p]
	wait := time.Duration(req.GetWaitMs()) * time.Millisecond
	if wait <= 0 || wait > startCutWait {
		wait = startCutWait
	}
	var res cut.Finished
	err := awaitApply(ctx, part, wait, func() (bool, error) {
		var ok bool
		if res, ok = part.CutResult(v); ok {
			return true, nil
		}
		if cv := part.CutVersion(); cv > v {
			return false, &overtakenError{p: p, v: v, by: cv}
		}
		return false, nil
	})
	resp := &internalpb.StartCutResponse{}
	var ov *overtakenError
	switch {
	case err == nil:
		resp.Finished, resp.Finish, resp.FinishIndex = true, res.Op, res.Index
	case errors.Is(err, errPollTimeout):
	case errors.As(err, &ov):
		// Said in the reply, not as an error: the driver takes the
		// partition's version as the floor of the next allocation.
		resp.OvertakenBy = ov.by
	default:
		return nil, toStatus(err, "")
	}
	resp.CutVersion = s.n.Clock.Load()
	return resp, nil
}

// PartitionHash answers with this replica's hash of the partition at the
// index a HashOp entry took it. Index 0 asks the leader to put a HashOp
// entry in the log first; the answer names its index.
func (s *CutServer) PartitionHash(ctx context.Context, req *internalpb.PartitionHashRequest) (*internalpb.PartitionHashResponse, error) {
	p := req.GetPartition()
	part := s.n.Partitions[p]
	if part == nil {
		return nil, toStatus(fmt.Errorf("%w: no replica of partition %d here", ErrFailedPrecondition, p), "")
	}
	if req.GetIndex() == 0 {
		if err := s.n.leaderCheck(p); err != nil {
			return nil, toStatus(err, s.n.leaderHintOf(p))
		}
		res, err := s.n.Store.Propose(ctx, p, &internalpb.Command{Op: &internalpb.Command_Hash{Hash: &internalpb.HashOp{}}})
		if err != nil {
			return nil, toStatus(err, s.n.leaderHintOf(p))
		}
		idx, _ := res.(uint64)
		req = &internalpb.PartitionHashRequest{Partition: p, Index: idx, WaitMs: req.GetWaitMs()}
	}
	wait := time.Duration(req.GetWaitMs()) * time.Millisecond
	if wait <= 0 || wait > 10*time.Second {
		wait = 10 * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sum, keys, err := part.HashAt(hctx, req.GetIndex())
	if err != nil {
		return nil, toStatus(fmt.Errorf("%w: partition %d: %v", ErrFailedPrecondition, req.GetPartition(), err), "")
	}
	return &internalpb.PartitionHashResponse{Index: req.GetIndex(), Hash: sum, Keys: keys}, nil
}

// CutEnv is the driver's environment on a node (cut.Env).
type CutEnv struct{ n *Node }

// NewCutEnv returns the cut driver environment of node n.
func NewCutEnv(n *Node) *CutEnv { return &CutEnv{n: n} }

// Partitions lists 1..N.
func (e *CutEnv) Partitions() []uint64 {
	out := make([]uint64, e.n.Layout.Partitions)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// Announce raises the clock and gossips v.
func (e *CutEnv) Announce(v uint64) {
	if e.n.Clock.Raise(v) {
		e.n.PokeCuts()
	}
	if e.n.Gossip != nil {
		e.n.Gossip.Announce(v)
	}
}

// StartPartition calls StartCut on the leader of p.
func (e *CutEnv) StartPartition(ctx context.Context, p, v uint64) (*kvpb.CutPartition, bool, error) {
	r, err := callLeader(ctx, e.n, p, func(cc *grpc.ClientConn, cctx context.Context) (*internalpb.StartCutResponse, error) {
		req := &internalpb.StartCutRequest{Partition: p, Version: v, WaitMs: uint32(startCutWait / time.Millisecond), CutVersion: e.n.Clock.Load()}
		if cc == nil {
			return NewCutServer(e.n).StartCut(cctx, req)
		}
		return internalrpc.NewCutServiceClient(cc).StartCut(cctx, req)
	})
	if by := r.GetOvertakenBy(); err == nil && by > 0 {
		// The partition's log holds a version above this cut's: the next
		// allocation goes above it (CutAllocateOp.floor).
		raiseTo(&e.n.overtaken, by)
		return nil, false, fmt.Errorf("%w: partition %d already started cut %d, after %d", cut.ErrOvertaken, p, by, v)
	}
	if err != nil || !r.GetFinished() {
		return nil, false, err
	}
	f := r.GetFinish()
	return &kvpb.CutPartition{
		Partition: p, Pos: f.GetPos(), FinishIndex: r.GetFinishIndex(),
		Before: uint32(len(f.GetBefore())), After: uint32(len(f.GetAfter())), Aborted: uint32(len(f.GetAborted())),
	}, true, nil
}

// Record proposes the end of a cut in group 0 (this node must lead it).
func (e *CutEnv) Record(ctx context.Context, c *kvpb.CutInfo) error {
	_, err := e.n.Store.Propose(ctx, 0, &internalpb.Command{Op: &internalpb.Command_CutRecord{CutRecord: &internalpb.CutRecordOp{Cut: c}}})
	return err
}

// Now is the wall clock (internal/clock): a cut's deadline counts from
// its StartedUnixMs, which group 0's leader read on its own wall clock.
func (e *CutEnv) Now() time.Time { return clock.Now() }
