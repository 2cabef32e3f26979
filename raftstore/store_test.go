package raftstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/wal"
)

// TestReplication writes through each group's leader and checks that
// every replica ends with the same state, which is the model's.
func TestReplication(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	var wg sync.WaitGroup
	models := make([]map[string]string, len(c.groups)+1)
	last := make([]uint64, len(c.groups)+1)
	for _, g := range c.groups {
		models[g] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				k, v := fmt.Sprintf("g%d-k%02d", g, i%20), fmt.Sprintf("v%d", i)
				last[g] = c.put(g, k, v)
				models[g][k] = v
			}
		}()
	}
	wg.Wait()
	for _, g := range c.groups {
		rows := c.waitConverged(g, last[g])
		checkModel(t, g, rows, models[g])
	}
}

// TestProposeResult checks that the proposer gets the state machine's
// result for its own command, on a single-voter group: there the node
// wins its election, and commits, while the loop advances raft, and a
// node whose status says it leads must accept proposals at once.
func TestProposeResult(t *testing.T) {
	c := newTestCluster(t, clusterOptions{nodes: 1, groups: 1})
	lead := c.waitLeader(1)
	s := c.store(lead)
	ctx := context.Background()
	if _, err := s.Propose(ctx, 1, putCmd("k", "v1")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Propose(ctx, 1, putCmd("k", "v2"))
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(partition.Result)
	if !ok || r.Prev == nil || string(r.Prev.Value) != "v1" {
		t.Fatalf("second put returned %#v, want a partition.Result with Prev v1", res)
	}
}

// TestProposeNotLeader checks the errors of a proposal or read sent to the
// wrong node or group.
func TestProposeNotLeader(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	ctx := context.Background()
	for _, g := range c.groups {
		lead := c.waitLeader(g)
		for _, id := range c.running() {
			if id == lead {
				continue
			}
			s := c.store(id)
			_, err := s.Propose(ctx, g, putCmd("k", "v"))
			var nle *NotLeaderError
			if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nle) {
				t.Fatalf("group %d: Propose on follower %d: %v, want a *NotLeaderError", g, id, err)
			}
			if nle.Leader != lead || nle.Group != g {
				t.Fatalf("group %d: follower %d names leader %d of group %d, want %d", g, id, nle.Leader, nle.Group, lead)
			}
			if errors.Is(err, ErrNoLeader) {
				t.Fatalf("group %d: %v matches ErrNoLeader though the leader is known", g, err)
			}
			err = s.ReadIndex(ctx, g)
			if !errors.As(err, &nle) || nle.Leader != lead {
				t.Fatalf("group %d: ReadIndex on follower %d: %v, want not leader (leader %d)", g, id, err, lead)
			}
		}
	}
	s := c.store(1)
	if _, err := s.Propose(ctx, 99, putCmd("k", "v")); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("Propose to group 99: %v, want ErrUnknownGroup", err)
	}
	if err := s.ReadIndex(ctx, 99); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("ReadIndex of group 99: %v, want ErrUnknownGroup", err)
	}
	if _, ok := s.Status(99); ok {
		t.Fatal("Status of group 99 reported ok")
	}
}

func TestNotLeaderError(t *testing.T) {
	cases := []struct {
		err                 *NotLeaderError
		notLeader, noLeader bool
		proposalDropped     bool
	}{
		{&NotLeaderError{Group: 3, Leader: 2}, true, false, false},
		{&NotLeaderError{Group: 3}, true, true, false},
	}
	for _, tc := range cases {
		wrapped := fmt.Errorf("put: %w", tc.err)
		if got := errors.Is(wrapped, ErrNotLeader); got != tc.notLeader {
			t.Errorf("%v: Is(ErrNotLeader) = %v", tc.err, got)
		}
		if got := errors.Is(wrapped, ErrNoLeader); got != tc.noLeader {
			t.Errorf("%v: Is(ErrNoLeader) = %v", tc.err, got)
		}
		if got := errors.Is(wrapped, ErrProposalDropped); got != tc.proposalDropped {
			t.Errorf("%v: Is(ErrProposalDropped) = %v", tc.err, got)
		}
		if tc.err.Error() == "" {
			t.Errorf("empty message")
		}
	}
}

