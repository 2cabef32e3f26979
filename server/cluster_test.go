package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// put writes through node i, retrying while the cluster elects.
func put(t *testing.T, c *clustertest.Cluster, i int, k, v string) {
	t.Helper()
	clustertest.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.KV(i).Put(ctx, &kvpb.PutRequest{Key: []byte(k), Value: []byte(v)})
		return err
	})
}

func TestReplicationAndForwarding(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	for k := 0; k < 60; k++ {
		put(t, c, k%3, fmt.Sprintf("key-%02d", k), fmt.Sprintf("val-%d", k))
	}
	// Every node answers every key (forwarding to the leader).
	for i := 0; i < 3; i++ {
		for k := 0; k < 60; k++ {
			resp, err := c.KV(i).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte(fmt.Sprintf("key-%02d", k))})
			if err != nil {
				t.Fatalf("get via n%d: %v", i+1, err)
			}
			if got := string(resp.GetKv().GetValue()); got != fmt.Sprintf("val-%d", k) {
				t.Fatalf("get key-%02d via n%d = %q", k, i+1, got)
			}
		}
	}
	// Scan merges partitions in key order.
	resp, err := c.KV(1).Scan(ctxT(t, 5*time.Second), &kvpb.ScanRequest{Start: []byte("key-10"), End: []byte("key-20")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetKvs()) != 10 || string(resp.GetKvs()[0].GetKey()) != "key-10" || string(resp.GetKvs()[9].GetKey()) != "key-19" {
		t.Fatalf("scan returned %d kvs: %v", len(resp.GetKvs()), resp.GetKvs())
	}
	for i := 1; i < len(resp.GetKvs()); i++ {
		if bytes.Compare(resp.GetKvs()[i-1].GetKey(), resp.GetKvs()[i].GetKey()) >= 0 {
			t.Fatalf("scan out of order at %d", i)
		}
	}
	limited, err := c.KV(2).Scan(ctxT(t, 5*time.Second), &kvpb.ScanRequest{Limit: 7})
	if err != nil || len(limited.GetKvs()) != 7 || !limited.GetMore() || string(limited.GetKvs()[0].GetKey()) != "key-00" {
		t.Fatalf("scan limit 7: %v %d more=%v", err, len(limited.GetKvs()), limited.GetMore())
	}
	// Every replica applied every write: the replicas' key counts agree.
	clustertest.Eventually(t, 10*time.Second, func() error {
		st, err := kvrpc.NewClusterClient(c.Conn(0)).Status(ctxT(t, 5*time.Second), &kvpb.StatusRequest{})
		if err != nil {
			return err
		}
		total := uint64(0)
		for _, g := range st.GetGroups() {
			if g.GetId() != 0 {
				total += g.GetKeys()
			}
			if g.GetLeader() == "" {
				return fmt.Errorf("group %d has no leader", g.GetId())
			}
		}
		if total != 60 {
			return fmt.Errorf("status counts %d keys, want 60", total)
		}
		for i := 0; i < 3; i++ {
			local, err := kvrpc.NewClusterClient(c.Conn(i)).Status(ctxT(t, 5*time.Second), &kvpb.StatusRequest{LocalOnly: true})
			if err != nil {
				return err
			}
			for _, g := range local.GetGroups() {
				if g.GetAppliedIndex() < st.GetGroups()[g.GetId()].GetCommitIndex() {
					return fmt.Errorf("n%d group %d applied %d < leader commit %d", i+1, g.GetId(), g.GetAppliedIndex(), st.GetGroups()[g.GetId()].GetCommitIndex())
				}
			}
		}
		return nil
	})
	// Delete.
	del, err := c.KV(0).Delete(ctxT(t, 5*time.Second), &kvpb.DeleteRequest{Key: []byte("key-05")})
	if err != nil || del.GetDeleted() != 1 {
		t.Fatalf("delete: %v %v", err, del)
	}
	got, err := c.KV(2).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte("key-05")})
	if err != nil || got.GetKv() != nil {
		t.Fatalf("deleted key still there: %v %v", err, got)
	}
}

func TestLeaderFailover(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	put(t, c, 0, "k", "v1")
	p := keyspace.PartitionOf([]byte("k"), 4)
	leader := -1
	for i := 0; i < 3; i++ {
		if st, _ := c.Node(i).Store().Status(p); st.IsLeader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no leader for the key's partition")
	}
	c.Kill(leader)
	other := (leader + 1) % 3
	start := time.Now()
	put(t, c, other, "k", "v2")
	t.Logf("write succeeded %v after killing the leader n%d", time.Since(start), leader+1)
	resp, err := c.KV((leader+2)%3).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte("k")})
	if err != nil || string(resp.GetKv().GetValue()) != "v2" {
		t.Fatalf("after failover get = %v, %v", resp, err)
	}
	// The killed node comes back and catches up.
	c.Restart(leader)
	clustertest.Eventually(t, 10*time.Second, func() error {
		st, _ := c.Node(leader).Store().Status(p)
		lst, _ := c.Node(other).Store().Status(p)
		if st.Applied < lst.Commit || lst.Commit == 0 {
			return fmt.Errorf("restarted node applied %d, cluster commit %d", st.Applied, lst.Commit)
		}
		return nil
	})
}

