package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cutkv/cutkv/internal/clustertest"
	"github.com/cutkv/cutkv/proto/kvpb"
	"github.com/cutkv/cutkv/proto/kvrpc"
	"github.com/cutkv/cutkv/server"
)

// TestCutCreateIdleAndBusy takes cuts on an idle cluster and while
// transactions run, and checks what group 0 records about each.
func TestCutCreateIdleAndBusy(t *testing.T) {
	c := clustertest.Start(t, 3, clustertest.Options{})
	cl := kvrpc.NewClusterClient(c.Conn(1))
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
		// Idle: nothing is active at any position, so every partition
		// closes the cut right there, with no CutFinish round (rule 6).
		for _, p := range cu.GetPartitions() {
			if p.GetPos() == 0 || p.GetFinishIndex() != p.GetPos() {
				t.Errorf("cut %d partition %d: pos %d finish index %d, want the cut closed at its position", last, p.GetPartition(), p.GetPos(), p.GetFinishIndex())
			}
		}
		if resp.GetHeader().GetCutVersion() < last {
			t.Errorf("reply header carries cut version %d, want >= %d", resp.GetHeader().GetCutVersion(), last)
		}
	}
	list, err := kvrpc.NewClusterClient(c.Conn(2)).ListCuts(ctxT(t, 5*time.Second), &kvpb.ListCutsRequest{})
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

// TestCutFailsWithoutQuorumThenRecovers stops two of five nodes so that
// one partition loses its quorum while group 0 keeps its own: the cut
// fails after the cut timeout, naming the partition, and is recorded as
// failed; once the nodes are back, the next cut completes.
func TestCutFailsWithoutQuorumThenRecovers(t *testing.T) {
	const parts = 4
	c := clustertest.Start(t, 5, clustertest.Options{Partitions: parts, Configure: func(i int, cfg *server.Config) {
		cfg.CutTimeout = 2 * time.Second
	}})
	cl := kvrpc.NewClusterClient(c.Conn(0))
	clustertest.Eventually(t, 20*time.Second, func() error {
		_, err := cl.CreateCut(ctxT(t, 10*time.Second), &kvpb.CreateCutRequest{})
		return err
	})
	// Replicas of group g sit on members g, g+1, g+2 (mod 5): group 0 on
	// 0-2, partition 3 on 3, 4, 0. Without 3 and 4, partition 3 has no quorum.
	c.Kill(3)
	c.Kill(4)
	start := time.Now()
	resp, err := cl.CreateCut(ctxT(t, 30*time.Second), &kvpb.CreateCutRequest{})
	if err != nil {
		t.Fatal(err)
	}
	failed := resp.GetCut()
	if failed.GetState() != kvpb.CutState_CUT_STATE_FAILED {
		t.Fatalf("cut %d without quorum in partition 3: %v", failed.GetVersion(), failed.GetState())
	}
	if !strings.Contains(failed.GetError(), "partition 3") {
		t.Errorf("failed cut's error does not name partition 3: %q", failed.GetError())
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("cut failed after %v, before its 2s timeout", took)
	}
	c.Restart(3)
	c.Restart(4)
	var next *kvpb.CutInfo
	clustertest.Eventually(t, 30*time.Second, func() error {
		r, err := cl.CreateCut(ctxT(t, 10*time.Second), &kvpb.CreateCutRequest{})
		if err != nil {
			return err
		}
		if next = r.GetCut(); next.GetState() != kvpb.CutState_CUT_STATE_COMPLETED {
			return fmt.Errorf("cut %d %v: %s", next.GetVersion(), next.GetState(), next.GetError())
		}
		return nil
	})
	if next.GetVersion() <= failed.GetVersion() {
		t.Fatalf("next cut %d not after the failed %d", next.GetVersion(), failed.GetVersion())
	}
	g, err := cl.GetCut(ctxT(t, 5*time.Second), &kvpb.GetCutRequest{Version: failed.GetVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if g.GetCut().GetState() != kvpb.CutState_CUT_STATE_FAILED {
		t.Fatalf("failed cut %d now reads %v: a failed cut must stay failed", failed.GetVersion(), g.GetCut().GetState())
	}
}
