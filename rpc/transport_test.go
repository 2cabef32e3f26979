package rpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/proto/internalrpc"
	"github.com/cutkv/cutkv/topology"
)

const (
	testCluster = 0xc0ffee
	// testWait bounds every poll; never reached when all is well.
	testWait = 20 * time.Second
)

var testLog = slog.New(slog.DiscardHandler)

func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", testWait, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeReceiver records what a node receives and which peers its transport
// reported unreachable.
type fakeReceiver struct {
	mu          sync.Mutex
	calls       []receiveCall
	unreachable map[uint64]int
	// gate, if set, is received from before each Receive returns: a
	// receiver that does not keep up.
	gate chan struct{}
	err  error // returned by Receive
}

type receiveCall struct {
	from uint64
	msgs []*internalpb.GroupMessage
}

func newFakeReceiver() *fakeReceiver { return &fakeReceiver{unreachable: map[uint64]int{}} }

func (r *fakeReceiver) Receive(from uint64, msgs []*internalpb.GroupMessage) error {
	r.mu.Lock()
	r.calls = append(r.calls, receiveCall{from, msgs})
	gate, err := r.gate, r.err
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return err
}

func (r *fakeReceiver) ReportUnreachable(to uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unreachable[to]++
}

func (r *fakeReceiver) numCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *fakeReceiver) numUnreachable(id uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreachable[id]
}

// received returns the sequence numbers of every message received, in
// order, and the calls' sizes as msgsSize counts them.
func (r *fakeReceiver) received(t testing.TB, from uint64) (seqs []uint64, sizes []int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.calls {
		if c.from != from {
			t.Fatalf("message from %d, want only %d", c.from, from)
		}
		for _, m := range c.msgs {
			seqs = append(seqs, binary.BigEndian.Uint64(m.GetMessage()))
		}
		sizes = append(sizes, msgsSize(c.msgs))
	}
	return seqs, sizes
}

// seqMsg is a message carrying seq, padded to size bytes.
func seqMsg(seq uint64, size int) []*internalpb.GroupMessage {
	data := make([]byte, max(size, 8))
	binary.BigEndian.PutUint64(data, seq)
	return []*internalpb.GroupMessage{{Group: seq % 7, Message: data}}
}

// testNode is one node's raft service on a loopback gRPC server.
type testNode struct {
	id   uint64
	addr string
	recv *fakeReceiver
}

func startNode(t *testing.T, id, cluster uint64) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{id: id, addr: lis.Addr().String(), recv: newFakeReceiver()}
	srv := grpc.NewServer()
	internalrpc.RegisterRaftServer(srv, NewRaftServer(&topology.Layout{ClusterID: cluster}, id, n.recv, testLog))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return n
}

// newTestTransport returns node self's transport resolving ids through
// addrs; it is closed when the test ends.
func newTestTransport(t *testing.T, self, cluster uint64, addrs map[uint64]string, maxBatch int) (*Transport, *fakeReceiver) {
	t.Helper()
	return newTestTransportResolve(t, self, cluster, func(id uint64) (string, string, bool) {
		a, ok := addrs[id]
		return fmt.Sprint(id), a, ok
	}, maxBatch)
}

func newTestTransportResolve(t *testing.T, self, cluster uint64, resolve func(uint64) (string, string, bool), maxBatch int) (*Transport, *fakeReceiver) {
	t.Helper()
	pool := NewPool(PoolConfig{MaxMsgSize: 16 << 20})
	tr := NewTransport(self, cluster, resolve, pool, maxBatch, testLog)
	r := newFakeReceiver()
	tr.SetReceiver(r)
	t.Cleanup(func() {
		tr.Close()
		pool.Close()
	})
	return tr, r
}