func TestRestartedNodeCatchesUp(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	c.Stop(2)
	for k := 0; k < 100; k++ {
		put(t, c, k%2, fmt.Sprintf("k%03d", k), "v")
	}
	c.Restart(2)
	// Its own replicas catch up: with the other two killed, it cannot
	// serve, so check through its local status against the others'.
	clustertest.Eventually(t, 15*time.Second, func() error {
		for _, g := range c.Node(2).Store().Groups() {
			st, _ := c.Node(2).Store().Status(g)
			ref, _ := c.Node(0).Store().Status(g)
			if ref.Commit == 0 {
				ref, _ = c.Node(1).Store().Status(g)
			}
			if st.Applied < ref.Commit {
				return fmt.Errorf("group %d: applied %d < commit %d", g, st.Applied, ref.Commit)
			}
		}
		return nil
	})
	// Now only n3 and one other are up: every key still readable.
	c.Kill(0)
	for k := 0; k < 100; k++ {
		key := fmt.Sprintf("k%03d", k)
		clustertest.Eventually(t, 10*time.Second, func() error {
			resp, err := c.KV(2).Get(ctxT(t, 3*time.Second), &kvpb.GetRequest{Key: []byte(key)})
			if err != nil {
				return err
			}
			if resp.GetKv() == nil {
				t.Fatalf("%s lost after restart", key)
			}
			return nil
		})
	}
}

func TestAllNodesKilledKeepAcknowledgedWrites(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	for k := 0; k < 50; k++ {
		put(t, c, k%3, fmt.Sprintf("k%02d", k), fmt.Sprint(k))
	}
	for i := 0; i < 3; i++ {
		c.Kill(i)
	}
	for i := 0; i < 3; i++ {
		c.StartNode(i)
	}
	cli := c.KV(1)
	for k := 0; k < 50; k++ {
		key := fmt.Sprintf("k%02d", k)
		clustertest.Eventually(t, 15*time.Second, func() error {
			resp, err := cli.Get(ctxT(t, 3*time.Second), &kvpb.GetRequest{Key: []byte(key)})
			if err != nil {
				return err
			}
			if string(resp.GetKv().GetValue()) != fmt.Sprint(k) {
				t.Fatalf("%s = %q after killing and restarting all nodes", key, resp.GetKv().GetValue())
			}
			return nil
		})
	}
}

