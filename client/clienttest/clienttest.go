// Package clienttest runs an in-process fake cutkv cluster on 127.0.0.1 for
// tests of the client and of programs built on it. Every fake node serves
// the public KV and Cluster gRPC services over one shared in-memory store,
// with a settable leader per partition, per-node call counters, a log of
// the requests received, and hooks that inject failures. It is a test
// double, not a database: there is no raft and no persistence, and Txn is
// evaluated under one lock on the map (no 2PC, no locks, never Aborted
// unless a hook says so), after the server's InvalidArgument checks.
package clienttest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// Reasons of the "not applied" ErrorInfo the real server returns.
const (
	Domain                = "cutkv.io"
	ReasonNotLeader       = "NOT_LEADER"
	ReasonNoLeader        = "NO_LEADER"
	ReasonProposalDropped = "PROPOSAL_DROPPED"
	ReasonNotServing      = "NOT_SERVING"
	ReasonShuttingDown    = "SHUTTING_DOWN"
)

// Method names given to hooks and counters.
const (
	MethodGet     = "Get"
	MethodPut     = "Put"
	MethodDelete  = "Delete"
	MethodScan    = "Scan"
	MethodTxn     = "Txn"
	MethodMembers = "Members"
	MethodStatus  = "Status"
	MethodRouting = "Routing"
)

// NotApplied returns the error a node gives for a request it did not apply:
// codes.Unavailable with a cutkv ErrorInfo. leader is the NOT_LEADER hint
// (a node id), "" for none.
func NotApplied(reason, leader string) error {
	st := status.New(codes.Unavailable, "cutkv: "+reason)
	info := &errdetails.ErrorInfo{Domain: Domain, Reason: reason}
	if leader != "" {
		info.Metadata = map[string]string{"leader": leader}
	}
	st, err := st.WithDetails(info)
	if err != nil {
		panic(err) // ErrorInfo always marshals
	}
	return st.Err()
}

// Hook runs on the node that received a request, before it is served. A
// non-nil error is returned to the client instead of serving the request.
// A hook may block (for example on ctx.Done()).
type Hook func(ctx context.Context, method string, req proto.Message) error

// Options configures a Cluster.
type Options struct {
	// Nodes is the number of nodes; default 3.
	Nodes int
	// Partitions is the number of partitions; default 4.
	Partitions uint32
	// ClusterID is reported in every header; default 0xC07.
	ClusterID uint64
	// MaxTxnOps is the most compares, and ops per branch, a Txn may hold;
	// default 128.
	MaxTxnOps int
}

// Cluster is a fake cluster. Its methods are safe for concurrent use.
type Cluster struct {
	Partitions uint32
	ClusterID  string // hex, as replies carry it
	MaxTxnOps  int
	Nodes      []*Node

	mu       sync.Mutex
	requests map[string][]proto.Message // REQUIRES mu; by method, in arrival order
	data     map[string]*kvpb.KeyValue  // REQUIRES mu
	index    []uint64                   // REQUIRES mu; last raft index per partition (0 = metadata)
	leaders  []int                      // REQUIRES mu; node index per partition 1..N at [p-1], -1 = none
	reported []int                      // REQUIRES mu; what Routing says, nil = leaders
	cut      uint64                     // REQUIRES mu
}

// NewCluster starts a cluster and stops it when tb's test ends. Node i has
// id "n<i+1>" and raft id i+1; partition p is led by node (p-1) mod n.
func NewCluster(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	if opts.ClusterID == 0 {
		opts.ClusterID = 0xC07
	}
	if opts.MaxTxnOps <= 0 {
		opts.MaxTxnOps = 128
	}
	c := &Cluster{
		Partitions: opts.Partitions,
		ClusterID:  fmt.Sprintf("%016x", opts.ClusterID),
		MaxTxnOps:  opts.MaxTxnOps,
		requests:   make(map[string][]proto.Message),
		data:       make(map[string]*kvpb.KeyValue),
		index:      make([]uint64, opts.Partitions+1),
		leaders:    make([]int, opts.Partitions),
	}
	for p := range c.leaders {
		c.leaders[p] = p % opts.Nodes
	}
	for i := range opts.Nodes {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("clienttest: listen: %v", err)
		}
		n := &Node{
			ID:      fmt.Sprintf("n%d", i+1),
			RaftID:  uint64(i + 1),
			Addr:    lis.Addr().String(),
			c:       c,
			srv:     grpc.NewServer(),
			forward: true,
			state:   kvpb.MemberState_MEMBER_STATE_ALIVE,
			calls:   make(map[string]int),
		}
		kvrpc.RegisterKVServer(n.srv, kvServer{n: n})
		kvrpc.RegisterClusterServer(n.srv, clusterServer{n: n})
		go func() { _ = n.srv.Serve(lis) }()
		c.Nodes = append(c.Nodes, n)
	}
	tb.Cleanup(c.Close)
	return c
}

