package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// waitTimeout bounds every poll of the tests: generous, because -race on a
// loaded two-core machine is slow, and never reached when all is well.
const waitTimeout = 20 * time.Second

// pollInterval is how often waitFor re-checks its condition.
const pollInterval = 2 * time.Millisecond

var quietLogger = slog.New(slog.DiscardHandler)

// waitFor polls cond until it holds or waitTimeout passes; what describes
// the condition in the failure message.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(pollInterval)
	}
}

// linkKey names the one-way link from one raft id to another.
type linkKey struct{ from, to uint64 }

// testNet is an in-memory network between the stores of one process. Each
// one-way link is a buffered channel drained by its own goroutine, so
// delivery is asynchronous and ordered per link, like the gRPC transport.
// Links can be cut (messages are dropped, at Send and in flight, and the
// sender is told with ReportUnreachable) and messages filtered.
type testNet struct {
	mu     sync.Mutex
	stores map[uint64]*Store // REQUIRES mu; nil or absent: the node is down
	cut    map[linkKey]bool  // REQUIRES mu
	links  map[linkKey]chan []*internalpb.GroupMessage
	// drop, if set, is asked about every message at delivery; true drops
	// it silently (as a lossy network would).
	drop   func(from, to, group uint64, m *raftpb.Message) bool // REQUIRES mu
	closed bool                                                 // REQUIRES mu
	wg     sync.WaitGroup
}

func newTestNet() *testNet {
	return &testNet{
		stores: map[uint64]*Store{},
		cut:    map[linkKey]bool{},
		links:  map[linkKey]chan []*internalpb.GroupMessage{},
	}
}

// testTransport is one node's view of a testNet.
type testTransport struct {
	n    *testNet
	from uint64
}

func (n *testNet) transport(from uint64) Transport { return &testTransport{n: n, from: from} }

// Send implements Transport: it never blocks.
func (t *testTransport) Send(to uint64, msgs []*internalpb.GroupMessage) {
	n := t.n
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	src := n.stores[t.from]
	delivered := false
	if !n.cut[linkKey{t.from, to}] && n.stores[to] != nil {
		ch := n.linkLocked(t.from, to)
		select { // under mu, so Close cannot close ch meanwhile
		case ch <- msgs:
			delivered = true
		default:
		}
	}
	n.mu.Unlock()
	if !delivered && src != nil {
		src.ReportUnreachable(to)
	}
}

// linkLocked returns the link's channel, starting its goroutine on first
// use. REQUIRES mu held.
func (n *testNet) linkLocked(from, to uint64) chan []*internalpb.GroupMessage {
	k := linkKey{from, to}
	ch := n.links[k]
	if ch == nil {
		ch = make(chan []*internalpb.GroupMessage, 1024)
		n.links[k] = ch
		n.wg.Add(1)
		go n.deliver(k, ch)
	}
	return ch
}

func (n *testNet) deliver(k linkKey, ch chan []*internalpb.GroupMessage) {
	defer n.wg.Done()
	for msgs := range ch {
		n.mu.Lock()
		dst, src, cut, drop := n.stores[k.to], n.stores[k.from], n.cut[k], n.drop
		n.mu.Unlock()
		if dst == nil || cut {
			if src != nil {
				src.ReportUnreachable(k.to)
			}
			continue
		}
		if drop != nil {
			kept := make([]*internalpb.GroupMessage, 0, len(msgs))
			for _, gm := range msgs {
				m := &raftpb.Message{}
				if err := proto.Unmarshal(gm.GetMessage(), m); err != nil || !drop(k.from, k.to, gm.GetGroup(), m) {
					kept = append(kept, gm)
				}
			}
			if msgs = kept; len(msgs) == 0 {
				continue
			}
		}
		_ = dst.Receive(k.from, msgs) // fails only once dst stopped or failed
	}
}

// setStore makes s the node with raft id id; nil takes the node down.
func (n *testNet) setStore(id uint64, s *Store) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stores[id] = s
}

// isolate cuts (or, with on false, heals) every link to and from id.
func (n *testNet) isolate(id uint64, on bool, peers []uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range peers {
		if p != id {
			n.cut[linkKey{id, p}] = on
			n.cut[linkKey{p, id}] = on
		}
	}
}

func (n *testNet) setDrop(f func(from, to, group uint64, m *raftpb.Message) bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop = f
}

