package rpc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
)

// markerPeer is a participant service whose Status replies carry the
// marker it is told to, and nothing else.
type markerPeer struct {
	internalrpc.UnimplementedParticipantServer
	marker atomic.Uint64
}

func (p *markerPeer) Status(context.Context, *internalpb.StatusRequest) (*internalpb.StatusResponse, error) {
	return &internalpb.StatusResponse{State: internalpb.TxnState_TXN_STATE_REFUSED, CutVersion: p.marker.Load()}, nil
}

// startMarkerPeer serves peer on a local port and returns its address.
func startMarkerPeer(t *testing.T, peer *markerPeer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	internalrpc.RegisterParticipantServer(srv, peer)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestMarkerClientInterceptor: the reply of a call through the pool is
// merged into the clock of the pool's node by the pool's connection
// alone — no handler or caller code raises it — once group 0 says the
// version was allocated; a reply naming a version group 0 never allocated
// fails the call (not retried, InvalidArgument underneath) and leaves the
// clock where it was; a known one costs no read of group 0.
func TestMarkerClientInterceptor(t *testing.T) {
	peer := &markerPeer{}
	addr := startMarkerPeer(t, peer)
	n := newGateNode()
	n.Clock.Raise(1)
	n.allocated.Store(7)
	pool := NewPool(PoolConfig{MaxMsgSize: 1 << 20})
	t.Cleanup(pool.Close)
	pool.SetMarker(n.Node)
	conn, err := pool.Conn("peer", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := internalrpc.NewParticipantClient(conn)
	status := func() error {
		_, err := pc.Status(context.Background(), &internalpb.StatusRequest{Partition: 1})
		return err
	}

	peer.marker.Store(7)
	if err := status(); err != nil {
		t.Fatalf("a reply with allocated version 7: %v", err)
	}
	if got := n.Clock.Load(); got != 7 {
		t.Fatalf("clock %d after a reply with marker 7, want 7 (merged by the pool's interceptor)", got)
	}

	peer.marker.Store(1 << 40)
	err = status()
	if !errors.Is(err, ErrInvalidArgument) || !isRefusedReply(err) {
		t.Fatalf("a reply with unallocated version 2^40: %v, want a refused reply (ErrInvalidArgument)", err)
	}
	if got := n.Clock.Load(); got != 7 {
		t.Fatalf("a refused reply moved the clock to %d", got)
	}

	reads := n.reads.Load()
	peer.marker.Store(5)
	if err := status(); err != nil || n.reads.Load() != reads || n.Clock.Load() != 7 {
		t.Fatalf("a reply with known version 5: %v after %d more reads, clock %d; want nil, no read, clock 7", err, n.reads.Load()-reads, n.Clock.Load())
	}
}

// TestPoolWithoutMarker: a pool whose node was never set fails a reply
// that carries a marker instead of handing it on unmerged.
func TestPoolWithoutMarker(t *testing.T) {
	peer := &markerPeer{}
	addr := startMarkerPeer(t, peer)
	pool := NewPool(PoolConfig{MaxMsgSize: 1 << 20})
	t.Cleanup(pool.Close)
	conn, err := pool.Conn("peer", addr)
	if err != nil {
		t.Fatal(err)
	}
	pc := internalrpc.NewParticipantClient(conn)
	if _, err := pc.Status(context.Background(), &internalpb.StatusRequest{Partition: 1}); err != nil {
		t.Fatalf("a reply without a marker: %v", err)
	}
	peer.marker.Store(3)
	if _, err := pc.Status(context.Background(), &internalpb.StatusRequest{Partition: 1}); !errors.Is(err, ErrInternal) {
		t.Fatalf("a reply with marker 3 and no node set: %v, want ErrInternal", err)
	}
}
