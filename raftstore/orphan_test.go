package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// orphanCluster is a 3-node cluster of group 1 holding k=v0, with no
// leader balancing and an OrphanWait long enough for a test's heal; it
// returns the leader.
func orphanCluster(t *testing.T) (*testCluster, uint64) {
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.BalanceInterval = -1
		cfg.OrphanWait = time.Minute
	}})
	c.put(1, "k", "v0")
	return c, c.waitLeader(1)
}

// proposeAsync proposes k=value on node id and delivers the answer.
func proposeAsync(c *testCluster, id uint64, value string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := c.store(id).Propose(ctx, 1, putCmd("k", value))
		errc <- err
	}()
	return errc
}

// waitDeposed waits until another node leads group 1 and the cut-off
// lead has stepped down (check quorum); between the two, then (if set)
// runs.
func waitDeposed(t *testing.T, c *testCluster, lead uint64, then func()) {
	waitFor(t, "a new leader among the others", func() bool {
		l := c.leaderOf(1)
		return l != 0 && l != lead
	})
	if then != nil {
		then()
	}
	waitFor(t, "the old leader to step down", func() bool {
		st, _ := c.store(lead).Status(1)
		return !st.IsLeader
	})
}

// answer waits for a proposal's answer after the heal.
func answer(t *testing.T, errc <-chan error) error {
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned proposal was not answered")
		return nil
	}
}

// TestOrphanedProposalApplied: a proposal replicated to the followers
// whose leader is cut off before it learns of the commit is committed by
// the next leader; the old leader's caller, instead of "outcome unknown"
// at the step-down, waits and is answered "applied" once the partition
// heals and the entry applies there.
func TestOrphanedProposalApplied(t *testing.T) {
	c, lead := orphanCluster(t)
	last := func(id uint64) uint64 {
		i, _ := c.store(id).groups[1].storage.LastIndex()
		return i
	}
	before := last(lead)
	// The followers append, but their acknowledgements never reach the
	// leader, which therefore cannot commit.
	c.net.setDrop(func(from, to, group uint64, m *raftpb.Message) bool {
		return to == lead && m.GetType() == raftpb.MsgAppResp
	})
	errc := proposeAsync(c, lead, "v1")
	waitFor(t, "the followers to append the proposal", func() bool {
		for _, id := range c.ids {
			if id != lead && last(id) <= before {
				return false
			}
		}
		return true
	})
	c.net.isolate(lead, true, c.ids)
	c.net.setDrop(nil)
	waitDeposed(t, c, lead, nil)
	select {
	case err := <-errc:
		t.Fatalf("answered before the heal: %v", err)
	default:
	}
	c.net.isolate(lead, false, c.ids)
	if err := answer(t, errc); err != nil {
		t.Fatalf("proposal committed by the next leader: %v, want applied", err)
	}
	kv, ok, _ := c.part(lead, 1).Get([]byte("k"))
	if !ok || string(kv.Value) != "v1" {
		t.Fatalf("old leader holds %v %v, want k=v1", kv, ok)
	}
}

// TestOverwrittenProposalDropped: a proposal left on a cut-off leader is
// overwritten by the new leader's log once the partition heals; the old
// leader's caller learns that it certainly was not applied.
func TestOverwrittenProposalDropped(t *testing.T) {
	c, lead := orphanCluster(t)
	c.net.isolate(lead, true, c.ids)
	errc := proposeAsync(c, lead, "lost")
	// The others commit in their new term.
	waitDeposed(t, c, lead, func() { c.put(1, "k", "v1") })
	c.net.isolate(lead, false, c.ids)
	if err := answer(t, errc); !errors.Is(err, ErrProposalDropped) {
		t.Fatalf("proposal on the deposed leader: %v, want ErrProposalDropped", err)
	}
	waitFor(t, "every replica to hold k=v1", func() bool {
		for _, id := range c.ids {
			kv, ok, _ := c.part(id, 1).Get([]byte("k"))
			if !ok || string(kv.Value) != "v1" {
				return false
			}
		}
		return true
	})
}
