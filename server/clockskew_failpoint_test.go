//go:build failpoints

package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clock"
	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/node"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/rpc"
)

// TestTxnHorizonAfterForwardSkew: leaders whose clocks ran ahead by more
// than rpc.FinishedRetention raise the partitions' horizons while skewed;
// once the clocks are right again, cross-partition transactions commit.
// Before (issue 17), the horizon followed the skewed clock into the future
// and, since it never goes back, every prepare stamped by a correct clock
// was refused as behind it until the real time caught up — minutes for a
// skew of minutes.
func TestTxnHorizonAfterForwardSkew(t *testing.T) {
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