// Close stops every node.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Endpoints returns the nodes' addresses.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.Addr)
	}
	return eps
}

// PartitionOf returns key's partition.
func (c *Cluster) PartitionOf(key []byte) uint64 { return keyspace.PartitionOf(key, c.Partitions) }

// Leader returns the node leading key's partition, nil if none.
func (c *Cluster) Leader(key []byte) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderLocked(c.PartitionOf(key))
}

// REQUIRES c.mu.
func (c *Cluster) leaderLocked(p uint64) *Node {
	i := c.leaders[p-1]
	if i < 0 {
		return nil
	}
	return c.Nodes[i]
}

// SetLeader makes node i (-1: none) the leader of partition p.
func (c *Cluster) SetLeader(p uint64, i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leaders[p-1] = i
}

// SetReportedLeaders makes Routing report leaders[p-1] (a node index, -1
// for none) as partition p's leader, whatever the true leader is: a stale
// view. nil restores the truth.
func (c *Cluster) SetReportedLeaders(leaders []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reported = slices.Clone(leaders)
}

// SetCutVersion sets the cut version the nodes know.
func (c *Cluster) SetCutVersion(v uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = v
}

// CutVersion returns the highest cut version the nodes know (raised by
// requests that carry a higher one).
func (c *Cluster) CutVersion() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// Value returns the stored key-value, nil if absent.
func (c *Cluster) Value(key []byte) *kvpb.KeyValue {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kv, ok := c.data[string(key)]; ok {
		return proto.Clone(kv).(*kvpb.KeyValue)
	}
	return nil
}

// Put stores a key-value directly, as a committed write.
func (c *Cluster) Put(key, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, value)
}

// Requests returns copies of the requests of method that reached any node
// (hooks included, so also those a hook refused), in arrival order.
func (c *Cluster) Requests(method string) []proto.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]proto.Message, 0, len(c.requests[method]))
	for _, m := range c.requests[method] {
		out = append(out, proto.Clone(m))
	}
	return out
}

// TxnRequests is Requests(MethodTxn), typed.
func (c *Cluster) TxnRequests() []*kvpb.TxnRequest {
	var out []*kvpb.TxnRequest
	for _, m := range c.Requests(MethodTxn) {
		out = append(out, m.(*kvpb.TxnRequest))
	}
	return out
}

// REQUIRES c.mu.
func (c *Cluster) putLocked(key, value []byte) {
	p := c.PartitionOf(key)
	c.index[p]++
	c.writeLocked(key, value, c.index[p])
}

// writeLocked stores a key-value written at raft index idx of its
// partition. REQUIRES c.mu.
func (c *Cluster) writeLocked(key, value []byte, idx uint64) {
	kv, ok := c.data[string(key)]
	if !ok {
		kv = &kvpb.KeyValue{Key: bytes.Clone(key), CreateIndex: idx}
		c.data[string(key)] = kv
	}
	kv.Value = bytes.Clone(value)
	kv.Version++
	kv.ModIndex = idx
}

// Node is one fake node.
type Node struct {
	ID     string
	RaftID uint64
	Addr   string

	c   *Cluster
	srv *grpc.Server

	mu      sync.Mutex
	hook    Hook              // REQUIRES mu
	forward bool              // REQUIRES mu
	stopped bool              // REQUIRES mu
	state   kvpb.MemberState  // REQUIRES mu
	calls   map[string]int    // REQUIRES mu
	lastHdr map[string]uint64 // REQUIRES mu; cut_version of the last request per method
}

// SetHook installs h (nil removes it).
func (n *Node) SetHook(h Hook) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hook = h
}

// SetForward sets whether the node serves keyed requests for partitions it
// does not lead (as the real node does by forwarding; the default) or
// answers them NOT_LEADER with a hint.
func (n *Node) SetForward(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.forward = on
}

// SetState sets the member state other nodes report for n.
func (n *Node) SetState(s kvpb.MemberState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.state = s
}

// Calls returns how many requests of method reached n (hooks included).
func (n *Node) Calls(method string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls[method]
}

// LastCutVersion returns the cut_version of the last request of method
// that reached n.
func (n *Node) LastCutVersion(method string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lastHdr[method]
}

// Stop kills the node: connections break, new ones are refused.
func (n *Node) Stop() {
	n.mu.Lock()
	stopped := n.stopped
	n.stopped = true
	n.mu.Unlock()
	if !stopped {
		n.srv.Stop()
	}
}