func TestLimitsAndBadInput(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	kv := c.KV(0)
	cases := []struct {
		name string
		req  *kvpb.PutRequest
	}{
		{"empty key", &kvpb.PutRequest{Key: nil, Value: []byte("v")}},
		{"key over 4 KiB", &kvpb.PutRequest{Key: bytes.Repeat([]byte("k"), 4<<10+1), Value: []byte("v")}},
		{"value over 1 MiB", &kvpb.PutRequest{Key: []byte("k"), Value: make([]byte, 1<<20+1)}},
	}
	for _, tc := range cases {
		_, err := kv.Put(ctxT(t, 5*time.Second), tc.req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", tc.name, err)
		}
	}
	if _, err := kv.Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("get empty key: %v", err)
	}
	// The largest legal request is accepted.
	if _, err := kv.Put(ctxT(t, 5*time.Second), &kvpb.PutRequest{Key: bytes.Repeat([]byte("k"), 4<<10), Value: make([]byte, 1<<20)}); err != nil {
		t.Fatalf("largest legal put: %v", err)
	}
	resp, err := kv.Scan(ctxT(t, 5*time.Second), &kvpb.ScanRequest{KeysOnly: true})
	if err != nil || len(resp.GetKvs()) != 1 {
		t.Fatalf("after refused puts the store holds %d keys (%v), want only the legal one", len(resp.GetKvs()), err)
	}
	// Health and reflection are served.
	h, err := healthpb.NewHealthClient(c.Conn(0)).Check(ctxT(t, 5*time.Second), &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(c.Conn(0)).ServerReflectionInfo(ctxT(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	services := map[string]bool{}
	for _, sv := range rr.GetListServicesResponse().GetService() {
		services[sv.GetName()] = true
	}
	for _, want := range []string{"cutkv.kv.v1.KV", "cutkv.kv.v1.Cluster", "grpc.health.v1.Health"} {
		if !services[want] {
			t.Errorf("reflection does not list %s (lists %v)", want, services)
		}
	}
}

func TestDataDirIdentityAndPorts(t *testing.T) {
	c := clustertest.Start(t, 1, clustertest.Options{Partitions: 2})
	cfg := c.Config(0)

	// A second process on the same data dir is refused.
	dup := cfg
	dup.GRPCAddr, dup.GossipAddr = clustertest.FreeAddr(t), clustertest.FreeAddr(t)
	if _, err := server.Start(dup, nil); !errors.Is(err, server.ErrDataDirLocked) {
		t.Fatalf("second node on a locked data dir: %v", err)
	}
	// A busy port is an error naming it.
	busy := cfg
	busy.DataDir = t.TempDir()
	_, err := server.Start(busy, nil)
	if err == nil || !strings.Contains(err.Error(), cfg.GRPCAddr) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("busy port: %v", err)
	}
	c.Stop(0)

	// The data dir refuses another cluster.
	other := cfg
	other.InitialClusterToken = "another"
	if _, err := server.Start(other, nil); !errors.Is(err, server.ErrWrongCluster) {
		t.Fatalf("data dir joined another cluster: %v", err)
	}
	// And another node id.
	renamed := cfg
	renamed.ID = "n9"
	renamed.InitialCluster = ""
	if _, err := server.Start(renamed, nil); !errors.Is(err, server.ErrWrongCluster) {
		t.Fatalf("data dir started as another node: %v", err)
	}
	// Restart without bootstrap flags works.
	plain := cfg
	plain.InitialCluster = ""
	n, err := server.Start(plain, nil)
	if err != nil {
		t.Fatalf("restart without --initial-cluster: %v", err)
	}
	defer n.Kill()
	select {
	case <-n.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("restarted node not ready")
	}
	// An empty data dir without bootstrap flags is refused.
	empty := plain
	empty.DataDir = t.TempDir()
	empty.GRPCAddr, empty.GossipAddr = clustertest.FreeAddr(t), clustertest.FreeAddr(t)
	if _, err := server.Start(empty, nil); !errors.Is(err, server.ErrNoBootstrap) {
		t.Fatalf("empty data dir without bootstrap: %v", err)
	}
}

func TestMembersFailedAndLeft(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	cl := kvrpc.NewClusterClient(c.Conn(0))
	state := func(id string) kvpb.MemberState {
		resp, err := cl.Members(ctxT(t, 3*time.Second), &kvpb.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.GetMembers() {
			if m.GetId() == id {
				return m.GetState()
			}
		}
		t.Fatalf("member %s not listed", id)
		return 0
	}
	clustertest.Eventually(t, 5*time.Second, func() error {
		for _, id := range []string{"n1", "n2", "n3"} {
			if s := state(id); s != kvpb.MemberState_MEMBER_STATE_ALIVE {
				return fmt.Errorf("%s is %v", id, s)
			}
		}
		return nil
	})
	c.Kill(2)
	killed := time.Now()
	clustertest.Eventually(t, 5*time.Second, func() error {
		if s := state("n3"); s != kvpb.MemberState_MEMBER_STATE_FAILED {
			return fmt.Errorf("killed n3 is %v", s)
		}
		return nil
	})
	t.Logf("kill detected as failed after %v", time.Since(killed))
	c.Stop(1)
	clustertest.Eventually(t, 5*time.Second, func() error {
		if s := state("n2"); s != kvpb.MemberState_MEMBER_STATE_LEFT {
			return fmt.Errorf("stopped n2 is %v", s)
		}
		return nil
	})
}

// TestFiveNodesAnyNodeServesAnyKey: with 5 nodes a partition has replicas
// on only 3 of them; the other two hand requests to a replica.
func TestFiveNodesAnyNodeServesAnyKey(t *testing.T) {
	c := clustertest.Start(t, 5, clustertest.Options{Partitions: 4})
	for k := 0; k < 40; k++ {
		put(t, c, k%5, fmt.Sprintf("k%02d", k), fmt.Sprint(k))
	}
	// Raw gRPC calls, no client: a call that meets an election (a loaded
	// machine starves the raft ticks) is answered "no leader", not
	// applied, and is tried again as the client would.
	for i := 0; i < 5; i++ {
		for k := 0; k < 40; k += 3 {
			clustertest.Eventually(t, 10*time.Second, func() error {
				resp, err := c.KV(i).Get(ctxT(t, 5*time.Second), &kvpb.GetRequest{Key: []byte(fmt.Sprintf("k%02d", k))})
				if err != nil {
					return fmt.Errorf("get k%02d via n%d: %v", k, i+1, err)
				}
				if string(resp.GetKv().GetValue()) != fmt.Sprint(k) {
					t.Fatalf("get k%02d via n%d: %v", k, i+1, resp) // a wrong answer is not retried
				}
				return nil
			})
		}
		clustertest.Eventually(t, 10*time.Second, func() error {
			resp, err := c.KV(i).Scan(ctxT(t, 5*time.Second), &kvpb.ScanRequest{})
			if err != nil {
				return fmt.Errorf("scan via n%d: %v", i+1, err)
			}
			if len(resp.GetKvs()) != 40 {
				t.Fatalf("scan via n%d: %d keys, want 40", i+1, len(resp.GetKvs()))
			}
			return nil
		})
	}
}