// TestReadIndexAfterFailover checks that a linearizable read on a new
// leader sees every write the old leader acknowledged.
func TestReadIndexAfterFailover(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 1
	c.put(g, "k", "v1")
	old := c.waitLeader(g)
	if err := c.store(old).ReadIndex(context.Background(), g); err != nil {
		t.Fatalf("ReadIndex on leader %d: %v", old, err)
	}
	if !hasKey(c.part(old, g), "k", "v1") {
		t.Fatal("leader does not hold its acknowledged write after ReadIndex")
	}
	c.put(g, "k", "v2")
	c.stop(old)
	lead := c.waitLeader(g, old)
	// The new leader may not have applied v2 yet; ReadIndex must wait
	// until it has.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		err := c.store(lead).ReadIndex(ctx, g)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrNotLeader) {
			t.Fatalf("ReadIndex on new leader %d: %v", lead, err)
		}
		lead = c.waitLeader(g, old) // leadership moved again; follow it
	}
	if !hasKey(c.part(lead, g), "k", "v2") {
		kv, _, _ := c.part(lead, g).Get([]byte("k"))
		t.Fatalf("read on new leader %d after ReadIndex saw %v, want v2", lead, kv)
	}
}

// TestReadIndexIsolatedLeader checks that a leader cut off from its peers
// serves no linearizable read, while the majority elects a new leader and
// moves on.
func TestReadIndexIsolatedLeader(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 2
	c.put(g, "k", "old")
	lead := c.waitLeader(g)
	c.net.isolate(lead, true, c.ids)

	// The majority moves on: a new leader and a new value.
	errc := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go func() { errc <- c.store(lead).ReadIndex(ctx, g) }()

	waitFor(t, "a new leader on the majority side", func() bool {
		for _, id := range c.ids {
			if st, _ := c.store(id).Status(g); id != lead && st.IsLeader {
				return true
			}
		}
		return false
	})
	c.put(g, "k", "new") // goes to the leader of the highest term

	err := <-errc
	if err == nil {
		t.Fatalf("isolated former leader %d served a linearizable read (it holds %q)", lead, dumpValue(c.part(lead, g), "k"))
	}
	if !errors.Is(err, ErrNotLeader) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadIndex on isolated leader: %v, want not leader or deadline", err)
	}
	// Once stepped down (CheckQuorum), it refuses reads at once.
	waitFor(t, "the isolated leader to step down", func() bool {
		st, _ := c.store(lead).Status(g)
		return !st.IsLeader
	})
	if err := c.store(lead).ReadIndex(context.Background(), g); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ReadIndex on stepped-down node: %v, want ErrNotLeader", err)
	}

	c.net.isolate(lead, false, c.ids)
	idx := c.put(g, "k2", "after-heal")
	rows := c.waitConverged(g, idx)
	checkModel(t, g, rows, map[string]string{"k": "new", "k2": "after-heal"})
}

func dumpValue(p *partition.Partition, key string) string {
	kv, ok, _ := p.Get([]byte(key))
	if !ok {
		return "<absent>"
	}
	return string(kv.Value)
}

