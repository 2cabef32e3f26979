package rpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/raftstore"
	"github.com/cutkv/cutkv/topology"
)

// Receiver takes raft messages that arrived from a peer
// (raftstore.Store implements it).
type Receiver interface {
	Receive(from uint64, msgs []*internalpb.GroupMessage) error
	ReportUnreachable(to uint64)
}

// Transport sends raft messages to peers over one long-lived gRPC client
// stream per peer. Everything queued for a peer while the previous batch
// was on the wire goes out as one RaftBatch.
type Transport struct {
	self      uint64
	clusterID uint64
	resolve   func(raftID uint64) (id, addr string, ok bool)
	pool      *Pool
	log       *slog.Logger
	maxBatch  int // bytes per batch

	recvMu sync.RWMutex
	recv   Receiver

	mu     sync.Mutex
	peers  map[uint64]*peer // REQUIRES: mu held
	closed bool
	wg     sync.WaitGroup
	stopc  chan struct{}
}

type peer struct {
	id    uint64
	queue chan []*internalpb.GroupMessage
}

// NewTransport returns a transport for node self of cluster clusterID.
// resolve maps a peer's raft id to its member id and peer address.
// maxBatch bounds a batch's bytes (it must fit the peers' receive limit).
func NewTransport(self, clusterID uint64, resolve func(uint64) (id, addr string, ok bool), pool *Pool, maxBatch int, log *slog.Logger) *Transport {
	return &Transport{
		self: self, clusterID: clusterID, resolve: resolve, pool: pool, maxBatch: maxBatch,
		log: log.With("component", "transport"), peers: map[uint64]*peer{}, stopc: make(chan struct{}),
	}
}

// SetReceiver sets where incoming messages and unreachable reports go.
func (t *Transport) SetReceiver(r Receiver) {
	t.recvMu.Lock()
	t.recv = r
	t.recvMu.Unlock()
}

func (t *Transport) receiver() Receiver {
	t.recvMu.RLock()
	defer t.recvMu.RUnlock()
	return t.recv
}

// Send implements raftstore.Transport. It never blocks: when a peer's
// queue is full the messages are dropped and the peer reported
// unreachable, and raft retransmits.
func (t *Transport) Send(to uint64, msgs []*internalpb.GroupMessage) {
	p := t.peer(to)
	if p == nil {
		return
	}
	select {
	case p.queue <- msgs:
	default:
		if r := t.receiver(); r != nil {
			r.ReportUnreachable(to)
		}
	}
}

func (t *Transport) peer(id uint64) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	p := t.peers[id]
	if p == nil {
		p = &peer{id: id, queue: make(chan []*internalpb.GroupMessage, 1024)}
		t.peers[id] = p
		t.wg.Add(1)
		go t.runPeer(p)
	}
	return p
}

// Close stops every peer's sender.
func (t *Transport) Close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.stopc)
	t.mu.Unlock()
	t.wg.Wait()
}

func (t *Transport) runPeer(p *peer) {
	defer t.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-t.stopc
		cancel()
	}()
	var stream internalrpc.Raft_SendClient
	backoff := 50 * time.Millisecond
	for {
		var first []*internalpb.GroupMessage
		select {
		case <-t.stopc:
			if stream != nil {
				_, _ = stream.CloseAndRecv()
			}
			return
		case first = <-p.queue:
		}
		batch := &internalpb.RaftBatch{ClusterId: t.clusterID, From: t.self, To: p.id, Messages: first}
		size := msgsSize(first)
	fill:
		for size < t.maxBatch {
			select {
			case more := <-p.queue:
				batch.Messages = append(batch.Messages, more...)
				size += msgsSize(more)
			default:
				break fill
			}
		}
		if stream == nil {
			s, err := t.openStream(ctx, p.id)
			if err != nil {
				t.unreachable(p.id, err, backoff)
				backoff = min(backoff*2, time.Second)
				continue
			}
			stream = s
		}
		if err := stream.Send(batch); err != nil {
			if err == io.EOF {
				// The peer ended the stream (a refusal, a restart).
				// Receiving its status says why, and releases the stream,
				// which would otherwise live until Close.
				_, err = stream.CloseAndRecv()
			}
			t.log.Debug("send to peer failed", "peer", p.id, "err", err)
			stream = nil
			t.unreachable(p.id, err, backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// unreachable reports a lost batch and waits a little before the next try,
// dropping whatever queued meanwhile (raft resends what matters).
func (t *Transport) unreachable(id uint64, err error, wait time.Duration) {
	t.log.Debug("peer unreachable", "peer", id, "err", err)
	if r := t.receiver(); r != nil {
		r.ReportUnreachable(id)
	}
	select {
	case <-t.stopc:
	case <-time.After(wait):
	}
}

func (t *Transport) openStream(ctx context.Context, id uint64) (internalrpc.Raft_SendClient, error) {
	member, addr, ok := t.resolve(id)
	if !ok {
		return nil, fmt.Errorf("rpc: no address for raft id %d", id)
	}
	conn, err := t.pool.Conn(member, addr)
	if err != nil {
		return nil, err
	}
	return internalrpc.NewRaftClient(conn).Send(ctx)
}

func msgsSize(msgs []*internalpb.GroupMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.GetMessage()) + 16
	}
	return n
}

// RaftServer is the receiving side of the transport.
type RaftServer struct {
	internalrpc.UnimplementedRaftServer
	layout    *topology.Layout
	clusterID uint64
	self      uint64
	recv      Receiver
	log       *slog.Logger
	store     *raftstore.Store // nil: no materializations served
}

// NewRaftServer returns the raft service of node self (raft id) of the
// cluster laid out by l.
func NewRaftServer(l *topology.Layout, self uint64, recv Receiver, log *slog.Logger) *RaftServer {
	return &RaftServer{layout: l, clusterID: l.ClusterID, self: self, recv: recv, log: log.With("component", "raft-server")}
}

// Send receives a peer's stream of batches.
func (s *RaftServer) Send(stream internalrpc.Raft_SendServer) error {
	for {
		b, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&internalpb.RaftAck{})
		}
		if err != nil {
			return err
		}
		if b.GetClusterId() != s.clusterID {
			s.log.Warn("refused raft messages from another cluster", "their_cluster", fmt.Sprintf("%x", b.GetClusterId()), "from", b.GetFrom())
			return toStatus(fmt.Errorf("%w: cluster %x, this node is in %x", ErrWrongCluster, b.GetClusterId(), s.clusterID), "")
		}
		if b.GetTo() != s.self {
			return toStatus(fmt.Errorf("%w: batch for raft id %d reached raft id %d (an address reused?)", ErrWrongCluster, b.GetTo(), s.self), "")
		}
		if who := authenticatedPeer(stream.Context()); who != "" {
			// The batch's sender is the member the certificate names:
			// one member cannot speak for another.
			if m, _ := s.layout.Member(who); m.RaftID != b.GetFrom() {
				s.log.Warn("refused raft messages claiming another sender", "peer", who, "claimed_from", b.GetFrom())
				return toStatus(fmt.Errorf("%w: member %s sent a raft batch as raft id %d", ErrPermissionDenied, who, b.GetFrom()), "")
			}
		}
		if err := s.recv.Receive(b.GetFrom(), b.GetMessages()); err != nil {
			// The store takes nothing any more (stopped, or stopped
			// serving); what it refuses it drops and counts itself.
			return toStatus(fmt.Errorf("%w: raft messages not taken: %w", ErrUnavailable, err), "")
		}
	}
}
