package rpc

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/raftstore"
)

// Cut versions that arrive from outside — a client's request header, a
// peer's request or reply, a gossip broadcast — raise this node's known
// version only once group 0 is known to have allocated them (DESIGN.md,
// consistent cut rule 8): a version at or below known is taken at once;
// one above it costs a linearizable read of group 0's highest allocated
// version (one read at a time per node; what it returns is remembered),
// and is refused above that, never clamped. Every entry a node proposes
// carries its known version, so a bogus version let in once would stay
// in the logs and fail every later cut.

// allocatedWait bounds the read of group 0's allocated version.
const allocatedWait = 2 * time.Second

// versionGate remembers group 0's highest allocated version as last read.
type versionGate struct {
	// read asks group 0 for its highest allocated version; nil:
	// Node.readAllocated (tests set it).
	read func(context.Context) (uint64, error)

	mu        sync.Mutex    // one read of group 0 at a time
	reads     atomic.Uint64 // reads of group 0 begun, numbered from 1
	answered  uint64        // the newest read that answered; REQUIRES mu held
	allocated atomic.Uint64 // highest allocated version read so far
	gossip    atomic.Uint64 // highest version gossip announced
	once      sync.Once
	gossipc   chan struct{} // see wake
}

// wake is the channel GossipLearned returns.
func (g *versionGate) wake() chan struct{} {
	g.once.Do(func() { g.gossipc = make(chan struct{}, 1) })
	return g.gossipc
}

// raiseTo sets a to v if v is higher; a only grows, whatever the order
// concurrent callers run in.
func raiseTo(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// admitVersion raises the clock to v, a version named by field of a
// request or reply from outside, if group 0 allocated it. It is
// ErrInvalidArgument when group 0 allocated no such version, and
// ErrUnconfirmed when group 0 cannot say.
func (n *Node) admitVersion(ctx context.Context, field string, v uint64) error {
	if v <= n.Clock.Load() {
		return nil
	}
	g := &n.versions
	arrived := g.reads.Load()
	if n.Meta != nil {
		// This node's replica of group 0 lags its leader, but whatever
		// it applied was allocated: most versions are admitted here,
		// without a read, once the allocation reached this replica.
		raiseTo(&g.allocated, n.Meta.LastCut())
	}
	if v > g.allocated.Load() {
		if err := n.confirmAllocated(ctx, v, arrived); err != nil {
			return fmt.Errorf("%w: %s %d is above this node's known version %d and group 0 could not confirm it: %v",
				ErrUnconfirmed, field, v, n.Clock.Load(), err)
		}
		if max := g.allocated.Load(); v > max {
			return fmt.Errorf("%w: %s %d was never allocated (group 0's highest cut version is %d)", ErrInvalidArgument, field, v, max)
		}
	}
	if n.Clock.Raise(v) {
		n.PokeCuts()
	}
	return nil
}

// confirmAllocated brings allocated up to at least every version group 0
// had allocated when the call arrived (when the count of reads begun was
// arrived), unless v is below it already. A read that began after the
// call arrived and answered is as good as one of its own (a version
// allocated before the call was allocated before that read began), so
// callers that queued behind one read share the next: a flood of
// unallocated versions costs one read at a time, not one per request. A
// read that failed is not shared (it may have failed for its caller's
// context alone).
func (n *Node) confirmAllocated(ctx context.Context, v, arrived uint64) error {
	g := &n.versions
	g.mu.Lock()
	defer g.mu.Unlock()
	if v <= g.allocated.Load() || g.answered > arrived {
		return nil
	}
	read := g.read
	if read == nil {
		read = n.readAllocated
	}
	num := g.reads.Add(1)
	max, err := read(ctx)
	if err != nil {
		return err
	}
	g.answered = num
	raiseTo(&g.allocated, max)
	return nil
}

// readAllocated asks group 0's leader for the highest allocated version.
func (n *Node) readAllocated(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, allocatedWait)
	defer cancel()
	r, err := callLeader(ctx, n, 0, func(cc *grpc.ClientConn, cctx context.Context) (*internalpb.AllocatedCutResponse, error) {
		if cc == nil {
			return NewCutServer(n).AllocatedCut(cctx, &internalpb.AllocatedCutRequest{})
		}
		return internalrpc.NewCutServiceClient(cc).AllocatedCut(cctx, &internalpb.AllocatedCutRequest{})
	})
	return r.GetVersion(), err
}

// AllocatedCut answers group 0's highest allocated version, read
// linearizably on its leader.
func (s *CutServer) AllocatedCut(ctx context.Context, _ *internalpb.AllocatedCutRequest) (*internalpb.AllocatedCutResponse, error) {
	n := s.n
	if n.Meta == nil {
		return nil, toStatus(&raftstore.NotLeaderError{Group: 0}, "")
	}
	if st, ok := n.Store.Status(0); !ok || !st.IsLeader {
		return nil, toStatus(&raftstore.NotLeaderError{Group: 0, Leader: st.Leader}, n.leaderHintOf(0))
	}
	if err := n.Store.ReadIndex(ctx, 0); err != nil {
		return nil, toStatus(err, n.leaderHintOf(0))
	}
	return &internalpb.AllocatedCutResponse{Version: n.Meta.LastCut()}, nil
}

// LearnGossip takes a version announced by gossip. It never blocks (it is
// called from memberlist's delivery): the highest version announced is
// admitted in the background (GossipLearned, AdmitGossiped).
func (n *Node) LearnGossip(v uint64) {
	raiseTo(&n.versions.gossip, v)
	if v > n.Clock.Load() {
		select {
		case n.versions.wake() <- struct{}{}:
		default:
		}
	}
}

// GossipLearned is the channel that says LearnGossip took a version
// above the clock; the node's loop then calls AdmitGossiped.
func (n *Node) GossipLearned() <-chan struct{} { return n.versions.wake() }

// AdmitGossiped admits the highest version gossip announced so far
// (admitVersion, as a request's marker), and returns it.
func (n *Node) AdmitGossiped(ctx context.Context) (uint64, error) {
	v := n.versions.gossip.Load()
	return v, n.admitVersion(ctx, "gossiped cut version", v)
}