// enter counts a request, merges its cut version and runs the hook.
func (n *Node) enter(ctx context.Context, method string, h *kvpb.RequestHeader, req proto.Message) error {
	n.mu.Lock()
	n.calls[method]++
	if n.lastHdr == nil {
		n.lastHdr = make(map[string]uint64)
	}
	n.lastHdr[method] = h.GetCutVersion()
	hook := n.hook
	n.mu.Unlock()
	n.c.mu.Lock()
	n.c.cut = max(n.c.cut, h.GetCutVersion())
	n.c.requests[method] = append(n.c.requests[method], proto.Clone(req))
	n.c.mu.Unlock()
	if hook != nil {
		return hook(ctx, method, req)
	}
	return nil
}

// route checks that n may serve key: it leads the partition or forwards.
// It returns the serving node. REQUIRES c.mu.
func (n *Node) routeLocked(key []byte) (*Node, error) {
	p := n.c.PartitionOf(key)
	l := n.c.leaderLocked(p)
	if l == nil {
		return nil, NotApplied(ReasonNoLeader, "")
	}
	if l == n {
		return n, nil
	}
	n.mu.Lock()
	fwd := n.forward
	n.mu.Unlock()
	if !fwd {
		return nil, NotApplied(ReasonNotLeader, l.ID)
	}
	return l, nil
}

// REQUIRES c.mu.
func (c *Cluster) headerLocked(served *Node, term uint64) *kvpb.ResponseHeader {
	return &kvpb.ResponseHeader{ClusterId: c.ClusterID, MemberId: served.ID, RaftTerm: term, CutVersion: c.cut}
}

func checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return status.Error(codes.InvalidArgument, "cutkv: empty key")
	case len(key) > 4<<10:
		return status.Errorf(codes.InvalidArgument, "cutkv: key of %d bytes exceeds 4096", len(key))
	}
	return nil
}

type kvServer struct {
	kvrpc.UnimplementedKVServer
	n *Node
}

func (s kvServer) Get(ctx context.Context, r *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := s.n.enter(ctx, MethodGet, r.GetHeader(), r); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := s.n.routeLocked(r.GetKey())
	if err != nil {
		return nil, err
	}
	resp := &kvpb.GetResponse{Header: c.headerLocked(l, 1)}
	if kv, ok := c.data[string(r.GetKey())]; ok {
		resp.Kv = proto.Clone(kv).(*kvpb.KeyValue)
	}
	return resp, nil
}

func (s kvServer) Put(ctx context.Context, r *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	if err := s.n.enter(ctx, MethodPut, r.GetHeader(), r); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	if len(r.GetValue()) > 1<<20 {
		return nil, status.Errorf(codes.InvalidArgument, "cutkv: value of %d bytes exceeds 1 MiB", len(r.GetValue()))
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := s.n.routeLocked(r.GetKey())
	if err != nil {
		return nil, err
	}
	resp := &kvpb.PutResponse{}
	if kv, ok := c.data[string(r.GetKey())]; ok && r.GetPrevKv() {
		resp.PrevKv = proto.Clone(kv).(*kvpb.KeyValue)
	}
	c.putLocked(r.GetKey(), r.GetValue())
	resp.Header = c.headerLocked(l, 1)
	return resp, nil
}

func (s kvServer) Delete(ctx context.Context, r *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	if err := s.n.enter(ctx, MethodDelete, r.GetHeader(), r); err != nil {
		return nil, err
	}
	if err := checkKey(r.GetKey()); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l, err := s.n.routeLocked(r.GetKey())
	if err != nil {
		return nil, err
	}
	resp := &kvpb.DeleteResponse{}
	if kv, ok := c.data[string(r.GetKey())]; ok {
		c.index[c.PartitionOf(r.GetKey())]++
		delete(c.data, string(r.GetKey()))
		resp.Deleted = 1
		if r.GetPrevKv() {
			resp.PrevKv = kv
		}
	}
	resp.Header = c.headerLocked(l, 1)
	return resp, nil
}

func (s kvServer) Scan(ctx context.Context, r *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	if err := s.n.enter(ctx, MethodScan, r.GetHeader(), r); err != nil {
		return nil, err
	}
	if r.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "cutkv: negative limit")
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := c.scanLocked(r)
	resp.Header = c.headerLocked(s.n, 0)
	return resp, nil
}

