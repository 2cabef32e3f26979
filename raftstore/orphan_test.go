package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// TestOrphanedProposalApplied: a proposal replicated to the followers
// whose leader is cut off before it learns of the commit is committed by
// the next leader; the old leader's caller, instead of "outcome unknown"
// at the step-down, waits and is answered "applied" once the partition
// heals and the entry applies there.
func TestOrphanedProposalApplied(t *testing.T) {
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.BalanceInterval = -1
		cfg.OrphanWait = time.Minute // long enough for the heal below
	}})
	const g = 1
	c.put(g, "k", "v0")
	lead := c.waitLeader(g)
	last := func(id uint64) uint64 {
		i, _ := c.store(id).groups[g].storage.LastIndex()
		return i
	}
	before := last(lead)
	// The followers append, but their acknowledgements never reach the
	// leader, which therefore cannot commit.
	c.net.setDrop(func(from, to, group uint64, m *raftpb.Message) bool {
		return to == lead && m.GetType() == raftpb.MsgAppResp
	})
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := c.store(lead).Propose(ctx, g, putCmd("k", "v1"))
		errc <- err
	}()
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
	waitFor(t, "a new leader among the others", func() bool {
		l := c.leaderOf(g)
		return l != 0 && l != lead
	})
	waitFor(t, "the old leader to step down", func() bool {
		st, _ := c.store(lead).Status(g)
		return !st.IsLeader
	})
	select {
	case err := <-errc:
		t.Fatalf("answered before the heal: %v", err)
	default:
	}
	c.net.isolate(lead, false, c.ids)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("proposal committed by the next leader: %v, want applied", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the orphaned proposal was not answered")
	}
	kv, ok := c.part(lead, g).Get([]byte("k"))
	if !ok || string(kv.Value) != "v1" {
		t.Fatalf("old leader holds %v %v, want k=v1", kv, ok)
	}
}

// TestOverwrittenProposalDropped: a proposal left on a cut-off leader is
// overwritten by the new leader's log once the partition heals; the old
// leader's caller learns that it certainly was not applied.
func TestOverwrittenProposalDropped(t *testing.T) {
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.BalanceInterval = -1
		cfg.OrphanWait = time.Minute // long enough for the heal below
	}})
	const g = 1
	c.put(g, "k", "v0")
	lead := c.waitLeader(g)
	c.net.isolate(lead, true, c.ids)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := c.store(lead).Propose(ctx, g, putCmd("k", "lost"))
		errc <- err
	}()
	// The others elect a leader and commit in their new term; the old one
	// steps down (check quorum).
	waitFor(t, "a new leader among the others", func() bool {
		l := c.leaderOf(g)
		return l != 0 && l != lead
	})
	c.put(g, "k", "v1")
	waitFor(t, "the old leader to step down", func() bool {
		st, _ := c.store(lead).Status(g)
		return !st.IsLeader
	})
	c.net.isolate(lead, false, c.ids)
	select {
	case err := <-errc:
		if !errors.Is(err, ErrProposalDropped) {
			t.Fatalf("proposal on the deposed leader: %v, want ErrProposalDropped", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the overwritten proposal was not answered")
	}
	waitFor(t, "every replica to hold k=v1", func() bool {
		for _, id := range c.ids {
			kv, ok := c.part(id, g).Get([]byte("k"))
			if !ok || string(kv.Value) != "v1" {
				return false
			}
		}
		return true
	})
}
