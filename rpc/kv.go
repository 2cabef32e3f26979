package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/cutkv/cutkv/cut"
	"github.com/cutkv/cutkv/meta"
	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/topology"
	"github.com/cutkv/cutkv/txn"
)

// DefaultScanLimit caps a scan that names no limit.
const DefaultScanLimit = 10000

// MaxScanBytes caps the keys and values of one partition's scan reply.
const MaxScanBytes = 4 << 20

// Limits bound what a request may carry.
type Limits struct {
	MaxKeySize   int // bytes; default 4 KiB
	MaxValueSize int // bytes; default 1 MiB
	MaxTxnOps    int // operations per Txn list (compares, success, failure); default 128
}

// Validate fills defaults.
func (l *Limits) Validate() {
	if l.MaxKeySize <= 0 {
		l.MaxKeySize = 4 << 10
	}
	if l.MaxValueSize <= 0 {
		l.MaxValueSize = 1 << 20
	}
	if l.MaxTxnOps <= 0 {
		l.MaxTxnOps = 128
	}
}

// MaxRequestSize is the receive limit that fits the largest legal request,
// and a raft batch carrying a full append message with one such entry.
// A Txn as a whole must fit it too (as etcd bounds a request's bytes).
func (l Limits) MaxRequestSize() int { return 2*(l.MaxKeySize+l.MaxValueSize) + 1<<20 }

// Membership is what the services know of the cluster's members. Its
// methods do not block (they read gossip's view).
type Membership interface {
	// PeerAddr returns member id's peer address (gossip may know a newer
	// one than the layout).
	PeerAddr(id string) string
	// Members lists the members with their gossip state.
	Members() []*kvpb.Member
}

// Host is what the services ask of the process they run in.
type Host interface {
	// LocalStatus describes this node (WAL, disk, serving); it may read
	// the file system (disk space).
	LocalStatus() *kvpb.NodeStatus
	// Draining is true once shutdown began: new requests are refused.
	Draining() bool
}

// Announcer gossips a cut version to every node; Announce does not wait
// for delivery.
type Announcer interface {
	Announce(v uint64)
}

// Node is what the services need from the node they run in.
type Node struct {
	Self       topology.Member
	Layout     *topology.Layout
	Store      *raftstore.Store
	Partitions map[uint64]*partition.Partition
	Pool       *Pool
	Limits     Limits
	// Cluster is what this node knows of the members.
	Cluster Membership
	// Host is the process the services run in.
	Host Host
	// Gossip announces cut versions; nil: none (tests).
	Gossip Announcer

	// Clock is the node's known cut version (DESIGN.md, consistent cut).
	Clock *cut.Clock
	// Meta is group 0's state, nil when this node holds no replica of it.
	Meta *meta.State
	// Cuts drives cuts while this node leads group 0; see NewCutEnv.
	Cuts *cut.Driver
	// Background is the node's lifetime: cut runs end with it.
	Background context.Context
	// Snapshots is the node's side of snapshots.
	Snapshots *Snapshots
	// Metrics records transactions, cuts and snapshots as they end; nil:
	// none (tests).
	Metrics *NodeMetrics

	// Log is the node's logger (nil: slog.Default()).
	Log *slog.Logger

	cutPoke   chan struct{} // wakes the cut agent; see PokeCuts
	forget    forgetter     // records of transactions finished everywhere
	versions  versionGate   // cut versions from outside; see admitVersion
	overtaken atomic.Uint64 // highest version a partition reported above a cut
	waits     sync.Map      // partition → *txn.WaitQueue: who waits for locks (wait-die)
	batches   sync.Map      // partition → *finishBatcher: Finishes sharing one entry
}

// finishes returns partition p's Finish batcher.
func (n *Node) finishes(p uint64) *finishBatcher {
	if b, ok := n.batches.Load(p); ok {
		return b.(*finishBatcher)
	}
	b, _ := n.batches.LoadOrStore(p, &finishBatcher{n: n, p: p})
	return b.(*finishBatcher)
}

// waitQueue returns partition p's wait queue.
func (n *Node) waitQueue(p uint64) *txn.WaitQueue {
	if q, ok := n.waits.Load(p); ok {
		return q.(*txn.WaitQueue)
	}
	q, _ := n.waits.LoadOrStore(p, &txn.WaitQueue{})
	return q.(*txn.WaitQueue)
}

func (n *Node) logger() *slog.Logger {
	if n.Log != nil {
		return n.Log
	}
	return slog.Default()
}

