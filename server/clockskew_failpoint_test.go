//go:build failpoints

package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/internal/failpoint"
	"github.com/cutkv/cutkv/node"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/rpc"
)

// TestTxnRecoveryHorizonAfterForwardSkew: leaders whose clocks ran ahead by more
// than rpc.FinishedRetention raise the partitions' horizons while skewed;
// once the clocks are right again, cross-partition transactions commit.
// Before (issue 17), the horizon followed the skewed clock into the future
// and, since it never goes back, every prepare stamped by a correct clock
// was refused as behind it until the real time caught up — minutes for a
// skew of minutes.
func TestTxnRecoveryHorizonAfterForwardSkew(t *testing.T) {
	retention, interval := rpc.FinishedRetention, node.HorizonInterval
	rpc.FinishedRetention, node.HorizonInterval = 2*time.Second, 200*time.Millisecond
	t.Cleanup(func() { rpc.FinishedRetention, node.HorizonInterval = retention, interval }) // after the cluster stops
	t.Cleanup(func() { _ = clock.Set(0) })
	c := clustertest.Start(t, 3, clustertest.Options{})
	a, b, _ := keysIn("skew", 4)
	txn := func(v string) error {
		_, err := c.KV(0).Txn(ctxT(t, 5*time.Second), &kvpb.TxnRequest{Success: []*kvpb.RequestOp{opPut(a, v), opPut(b, v)}})
		return err
	}
	clustertest.Eventually(t, 10*time.Second, func() error { return txn("before") })
	// key: node and partition
	horizons := func() map[[2]uint64]int64 {
		hs := map[[2]uint64]int64{}
		for i := range 3 {
			for p, h := range c.Node(i).TxnHorizons() {
				hs[[2]uint64{uint64(i + 1), p}] = h
			}
		}
		return hs
	}
	clustertest.Eventually(t, 10*time.Second, func() error {
		for k, h := range horizons() {
			if h == 0 {
				return fmt.Errorf("n%d, partition %d: no horizon yet", k[0], k[1])
			}
		}
		return nil
	})
	if err := clock.Set(15 * time.Minute); err != nil {
		t.Fatal(err)
	}
	h0 := horizons()
	// Every partition gets its horizon raised at least twice under the
	// skewed clock.
	clustertest.Eventually(t, 10*time.Second, func() error {
		for k, h := range horizons() {
			if h <= h0[k]+int64(2*node.HorizonInterval/time.Millisecond) {
				return fmt.Errorf("n%d, partition %d: horizon %d not yet raised twice since the skew (%d then)", k[0], k[1], h, h0[k])
			}
		}
		return nil
	})
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for k, h := range horizons() {
		if h > now {
			t.Errorf("n%d, partition %d: horizon %v ahead of the clock after the skew", k[0], k[1], time.Duration(h-now)*time.Millisecond)
		}
	}
	clustertest.Eventually(t, 10*time.Second, func() error { return txn("after") })
}

// TestTxnRecoveryBehindSkew: a coordinator held after every vote leaves
// its intents; the clocks then run 25 s behind the prepare time.
// Recovery still commits the transaction within a few seconds. Before
// (issue 17), an intent was stale only once the wall clock passed its
// prepare time plus node.RecoveryTimeout, so a leader whose clock ran
// behind kept a dead coordinator's locks for as long as it was behind.
// (25 s: within rpc.PeerClockSkew, which the participants' doors allow.)
func TestTxnRecoveryBehindSkew(t *testing.T) {
	const parts = 4
	t.Cleanup(func() { _ = clock.Set(0) })
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts})
	a, b, _ := keysIn("skewrec", parts)
	clustertest.Eventually(t, 10*time.Second, func() error { // leaders and routes
		_, err := c.KV(0).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(a), Value: []byte("0")})
		return err
	})
	done := holdTxn(t, c, 0, a, b)
	if err := clock.Set(-25 * time.Second); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 15*time.Second, func() error {
		for _, k := range []string{a, b} {
			g, err := c.KV(1).Get(ctxT(t, 2*time.Second), &kvpb.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if v := string(g.GetKv().GetValue()); v != "held" {
				return fmt.Errorf("%s = %q: recovery has not committed the held transaction", k, v)
			}
		}
		return nil
	})
	if err := failpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Logf("the released coordinator's answer: %v", err)
	}
}

// TestTxnRecoveryAfterAheadSkew: a coordinator held after every vote,
// its transaction prepared while the clocks ran 5 min ahead; once they
// are right again, recovery still commits it. Before (issue 17), the
// participants' doors refused recovery's Status and Finish, which carry
// the prepare time, as more than rpc.PeerClockSkew ahead: the keys stayed
// locked and every cut failed until the real time caught up.
func TestTxnRecoveryAfterAheadSkew(t *testing.T) {
	const parts = 4
	t.Cleanup(func() { _ = clock.Set(0) })
	c := clustertest.Start(t, 3, clustertest.Options{Partitions: parts})
	a, b, _ := keysIn("aheadrec", parts)
	clustertest.Eventually(t, 10*time.Second, func() error { // leaders and routes
		_, err := c.KV(0).Put(ctxT(t, 2*time.Second), &kvpb.PutRequest{Key: []byte(a), Value: []byte("0")})
		return err
	})
	if err := clock.Set(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	done := holdTxn(t, c, 0, a, b)
	if err := clock.Set(0); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 15*time.Second, func() error {
		for _, k := range []string{a, b} {
			g, err := c.KV(1).Get(ctxT(t, 2*time.Second), &kvpb.GetRequest{Key: []byte(k)})
			if err != nil {
				return err
			}
			if v := string(g.GetKv().GetValue()); v != "held" {
				return fmt.Errorf("%s = %q: recovery has not committed the held transaction", k, v)
			}
		}
		return nil
	})
	if err := failpoint.Arm(""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Logf("the released coordinator's answer: %v", err)
	}
}