// TestLeaderFailover stops the node leading a group and checks that
// another node takes over and accepts writes, and that the stopped node's
// pending proposals end.
func TestLeaderFailover(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 3
	c.put(g, "before", "1")
	old := c.waitLeader(g)
	oldStore := c.store(old)
	c.stop(old)
	lead := c.waitLeader(g, old)
	if lead == old {
		t.Fatalf("stopped node %d still leads", old)
	}
	idx := c.put(g, "after", "2")
	for _, gg := range c.groups {
		c.put(gg, "every-group", "3") // groups the old node led fail over too
	}
	rows := c.waitConverged(g, idx)
	checkModel(t, g, rows, map[string]string{"before": "1", "after": "2", "every-group": "3"})

	// The stopped store refuses work without blocking.
	for range 20 {
		if _, err := oldStore.Propose(context.Background(), g, putCmd("x", "y")); !errors.Is(err, ErrStopped) {
			t.Fatalf("Propose on a stopped store: %v, want ErrStopped", err)
		}
		if err := oldStore.ReadIndex(context.Background(), g); !errors.Is(err, ErrStopped) {
			t.Fatalf("ReadIndex on a stopped store: %v, want ErrStopped", err)
		}
	}
}

// TestRestartFromWAL stops a node, reopens its WAL and store, and checks
// that the state machines are rebuilt exactly from the WAL and then catch
// up with what was written while the node was down.
func TestRestartFromWAL(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const victim = 3
	models := map[uint64]map[string]string{}
	for _, g := range c.groups {
		models[g] = map[string]string{}
		var idx uint64
		for i := range 10 {
			k, v := fmt.Sprintf("k%d", i%7), fmt.Sprintf("a%d", i)
			idx = c.put(g, k, v)
			models[g][k] = v
		}
		c.waitConverged(g, idx)
	}
	// Whatever the victim applied before it stopped is what its WAL says
	// is committed: the rebuild must reach exactly that state.
	c.stop(victim)
	c.closeWAL(victim)
	before := map[uint64][]kvRow{}
	applied := map[uint64]uint64{}
	for _, g := range c.groups {
		before[g] = dump(c.part(victim, g))
		applied[g] = c.part(victim, g).Applied()
	}

	// Writes while it is down (every group keeps a majority).
	last := map[uint64]uint64{}
	for _, g := range c.groups {
		for i := range 5 {
			k, v := fmt.Sprintf("k%d", i+5), fmt.Sprintf("b%d", i)
			last[g] = c.put(g, k, v)
			models[g][k] = v
		}
	}

	// Restart cut off from the others: the state comes from the WAL alone.
	c.net.isolate(victim, true, c.ids)
	c.start(victim)
	for _, g := range c.groups {
		p := c.part(victim, g)
		waitFor(t, fmt.Sprintf("group %d to be rebuilt to index %d", g, applied[g]), func() bool {
			return p.Applied() >= applied[g]
		})
		if got := p.Applied(); got != applied[g] {
			t.Fatalf("group %d: rebuilt to applied index %d, the stopped store had %d", g, got, applied[g])
		}
		if got := dump(p); !rowsEqual(got, before[g]) {
			t.Fatalf("group %d: rebuilt state differs:\n got %v\nwant %v", g, got, before[g])
		}
	}

	// Reconnected, it catches up with the writes it missed.
	c.net.isolate(victim, false, c.ids)
	for _, g := range c.groups {
		rows := c.waitConverged(g, last[g])
		checkModel(t, g, rows, models[g])
	}
}

// TestRestartAll restarts every node at once from its WAL: nothing
// acknowledged is lost and the cluster serves writes again.
func TestRestartAll(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	models := map[uint64]map[string]string{}
	for _, g := range c.groups {
		models[g] = map[string]string{}
		for i := range 5 {
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
			c.put(g, k, v)
			models[g][k] = v
		}
	}
	for _, id := range c.ids {
		c.stop(id)
		c.closeWAL(id)
	}
	for _, id := range c.ids {
		c.start(id)
	}
	for _, g := range c.groups {
		idx := c.put(g, "after", "restart")
		models[g]["after"] = "restart"
		checkModel(t, g, c.waitConverged(g, idx), models[g])
	}
}

// errInjected is the I/O error the tests' WAL hooks inject.
var errInjected = errors.New("injected fsync failure")

