package ui

import (
	"context"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/kvpb"
)

// Status is the JSON of /ui/api/status.
type Status struct {
	Node       string `json:"node"`         // the node that answered
	ClusterID  string `json:"cluster_id"`   // 16 hex digits; empty when status failed
	TimeUnixMs int64  `json:"time_unix_ms"` // the node's wall clock when it gathered this
	RefreshMs  int64  `json:"refresh_ms"`   // how often the page should poll

	Members    Members    `json:"members"`
	Partitions Partitions `json:"partitions"`
	Ops        Ops        `json:"ops"`
	Cuts       Cuts       `json:"cuts"`
	Snapshots  Snapshots  `json:"snapshots"`
}

// Members is the layout's members as this node sees them: gossip state
// from discovery, serving from each node's own status.
type Members struct {
	Error string   `json:"error,omitempty"`
	Items []Member `json:"items"`
}

// Member is one member of the layout.
type Member struct {
	ID          string `json:"id"`
	RaftID      uint64 `json:"raft_id"`
	Self        bool   `json:"self"`  // the node that answered
	State       string `json:"state"` // gossip: alive, suspect, failed, left, unknown
	SinceUnixMs int64  `json:"since_unix_ms,omitempty"`
	GRPCAddr    string `json:"grpc_addr,omitempty"`
	PeerAddr    string `json:"peer_addr,omitempty"`
	GossipAddr  string `json:"gossip_addr,omitempty"`
	HTTPAddr    string `json:"http_addr,omitempty"`
	// Serving is the node's own health (SERVING); nil when it could not
	// be asked, with StatusError saying why.
	Serving        *bool  `json:"serving"`
	StatusError    string `json:"status_error,omitempty"`
	Version        string `json:"version,omitempty"`
	WALBytes       int64  `json:"wal_bytes,omitempty"`
	DiskFreeBytes  uint64 `json:"disk_free_bytes,omitempty"`
	DiskTotalBytes uint64 `json:"disk_total_bytes,omitempty"`
}

// Partitions is every raft group, each as reported by its leader when it
// could be reached (group 0 is the metadata group).
type Partitions struct {
	Error     string      `json:"error,omitempty"`
	Truncated bool        `json:"truncated,omitempty"` // more than MaxPartitions
	Items     []Partition `json:"items"`
}