// TestTransportDelivers sends both ways between two nodes: every message
// arrives, in order, marked with its sender.
func TestTransportDelivers(t *testing.T) {
	a, b := startNode(t, 1, testCluster), startNode(t, 2, testCluster)
	addrs := map[uint64]string{1: a.addr, 2: b.addr}
	ta, _ := newTestTransport(t, 1, testCluster, addrs, 1<<20)
	tb, _ := newTestTransport(t, 2, testCluster, addrs, 1<<20)
	const n = 300
	for i := range uint64(n) {
		ta.Send(2, seqMsg(i, 8+int(i%50)))
		tb.Send(1, seqMsg(1000+i, 8))
	}
	for _, c := range []struct {
		dst   *testNode
		from  uint64
		first uint64
	}{{b, 1, 0}, {a, 2, 1000}} {
		var seqs []uint64
		waitUntil(t, fmt.Sprintf("%d messages at node %d", n, c.dst.id), func() bool {
			seqs, _ = c.dst.recv.received(t, c.from)
			return len(seqs) >= n
		})
		for i, s := range seqs {
			if s != c.first+uint64(i) {
				t.Fatalf("node %d: message %d has seq %d, want %d (out of order or lost)", c.dst.id, i, s, c.first+uint64(i))
			}
		}
		if len(seqs) != n {
			t.Fatalf("node %d received %d messages, want %d", c.dst.id, len(seqs), n)
		}
	}
}

// TestTransportCoalesces queues a burst while the peer's stream cannot be
// opened yet (its address lookup is held) and checks that the burst goes
// out in few stream messages, in order, each within the batch limit.
func TestTransportCoalesces(t *testing.T) {
	b := startNode(t, 2, testCluster)
	for _, tc := range []struct {
		name     string
		maxBatch int
		size     int
	}{
		{"large batches", 1 << 20, 40},
		{"small batch limit", 1000, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.recv.mu.Lock()
			b.recv.calls = nil
			b.recv.mu.Unlock()
			hold := make(chan struct{})
			resolving := make(chan struct{}, 1)
			tr, _ := newTestTransportResolve(t, 1, testCluster, func(id uint64) (string, string, bool) {
				select {
				case resolving <- struct{}{}:
				default:
				}
				<-hold
				return "n2", b.addr, id == 2
			}, tc.maxBatch)
			const n = 1000
			tr.Send(2, seqMsg(0, tc.size))
			<-resolving // the peer's sender is stuck opening its stream
			for i := uint64(1); i < n; i++ {
				tr.Send(2, seqMsg(i, tc.size))
			}
			close(hold)
			var seqs []uint64
			var sizes []int
			waitUntil(t, "the burst to arrive", func() bool {
				seqs, sizes = b.recv.received(t, 1)
				return len(seqs) >= n
			})
			for i, s := range seqs {
				if s != uint64(i) {
					t.Fatalf("message %d has seq %d: out of order or lost", i, s)
				}
			}
			// One message fits in a batch whatever the limit; a batch
			// stops growing once it reaches the limit.
			one := msgsSize(seqMsg(0, tc.size))
			wantMax := (n*one+tc.maxBatch-1)/tc.maxBatch + 1
			if len(sizes) >= n || len(sizes) > wantMax {
				t.Fatalf("%d sends arrived in %d Receive calls, want at most %d", n, len(sizes), wantMax)
			}
			for i, sz := range sizes {
				if sz > tc.maxBatch+one {
					t.Fatalf("batch %d holds %d bytes, limit %d", i, sz, tc.maxBatch)
				}
			}
			t.Logf("%d sends in %d stream messages", n, len(sizes))
		})
	}
}

