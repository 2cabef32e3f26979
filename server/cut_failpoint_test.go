//go:build failpoints

package server_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/keyspace"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
)

// holdTxn starts a cross-partition transaction through node coord and
// waits until its coordinator is held after the votes (txnAfterPrepare
// armed with "hold"): both partitions then hold its intent, so no cut can
// finish in them until the hold is released. The result arrives on the
// returned channel.
func holdTxn(t *testing.T, c *clustertest.Cluster, coord int, a, b string) <-chan error {
	t.Helper()
	if err := failpoint.Arm(failpoint.TxnAfterPrepare + "=hold"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = failpoint.Arm("") })
	done := make(chan error, 1)
	go func() {
		_, err := c.KV(coord).Txn(ctxT(t, 20*time.Second), &kvpb.TxnRequest{
			Success: []*kvpb.RequestOp{opPut(a, "held"), opPut(b, "held")},
		})
		done <- err
	}()
	clustertest.Eventually(t, 10*time.Second, func() error {
		if failpoint.Calls(failpoint.TxnAfterPrepare) == 0 {
			return errString("the transaction has not reached the hold")
		}
		return nil
	})
	return done
}

type errString string

func (e errString) Error() string { return string(e) }

// runningCut waits until group 0 reports a running cut and returns it.
func runningCut(t *testing.T, cl kvrpc.ClusterClient) uint64 {
	t.Helper()
	var v uint64
	clustertest.Eventually(t, 10*time.Second, func() error {
		r, err := cl.ListCuts(ctxT(t, 2*time.Second), &kvpb.ListCutsRequest{Limit: 1})
		if err != nil {
			return err
		}
		if len(r.GetCuts()) == 0 || r.GetCuts()[0].GetState() != kvpb.CutState_CUT_STATE_RUNNING {
			return errString("no cut running yet")
		}
		v = r.GetCuts()[0].GetVersion()
		return nil
	})
	return v
}

// TestCutNonBlocking holds one transaction prepared so the cut cannot
// finish in its two partitions, while other transactions on those same
// partitions keep committing; released, the cut completes. Concurrent
// cut requests made meanwhile join the cut in flight.
func TestCutNonBlocking(t *testing.T) {
	const parts = 4
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts})
	a, b, _ := keysIn("hold", parts)
	pa, pb := keyspace.PartitionOf([]byte(a), parts), keyspace.PartitionOf([]byte(b), parts)
	// Warm the routes and leaders.
	clustertest.Eventually(t, 10*time.Second, func() error {
		_, err := c.KV(0).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(a), Value: []byte("0")})
		return err
	})
	start := time.Now()
	held := holdTxn(t, c, 0, a, b)

	cl := kvrpc.NewClusterClient(c.Conn(1))
	results := make([]*kvpb.CreateCutResponse, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		results[0], errs[0] = cl.CreateCut(ctxT(t, 30*time.Second), &kvpb.CreateCutRequest{})
	}()
	v := runningCut(t, cl)
	for i := 1; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = kvrpc.NewClusterClient(c.Conn(i)).CreateCut(ctxT(t, 30*time.Second), &kvpb.CreateCutRequest{})
		}()
	}

	// Single-partition transactions on other keys of the held partitions
	// commit while the cut waits. The hold must end well before the
	// recovery timeout (2 s after the prepare), or recovery would abort the
	// held transaction and unblock the cut on its own.
	var committed [2]atomic.Int64
	for time.Since(start) < 1200*time.Millisecond {
		for j, p := range []uint64{pa, pb} {
			k := keyInPartition("busy", p, parts, int(committed[j].Load()))
			if _, err := c.KV(2).Txn(ctxT(t, 2*time.Second), &kvpb.TxnRequest{
				Compare: []*kvpb.Compare{cmpVersion(k, 0)},
				Success: []*kvpb.RequestOp{opPut(k, "1")},
			}); err == nil {
				committed[j].Add(1)
			}
		}
	}
	g, err := cl.GetCut(ctxT(t, 2*time.Second), &kvpb.GetCutRequest{Version: v})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetCut().GetState() != kvpb.CutState_CUT_STATE_RUNNING {
		t.Fatalf("cut %d is %v while a transaction it waits for is held", v, g.GetCut().GetState())
	}
	if committed[0].Load() < 5 || committed[1].Load() < 5 {
		t.Fatalf("while the cut waited only %d and %d transactions committed on partitions %d and %d",
			committed[0].Load(), committed[1].Load(), pa, pb)
	}
	t.Logf("cut %d held for %v; meanwhile %d + %d transactions committed on partitions %d and %d",
		v, time.Since(start), committed[0].Load(), committed[1].Load(), pa, pb)

	if err := failpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("held transaction: %v", err)
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		cu := results[i].GetCut()
		if cu.GetVersion() != v || cu.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			t.Fatalf("create %d reported cut %d %v, want cut %d completed", i, cu.GetVersion(), cu.GetState(), v)
		}
	}
	// The held transaction was active at the cut in both its partitions.
	for _, p := range results[0].GetCut().GetPartitions() {
		if p.GetPartition() == pa || p.GetPartition() == pb {
			if p.GetBefore()+p.GetAfter() != 1 {
				t.Errorf("partition %d: before %d after %d, want the held transaction on one side", p.GetPartition(), p.GetBefore(), p.GetAfter())
			}
		}
	}
}

// TestCutTakenOverByNewGroup0Leader kills group 0's leader while a cut is
// running (held open by a prepared transaction): the next leader takes the
// cut over and records its end.
func TestCutTakenOverByNewGroup0Leader(t *testing.T) {
	const parts = 4
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts})
	leader := -1
	clustertest.Eventually(t, 10*time.Second, func() error {
		for i := 0; i < c.N(); i++ {
			if st, ok := c.Node(i).Store().Status(0); ok && st.IsLeader {
				leader = i
				return nil
			}
		}
		return errString("group 0 has no leader")
	})
	coord := (leader + 1) % 3
	other := (leader + 2) % 3
	a, b, _ := keysIn("take", parts)
	clustertest.Eventually(t, 10*time.Second, func() error {
		_, err := c.KV(coord).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(a), Value: []byte("0")})
		return err
	})
	held := holdTxn(t, c, coord, a, b)
	go func() {
		_, _ = kvrpc.NewClusterClient(c.Conn(other)).CreateCut(ctxT(t, 30*time.Second), &kvpb.CreateCutRequest{})
	}()
	v := runningCut(t, kvrpc.NewClusterClient(c.Conn(other)))
	c.Kill(leader)
	if err := failpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	<-held // committed or not: either way the cut can finish
	cl := kvrpc.NewClusterClient(c.Conn(other))
	clustertest.Eventually(t, 20*time.Second, func() error {
		r, err := cl.GetCut(ctxT(t, 2*time.Second), &kvpb.GetCutRequest{Version: v})
		if err != nil {
			return err
		}
		if r.GetCut().GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			return errString("cut " + r.GetCut().GetState().String())
		}
		return nil
	})
	c.Restart(leader)
}

// keyInPartition returns the i-th key with prefix that falls in partition p.
func keyInPartition(prefix string, p uint64, parts uint32, i int) string {
	for n, seen := 0, 0; ; n++ {
		k := fmt.Sprintf("%s-%d", prefix, n)
		if keyspace.PartitionOf([]byte(k), parts) == p {
			if seen == i {
				return k
			}
			seen++
		}
	}
}