// TestFatalWALError makes a leader's fsync fail and checks that the store
// stops for good: OnFatal once, Err set, no acknowledgement afterwards,
// proposals refused with ErrNotServing. A proposal that had already been
// sent to the followers is not reported as "not applied": the followers
// go on to commit it.
func TestFatalWALError(t *testing.T) {
	var failSync [4]atomic.Bool
	var fatal [4]atomic.Int32
	var fatalErr [4]atomic.Pointer[error]
	c := newTestCluster(t, clusterOptions{
		walOptions: func(id uint64) wal.Options {
			return wal.Options{Logger: quietLogger, Hooks: wal.Hooks{BeforeSync: func(string) error {
				if failSync[id].Load() {
					return errInjected
				}
				return nil
			}}}
		},
		config: func(id uint64, cfg *Config) {
			cfg.OnFatal = func(err error) {
				fatal[id].Add(1)
				fatalErr[id].Store(&err)
			}
		},
	})
	const g = 1
	for _, gg := range c.groups {
		c.waitConverged(gg, c.put(gg, "warm", "up"))
	}
	lead := c.waitLeader(g)
	ls := c.store(lead)
	var followers []uint64
	for _, id := range c.ids {
		if id != lead {
			followers = append(followers, id)
		}
	}

	// The followers persist what the leader sends in group g, but the
	// leader never hears that they did, so it cannot commit: the entry is
	// durable on a quorum yet unacknowledged. Heartbeats still flow, so
	// the leader keeps its leadership.
	c.net.setDrop(func(from, to, group uint64, m *raftpb.Message) bool {
		return to == lead && group == g && m.GetType() == raftpb.MsgAppResp
	})
	lastBefore, _ := ls.groups[g].storage.LastIndex()
	sent := make(chan error, 1)
	go func() {
		_, err := ls.Propose(context.Background(), g, putCmd("sent", "1"))
		sent <- err
	}()
	var sentIdx uint64
	waitFor(t, "the leader to append the proposal", func() bool {
		sentIdx, _ = ls.groups[g].storage.LastIndex()
		return sentIdx > lastBefore
	})
	for _, f := range followers {
		waitFor(t, fmt.Sprintf("follower %d to append index %d", f, sentIdx), func() bool {
			li, _ := c.store(f).groups[g].storage.LastIndex()
			return li >= sentIdx
		})
	}

	// Now the leader's next fsync fails.
	failSync[lead].Store(true)
	pendingErr := make(chan error, 1)
	go func() {
		_, err := ls.Propose(context.Background(), g, putCmd("pending", "1"))
		pendingErr <- err
	}()
	waitFor(t, "OnFatal", func() bool { return fatal[lead].Load() > 0 })
	appliedAtFailure := c.part(lead, g).Applied()

	if err := ls.Err(); err == nil || !errors.Is(err, errInjected) || !errors.Is(err, wal.ErrWrite) {
		t.Fatalf("Err() = %v, want the WAL's write error wrapping the injected one", err)
	}
	if p := fatalErr[lead].Load(); p == nil || !errors.Is(*p, errInjected) {
		t.Fatalf("OnFatal got %v, want the injected error", p)
	}
	// The entry the followers hold may well be committed without the
	// leader: its proposer must hear "outcome unknown".
	if err := <-sent; !errors.Is(err, ErrStopped) || errors.Is(err, ErrNotServing) || retryable(err) {
		t.Fatalf("proposal already on the followers ended with %v; want ErrStopped (outcome unknown), not a 'not applied' error", err)
	}
	// The proposal of the failed batch was written but not synced: it
	// may survive in the file, so it is unknown too, unless it was
	// refused outright.
	if err := <-pendingErr; !errors.Is(err, ErrStopped) && !errors.Is(err, ErrNotServing) {
		t.Fatalf("proposal pending at the failure: %v, want ErrStopped or ErrNotServing", err)
	}
	// Everything later is refused as not applied.
	for i := range 3 {
		if _, err := ls.Propose(context.Background(), g, putCmd("later", fmt.Sprint(i))); !errors.Is(err, ErrNotServing) {
			t.Fatalf("Propose after the failure: %v, want ErrNotServing", err)
		}
	}
	if err := ls.ReadIndex(context.Background(), g); !errors.Is(err, ErrNotServing) {
		t.Fatalf("ReadIndex after the failure: %v, want ErrNotServing", err)
	}
	if err := ls.Receive(followers[0], nil); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Receive after the failure: %v, want ErrNotServing", err)
	}
	ls.ReportUnreachable(followers[0]) // must not block or panic

	// The followers elect a leader between them and commit the entry.
	c.stop(lead) // off the network; Stop after a failure is harmless
	c.net.setDrop(nil)
	for _, f := range followers {
		waitFor(t, fmt.Sprintf("follower %d to apply the entry the failed leader sent", f), func() bool {
			return hasKey(c.part(f, g), "sent", "1")
		})
	}
	for _, f := range followers {
		if hasKey(c.part(f, g), "later", "0") {
			t.Fatal("a proposal refused with ErrNotServing was applied")
		}
	}
	idx := c.put(g, "after", "1")
	c.waitConverged(g, idx)

	// The failed node acknowledged and applied nothing more.
	if got := c.part(lead, g).Applied(); got != appliedAtFailure {
		t.Fatalf("failed node applied up to %d after failing at %d", got, appliedAtFailure)
	}
	if hasKey(c.part(lead, g), "sent", "1") {
		t.Fatal("failed node applied the entry after failing")
	}
	ls.Stop()
	if n := fatal[lead].Load(); n != 1 {
		t.Fatalf("OnFatal called %d times, want 1", n)
	}
	for _, id := range followers {
		if n := fatal[id].Load(); n != 0 {
			t.Fatalf("OnFatal called on healthy node %d", id)
		}
	}
}