// storeError is a read of partition p's state that its store could not
// serve (a disk error, which stops the partition too): NOT_SERVING.
func storeError(p uint64, err error) error {
	return fmt.Errorf("%w: partition %d's state could not be read: %v", raftstore.ErrNotServing, p, err)
}

// lifetime is the node's Background, or a context that never ends when
// none was set (tests that build a Node by hand).
func (n *Node) lifetime() context.Context {
	if n.Background != nil {
		return n.Background
	}
	return context.Background()
}

func (n *Node) header(term uint64) *kvpb.ResponseHeader {
	return &kvpb.ResponseHeader{ClusterId: topology.FormatClusterID(n.Layout.ClusterID), MemberId: n.Self.ID, RaftTerm: term, CutVersion: n.Clock.Load()}
}

func (n *Node) memberID(raftID uint64) string {
	if m, ok := n.Layout.MemberByRaftID(raftID); ok {
		return m.ID
	}
	return ""
}

// KVServer implements kvrpc.KVServer.
type KVServer struct {
	kvrpc.UnimplementedKVServer
	n *Node
}

// NewKVServer returns the KV service of node n.
func NewKVServer(n *Node) *KVServer { return &KVServer{n: n} }

func (s *KVServer) checkKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalidArgument)
	}
	if len(key) > s.n.Limits.MaxKeySize {
		return fmt.Errorf("%w: key of %d bytes exceeds the limit of %d", ErrInvalidArgument, len(key), s.n.Limits.MaxKeySize)
	}
	return nil
}

// maxHops bounds forwarding: a node that holds no replica of a partition
// sends to a replica, which may send once more to the leader.
const maxHops = 2

// route decides where a request for partition p is served: locally (nil)
// or on another node, through that node's peer listener (the forwarded
// copies of the client services, see auth.go). A request is forwarded at
// most maxHops times.
func (n *Node) route(ctx context.Context, p uint64) (grpc.ClientConnInterface, error) {
	if n.Host.Draining() {
		return nil, ErrShuttingDown
	}
	hops := forwardedHops(ctx)
	st, ok := n.Store.Status(p)
	if !ok {
		// No replica here: hand it to a replica, which knows the leader.
		if hops >= maxHops-1 {
			return nil, &raftstore.NotLeaderError{Group: p}
		}
		conn, err := n.readyConn(ctx, n.replicaToAsk(p))
		if err != nil {
			return nil, &raftstore.NotLeaderError{Group: p}
		}
		return forwardConn{conn}, nil
	}
	if st.IsLeader {
		return nil, nil
	}
	lead := st.Leader
	if lead == 0 {
		// An election or a leadership hand-off is under way: give it a
		// moment rather than bouncing the client.
		lead = n.waitLeader(ctx, p)
		if st, _ := n.Store.Status(p); st.IsLeader {
			return nil, nil
		}
	}
	if lead == 0 || lead == n.Self.RaftID || hops >= maxHops {
		return nil, &raftstore.NotLeaderError{Group: p, Leader: lead}
	}
	conn, err := n.readyConn(ctx, n.memberID(lead))
	if err != nil {
		// Nothing was sent: the client may resend, even a write.
		return nil, &raftstore.NotLeaderError{Group: p, Leader: lead}
	}
	return forwardConn{conn}, nil
}

// connectWait bounds how long forwarding waits for a connection to the
// target node before giving up (and saying nothing was sent).
const connectWait = 500 * time.Millisecond

// readyConn returns the connection to node id once it is ready. A
// request forwarded on a connection that was not ready could not be told
// apart from one lost after sending; waiting first keeps "not sent"
// answers honest (the leader died and its port is closed).
func (n *Node) readyConn(ctx context.Context, id string) (*grpc.ClientConn, error) {
	conn, err := n.peerConn(id)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, connectWait)
	defer cancel()
	for {
		st := conn.GetState()
		if st == connectivity.Ready {
			return conn, nil
		}
		if st == connectivity.Idle {
			conn.Connect()
		}
		if !conn.WaitForStateChange(wctx, st) {
			return nil, fmt.Errorf("rpc: node %s not reachable (%v)", id, st)
		}
	}
}

// replicaToAsk picks a replica of p that gossip reports alive, else the
// first one.
func (n *Node) replicaToAsk(p uint64) string {
	reps := n.Layout.Groups[p]
	alive := map[string]bool{}
	for _, m := range n.Cluster.Members() {
		alive[m.GetId()] = m.GetState() == kvpb.MemberState_MEMBER_STATE_ALIVE
	}
	for _, r := range reps {
		if id := n.memberID(r); alive[id] {
			return id
		}
	}
	return n.memberID(reps[0])
}

