package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
)

// TestCutCreateIdleAndBusy takes cuts on an idle cluster and while
// transactions run, and checks what group 0 records about each.
func TestCutCreateIdleAndBusy(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	cl := kvpb.NewClusterClient(c.Conn(1))
	var last uint64
	for i := 0; i < 3; i++ {
		var resp *kvpb.CreateCutResponse
		clustertest.Eventually(t, 20*time.Second, func() error {
			var err error
			resp, err = cl.CreateCut(ctxT(t, 15*time.Second), &kvpb.CreateCutRequest{})
			return err
		})
		cu := resp.GetCut()
		if cu.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			t.Fatalf("cut %d: state %v, error %q", cu.GetVersion(), cu.GetState(), cu.GetError())
		}
		if cu.GetVersion() <= last {
			t.Fatalf("cut version %d after %d", cu.GetVersion(), last)
		}
		last = cu.GetVersion()
		if got := len(cu.GetPartitions()); got != int(c.Config(0).Partitions) {
			t.Fatalf("cut %d covers %d partitions, want %d", last, got, c.Config(0).Partitions)
		}
		for _, p := range cu.GetPartitions() {
			if p.GetPos() == 0 || p.GetFinishIndex() <= p.GetPos() {
				t.Errorf("cut %d partition %d: pos %d finish index %d", last, p.GetPartition(), p.GetPos(), p.GetFinishIndex())
			}
		}
		if resp.GetHeader().GetCutVersion() < last {
			t.Errorf("reply header carries cut version %d, want >= %d", resp.GetHeader().GetCutVersion(), last)
		}
	}
	list, err := kvpb.NewClusterClient(c.Conn(2)).ListCuts(ctxT(t, 5*time.Second), &kvpb.ListCutsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetCuts()) != 3 || list.GetCuts()[0].GetVersion() != last {
		t.Fatalf("list: %v", list.GetCuts())
	}
	// Every node learned the version (gossip, StartCut, raft entries).
	clustertest.Eventually(t, 10*time.Second, func() error {
		for i := 0; i < 3; i++ {
			r, err := c.KV(i).Get(ctxT(t, 2*time.Second), &kvpb.GetRequest{Key: []byte("k")})
			if err != nil {
				return err
			}
			if r.GetHeader().GetCutVersion() < last {
				return fmt.Errorf("node %d knows cut %d, want %d", i, r.GetHeader().GetCutVersion(), last)
			}
		}
		return nil
	})
	chk, err := cl.Check(ctxT(t, 20*time.Second), &kvpb.CheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range chk.GetPartitions() {
		if !p.GetConsistent() {
			t.Errorf("partition %d not consistent: %v", p.GetPartition(), p)
		}
	}
}