// TestTransferLeadership drains the node leading the most groups.
func TestTransferLeadership(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	for _, g := range c.groups {
		c.waitLeader(g)
	}
	var drain uint64
	best := -1
	for _, id := range c.ids {
		if n := c.store(id).LeaderCount(); n > best {
			drain, best = id, n
		}
	}
	s := c.store(drain)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.TransferLeadership(ctx); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if n := s.LeaderCount(); n != 0 {
		t.Fatalf("drained node still leads %d groups", n)
	}
	for _, g := range c.groups {
		if _, err := s.Propose(context.Background(), g, putCmd("k", "v")); !errors.Is(err, ErrProposalDropped) && !errors.Is(err, ErrNotLeader) {
			t.Fatalf("group %d: Propose on the drained node: %v, want ErrProposalDropped or ErrNotLeader", g, err)
		}
		if lead := c.waitLeader(g, drain); lead == drain {
			t.Fatalf("group %d still led by the drained node", g)
		}
		idx := c.put(g, "after-drain", "1")
		c.waitConverged(g, idx)
	}
	if n := s.LeaderCount(); n != 0 {
		t.Fatalf("drained node took back %d groups", n)
	}
	// Draining again is a no-op.
	if err := s.TransferLeadership(ctx); err != nil {
		t.Fatalf("second TransferLeadership: %v", err)
	}
}

// TestBalance checks that leaders move to each group's preferred node.
func TestBalance(t *testing.T) {
	c := newTestCluster(t, clusterOptions{config: func(_ uint64, cfg *Config) {
		cfg.BalanceInterval = 20 * time.Millisecond
	}})
	for _, g := range c.groups {
		want := c.peersOf(g)[0]
		waitFor(t, fmt.Sprintf("group %d to be led by its preferred node %d", g, want), func() bool {
			st, _ := c.store(want).Status(g)
			return st.IsLeader
		})
	}
	for _, id := range c.ids {
		want := 0
		for _, g := range c.groups {
			if c.peersOf(g)[0] == id {
				want++
			}
		}
		waitFor(t, fmt.Sprintf("node %d to lead %d groups", id, want), func() bool {
			return c.store(id).LeaderCount() == want
		})
	}
}

