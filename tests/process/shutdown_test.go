package process

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// dial opens a raw gRPC connection to one node, closed when the test ends.
func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// localKeys returns how many keys the node at addr holds in its own
// replicas of the data partitions, without asking any other node.
func localKeys(ctx context.Context, cc *grpc.ClientConn) (uint64, error) {
	st, err := kvrpc.NewClusterClient(cc).Status(ctx, &kvpb.StatusRequest{LocalOnly: true})
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, g := range st.GetGroups() {
		if g.GetId() != 0 {
			n += g.GetKeys()
		}
	}
	return n, nil
}

// putKeys puts count keys prefix/NN = value-of(key) through the client and
// fails the test on any error.
func putKeys(t testing.TB, c *Cluster, prefix string, count int) []string {
	t.Helper()
	cl := c.Client()
	var keys []string
	for i := 0; i < count; i++ {
		k := fmt.Sprintf("%s/%03d", prefix, i)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.Put(ctx, []byte(k), []byte("v-"+k))
		cancel()
		if err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		keys = append(keys, k)
	}
	return keys
}

// getKeys reads every key back through the client.
func getKeys(t testing.TB, c *Cluster, keys []string) {
	t.Helper()
	cl := c.Client()
	for _, k := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		kv, err := cl.Get(ctx, []byte(k))
		cancel()
		if err != nil || string(kv.Value) != "v-"+k {
			t.Errorf("get %s: %q, %v; want %q", k, kv.Value, err, "v-"+k)
		}
	}
}

// TestGracefulShutdown: SIGTERM makes a node exit 0 within
// --shutdown-timeout; the others see it "left" and keep serving writes;
// restarted without any bootstrap flag it is ready and holds every key,
// those written while it was away included.
func TestGracefulShutdown(t *testing.T) {
	const shutdownTimeout = 5 * time.Second
	c := NewCluster(t, Spec{Bin: bin.Kvnode, ShutdownTimeout: shutdownTimeout})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	before := putKeys(t, c, "before", 40)

	code, took := n1.Term(shutdownTimeout + 10*time.Second)
	t.Logf("n1 exited with status %d %v after SIGTERM", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("n1: exit status %d after SIGTERM, want 0; stderr:\n%s", code, Tail(n1.Stderr(), 20))
	}
	if took > shutdownTimeout {
		t.Errorf("n1 took %v to shut down, more than --shutdown-timeout %v", took, shutdownTimeout)
	}
	for _, n := range []*Node{n2, n3} {
		waitState(t, n.GRPC, "n1", "left", 5*time.Second)
	}

	// Two nodes are a quorum: writes go on.
	during := putKeys(t, c, "during", 40)

	// No --initial-cluster, --initial-cluster-token or --partitions: the
	// data dir knows its cluster.
	n1.Bootstrap = false
	n1.Restart()
	if args := strings.Join(n1.args(), " "); strings.Contains(args, "--initial-cluster") || strings.Contains(args, "--partitions") {
		t.Fatalf("restart flags carry bootstrap flags: %s", args)
	}
	waitState(t, n2.GRPC, "n1", "alive", 10*time.Second)

	// n1's own replicas hold every key: those from its WAL and those it
	// caught up on.
	cc := dial(t, n1.GRPC)
	wantKeys := uint64(len(before) + len(during))
	ok, last := WaitFor(10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, err := localKeys(ctx, cc)
		return err == nil && n == wantKeys, fmt.Sprintf("%d keys, err %v", n, err)
	})
	if !ok {
		t.Fatalf("restarted n1 does not hold the %d keys; last: %s", wantKeys, last)
	}
	// And it takes part in the quorum: with n2 gone, n1 and n3 serve
	// every key.
	n2.Kill9()
	getKeys(t, c, append(before, during...))
}

// TestSecondSignalExitsAtOnce: a node whose graceful shutdown cannot end
// soon (a request it forwarded hangs on a stopped leader, so draining
// waits for --shutdown-timeout) exits at once, with status 1, on a second
// SIGTERM.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	c := NewCluster(t, Spec{Bin: bin.Kvnode, Configure: func(n *Node) {
		if n.ID == "n3" {
			n.Flags = append(n.Flags, "--shutdown-timeout", "60s") // the last value wins
		}
	}})
	n3 := c.Nodes[2]
	cc := dial(t, n3.GRPC)

	// A key of a partition that n3 does not lead, as n3 sees it.
	var key string
	ok, last := WaitFor(10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rt, err := kvrpc.NewClusterClient(cc).Routing(ctx, &kvpb.RoutingRequest{})
		if err != nil {
			return false, err.Error()
		}
		for i := 0; i < 1000; i++ {
			k := fmt.Sprintf("slow/%d", i)
			lead := rt.GetLeaders()[keyspace.PartitionOf([]byte(k), rt.GetPartitions())-1]
			if lead == "n1" || lead == "n2" {
				key = k
				return true, ""
			}
		}
		return false, fmt.Sprintf("leaders %v", rt.GetLeaders())
	})
	if !ok {
		t.Fatalf("no partition led by n1 or n2: %s", last)
	}

	// Freeze n1 and n2: n3 cannot elect anyone, and what it forwards to
	// the old leader is never answered.
	for _, n := range c.Nodes[:2] {
		n.Signal(syscall.SIGSTOP)
		defer n.current().signal(syscall.SIGCONT)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	putDone := make(chan error, 1)
	go func() {
		_, err := kvrpc.NewKVClient(cc).Put(ctx, &kvpb.PutRequest{Key: []byte(key), Value: []byte("x")})
		putDone <- err
	}()
	select {
	case err := <-putDone:
		t.Fatalf("precondition: put %q through n3 returned at once (%v); it should hang on the frozen leader", key, err)
	case <-time.After(300 * time.Millisecond):
	}

	n3.Signal(syscall.SIGTERM)
	if n3.current().wait(1 * time.Second) {
		code, desc := n3.current().exit()
		t.Fatalf("precondition: n3 finished its shutdown within 1s (%s, %d) although a request is in flight", desc, code)
	}
	n3.Signal(syscall.SIGTERM)
	sent := time.Now()
	code, desc := n3.WaitExit(5 * time.Second)
	took := n3.current().exitedAt.Sub(sent)
	t.Logf("n3: second SIGTERM: %s after %v", desc, took.Round(time.Millisecond))
	if code != 1 {
		t.Errorf("n3: %s after a second SIGTERM, want exit status 1", desc)
	}
	if took > 2*time.Second {
		t.Errorf("n3 took %v to exit after the second SIGTERM; want at once", took)
	}
	if s := n3.Stderr(); !strings.Contains(s, "second signal") {
		t.Errorf("n3 stderr does not mention the second signal:\n%s", Tail(s, 10))
	}
	// The put was never answered by n3 with success.
	select {
	case err := <-putDone:
		if err == nil {
			t.Errorf("put through n3 succeeded while n1 and n2 were frozen")
		}
	case <-time.After(5 * time.Second):
		t.Errorf("put through n3 still pending 5s after n3 exited")
	}
}