// close stops every link goroutine. The stores must be stopped first.
func (n *testNet) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	for _, ch := range n.links {
		close(ch)
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// clusterOptions shape a testCluster.
type clusterOptions struct {
	nodes  int
	groups int
	// config adjusts each node's Config after the harness filled it.
	config func(id uint64, c *Config)
	// walOptions returns each node's WAL options; nil means NoSync off,
	// quiet logger.
	walOptions func(id uint64) wal.Options
}

// testCluster is nodes raft ids 1..n, each with a WAL in its own temp dir,
// holding every group 1..groups. Group g prefers node (g-1)%n+1 as leader
// (first in Peers), so balancing spreads the leaders.
type testCluster struct {
	t      testing.TB
	opts   clusterOptions
	net    *testNet
	ids    []uint64
	groups []uint64

	mu     sync.Mutex
	dirs   map[uint64]string
	wals   map[uint64]*wal.WAL
	stores map[uint64]*Store
	parts  map[uint64]map[uint64]*partition.Partition // node → group → state
}

func newTestCluster(t testing.TB, o clusterOptions) *testCluster {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 3
	}
	if o.groups == 0 {
		o.groups = 4
	}
	c := &testCluster{
		t: t, opts: o, net: newTestNet(),
		dirs:   map[uint64]string{},
		wals:   map[uint64]*wal.WAL{},
		stores: map[uint64]*Store{},
		parts:  map[uint64]map[uint64]*partition.Partition{},
	}
	for i := 1; i <= o.nodes; i++ {
		c.ids = append(c.ids, uint64(i))
		c.dirs[uint64(i)] = filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))
	}
	for g := 1; g <= o.groups; g++ {
		c.groups = append(c.groups, uint64(g))
	}
	t.Cleanup(c.close)
	for _, id := range c.ids {
		c.start(id)
	}
	return c
}

// peersOf returns group g's replicas, its preferred leader first.
func (c *testCluster) peersOf(g uint64) []uint64 {
	n := len(c.ids)
	first := int(g-1) % n
	return append(slices.Clone(c.ids[first:]), c.ids[:first]...)
}

// openWAL opens node id's WAL if it is not open.
func (c *testCluster) openWAL(id uint64) *wal.WAL {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.wals[id]; w != nil {
		return w
	}
	o := wal.Options{Logger: quietLogger}
	if c.opts.walOptions != nil {
		o = c.opts.walOptions(id)
	}
	w, err := wal.Open(c.dirs[id], o)
	if err != nil {
		c.t.Fatalf("node %d: open WAL: %v", id, err)
	}
	c.wals[id] = w
	return w
}

// config returns node id's store config over w with fresh partitions.
func (c *testCluster) config(id uint64, w *wal.WAL) (Config, map[uint64]*partition.Partition) {
	parts := map[uint64]*partition.Partition{}
	cfg := Config{
		RaftID:          id,
		WAL:             w,
		Transport:       c.net.transport(id),
		Bootstrap:       true,
		TickInterval:    10 * time.Millisecond,
		ElectionTicks:   10,
		HeartbeatTicks:  1,
		BalanceInterval: -1,
		Logger:          quietLogger,
		// A store that stops by itself fails the test, unless the test
		// expects it (and sets its own OnFatal).
		OnFatal: func(err error) { c.t.Errorf("node %d stopped: %v", id, err) },
		// Nothing a healthy cluster sends is dropped.
		Rejected: func(reason string) { c.t.Errorf("node %d dropped a message from a peer: %s", id, reason) },
	}
	for _, g := range c.groups {
		p := partition.New(g)
		parts[g] = p
		cfg.Groups = append(cfg.Groups, GroupConfig{ID: g, Peers: c.peersOf(g), SM: p})
	}
	if c.opts.config != nil {
		c.opts.config(id, &cfg)
	}
	return cfg, parts
}

// start opens node id's WAL (if needed) and a store over it with fresh
// state machines, and starts it on the network.
func (c *testCluster) start(id uint64) *Store {
	c.t.Helper()
	w := c.openWAL(id)
	cfg, parts := c.config(id, w)
	s, err := Open(cfg)
	if err != nil {
		c.t.Fatalf("node %d: Open: %v", id, err)
	}
	c.mu.Lock()
	c.stores[id], c.parts[id] = s, parts
	c.mu.Unlock()
	c.net.setStore(id, s)
	s.Start()
	return s
}

// stop takes node id off the network and stops its store; the WAL stays
// open.
func (c *testCluster) stop(id uint64) {
	c.net.setStore(id, nil)
	if s := c.store(id); s != nil {
		s.Stop()
	}
	c.mu.Lock()
	delete(c.stores, id)
	c.mu.Unlock()
}

// closeWAL closes node id's WAL; the store must be stopped.
func (c *testCluster) closeWAL(id uint64) {
	c.t.Helper()
	c.mu.Lock()
	w := c.wals[id]
	delete(c.wals, id)
	c.mu.Unlock()
	if w != nil {
		if err := w.Close(); err != nil {
			c.t.Fatalf("node %d: close WAL: %v", id, err)
		}
	}
}

func (c *testCluster) close() {
	for _, id := range c.ids {
		c.stop(id)
	}
	c.net.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, w := range c.wals {
		_ = w.Close() // a test may have failed it on purpose
		delete(c.wals, id)
	}
}