// scanLocked serves r, without the header. REQUIRES c.mu.
func (c *Cluster) scanLocked(r *kvpb.ScanRequest) *kvpb.ScanResponse {
	limit := int(r.GetLimit())
	if limit == 0 || limit > 10000 {
		limit = 10000
	}
	var keys []string
	for k := range c.data {
		if inRange([]byte(k), r.GetStart(), r.GetEnd()) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	resp := &kvpb.ScanResponse{}
	if len(keys) > limit {
		keys, resp.More = keys[:limit], true
	}
	for _, k := range keys {
		kv := proto.Clone(c.data[k]).(*kvpb.KeyValue)
		if r.GetKeysOnly() {
			kv.Value = nil
		}
		resp.Kvs = append(resp.Kvs, kv)
	}
	return resp
}

// inRange reports start ≤ k < end, an empty end being no bound.
func inRange(k, start, end []byte) bool {
	return bytes.Compare(k, start) >= 0 && (len(end) == 0 || bytes.Compare(k, end) < 0)
}

type clusterServer struct {
	kvrpc.UnimplementedClusterServer
	n *Node
}

// membersLocked lists the members. REQUIRES c.mu.
func (c *Cluster) membersLocked() []*kvpb.Member {
	var ms []*kvpb.Member
	for i, n := range c.Nodes {
		n.mu.Lock()
		st := n.state
		n.mu.Unlock()
		ms = append(ms, &kvpb.Member{
			Id:          n.ID,
			RaftId:      n.RaftID,
			GrpcAddr:    n.Addr,
			GossipAddr:  fmt.Sprintf("127.0.0.1:%d", 7946+i),
			HttpAddr:    fmt.Sprintf("127.0.0.1:%d", 8080+i),
			State:       st,
			SinceUnixMs: 1700000000000 + int64(i)*1000,
		})
	}
	return ms
}

func (s clusterServer) Members(ctx context.Context, r *kvpb.MembersRequest) (*kvpb.MembersResponse, error) {
	if err := s.n.enter(ctx, MethodMembers, r.GetHeader(), r); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return &kvpb.MembersResponse{Header: c.headerLocked(s.n, 0), Members: c.membersLocked()}, nil
}

func (s clusterServer) Status(ctx context.Context, r *kvpb.StatusRequest) (*kvpb.StatusResponse, error) {
	if err := s.n.enter(ctx, MethodStatus, r.GetHeader(), r); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for _, n := range c.Nodes {
		ids = append(ids, n.ID)
	}
	keys := make([]uint64, c.Partitions+1)
	for k := range c.data {
		keys[c.PartitionOf([]byte(k))]++
	}
	resp := &kvpb.StatusResponse{Header: c.headerLocked(s.n, 0), ClusterId: c.ClusterID, Partitions: c.Partitions}
	resp.Groups = append(resp.Groups, &kvpb.PartitionStatus{
		Id: 0, Leader: c.Nodes[0].ID, Term: 1, CommitIndex: c.index[0], AppliedIndex: c.index[0],
		Replicas: ids, ReportedBy: c.Nodes[0].ID,
	})
	for p := uint64(1); p <= uint64(c.Partitions); p++ {
		g := &kvpb.PartitionStatus{Id: p, Term: 1, CommitIndex: c.index[p], AppliedIndex: c.index[p], Replicas: ids, ReportedBy: s.n.ID, Keys: keys[p]}
		if l := c.leaderLocked(p); l != nil {
			g.Leader, g.ReportedBy = l.ID, l.ID
		}
		resp.Groups = append(resp.Groups, g)
	}
	for i, n := range c.Nodes {
		n.mu.Lock()
		stopped := n.stopped
		n.mu.Unlock()
		if stopped {
			resp.Nodes = append(resp.Nodes, &kvpb.NodeStatus{Id: n.ID, Error: "unreachable"})
			continue
		}
		resp.Nodes = append(resp.Nodes, &kvpb.NodeStatus{
			Id: n.ID, Serving: true, WalBytes: int64(1536 * (i + 1)),
			DiskFreeBytes: 20 << 30, DiskTotalBytes: 100 << 30,
			WalFirstIndex: 1, WalLastIndex: 100, Version: "test",
		})
	}
	return resp, nil
}

func (s clusterServer) Routing(ctx context.Context, r *kvpb.RoutingRequest) (*kvpb.RoutingResponse, error) {
	if err := s.n.enter(ctx, MethodRouting, r.GetHeader(), r); err != nil {
		return nil, err
	}
	c := s.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	view := c.leaders
	if c.reported != nil {
		view = c.reported
	}
	resp := &kvpb.RoutingResponse{Header: c.headerLocked(s.n, 0), Partitions: c.Partitions, Hash: keyspace.HashName, Members: c.membersLocked()}
	for _, i := range view {
		id := ""
		if i >= 0 {
			id = c.Nodes[i].ID
		}
		resp.Leaders = append(resp.Leaders, id)
	}
	return resp, nil
}

// DeadAddr returns a 127.0.0.1 address where nothing listens (it was just
// free).
func DeadAddr(tb testing.TB) string {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("clienttest: listen: %v", err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}