var seedFlag = flag.Int64("seed", 0, "seed of the randomized tests; 0 picks one")

// TestProposeContextDone checks that a proposal whose context is done
// returns the context's error and leaves no waiter behind, and that the
// store works normally afterwards.
func TestProposeContextDone(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 1
	c.put(g, "warm", "up")
	lead := c.waitLeader(g)
	s := c.store(lead)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Propose(cancelled, g, putCmd("k", "cancelled")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Propose with a cancelled context: %v, want context.Canceled", err)
	}
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	if _, err := s.Propose(expired, g, putCmd("k", "expired")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Propose with an expired context: %v, want context.DeadlineExceeded", err)
	}
	if err := s.ReadIndex(cancelled, g); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadIndex with a cancelled context: %v, want context.Canceled", err)
	}

	// Many proposals whose contexts end at random points of their life.
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var wg sync.WaitGroup
	var okCount, ctxCount atomic.Int32
	for i := range 400 {
		d := time.Duration(rng.IntN(60000)) * time.Microsecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			_, err := s.Propose(ctx, g, putCmd(fmt.Sprintf("r%d", i), "x"))
			switch {
			case err == nil:
				okCount.Add(1)
			case errors.Is(err, context.DeadlineExceeded):
				ctxCount.Add(1)
			default:
				t.Errorf("proposal %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d proposals acknowledged, %d ended by their context", okCount.Load(), ctxCount.Load())

	// A proposal stuck behind a lost quorum times out; its waiter goes,
	// and when the entry commits later nobody is woken by mistake.
	c.net.setDrop(func(from, to, group uint64, m *raftpb.Message) bool {
		return to == lead && group == g && m.GetType() == raftpb.MsgAppResp
	})
	ctx, cancel3 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, err := s.Propose(ctx, g, putCmd("stuck", "1")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Propose without a quorum: %v, want context.DeadlineExceeded", err)
	}
	cancel3()
	waitFor(t, "every waiter to be forgotten", func() bool { return waiterCount(t, s) == 0 })
	c.net.setDrop(nil)

	// The store carries on; the timed-out write may or may not have been
	// applied (its outcome was unknown) — here it was, once the quorum
	// came back.
	idx := c.put(g, "after", "1")
	rows := c.waitConverged(g, idx)
	found := false
	for _, r := range rows {
		found = found || r.Key == "stuck"
	}
	t.Logf("timed-out proposal applied later: %v", found)
	waitFor(t, "every waiter to be released", func() bool { return waiterCount(t, s) == 0 })
}

// TestStopWakesProposers checks that stopping a store ends blocked
// Propose and ReadIndex calls with ErrStopped.
func TestStopWakesProposers(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 1
	c.put(g, "warm", "up")
	lead := c.waitLeader(g)
	s := c.store(lead)
	// Nothing can commit now, but heartbeats keep the leader in place.
	c.net.setDrop(func(from, to, group uint64, m *raftpb.Message) bool {
		return to == lead && group == g && m.GetType() == raftpb.MsgAppResp
	})
	errs := make(chan error, 2)
	go func() {
		_, err := s.Propose(context.Background(), g, putCmd("k", "v"))
		errs <- err
	}()
	waitFor(t, "the proposal to be pending", func() bool { return waiterCount(t, s) == 1 })
	c.stop(lead)
	if err := <-errs; !errors.Is(err, ErrStopped) {
		t.Fatalf("pending Propose after Stop: %v, want ErrStopped", err)
	}
	s.Stop() // idempotent
}

// TestStopBeforeStart checks that a store that never started stops.
func TestStopBeforeStart(t *testing.T) {
	w, err := wal.Open(t.TempDir(), wal.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s, err := Open(Config{RaftID: 1, WAL: w, Transport: newTestNet().transport(1), Logger: quietLogger,
		Groups: []GroupConfig{{ID: 1, Peers: []uint64{1}, SM: partition.New(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Start() // after Stop: must not start a loop
	if _, err := s.Propose(context.Background(), 1, putCmd("k", "v")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose: %v, want ErrStopped", err)
	}
}

func TestConfigValidate(t *testing.T) {
	w, err := wal.Open(t.TempDir(), wal.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tr := newTestNet().transport(1)
	sm := partition.New(1)
	cases := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{RaftID: 1, WAL: w, Transport: tr}, true},
		{"no raft id", Config{WAL: w, Transport: tr}, false},
		{"no WAL", Config{RaftID: 1, Transport: tr}, false},
		{"no transport", Config{RaftID: 1, WAL: w}, false},
		{"heartbeat not below election", Config{RaftID: 1, WAL: w, Transport: tr, ElectionTicks: 3, HeartbeatTicks: 3}, false},
		{"group without peers", Config{RaftID: 1, WAL: w, Transport: tr, Groups: []GroupConfig{{ID: 1, SM: sm}}}, false},
		{"group without state machine", Config{RaftID: 1, WAL: w, Transport: tr, Groups: []GroupConfig{{ID: 1, Peers: []uint64{1}}}}, false},
	}
	for _, tc := range cases {
		err := tc.cfg.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if tc.ok {
			c := tc.cfg
			if c.TickInterval != 100*time.Millisecond || c.ElectionTicks != 10 || c.HeartbeatTicks != 1 ||
				c.BalanceInterval != 3*time.Second || c.MaxSizePerMsg != 1<<20 || c.Logger == nil || c.OnFatal == nil {
				t.Errorf("%s: defaults not filled: %+v", tc.name, c)
			}
		}
	}
	// Open validates too.
	if _, err := Open(Config{WAL: w, Transport: tr}); err == nil {
		t.Error("Open accepted a config without RaftID")
	}
}

func TestBalanceBackoff(t *testing.T) {
	want := []int{0, 1, 3, 7, 15, 31, 63, 63, 63}
	for n, w := range want {
		if got := balanceBackoff(n); got != w {
			t.Errorf("balanceBackoff(%d) = %d, want %d", n, got, w)
		}
	}
}

// TestProposalOnDeposedLeader: a proposal made on a leader that is then
// cut off cannot commit there; when the leader steps down its caller
// learns at once that the outcome is unknown, instead of waiting out its
// context.
func TestProposalOnDeposedLeader(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	const g = 1
	c.put(g, "k", "v0")
	lead := c.waitLeader(g)
	c.net.isolate(lead, true, c.ids)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.store(lead).Propose(ctx, g, putCmd("k", "lost"))
	if !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("proposal on a cut-off leader: %v, want ErrLeadershipLost (or NotLeader if it stepped down first)", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the caller waited for its whole context (%v)", time.Since(start))
	}
	if n := waiterCount(t, c.store(lead)); n != 0 {
		t.Fatalf("%d waiters left on the deposed leader", n)
	}
	c.net.isolate(lead, false, c.ids)
}

// TestPing: Ping returns once the loop ran it, waits for ctx while the
// loop is busy, and fails once the store stopped.
func TestPing(t *testing.T) {
	c := newTestCluster(t, clusterOptions{})
	s := c.store(1)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("ping of a running store: %v", err)
	}
	// Wedge the loop: Ping must wait for its context, not answer.
	release := make(chan struct{})
	if err := s.do(context.Background(), func() { <-release }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	err := s.Ping(ctx)
	cancel()
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ping of a wedged loop: %v, want the deadline", err)
	}
	c.stop(1)
	if err := s.Ping(context.Background()); err == nil {
		t.Fatal("ping of a stopped store answered nil")
	}
}