// Partition is one raft group.
type Partition struct {
	ID           uint64   `json:"id"`
	Leader       string   `json:"leader"` // empty: none known
	Replicas     []string `json:"replicas"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	Keys         uint64   `json:"keys"`
	ReportedBy   string   `json:"reported_by"`
}

// Ops is throughput over the last gatherings: client requests this node
// served (its cutkv_grpc_requests_total for the KV service) and raft
// entries applied in all partitions of the cluster (writes, transaction
// steps and cut records; reads take none).
type Ops struct {
	Error          string     `json:"error,omitempty"`
	RequestsPerSec *float64   `json:"requests_per_sec"` // nil until two samples
	EntriesPerSec  *float64   `json:"entries_per_sec"`
	RequestsTotal  uint64     `json:"requests_total"`
	Series         []OpsPoint `json:"series"` // oldest first, at most 120
}

// OpsPoint is the rates between two consecutive gatherings, at the later.
type OpsPoint struct {
	TimeUnixMs     int64   `json:"t"`
	RequestsPerSec float64 `json:"requests_per_sec"`
	EntriesPerSec  float64 `json:"entries_per_sec"`
}

// Cuts is the newest cuts group 0 remembers, newest first.
type Cuts struct {
	Error string `json:"error,omitempty"`
	Items []Cut  `json:"items"`
}

// Cut is one consistent cut.
type Cut struct {
	Version        uint64 `json:"version"`
	State          string `json:"state"` // running, completed, failed
	StartedUnixMs  int64  `json:"started_unix_ms"`
	FinishedUnixMs int64  `json:"finished_unix_ms,omitempty"` // 0 while running
	DurationMs     int64  `json:"duration_ms"`                // so far, while running
	Partitions     int    `json:"partitions"`
	Error          string `json:"error,omitempty"`
}

// Snapshots is the newest snapshots of the store, oldest cut first (the
// order of their chain).
type Snapshots struct {
	Error         string     `json:"error,omitempty"`
	Store         string     `json:"store,omitempty"`
	UpdatedUnixMs int64      `json:"updated_unix_ms,omitempty"` // when the store was last read
	Items         []Snapshot `json:"items"`
}

// Snapshot is one snapshot and what it adds to the one before it.
type Snapshot struct {
	ID            string `json:"id"`
	CutVersion    uint64 `json:"cut_version"`
	TimeUnixMs    int64  `json:"time_unix_ms"`
	Partitions    uint32 `json:"partitions"`
	Objects       uint32 `json:"objects"`
	TotalBytes    uint64 `json:"total_bytes"`
	Parent        string `json:"parent,omitempty"` // the previous snapshot of the chain
	NewObjects    *int   `json:"new_objects"`      // objects the parent does not reference; nil when unknown
	NewBytes      *int64 `json:"new_bytes"`
	SharedObjects *int   `json:"shared_objects"`
	DetailError   string `json:"detail_error,omitempty"` // why the objects could not be read
}

// errText is what the page shows for a failed call: the gRPC message
// without its "rpc error:" wrapping, after what was being done.
func errText(what string, err error) string {
	if s, ok := status.FromError(err); ok {
		return what + ": " + s.Code().String() + ": " + s.Message()
	}
	return what + ": " + err.Error()
}

// status returns the latest Status, gathering a new one when the last is
// older than cfg.Refresh. Callers get their own copy of the lists'
// headers (slices may be trimmed, never written).
func (g *gatherer) status(ctx context.Context) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	if !g.lastAt.IsZero() && now.Sub(g.lastAt) < g.cfg.Refresh {
		return g.last
	}
	// A page that goes away does not spoil the gathering for the others.
	ctx = context.WithoutCancel(ctx)
	st := Status{Node: g.cfg.Self, TimeUnixMs: g.cfg.Wall().UnixMilli(), RefreshMs: g.cfg.Refresh.Milliseconds()}
	cctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	// At once: a status waits up to 2s for a node that does not answer,
	// which must not leave the cut list without time.
	var (
		members    *kvpb.MembersResponse
		stat       *kvpb.StatusResponse
		cuts       *kvpb.ListCutsResponse
		merr, serr error
		cerr       error
		wg         sync.WaitGroup
	)
	wg.Go(func() { members, merr = g.cfg.Cluster.Members(cctx, &kvpb.MembersRequest{}) })
	wg.Go(func() { stat, serr = g.cfg.Cluster.Status(cctx, &kvpb.StatusRequest{}) })
	wg.Go(func() { cuts, cerr = g.cfg.Cluster.ListCuts(cctx, &kvpb.ListCutsRequest{Limit: MaxCuts}) })
	wg.Wait()
	st.ClusterID = stat.GetClusterId()

	st.Members = buildMembers(g.cfg.Self, members, merr, stat, serr)
	st.Partitions = buildPartitions(stat, serr)
	st.Cuts = buildCuts(cuts, cerr, now)
	st.Ops = g.ops.sample(now, g.requestsTotal, stat, serr)
	st.Snapshots = g.snaps.get(ctx, g.cfg, now)
	for source, msg := range map[string]string{"members": st.Members.Error, "status": st.Partitions.Error,
		"cuts": st.Cuts.Error, "ops": st.Ops.Error, "snapshots": st.Snapshots.Error} {
		g.noteErrLocked(source, msg)
	}
	g.last, g.lastAt = st, now
	return st
}

func buildMembers(self string, resp *kvpb.MembersResponse, err error, stat *kvpb.StatusResponse, serr error) Members {
	out := Members{Items: []Member{}}
	if err != nil {
		out.Error = errText("members", err)
		return out
	}
	nodes := map[string]*kvpb.NodeStatus{}
	for _, ns := range stat.GetNodes() {
		nodes[ns.GetId()] = ns
	}
	for _, m := range resp.GetMembers() {
		if len(out.Items) == MaxMembers {
			break
		}
		item := Member{
			ID: m.GetId(), RaftID: m.GetRaftId(), Self: m.GetId() == self, State: memberState(m.GetState()),
			SinceUnixMs: m.GetSinceUnixMs(), GRPCAddr: m.GetGrpcAddr(), PeerAddr: m.GetPeerAddr(),
			GossipAddr: m.GetGossipAddr(), HTTPAddr: m.GetHttpAddr(),
		}
		switch ns := nodes[m.GetId()]; {
		case serr != nil:
			item.StatusError = errText("status", serr)
		case ns == nil:
			item.StatusError = "status: the node is not in the status answer"
		case ns.GetError() != "":
			item.StatusError = ns.GetError()
		default:
			serving := ns.GetServing()
			item.Serving = &serving
			item.Version, item.WALBytes = ns.GetVersion(), ns.GetWalBytes()
			item.DiskFreeBytes, item.DiskTotalBytes = ns.GetDiskFreeBytes(), ns.GetDiskTotalBytes()
		}
		out.Items = append(out.Items, item)
	}
	return out
}

func memberState(s kvpb.MemberState) string {
	switch s {
	case kvpb.MemberState_MEMBER_STATE_ALIVE:
		return "alive"
	case kvpb.MemberState_MEMBER_STATE_SUSPECT:
		return "suspect"
	case kvpb.MemberState_MEMBER_STATE_FAILED:
		return "failed"
	case kvpb.MemberState_MEMBER_STATE_LEFT:
		return "left"
	}
	return "unknown"
}

func buildPartitions(stat *kvpb.StatusResponse, err error) Partitions {
	out := Partitions{Items: []Partition{}}
	if err != nil {
		out.Error = errText("status", err)
		return out
	}
	for _, g := range stat.GetGroups() {
		if len(out.Items) == MaxPartitions {
			out.Truncated = true
			break
		}
		reps := g.GetReplicas()
		if reps == nil {
			reps = []string{}
		}
		out.Items = append(out.Items, Partition{
			ID: g.GetId(), Leader: g.GetLeader(), Replicas: reps, Term: g.GetTerm(),
			CommitIndex: g.GetCommitIndex(), AppliedIndex: g.GetAppliedIndex(), Keys: g.GetKeys(), ReportedBy: g.GetReportedBy(),
		})
	}
	return out
}

func buildCuts(resp *kvpb.ListCutsResponse, err error, now time.Time) Cuts {
	out := Cuts{Items: []Cut{}}
	if err != nil {
		out.Error = errText("list cuts", err)
		return out
	}
	for _, c := range resp.GetCuts() {
		if len(out.Items) == MaxCuts {
			break
		}
		item := Cut{Version: c.GetVersion(), StartedUnixMs: c.GetStartedUnixMs(), FinishedUnixMs: c.GetFinishedUnixMs(),
			Partitions: len(c.GetPartitions()), Error: c.GetError()}
		switch c.GetState() {
		case kvpb.CutState_CUT_STATE_RUNNING:
			item.State = "running"
			item.FinishedUnixMs = 0
			item.DurationMs = max(0, now.UnixMilli()-item.StartedUnixMs)
		case kvpb.CutState_CUT_STATE_COMPLETED:
			item.State = "completed"
		case kvpb.CutState_CUT_STATE_FAILED:
			item.State = "failed"
		default:
			item.State = strings.ToLower(strings.TrimPrefix(c.GetState().String(), "CUT_STATE_"))
		}
		if item.FinishedUnixMs != 0 {
			item.DurationMs = max(0, item.FinishedUnixMs-item.StartedUnixMs)
		}
		out.Items = append(out.Items, item)
	}
	return out
}