// store returns node id's running store, nil if it is stopped.
func (c *testCluster) store(id uint64) *Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stores[id]
}

func (c *testCluster) part(id, g uint64) *partition.Partition {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[id][g]
}

// running returns the ids of the running stores.
func (c *testCluster) running() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []uint64
	for _, id := range c.ids {
		if c.stores[id] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// leaderOf returns the running node that leads g with the highest term, 0
// if none does.
func (c *testCluster) leaderOf(g uint64) uint64 {
	var lead, term uint64
	for _, id := range c.running() {
		s := c.store(id)
		if s == nil {
			continue
		}
		if st, _ := s.Status(g); st.IsLeader && st.Term >= term {
			lead, term = id, st.Term
		}
	}
	return lead
}

// waitLeader waits until g has a leader among the running nodes other than
// the excluded ones that every other running node also follows.
func (c *testCluster) waitLeader(g uint64, exclude ...uint64) uint64 {
	c.t.Helper()
	var lead uint64
	waitFor(c.t, fmt.Sprintf("a leader of group %d", g), func() bool {
		lead = c.leaderOf(g)
		if lead == 0 || slices.Contains(exclude, lead) {
			return false
		}
		for _, id := range c.running() {
			if s := c.store(id); s != nil && s.Leader(g) != lead {
				return false
			}
		}
		return true
	})
	return lead
}

// putCmd is the command that writes key=value.
func putCmd(key, value string) *internalpb.Command {
	return &internalpb.Command{Op: &internalpb.Command_Put{Put: &internalpb.PutOp{Key: []byte(key), Value: []byte(value)}}}
}

// retryable says that a proposal certainly was not applied and may be sent
// again (to whoever leads now).
func retryable(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrProposalDropped)
}

// put writes key=value to group g through its current leader, retrying
// while leadership moves. A proposal whose context expired is retried too:
// the write is idempotent for the tests' models. It returns the raft index
// the write was applied at.
func (c *testCluster) put(g uint64, key, value string) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		var err error
		if lead := c.leaderOf(g); lead != 0 {
			if s := c.store(lead); s != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err = s.Propose(ctx, g, putCmd(key, value))
				cancel()
				if err == nil {
					kv, ok, _ := c.part(lead, g).Get([]byte(key))
					if !ok {
						c.t.Fatalf("group %d: %q acknowledged by node %d but not in its state", g, key, lead)
					}
					return kv.ModIndex
				}
				if !retryable(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrStopped) {
					c.t.Fatalf("group %d: put %q on node %d: %v", g, key, lead, err)
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("group %d: put %q: no leader accepted it within %v (last error %v)", g, key, waitTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// kvRow is one key-value as a partition holds it.
type kvRow struct {
	Key, Value  string
	Version     int64
	Create, Mod uint64
}

// dump returns p's whole content in key order.
func dump(p *partition.Partition) []kvRow {
	kvs, _, _ := p.Scan(nil, nil, 0)
	rows := make([]kvRow, len(kvs))
	for i, kv := range kvs {
		rows[i] = kvRow{string(kv.Key), string(kv.Value), kv.Version, kv.CreateIndex, kv.ModIndex}
	}
	return rows
}

func rowsEqual(a, b []kvRow) bool { return slices.Equal(a, b) }

// waitConverged waits until every running replica of g has applied at
// least index and all hold the same content, and returns that content.
func (c *testCluster) waitConverged(g, index uint64) []kvRow {
	c.t.Helper()
	var rows []kvRow
	waitFor(c.t, fmt.Sprintf("group %d to converge at index %d", g, index), func() bool {
		rows = nil
		for i, id := range c.running() {
			p := c.part(id, g)
			if p.Applied() < index {
				return false
			}
			d := dump(p)
			if i == 0 {
				rows = d
			} else if !rowsEqual(rows, d) {
				return false
			}
		}
		return true
	})
	return rows
}

// checkModel fails unless rows hold exactly the keys and values of want.
func checkModel(t testing.TB, g uint64, rows []kvRow, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, r := range rows {
		got[r.Key] = r.Value
	}
	if len(got) != len(want) {
		t.Fatalf("group %d holds %d keys, want %d", g, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("group %d: %q = %q, want %q", g, k, got[k], v)
		}
	}
}

// waiterCount returns how many proposals s is waiting for, read on its
// loop.
func waiterCount(t testing.TB, s *Store) int {
	t.Helper()
	n := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.do(ctx, func() { n <- len(s.waiters) }); err != nil {
		t.Fatalf("waiterCount: %v", err)
	}
	select {
	case v := <-n:
		return v
	case <-ctx.Done():
		t.Fatal("waiterCount: the loop did not answer")
		return 0
	}
}

// hasKey says whether p holds key=value.
func hasKey(p *partition.Partition, key, value string) bool {
	kv, ok, _ := p.Get([]byte(key))
	return ok && bytes.Equal(kv.Value, []byte(value))
}