// leaderWait bounds how long a request waits for an unknown leader.
const leaderWait = 2 * time.Second

// waitLeader polls until partition p has a known leader, leaderWait or ctx
// ends; it returns the leader's raft id or 0.
func (n *Node) waitLeader(ctx context.Context, p uint64) uint64 {
	var lead uint64
	_ = poll(ctx, leaderWait, func() (bool, error) {
		st, _ := n.Store.Status(p)
		lead = st.Leader
		return lead != 0, nil
	})
	return lead
}

// errPollTimeout is the answer of poll and awaitApply when the wait ran
// out.
var errPollTimeout = errors.New("rpc: wait ran out")

// poll calls check every 2 ms until it reports done or fails, ctx ends,
// or within has passed (errPollTimeout). It is for state that no apply
// announces (a raft group's leader); what a partition's entries change is
// waited for with awaitApply.
func poll(ctx context.Context, within time.Duration, check func() (done bool, err error)) error {
	// Most waits are over at the first look: no clock reading or ticker
	// for those.
	if done, err := check(); done || err != nil {
		return err
	}
	deadline := time.Now().Add(within)
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if done, err := check(); done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errPollTimeout
		}
	}
}

// waitTimer starts the timer that bounds a wait; tests replace it with
// one that never fires, to show that waiters wake on applies alone.
var waitTimer = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// awaitApply waits until check reports done or fails, ctx ends, or within
// has passed (errPollTimeout), looking again each time part applies an
// entry: what the request path waits for on a partition (a lock released,
// a prepared write finished, a cut closed) changes only there. So a
// waiter wakes on the apply that releases it, and costs nothing between
// applies.
func awaitApply(ctx context.Context, part *partition.Partition, within time.Duration, check func() (done bool, err error)) error {
	return await(ctx, within, check, part.Changed, nil)
}

// await is awaitApply over a partition's applies (changed) and, when
// also is not nil, a second source of changes (a wait queue's leaves).
func await(ctx context.Context, within time.Duration, check func() (done bool, err error), changed, also func() <-chan struct{}) error {
	// Most waits are over at the first look (every Get, Put and prepare
	// checks its locks this way): no channel or timer for those.
	if done, err := check(); done || err != nil {
		return err
	}
	timeout, stop := waitTimer(within)
	defer stop()
	for {
		// Taken before the look, so a change between the look and the
		// wait is not missed.
		c := changed()
		var a <-chan struct{}
		if also != nil {
			a = also()
		}
		if done, err := check(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return errPollTimeout
		case <-c:
		case <-a:
		}
	}
}

// peerConn returns the connection to member id's peer listener.
func (n *Node) peerConn(id string) (*grpc.ClientConn, error) {
	return n.Pool.Conn(id, n.Cluster.PeerAddr(id))
}

func (s *KVServer) leaderHint(p uint64) string {
	st, _ := s.n.Store.Status(p)
	return s.n.memberID(st.Leader)
}

// onLeader runs a request for partition p where p's leader is: through
// forward on the leader's node when this node does not lead p, else local
// here. Errors come back as gRPC statuses.
func onLeader[R any](ctx context.Context, s *KVServer, p uint64,
	forward func(kvrpc.KVClient, context.Context) (R, error), local func() (R, error)) (R, error) {
	var zero R
	conn, err := s.n.route(ctx, p)
	if err != nil {
		return zero, toStatus(err, s.leaderHint(p))
	}
	if conn != nil {
		return forward(kvrpc.NewKVClient(conn), forwardCtx(ctx))
	}
	r, err := local()
	if err != nil {
		return zero, toStatus(err, s.leaderHint(p))
	}
	return r, nil
}

// propose replicates cmd through p's raft log and returns the apply result
// and the term of the serving leader.
func (s *KVServer) propose(ctx context.Context, p uint64, cmd *internalpb.Command) (partition.Result, uint64, error) {
	res, err := s.n.Store.Propose(ctx, p, cmd)
	if err != nil {
		return partition.Result{}, 0, err
	}
	r, _ := res.(partition.Result)
	st, _ := s.n.Store.Status(p)
	return r, st.Term, nil
}

