package rpc

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// onMeta runs an administrative call on group 0's leader: forward when
// this node does not lead group 0, else local.
func onMeta[R any](ctx context.Context, n *Node, forward func(kvrpc.ClusterClient, context.Context) (R, error), local func() (R, error)) (R, error) {
	var zero R
	conn, err := n.route(ctx, 0)
	if err != nil {
		return zero, toStatus(err, n.leaderHintOf(0))
	}
	if conn != nil {
		return forward(kvrpc.NewClusterClient(conn), forwardCtx(ctx))
	}
	r, err := local()
	if err != nil {
		return zero, toStatus(err, n.leaderHintOf(0))
	}
	return r, nil
}

// CreateCut allocates a cut in group 0 (or joins the one in flight),
// drives it and waits until it is recorded Completed or Failed.
func (s *ClusterServer) CreateCut(ctx context.Context, req *kvpb.CreateCutRequest) (*kvpb.CreateCutResponse, error) {
	return onMeta(ctx, s.n, func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.CreateCutResponse, error) {
		return c.CreateCut(fctx, req)
	}, func() (*kvpb.CreateCutResponse, error) {
		c, err := StartCut(ctx, s.n)
		if err != nil {
			return nil, err
		}
		done, err := WaitCut(ctx, s.n, c.GetVersion())
		if err != nil {
			return nil, err
		}
		return &kvpb.CreateCutResponse{Header: s.n.header(0), Cut: done}, nil
	})
}

// StartCut allocates a cut in group 0, unless one runs, and makes sure
// this node (group 0's leader) drives it. It returns the running cut.
func StartCut(ctx context.Context, n *Node) (*kvpb.CutInfo, error) {
	res, err := n.Store.Propose(ctx, 0, &internalpb.Command{Op: &internalpb.Command_CutAllocate{
		CutAllocate: &internalpb.CutAllocateOp{StartedUnixMs: clock.Now().UnixMilli(), Floor: max(n.Clock.Load(), n.overtaken.Load())},
	}})
	if err != nil {
		return nil, err
	}
	c, _ := res.(*kvpb.CutInfo)
	if c == nil {
		return nil, fmt.Errorf("rpc: group 0 applied a cut allocation but returned %T", res)
	}
	n.Cuts.Ensure(n.Background, c)
	return c, nil
}

// WaitCut waits until cut v is recorded as ended in this node's replica of
// group 0, woken by group 0's applies.
func WaitCut(ctx context.Context, n *Node, v uint64) (*kvpb.CutInfo, error) {
	for {
		changed := n.Meta.Changed() // before the look: no change is missed
		c, ok := n.Meta.Cut(v)
		if !ok {
			return nil, fmt.Errorf("%w: cut %d is not known to group 0", ErrFailedPrecondition, v)
		}
		if c.GetState() != kvpb.CutState_CUT_STATE_RUNNING {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// ListCuts lists the cuts group 0 remembers, newest first.
func (s *ClusterServer) ListCuts(ctx context.Context, req *kvpb.ListCutsRequest) (*kvpb.ListCutsResponse, error) {
	return onMeta(ctx, s.n, func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.ListCutsResponse, error) {
		return c.ListCuts(fctx, req)
	}, func() (*kvpb.ListCutsResponse, error) {
		return &kvpb.ListCutsResponse{Header: s.n.header(0), Cuts: s.n.Meta.Cuts(int(req.GetLimit()))}, nil
	})
}

// GetCut returns one cut.
func (s *ClusterServer) GetCut(ctx context.Context, req *kvpb.GetCutRequest) (*kvpb.GetCutResponse, error) {
	return onMeta(ctx, s.n, func(c kvrpc.ClusterClient, fctx context.Context) (*kvpb.GetCutResponse, error) {
		return c.GetCut(fctx, req)
	}, func() (*kvpb.GetCutResponse, error) {
		c, ok := s.n.Meta.Cut(req.GetVersion())
		if !ok {
			return nil, fmt.Errorf("%w: no cut %d (group 0 keeps the last %d)", ErrFailedPrecondition, req.GetVersion(), len(s.n.Meta.Cuts(0)))
		}
		return &kvpb.GetCutResponse{Header: s.n.header(0), Cut: c}, nil
	})
}

// Check asks every partition's leader to take a hash of the partition at
// one index (a HashOp entry through raft) and compares each replica's
// hash at that index.
func (s *ClusterServer) Check(ctx context.Context, req *kvpb.CheckRequest) (*kvpb.CheckResponse, error) {
	out := &kvpb.CheckResponse{Header: s.n.header(0), Partitions: make([]*kvpb.PartitionCheck, s.n.Layout.Partitions)}
	var wg sync.WaitGroup
	for i := range out.Partitions {
		p := uint64(i + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out.Partitions[i] = checkPartition(ctx, s.n, p)
		}()
	}
	wg.Wait()
	return out, nil
}

func checkPartition(ctx context.Context, n *Node, p uint64) *kvpb.PartitionCheck {
	pc := &kvpb.PartitionCheck{Partition: p}
	// The hash entry goes through the KV path's routing (forwarded to the
	// leader), as a Noop-like proposal that every replica applies.
	index, err := proposeHash(ctx, n, p)
	if err != nil {
		pc.Error = err.Error()
		return pc
	}
	pc.Index = index
	reps := n.Layout.Groups[p]
	pc.Replicas = make([]*kvpb.ReplicaHash, len(reps))
	var wg sync.WaitGroup
	for i, r := range reps {
		id := n.memberID(r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rh := &kvpb.ReplicaHash{Node: id}
			pc.Replicas[i] = rh
			hreq := &internalpb.PartitionHashRequest{Partition: p, Index: index, WaitMs: 10000}
			var resp *internalpb.PartitionHashResponse
			var err error
			if id == n.Self.ID {
				resp, err = NewCutServer(n).PartitionHash(ctx, hreq)
			} else if conn, cerr := n.peerConn(id); cerr != nil {
				err = cerr
			} else {
				resp, err = internalrpc.NewCutServiceClient(conn).PartitionHash(ctx, hreq)
			}
			if err != nil {
				rh.Error = err.Error()
				return
			}
			rh.Hash, rh.Keys = resp.GetHash(), resp.GetKeys()
		}()
	}
	wg.Wait()
	pc.Consistent = true
	for _, rh := range pc.Replicas {
		if rh.GetError() != "" || rh.GetHash() != pc.Replicas[0].GetHash() {
			pc.Consistent = false
		}
	}
	sort.Slice(pc.Replicas, func(i, j int) bool { return pc.Replicas[i].GetNode() < pc.Replicas[j].GetNode() })
	return pc
}

// proposeHash puts a HashOp entry in p's log through its leader and
// returns the entry's index.
func proposeHash(ctx context.Context, n *Node, p uint64) (uint64, error) {
	r, err := callLeader(ctx, n, p, func(cc *grpc.ClientConn, cctx context.Context) (*internalpb.PartitionHashResponse, error) {
		req := &internalpb.PartitionHashRequest{Partition: p}
		if cc == nil {
			return NewCutServer(n).PartitionHash(cctx, req)
		}
		return internalrpc.NewCutServiceClient(cc).PartitionHash(cctx, req)
	})
	return r.GetIndex(), err
}
