package raftstore

import (
	"context"
	"testing"
)

// TestCounters: proposals on the leader, refusals on a follower and a
// leader seen are counted on the group they concern, and nothing on a
// group not held.
func TestCounters(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 1
	lead := c.waitLeader(g)
	before, _ := c.store(lead).Counters(g)
	for range 3 {
		if _, err := c.store(lead).Propose(context.Background(), g, putCmd("k", "v")); err != nil {
			t.Fatal(err)
		}
	}
	after, ok := c.store(lead).Counters(g)
	if !ok || after.Proposals-before.Proposals != 3 {
		t.Fatalf("leader's proposals went from %d to %d (ok %v), want +3", before.Proposals, after.Proposals, ok)
	}
	for _, id := range c.running() {
		s := c.store(id)
		cn, _ := s.Counters(g)
		if cn.LeaderChanges == 0 {
			t.Fatalf("node %d saw no leader of group %d", id, g)
		}
		if id == lead {
			continue
		}
		_, _ = s.Propose(context.Background(), g, putCmd("k", "v"))
		got, _ := s.Counters(g)
		if got.Failed[FailNotLeader] != cn.Failed[FailNotLeader]+1 || got.Proposals != cn.Proposals {
			t.Fatalf("follower %d: counters %+v after a refused proposal, were %+v", id, got, cn)
		}
	}
	if _, ok := c.store(lead).Counters(99); ok {
		t.Fatal("Counters of group 99 reported ok")
	}
	if len(FailReasons()) != int(numFailReasons) {
		t.Fatalf("FailReasons names %d reasons, there are %d", len(FailReasons()), numFailReasons)
	}
}
