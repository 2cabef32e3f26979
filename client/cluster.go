package client

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// MemberState is a member's state as the failure detector sees it.
type MemberState int

const (
	StateUnknown MemberState = iota
	StateAlive
	StateSuspect
	StateFailed
	StateLeft
)

// String returns "alive", "suspect", "failed", "left" or "unknown".
func (s MemberState) String() string {
	switch s {
	case StateAlive:
		return "alive"
	case StateSuspect:
		return "suspect"
	case StateFailed:
		return "failed"
	case StateLeft:
		return "left"
	}
	return "unknown"
}

func stateFromPB(s kvpb.MemberState) MemberState {
	switch s {
	case kvpb.MemberState_MEMBER_STATE_ALIVE:
		return StateAlive
	case kvpb.MemberState_MEMBER_STATE_SUSPECT:
		return StateSuspect
	case kvpb.MemberState_MEMBER_STATE_FAILED:
		return StateFailed
	case kvpb.MemberState_MEMBER_STATE_LEFT:
		return StateLeft
	}
	return StateUnknown
}

// Member is a cluster node.
type Member struct {
	ID string
	// RaftID is the node's raft replica id (the same in every group).
	RaftID uint64
	// GRPCAddr is the member's client address (empty until gossip heard
	// from it); PeerAddr its peer address, as --initial-cluster names it.
	GRPCAddr   string
	PeerAddr   string
	GossipAddr string
	HTTPAddr   string
	State      MemberState
	// Since is when the member entered State; zero if never seen.
	Since time.Time
}

// Members lists the cluster's members as the answering node sees them.
func (c *Client) Members(ctx context.Context, opts ...Option) ([]Member, error) {
	o := collect(opts)
	var resp *kvpb.MembersResponse
	err := c.do(ctx, op{name: "members"}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewClusterClient(cc).Members(ctx, &kvpb.MembersRequest{Header: h}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return nil, err
	}
	o.setHeader(resp.GetHeader())
	ms := make([]Member, 0, len(resp.GetMembers()))
	for _, m := range resp.GetMembers() {
		mm := Member{
			ID:         m.GetId(),
			RaftID:     m.GetRaftId(),
			GRPCAddr:   m.GetGrpcAddr(),
			PeerAddr:   m.GetPeerAddr(),
			GossipAddr: m.GetGossipAddr(),
			HTTPAddr:   m.GetHttpAddr(),
			State:      stateFromPB(m.GetState()),
		}
		if since := m.GetSinceUnixMs(); since != 0 {
			mm.Since = time.UnixMilli(since)
		}
		ms = append(ms, mm)
	}
	return ms, nil
}

// Status is the cluster's state: one row per raft group, one per node.
type Status struct {
	ClusterID  string // 16 hex digits
	Partitions uint32
	// Groups lists group 0 (metadata) first, then partitions 1..N.
	Groups []GroupStatus
	Nodes  []NodeStatus
}

// GroupStatus describes one raft group.
type GroupStatus struct {
	// ID is the partition id; 0 is the metadata group.
	ID uint64
	// Leader is the leader's node id, "" if none.
	Leader       string
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// Replicas are the node ids holding a replica.
	Replicas []string
	// ReportedBy is the node that reported the row (the leader when it
	// could be reached).
	ReportedBy string
	Keys       uint64
}

// NodeStatus describes one node.
type NodeStatus struct {
	ID string
	// Serving is false after a sticky WAL error or during shutdown.
	Serving        bool
	WALBytes       int64
	WALFirstIndex  uint64
	WALLastIndex   uint64
	DiskFreeBytes  uint64
	DiskTotalBytes uint64
	Version        string
	// Error is set when the node could not be asked; the other fields are
	// then zero.
	Error string
}

// Status asks one node for the whole cluster's status (it asks the others).
func (c *Client) Status(ctx context.Context, opts ...Option) (*Status, error) {
	o := collect(opts)
	var resp *kvpb.StatusResponse
	err := c.do(ctx, op{name: "status"}, func(ctx context.Context, cc *grpc.ClientConn, h *kvpb.RequestHeader) (*kvpb.ResponseHeader, error) {
		r, err := kvrpc.NewClusterClient(cc).Status(ctx, &kvpb.StatusRequest{Header: h}, c.callOpts...)
		resp = r
		return r.GetHeader(), err
	})
	if err != nil {
		return nil, err
	}
	o.setHeader(resp.GetHeader())
	st := &Status{ClusterID: resp.GetClusterId(), Partitions: resp.GetPartitions()}
	for _, g := range resp.GetGroups() {
		st.Groups = append(st.Groups, GroupStatus{
			ID:           g.GetId(),
			Leader:       g.GetLeader(),
			Term:         g.GetTerm(),
			CommitIndex:  g.GetCommitIndex(),
			AppliedIndex: g.GetAppliedIndex(),
			Replicas:     g.GetReplicas(),
			ReportedBy:   g.GetReportedBy(),
			Keys:         g.GetKeys(),
		})
	}
	for _, n := range resp.GetNodes() {
		st.Nodes = append(st.Nodes, NodeStatus{
			ID:             n.GetId(),
			Serving:        n.GetServing(),
			WALBytes:       n.GetWalBytes(),
			WALFirstIndex:  n.GetWalFirstIndex(),
			WALLastIndex:   n.GetWalLastIndex(),
			DiskFreeBytes:  n.GetDiskFreeBytes(),
			DiskTotalBytes: n.GetDiskTotalBytes(),
			Version:        n.GetVersion(),
			Error:          n.GetError(),
		})
	}
	return st, nil
}