// Get reads a key linearizably (raft ReadIndex on the partition leader).
func (s *KVServer) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	if err := s.checkKey(req.GetKey()); err != nil {
		return nil, toStatus(err, "")
	}
	p := s.n.Layout.PartitionOf(req.GetKey())
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.GetResponse, error) {
		return c.Get(fctx, req)
	}, func() (*kvpb.GetResponse, error) {
		if err := s.n.Store.ReadIndex(ctx, p); err != nil {
			return nil, err
		}
		if err := waitUnlocked(ctx, s.n.Partitions[p], req.GetKey(), nil); err != nil {
			return nil, err
		}
		st, _ := s.n.Store.Status(p)
		resp := &kvpb.GetResponse{Header: s.n.header(st.Term)}
		kv, ok, err := s.n.Partitions[p].Get(req.GetKey())
		if err != nil {
			return nil, storeError(p, err)
		}
		if ok {
			resp.Kv = kv.Proto(false)
		}
		return resp, nil
	})
}

// Put writes a key through raft; it returns once the entry is committed
// (durable on a quorum) and applied.
func (s *KVServer) Put(ctx context.Context, req *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	if err := s.checkKey(req.GetKey()); err != nil {
		return nil, toStatus(err, "")
	}
	if len(req.GetValue()) > s.n.Limits.MaxValueSize {
		return nil, toStatus(fmt.Errorf("%w: value of %d bytes exceeds the limit of %d", ErrInvalidArgument, len(req.GetValue()), s.n.Limits.MaxValueSize), "")
	}
	p := s.n.Layout.PartitionOf(req.GetKey())
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.PutResponse, error) {
		return c.Put(fctx, req)
	}, func() (*kvpb.PutResponse, error) {
		waitWritable(ctx, s.n.Partitions[p], req.GetKey())
		cmd := &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: req.GetKey(), Value: req.GetValue()}}}
		r, term, err := s.propose(ctx, p, cmd)
		if err != nil {
			return nil, err
		}
		if r.LockedBy != "" {
			return nil, ErrConflict
		}
		resp := &kvpb.PutResponse{Header: s.n.header(term)}
		if req.GetPrevKv() && r.Prev != nil {
			resp.PrevKv = r.Prev.Proto(false)
		}
		return resp, nil
	})
}

// Delete removes a key through raft.
func (s *KVServer) Delete(ctx context.Context, req *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	if err := s.checkKey(req.GetKey()); err != nil {
		return nil, toStatus(err, "")
	}
	p := s.n.Layout.PartitionOf(req.GetKey())
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.DeleteResponse, error) {
		return c.Delete(fctx, req)
	}, func() (*kvpb.DeleteResponse, error) {
		waitWritable(ctx, s.n.Partitions[p], req.GetKey())
		cmd := &internalpb.Command{Op: &internalpb.Command_Delete{Delete: &internalpb.DeleteOp{Key: req.GetKey()}}}
		r, term, err := s.propose(ctx, p, cmd)
		if err != nil {
			return nil, err
		}
		if r.LockedBy != "" {
			return nil, ErrConflict
		}
		resp := &kvpb.DeleteResponse{Header: s.n.header(term), Deleted: r.Deleted}
		if req.GetPrevKv() && r.Prev != nil {
			resp.PrevKv = r.Prev.Proto(false)
		}
		return resp, nil
	})
}

// Scan reads [start, end) in key order: each partition's leader answers
// for its share (linearizably), and the shares are merged.
func (s *KVServer) Scan(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	if len(req.GetStart()) > s.n.Limits.MaxKeySize || len(req.GetEnd()) > s.n.Limits.MaxKeySize {
		return nil, toStatus(fmt.Errorf("%w: scan bound exceeds the key limit of %d bytes", ErrInvalidArgument, s.n.Limits.MaxKeySize), "")
	}
	if req.GetLimit() < 0 {
		return nil, toStatus(fmt.Errorf("%w: negative limit %d", ErrInvalidArgument, req.GetLimit()), "")
	}
	if p := req.GetPartition(); p != 0 {
		if p > uint64(s.n.Layout.Partitions) {
			return nil, toStatus(fmt.Errorf("%w: partition %d not in 1..%d", ErrInvalidArgument, p, s.n.Layout.Partitions), "")
		}
		return s.scanPartition(ctx, req)
	}
	limit := req.GetLimit()
	if limit == 0 || limit > DefaultScanLimit {
		limit = DefaultScanLimit
	}
	n := int(s.n.Layout.Partitions)
	shares := make([]*kvpb.ScanResponse, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sub := &kvpb.ScanRequest{Header: req.GetHeader(), Start: req.GetStart(), End: req.GetEnd(), Limit: limit, KeysOnly: req.GetKeysOnly(), Partition: uint64(i + 1)}
			shares[i], errs[i] = s.scanPartition(ctx, sub)
		}(i)
	}
	wg.Wait()
	return mergeScan(s.n.header(0), shares, errs, int(limit))
}