// TestTransportWrongCluster checks that a node refuses batches from
// another cluster: the stream ends with FailedPrecondition, the receiver
// never sees them, and the sending transport reports the peer unreachable.
func TestTransportWrongCluster(t *testing.T) {
	b := startNode(t, 2, testCluster)

	// The raw stream: the server ends it with FailedPrecondition.
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	stream, err := internalrpc.NewRaftClient(conn).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&internalpb.RaftBatch{ClusterId: testCluster + 1, From: 1, To: 2, Messages: seqMsg(1, 8)}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	_, err = stream.CloseAndRecv()
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stream from another cluster ended with %v, want FailedPrecondition", err)
	}

	// Through a Transport of the other cluster.
	tr, r := newTestTransport(t, 1, testCluster+1, map[uint64]string{2: b.addr}, 1<<20)
	waitUntil(t, "the peer to be reported unreachable", func() bool {
		tr.Send(2, seqMsg(2, 8))
		return r.numUnreachable(2) > 0
	})
	if n := b.recv.numCalls(); n != 0 {
		t.Fatalf("receiver called %d times with messages from another cluster", n)
	}

	// The same cluster id gets through.
	ok, _ := newTestTransport(t, 1, testCluster, map[uint64]string{2: b.addr}, 1<<20)
	ok.Send(2, seqMsg(3, 8))
	waitUntil(t, "a message from the right cluster", func() bool { return b.recv.numCalls() > 0 })
}

// TestTransportWrongRecipient checks that a batch addressed to another
// raft id (a reused address) is refused and never reaches the receiver.
func TestTransportWrongRecipient(t *testing.T) {
	b := startNode(t, 2, testCluster)
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	stream, err := internalrpc.NewRaftClient(conn).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&internalpb.RaftBatch{ClusterId: testCluster, From: 1, To: 3, Messages: seqMsg(1, 8)}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if _, err = stream.CloseAndRecv(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("batch for raft id 3 at raft id 2 ended with %v, want FailedPrecondition", err)
	}
	if n := b.recv.numCalls(); n != 0 {
		t.Fatalf("receiver called %d times with a batch for another node", n)
	}
}

// TestTransportRefusedStreamsDoNotLeak checks that streams a peer keeps
// refusing are released, not left open until the transport closes.
func TestTransportRefusedStreamsDoNotLeak(t *testing.T) {
	b := startNode(t, 2, testCluster)
	tr, r := newTestTransport(t, 1, testCluster+1, map[uint64]string{2: b.addr}, 1<<20)
	refusals := func(n int) {
		t.Helper()
		want := r.numUnreachable(2) + n
		waitUntil(t, fmt.Sprintf("%d refusals", n), func() bool {
			tr.Send(2, seqMsg(1, 8))
			return r.numUnreachable(2) >= want
		})
	}
	refusals(2)
	before := runtime.NumGoroutine()
	refusals(15)
	// Each leaked stream keeps at least one goroutine of grpc's; allow
	// some slack for the connection's own.
	after := runtime.NumGoroutine()
	t.Logf("goroutines: %d before, %d after", before, after)
	if after-before >= 10 {
		t.Fatalf("goroutines grew from %d to %d over 15 refused streams: streams leak", before, after)
	}
}

// TestTransportReceiverError checks that a batch the receiver cannot take
// (it stopped) ends the stream with Unavailable.
func TestTransportReceiverError(t *testing.T) {
	b := startNode(t, 2, testCluster)
	b.recv.err = errors.New("stopped")
	conn, err := grpc.NewClient(b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	stream, err := internalrpc.NewRaftClient(conn).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&internalpb.RaftBatch{ClusterId: testCluster, From: 1, To: 2, Messages: seqMsg(1, 8)}); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream ended with %v, want Unavailable", err)
	}
	// A clean end of stream is acknowledged.
	b.recv.err = nil
	stream, err = internalrpc.NewRaftClient(conn).Send(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&internalpb.RaftBatch{ClusterId: testCluster, From: 1, To: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatalf("clean close: %v", err)
	}
}

// TestTransportUnreachable checks that a peer without an address, or with
// nothing listening at it, is reported unreachable (again and again).
func TestTransportUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	tr, r := newTestTransport(t, 1, testCluster, map[uint64]string{3: dead}, 1<<20)
	tr.Send(9, seqMsg(1, 8)) // no address
	waitUntil(t, "unknown peer 9 reported unreachable", func() bool { return r.numUnreachable(9) > 0 })
	waitUntil(t, "dead peer 3 reported unreachable twice", func() bool {
		tr.Send(3, seqMsg(1, 8))
		return r.numUnreachable(3) >= 2
	})
}

