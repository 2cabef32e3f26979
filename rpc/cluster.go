package rpc

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/topology"
)

// ClusterServer implements kvrpc.ClusterServer.
type ClusterServer struct {
	kvrpc.UnimplementedClusterServer
	n *Node
}

// NewClusterServer returns the Cluster service of node n.
func NewClusterServer(n *Node) *ClusterServer { return &ClusterServer{n: n} }

// Members lists every member of the layout with its gossip state.
func (s *ClusterServer) Members(ctx context.Context, req *kvpb.MembersRequest) (*kvpb.MembersResponse, error) {
	return &kvpb.MembersResponse{Header: s.n.header(0), Members: s.n.Cluster.Members()}, nil
}

// Routing tells clients which node leads each partition.
func (s *ClusterServer) Routing(ctx context.Context, req *kvpb.RoutingRequest) (*kvpb.RoutingResponse, error) {
	resp := &kvpb.RoutingResponse{
		Header:     s.n.header(0),
		Partitions: s.n.Layout.Partitions,
		Hash:       keyspace.HashName,
		Members:    s.n.Cluster.Members(),
		Leaders:    make([]string, s.n.Layout.Partitions),
	}
	for p := uint64(1); p <= uint64(s.n.Layout.Partitions); p++ {
		if st, ok := s.n.Store.Status(p); ok {
			resp.Leaders[p-1] = s.n.memberID(st.Leader)
		}
	}
	return resp, nil
}

// Status reports every group and every node. Without local_only the
// answering node asks each other node for its own view and keeps, per
// group, the row reported by the group's leader.
func (s *ClusterServer) Status(ctx context.Context, req *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	local := s.localStatus()
	if req.GetLocalOnly() {
		return local, nil
	}
	views := []*kvpb.StatusResponse{local}
	nodes := []*kvpb.NodeStatus{local.Nodes[0]}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range s.n.Layout.Members {
		if m.ID == s.n.Self.ID {
			continue
		}
		wg.Add(1)
		go func(m topology.Member) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			var (
				resp *kvpb.StatusResponse
				err  error
			)
			conn, err := s.n.peerConn(m.ID)
			if err == nil {
				resp, err = kvrpc.NewClusterClient(forwardConn{conn}).Status(forwardCtx(cctx), &kvpb.StatusRequest{LocalOnly: true})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				nodes = append(nodes, &kvpb.NodeStatus{Id: m.ID, Error: err.Error()})
				return
			}
			views = append(views, resp)
			nodes = append(nodes, resp.GetNodes()...)
		}(m)
	}
	wg.Wait()
	out := &kvpb.StatusResponse{Header: s.n.header(0), ClusterId: topology.FormatClusterID(s.n.Layout.ClusterID), Partitions: s.n.Layout.Partitions}
	for g := range s.n.Layout.Groups {
		var best *kvpb.PartitionStatus
		for _, v := range views {
			for _, row := range v.GetGroups() {
				if row.GetId() != uint64(g) {
					continue
				}
				if best == nil || (row.GetLeader() == row.GetReportedBy() && row.GetLeader() != "") ||
					(best.GetLeader() != best.GetReportedBy() && row.GetTerm() > best.GetTerm()) {
					best = row
				}
			}
		}
		if best == nil {
			best = &kvpb.PartitionStatus{Id: uint64(g), Replicas: s.replicaIDs(uint64(g))}
		}
		out.Groups = append(out.Groups, best)
	}
	sortNodes(nodes, s.n.Layout)
	out.Nodes = nodes
	return out, nil
}

func (s *ClusterServer) replicaIDs(g uint64) []string {
	var ids []string
	for _, r := range s.n.Layout.Groups[g] {
		ids = append(ids, s.n.memberID(r))
	}
	return ids
}

func (s *ClusterServer) localStatus() *kvpb.StatusResponse {
	resp := &kvpb.StatusResponse{Header: s.n.header(0), ClusterId: topology.FormatClusterID(s.n.Layout.ClusterID), Partitions: s.n.Layout.Partitions}
	for _, g := range s.n.Store.Groups() {
		st, _ := s.n.Store.Status(g)
		row := &kvpb.PartitionStatus{
			Id: g, Leader: s.n.memberID(st.Leader), Term: st.Term, CommitIndex: st.Commit, AppliedIndex: st.Applied,
			Replicas: s.replicaIDs(g), ReportedBy: s.n.Self.ID,
		}
		if p := s.n.Partitions[g]; p != nil {
			row.Keys = uint64(p.Len())
		}
		ms := s.n.Store.MaterializeStatus(g)
		row.MaterializedIndex, row.Materializations = ms.Index, uint32(ms.Files)
		row.WalTailEntries, row.WalTailBytes = ms.TailEntries, ms.TailBytes
		resp.Groups = append(resp.Groups, row)
	}
	resp.Nodes = []*kvpb.NodeStatus{s.n.Host.LocalStatus()}
	return resp
}

// sortCheckpoint orders rows by node (layout order), then group.
func sortCheckpoint(rows []*kvpb.GroupCheckpoint, n *Node) {
	order := map[string]int{}
	for i, m := range n.Layout.Members {
		order[m.ID] = i
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].GetNode() != rows[j].GetNode() {
			return order[rows[i].GetNode()] < order[rows[j].GetNode()]
		}
		return rows[i].GetGroup() < rows[j].GetGroup()
	})
}

func sortNodes(nodes []*kvpb.NodeStatus, l *topology.Layout) {
	order := map[string]int{}
	for i, m := range l.Members {
		order[m.ID] = i
	}
	for i := 1; i < len(nodes); i++ {
		for j := i; j > 0 && order[nodes[j].GetId()] < order[nodes[j-1].GetId()]; j-- {
			nodes[j], nodes[j-1] = nodes[j-1], nodes[j]
		}
	}
}