// mergeScan merges per-partition shares in key order. A share that was cut
// short (more) only vouches for keys up to its last one, so the merged
// answer stops at the smallest such key: a client continuing after the
// last key returned then misses nothing.
func mergeScan(h *kvpb.ResponseHeader, shares []*kvpb.ScanResponse, errs []error, limit int) (*kvpb.ScanResponse, error) {
	resp := &kvpb.ScanResponse{Header: h}
	var bound []byte
	for i, sh := range shares {
		if errs[i] != nil {
			return nil, errs[i]
		}
		resp.Kvs = append(resp.Kvs, sh.GetKvs()...)
		if sh.GetMore() {
			resp.More = true
			if n := len(sh.GetKvs()); n > 0 {
				if last := sh.GetKvs()[n-1].GetKey(); bound == nil || bytes.Compare(last, bound) < 0 {
					bound = last
				}
			}
		}
	}
	sort.Slice(resp.Kvs, func(i, j int) bool { return bytes.Compare(resp.Kvs[i].GetKey(), resp.Kvs[j].GetKey()) < 0 })
	if bound != nil {
		n := sort.Search(len(resp.Kvs), func(i int) bool { return bytes.Compare(resp.Kvs[i].GetKey(), bound) > 0 })
		resp.Kvs = resp.Kvs[:n]
	}
	if len(resp.Kvs) > limit {
		resp.Kvs = resp.Kvs[:limit]
		resp.More = true
	}
	return resp, nil
}

func (s *KVServer) scanPartition(ctx context.Context, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	p := req.GetPartition()
	return onLeader(ctx, s, p, func(c kvrpc.KVClient, fctx context.Context) (*kvpb.ScanResponse, error) {
		return c.Scan(fctx, req)
	}, func() (*kvpb.ScanResponse, error) {
		if err := s.n.Store.ReadIndex(ctx, p); err != nil {
			return nil, err
		}
		end := req.GetEnd()
		if end == nil {
			end = []byte{}
		}
		if err := waitUnlocked(ctx, s.n.Partitions[p], req.GetStart(), end); err != nil {
			return nil, err
		}
		return s.scanLocal(p, req)
	})
}

// waitUnlocked waits, bounded by readLockWait, until no prepared
// transaction holds a write lock on key start (end nil) or in [start, end):
// a plain read must not return a value a committed transaction already
// replaced. The read happens after: still linearizable, as the state only
// moves forward past the read index.
func waitUnlocked(ctx context.Context, part *partition.Partition, start, end []byte) error {
	var holder string
	err := awaitApply(ctx, part, readLockWait, func() (bool, error) {
		h, locked := part.ReadBlocker(start, end)
		holder = h
		return !locked, nil
	})
	if errors.Is(err, errPollTimeout) {
		return fmt.Errorf("%w (transaction %x)", ErrLocked, holder)
	}
	return err
}

// waitWritable waits, up to readLockWait, until no transaction locks key:
// a transaction answered before its Finish applied still holds its locks
// for a moment, and a plain write proposed meanwhile would only be
// refused (ErrConflict) and retried by the client after a backoff. The
// check is advisory: the lock is checked again where the write applies.
func waitWritable(ctx context.Context, part *partition.Partition, key []byte) {
	_ = awaitApply(ctx, part, readLockWait, func() (bool, error) {
		_, locked := part.WriteBlocker(key)
		return !locked, nil
	})
}

// scanLocal answers p's share of a scan from this node's state.
func (s *KVServer) scanLocal(p uint64, req *kvpb.ScanRequest) (*kvpb.ScanResponse, error) {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > DefaultScanLimit {
		limit = DefaultScanLimit
	}
	var end []byte
	if len(req.GetEnd()) > 0 {
		end = req.GetEnd()
	}
	kvs, more, err := s.n.Partitions[p].Scan(req.GetStart(), end, limit)
	if err != nil {
		return nil, storeError(p, err)
	}
	st, _ := s.n.Store.Status(p)
	resp := &kvpb.ScanResponse{Header: s.n.header(st.Term), More: more}
	size := 0
	for i, kv := range kvs {
		// Keep a reply well under the clients' receive limit; the first
		// key always goes, so a scan always makes progress.
		if size += len(kv.Key) + len(kv.Value); i > 0 && size > MaxScanBytes {
			resp.More = true
			break
		}
		resp.Kvs = append(resp.Kvs, kv.Proto(req.GetKeysOnly()))
	}
	return resp, nil
}