// TestTransportFullQueue checks that Send never blocks: once a peer's
// queue is full the messages are dropped and the peer reported.
func TestTransportFullQueue(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	tr, r := newTestTransportResolve(t, 1, testCluster, func(uint64) (string, string, bool) {
		<-hold
		return "", "", false
	}, 1<<20)
	for i := range 5000 {
		tr.Send(2, seqMsg(uint64(i), 8))
	}
	if r.numUnreachable(2) == 0 {
		t.Fatal("5000 sends to a stuck peer were all queued: the queue is unbounded or Send blocked")
	}
}

// TestTransportClosePromptly checks that Close returns while a peer is
// stuck: one that accepts TCP connections and never answers, and one whose
// receiver stopped reading.
func TestTransportClosePromptly(t *testing.T) {
	black, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer black.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := black.Accept()
			if err != nil {
				return
			}
			accepted <- c // hold it open, say nothing
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()

	slow := startNode(t, 3, testCluster)
	gate := make(chan struct{})
	slow.recv.mu.Lock()
	slow.recv.gate = gate
	slow.recv.mu.Unlock()
	defer close(gate)

	pool := NewPool(PoolConfig{MaxMsgSize: 16 << 20})
	defer pool.Close()
	addrs := map[uint64]string{2: black.Addr().String(), 3: slow.addr}
	tr := NewTransport(1, testCluster, func(id uint64) (string, string, bool) { a, ok := addrs[id]; return fmt.Sprint(id), a, ok }, pool, 1<<20, testLog)
	tr.SetReceiver(newFakeReceiver())

	tr.Send(2, seqMsg(1, 8))
	select {
	case c := <-accepted:
		accepted <- c
	case <-time.After(testWait):
		t.Fatal("the transport never connected to the silent peer")
	}
	// Enough to fill the flow-control windows of the stuck receiver.
	for i := range 200 {
		tr.Send(3, seqMsg(uint64(i), 32<<10))
	}
	waitUntil(t, "the slow receiver to be stuck", func() bool { return slow.recv.numCalls() > 0 })

	done := make(chan struct{})
	go func() {
		tr.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatal("Close did not return with stuck peers")
	}
	tr.Close()               // idempotent
	tr.Send(2, seqMsg(2, 8)) // after Close: dropped, no panic
}

func TestLimits(t *testing.T) {
	cases := []struct {
		in, want Limits
	}{
		{Limits{}, Limits{MaxKeySize: 4 << 10, MaxValueSize: 1 << 20, MaxTxnOps: 128}},
		{Limits{MaxKeySize: -1, MaxValueSize: -5}, Limits{MaxKeySize: 4 << 10, MaxValueSize: 1 << 20, MaxTxnOps: 128}},
		{Limits{MaxKeySize: 100, MaxValueSize: 200, MaxTxnOps: 7}, Limits{MaxKeySize: 100, MaxValueSize: 200, MaxTxnOps: 7}},
		{Limits{MaxKeySize: 100}, Limits{MaxKeySize: 100, MaxValueSize: 1 << 20, MaxTxnOps: 128}},
	}
	for _, tc := range cases {
		got := tc.in
		got.Validate()
		if got != tc.want {
			t.Errorf("Validate(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
		// The receive limit fits a request with the largest key and value
		// (and protobuf framing), and a raft batch carrying one such entry.
		if m := got.MaxRequestSize(); m < 2*(got.MaxKeySize+got.MaxValueSize) || m < got.MaxKeySize+got.MaxValueSize+64<<10 {
			t.Errorf("%+v: MaxRequestSize %d is too small", got, m)
		}
	}
	if got := (Limits{MaxKeySize: 4 << 10, MaxValueSize: 1 << 20}).MaxRequestSize(); got != 2*(4<<10+1<<20)+1<<20 {
		t.Errorf("MaxRequestSize of the defaults = %d", got)
	}
	if opts := ServerOptions(Limits{MaxKeySize: 1, MaxValueSize: 1}, ConnLimits{}); len(opts) == 0 {
		t.Error("no server options")
	}
}
