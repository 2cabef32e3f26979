package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/cutkv/cutkv/partition"
	"github.com/cutkv/cutkv/proto/internalpb"
	"github.com/cutkv/cutkv/wal"
)

// rejectCounter counts Config.Rejected calls by reason.
type rejectCounter struct {
	mu sync.Mutex
	n  map[string]int // REQUIRES mu
}

func (r *rejectCounter) hook(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

// counts returns a copy of the counts.
func (r *rejectCounter) counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.n {
		out[k] = v
	}
	return out
}

// groupMsg marshals m as a message of group g.
func groupMsg(t testing.TB, g uint64, m *raftpb.Message) *internalpb.GroupMessage {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &internalpb.GroupMessage{Group: g, Message: data}
}

// raftView is what raft itself holds for a group, read on the loop.
type raftView struct {
	term, lead, commit, last, lastTerm uint64
}

func viewOf(t testing.TB, s *Store, g uint64) raftView {
	t.Helper()
	ch := make(chan raftView, 1)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.do(ctx, func() {
		gr := s.groups[g]
		bs := gr.rn.BasicStatus()
		last, _ := gr.storage.LastIndex()
		lt, _ := gr.storage.Term(last)
		ch <- raftView{bs.HardState.GetTerm(), bs.Lead, bs.HardState.GetCommit(), last, lt}
	}); err != nil {
		t.Fatalf("view of group %d: %v", g, err)
	}
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatal("view: the loop did not answer")
		return raftView{}
	}
}

const absurdTerm = uint64(1) << 62

// TestReceiveRejects sends a follower messages that must not reach raft:
// each is dropped and counted under its reason, Receive does not fail (the
// peer's stream stays open), and raft's term, leader and log do not move.
func TestReceiveRejects(t *testing.T) {
	var counters [4]rejectCounter
	c := newTestCluster(t, clusterOptions{groups: 2, config: func(id uint64, cfg *Config) {
		cfg.Rejected = counters[id].hook
	}})
	const g = 1
	c.waitConverged(g, c.put(g, "k", "v"))
	lead := c.waitLeader(g)
	var f, other uint64 // the follower under test and the third node
	for _, id := range c.ids {
		if id != lead {
			if f == 0 {
				f = id
			} else {
				other = id
			}
		}
	}
	s := c.store(f)
	v0 := viewOf(t, s, g)
	const stranger = 9 // in no group
	msg := func(typ raftpb.MessageType, from, to, term uint64) *raftpb.Message {
		return &raftpb.Message{Type: typ.Enum(), From: new(from), To: new(to), Term: new(term)}
	}
	forgedApp := func(from uint64, term uint64) *raftpb.Message {
		m := msg(raftpb.MsgApp, from, f, term)
		m.Index, m.LogTerm, m.Commit = new(v0.last), new(v0.lastTerm), new(v0.last+1)
		m.Entries = []*raftpb.Entry{{Index: new(v0.last + 1), Term: new(term), Data: []byte("forged")}}
		return m
	}
	snap := func(group, index uint64, voters ...uint64) *raftpb.Message {
		m := msg(raftpb.MsgSnap, lead, f, v0.term)
		m.Snapshot = &raftpb.Snapshot{Data: snapshotData(group, index), Metadata: &raftpb.SnapshotMetadata{
			Index: new(index), Term: new(v0.term), ConfState: &raftpb.ConfState{Voters: voters}}}
		return m
	}
	gap := forgedApp(lead, v0.term)
	gap.Entries[0].Index = new(v0.last + 2)
	prop := msg(raftpb.MsgProp, lead, f, 0)
	prop.Entries = []*raftpb.Entry{{Data: []byte("x")}}
	vote := msg(raftpb.MsgVote, stranger, f, absurdTerm)
	vote.Index, vote.LogTerm = new(absurdTerm), new(absurdTerm)
	hb := msg(raftpb.MsgHeartbeat, stranger, f, absurdTerm)
	hb.Commit = new(absurdTerm)

	cases := []struct {
		name   string
		from   uint64
		gm     *internalpb.GroupMessage
		reason string
	}{
		{"vote with an absurd term from a non-member", stranger, groupMsg(t, g, vote), RejectNotAMember},
		{"heartbeat with an absurd term from a non-member", stranger, groupMsg(t, g, hb), RejectNotAMember},
		{"append forged by a non-member", stranger, groupMsg(t, g, forgedApp(stranger, absurdTerm)), RejectNotAMember},
		{"non-member using a member's id", stranger, groupMsg(t, g, forgedApp(lead, absurdTerm)), RejectNotAMember},
		{"this node's own id", f, groupMsg(t, g, msg(raftpb.MsgHeartbeat, f, f, v0.term)), RejectNotAMember},
		{"member claiming to be another", other, groupMsg(t, g, forgedApp(lead, v0.term)), RejectWrongSender},
		{"addressed to another node", lead, groupMsg(t, g, msg(raftpb.MsgHeartbeat, lead, other, absurdTerm)), RejectWrongRecipient},
		{"group this node does not hold", lead, groupMsg(t, 99, msg(raftpb.MsgHeartbeat, lead, f, absurdTerm)), RejectUnknownGroup},
		{"not a raft message", lead, &internalpb.GroupMessage{Group: g, Message: []byte{0xff, 0xff, 0xff}}, RejectDecode},
		{"local MsgHup", lead, groupMsg(t, g, msg(raftpb.MsgHup, lead, f, 0)), RejectBadType},
		{"local MsgStorageAppend", lead, groupMsg(t, g, msg(raftpb.MsgStorageAppend, lead, f, absurdTerm)), RejectBadType},
		{"forwarded proposal", lead, groupMsg(t, g, prop), RejectBadType},
		{"forwarded leader transfer", lead, groupMsg(t, g, msg(raftpb.MsgTransferLeader, lead, f, v0.term)), RejectBadType},
		{"unknown type", lead, groupMsg(t, g, msg(raftpb.MessageType(99), lead, f, v0.term)), RejectBadType},
		{"append with a gap", lead, groupMsg(t, g, gap), RejectMalformed},
		{"snapshot of another group", lead, groupMsg(t, g, snap(2, v0.last+10, c.ids...)), RejectMalformed},
		{"snapshot naming a non-member voter", lead, groupMsg(t, g, snap(g, v0.last+10, append(c.ids, stranger)...)), RejectMalformed},
	}
	for _, tc := range cases {
		before := counters[f].counts()
		if err := s.Receive(tc.from, []*internalpb.GroupMessage{tc.gm}); err != nil {
			t.Fatalf("%s: Receive = %v; a dropped message must not end the peer's stream", tc.name, err)
		}
		after := counters[f].counts()
		for _, r := range RejectReasons() {
			want := before[r]
			if r == tc.reason {
				want++
			}
			if after[r] != want {
				t.Fatalf("%s: %q counted %d times, want %d (counts %v)", tc.name, r, after[r]-before[r], want-before[r], after)
			}
		}
	}
	// Raft saw none of it: the term did not jump (a real election may
	// move it on a loaded machine), the leader is a member, and no
	// forged entry is in the log.
	for _, gg := range c.groups {
		v := viewOf(t, s, gg)
		if gg == g && (v.term < v0.term || v.term > v0.term+100 || v.lastTerm > v0.term+100) {
			t.Fatalf("group %d: term %d, last entry's term %d after the rejected messages (term %d before)", gg, v.term, v.lastTerm, v0.term)
		}
		if v.term >= absurdTerm || (v.lead != 0 && !c.isMember(v.lead)) {
			t.Fatalf("group %d on node %d: term %d, leader %d", gg, f, v.term, v.lead)
		}
	}
	// The group carries on, and the node still opens after a restart
	// (an absurd term once made every restart panic).
	c.waitConverged(g, c.put(g, "after", "1"))
	c.stop(f)
	c.closeWAL(f)
	c.start(f)
	c.waitConverged(g, c.put(g, "after-restart", "1"))
	if v := viewOf(t, c.store(f), g); v.term >= absurdTerm {
		t.Fatalf("restarted node has term %d", v.term)
	}
	for _, id := range c.ids {
		if id == f {
			continue
		}
		if n := counters[id].counts(); len(n) > 0 {
			t.Fatalf("node %d dropped messages of a healthy cluster: %v", id, n)
		}
	}
}

// isMember says whether id is one of the cluster's nodes.
func (c *testCluster) isMember(id uint64) bool {
	for _, x := range c.ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestReceiveKeepsGoodMessages: the messages of a batch that pass the
// door reach raft even when others in the batch are dropped.
func TestReceiveKeepsGoodMessages(t *testing.T) {
	var counters [4]rejectCounter
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.Rejected = counters[id].hook
	}})
	const g = 1
	c.waitConverged(g, c.put(g, "k", "v"))
	lead := c.waitLeader(g)
	f := c.ids[0]
	if f == lead {
		f = c.ids[1]
	}
	v0 := viewOf(t, c.store(f), g)
	// The leader hands leadership over: f campaigns in a newer term.
	timeout := &raftpb.Message{Type: raftpb.MsgTimeoutNow.Enum(), From: new(lead), To: new(f), Term: new(v0.term)}
	batch := []*internalpb.GroupMessage{
		{Group: g, Message: []byte("not a message")},
		groupMsg(t, g, &raftpb.Message{Type: raftpb.MsgHup.Enum(), From: new(lead), To: new(f)}),
		groupMsg(t, g, timeout),
	}
	if err := c.store(f).Receive(lead, batch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower to campaign", func() bool { return viewOf(t, c.store(f), g).term > v0.term })
	if n := counters[f].counts(); n[RejectDecode] != 1 || n[RejectBadType] != 1 {
		t.Fatalf("counts %v, want one decode and one bad_type", n)
	}
}

// TestHeartbeatBeyondLog: a heartbeat whose commit index lies beyond the
// follower's log stops the node through OnFatal with ErrLogBehind and a
// message that says what happened and what to do; raft never sees it (it
// would panic). The other replicas carry on.
func TestHeartbeatBeyondLog(t *testing.T) {
	var fatal [4]slot[error]
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.OnFatal = fatal[id].store
	}})
	const g = 1
	c.waitConverged(g, c.put(g, "k", "v"))
	lead := c.waitLeader(g)
	f := c.ids[0]
	if f == lead {
		f = c.ids[1]
	}
	s := c.store(f)
	v := viewOf(t, s, g)
	commit := v.last + 1000
	// A newer term, so that an election meanwhile cannot make it stale.
	hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(lead), To: new(f), Term: new(v.term + 1), Commit: new(commit)}
	if err := s.Receive(lead, []*internalpb.GroupMessage{groupMsg(t, g, hb)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "OnFatal", func() bool { return fatal[f].load() != nil })
	err := fatal[f].load()
	if !errors.Is(err, ErrLogBehind) {
		t.Fatalf("OnFatal(%v), want ErrLogBehind", err)
	}
	for _, want := range []string{
		fmt.Sprintf("group %d", g), fmt.Sprintf("leader %d", lead),
		fmt.Sprintf("up to index %d", commit), fmt.Sprintf("ends at index %d", v.last),
		"lost or rolled back", "rebuild this replica",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("OnFatal message lacks %q: %v", want, err)
		}
	}
	if !errors.Is(s.Err(), ErrLogBehind) {
		t.Fatalf("Err() = %v", s.Err())
	}
	if err := s.Receive(lead, nil); !errors.Is(err, ErrNotServing) {
		t.Fatalf("Receive after the stop: %v, want ErrNotServing", err)
	}
	<-s.donec // the loop has ended; its state is still there to read
	if term := s.groups[g].rn.BasicStatus().HardState.GetTerm(); term > v.term {
		t.Fatalf("raft took the heartbeat's term: %d", term)
	}
	c.stop(f)
	c.waitConverged(g, c.put(g, "after", "1"))
	for _, id := range c.ids {
		if id != f && fatal[id].load() != nil {
			t.Fatalf("node %d stopped: %v", id, fatal[id].load())
		}
	}
}

// TestRolledBackWALStops restarts a follower over an older copy of its
// WAL (a data directory copied back): the leader's heartbeats carry a
// commit index this node acknowledged and no longer holds, and the node
// stops with ErrLogBehind instead of raft's panic.
func TestRolledBackWALStops(t *testing.T) {
	var fatal [4]slot[error]
	c := newTestCluster(t, clusterOptions{groups: 1, config: func(id uint64, cfg *Config) {
		cfg.OnFatal = fatal[id].store
	}})
	const g = 1
	c.waitConverged(g, c.put(g, "k0", "v"))
	lead := c.waitLeader(g)
	f := c.ids[0]
	if f == lead {
		f = c.ids[1]
	}
	c.stop(f)
	c.closeWAL(f)
	old := t.TempDir() + "/wal"
	if err := os.CopyFS(old, os.DirFS(c.dirs[f])); err != nil {
		t.Fatal(err)
	}
	c.start(f)
	var idx uint64
	for i := range 20 {
		idx = c.put(g, fmt.Sprintf("k%d", i+1), "v")
	}
	c.waitConverged(g, idx) // f acknowledged all of it
	c.stop(f)
	c.closeWAL(f)
	if err := os.RemoveAll(c.dirs[f]); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(c.dirs[f], os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	c.start(f)
	waitFor(t, "the rolled-back node to stop", func() bool { return fatal[f].load() != nil })
	if err := fatal[f].load(); !errors.Is(err, ErrLogBehind) || !strings.Contains(err.Error(), fmt.Sprintf("group %d", g)) {
		t.Fatalf("OnFatal(%v), want ErrLogBehind for group %d", err, g)
	}
	c.stop(f)
	c.waitConverged(g, c.put(g, "after", "1"))
}

// slot is a value set from another goroutine.
type slot[T any] struct {
	mu sync.Mutex
	v  T
}

func (a *slot[T]) store(v T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.v = v
}

func (a *slot[T]) load() T {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v
}

// TestCheckCommitMatchesRaft drives a follower's raft with random appends
// (a leader's log model whose later leaders cut uncommitted tails),
// snapshots, Readys and heartbeats, and checks, for every heartbeat, that
// the store stops exactly when raft would panic: never in normal
// operation, always before raft's "tocommit out of range". The test
// goroutine plays the loop. Rerun a failure with -seed.
func TestCheckCommitMatchesRaft(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	// flushed: heartbeats beyond lastLow that raft's log did hold (found
	// once the Readys were handed over); cut: heartbeats stopped although
	// within the log as the last Ready left it (an append since cut its
	// tail). Both need the exact last index, not a bound.
	fatals, steps, flushed, cut := 0, 0, 0, 0
	for round := range 300 {
		f, s := 0, openFollower(t)
		g := s.groups[1]
		// The leader's log: terms by index (index 0 unused); bootstrap
		// made entries 1 and 2 in term 1.
		terms := []uint64{0, 1, 1}
		term := uint64(1)
		leaderCommit := uint64(2)
	ops:
		for op := 0; op < 60 && f == 0; op++ {
			committed := g.rn.BasicStatus().HardState.GetCommit()
			leaderCommit = max(leaderCommit, committed)
			last := uint64(len(terms) - 1)
			var m *raftpb.Message
			switch rng.IntN(6) {
			case 0: // the leader appends
				for range 1 + rng.IntN(4) {
					terms = append(terms, term)
				}
				continue
			case 1: // a new leader, whose log lacks part of the uncommitted tail
				term++
				keep := leaderCommit + uint64(rng.IntN(int(last-leaderCommit)+1))
				terms = terms[:keep+1]
				for range rng.IntN(3) {
					terms = append(terms, term)
				}
				continue
			case 2: // an append
				prev := leaderCommit + uint64(rng.IntN(int(last-leaderCommit)+1))
				n := min(last-prev, uint64(rng.IntN(5)))
				m = &raftpb.Message{Type: raftpb.MsgApp.Enum(), Index: new(prev), LogTerm: new(terms[prev]), Commit: new(leaderCommit)}
				for i := prev + 1; i <= prev+n; i++ {
					m.Entries = append(m.Entries, &raftpb.Entry{Index: new(i), Term: new(terms[i])})
				}
			case 3: // a snapshot at a committed index
				leaderCommit = max(leaderCommit, min(last, leaderCommit+uint64(rng.IntN(3))))
				idx := committed + uint64(rng.IntN(int(leaderCommit-committed)+1))
				m = &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: &raftpb.Snapshot{Data: snapshotData(1, idx),
					Metadata: &raftpb.SnapshotMetadata{Index: new(idx), Term: new(terms[idx]), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}}}
			case 4: // the loop hands a Ready over
				if err := s.handleReady(); err != nil {
					t.Fatalf("seed %d: handleReady: %v", seed, err)
				}
				continue
			default: // a heartbeat, now and then of an older term
				c := uint64(rng.IntN(int(last) + 1))
				if rng.IntN(6) == 0 {
					c = last + 1 + uint64(rng.IntN(3))
				}
				ht := term
				if rng.IntN(8) == 0 && term > 1 {
					ht--
				}
				m = &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Commit: new(c), Term: new(ht)}
			}
			m.From, m.To = new(uint64(2)), new(uint64(1))
			if m.Term == nil {
				m.Term = new(term)
			}
			steps++
			low, lastReady := g.lastLow, g.lastIndex
			err := stepCatching(s, g, m)
			if m.GetType() == raftpb.MsgHeartbeat && m.GetCommit() > low {
				switch {
				case err == nil && g.rn.BasicStatus().HardState.GetCommit() == m.GetCommit():
					flushed++ // raft took it
				case err != nil && m.GetCommit() <= lastReady:
					cut++
				}
			}
			switch {
			case err == nil:
				if g.rn.BasicStatus().HardState.GetCommit() > leaderCommit {
					// A heartbeat committed what this leader never
					// committed: the model no longer holds (a real
					// leader sends at most what the follower matched).
					break ops
				}
			case errors.Is(err, ErrLogBehind):
				fatals++
				// The store refused it: raft must panic on it.
				if p := raftPanics(g, m); p == "" {
					t.Fatalf("seed %d round %d: the store stopped on %v, which raft takes: %v", seed, round, describe(m), err)
				}
				f = 1
			default:
				t.Fatalf("seed %d round %d: %v on %v", seed, round, err, describe(m))
			}
		}
		s.Stop()
	}
	t.Logf("%d messages stepped, %d stops (%d of a log cut since the last Ready), %d heartbeats past the bound taken", steps, fatals, cut, flushed)
	if fatals == 0 || flushed == 0 {
		t.Fatal("no heartbeat beyond the log, or none beyond the bound and within the log, in the whole run: the test checks too little")
	}
}

// TestCheckCommitAfterCutTail: the log a Ready left (entries to 5) is cut
// by a newer leader's append (to 4) before the next Ready: a heartbeat
// committing 5 must stop the node, as raft would panic on it; one
// committing what an append since the Ready added must not.
func TestCheckCommitAfterCutTail(t *testing.T) {
	s := openFollower(t)
	g := s.groups[1]
	app := func(term, prev, prevTerm uint64, ents ...uint64) *raftpb.Message {
		m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term),
			Index: new(prev), LogTerm: new(prevTerm), Commit: new(uint64(2))}
		for i, et := range ents {
			m.Entries = append(m.Entries, &raftpb.Entry{Index: new(prev + 1 + uint64(i)), Term: new(et)})
		}
		return m
	}
	hb := func(term, commit uint64) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(term), Commit: new(commit)}
	}
	mustStep := func(m *raftpb.Message) {
		t.Helper()
		if err := stepCatching(s, g, m); err != nil {
			t.Fatalf("%s: %v", describe(m), err)
		}
	}
	mustStep(app(1, 2, 1, 1, 1, 1)) // entries 3..5 of term 1
	if err := s.handleReady(); err != nil {
		t.Fatal(err)
	}
	if g.lastIndex != 5 || g.lastLow != 5 {
		t.Fatalf("after the Ready: lastIndex %d, lastLow %d; want 5, 5", g.lastIndex, g.lastLow)
	}
	mustStep(app(1, 5, 1, 1, 1)) // 6 and 7, no Ready yet
	mustStep(hb(1, 7))           // within the log: taken, after a flush
	if c := g.rn.BasicStatus().HardState.GetCommit(); c != 7 {
		t.Fatalf("commit %d after a heartbeat committing 7", c)
	}
	if err := s.handleReady(); err != nil {
		t.Fatal(err)
	}
	// Entries 3..7 are committed now; a new leader cuts nothing of them.
	// Build an uncommitted tail 8..10, hand it over, then cut it to 8.
	mustStep(app(1, 7, 1, 1, 1, 1))
	if err := s.handleReady(); err != nil {
		t.Fatal(err)
	}
	mustStep(app(2, 7, 1, 2)) // term 2's entry 8 replaces 8..10
	if g.lastIndex != 10 || g.lastLow != 8 {
		t.Fatalf("after the cut: lastIndex %d, lastLow %d; want 10, 8", g.lastIndex, g.lastLow)
	}
	m := hb(2, 10)
	err := stepCatching(s, g, m)
	if !errors.Is(err, ErrLogBehind) || !strings.Contains(err.Error(), "ends at index 8") {
		t.Fatalf("heartbeat committing 10 over a log cut to 8: %v, want ErrLogBehind naming index 8", err)
	}
	if p := raftPanics(g, m); !strings.Contains(p, "out of range") {
		t.Fatalf("raft takes the heartbeat the store refused (panic %q)", p)
	}
}

// openFollower opens (does not start) a store holding group 1 of peers 1
// and 2 as node 1, bootstrapped, over a new WAL.
func openFollower(t *testing.T) *Store {
	t.Helper()
	w, err := wal.Open(t.TempDir(), wal.Options{Logger: quietLogger, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	s, err := Open(Config{RaftID: 1, WAL: w, Transport: newTestNet().transport(1), Logger: quietLogger, Bootstrap: true,
		Groups: []GroupConfig{{ID: 1, Peers: []uint64{1, 2}, SM: partition.New(1)}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// stepCatching is s.step, with raft's panic turned into a test failure.
func stepCatching(s *Store, g *group, m *raftpb.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("raft panicked on %v: %v", describe(m), p)
		}
	}()
	return s.step(g, m)
}

// raftPanics steps m straight into raft and returns its panic, "" if none.
func raftPanics(g *group, m *raftpb.Message) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	_ = g.rn.Step(m)
	return ""
}

func describe(m *raftpb.Message) string {
	return fmt.Sprintf("%s term %d index %d logterm %d commit %d entries %d", m.GetType(), m.GetTerm(), m.GetIndex(), m.GetLogTerm(), m.GetCommit(), len(m.GetEntries()))
}

// TestPeerSendsNoLocalMessage: the types a peer may send exclude every
// type raft keeps node-local, and proposals, which followers here do not
// forward.
func TestPeerSendsNoLocalMessage(t *testing.T) {
	allowed := 0
	for v := range raftpb.MessageType_name {
		typ := raftpb.MessageType(v)
		if raft.IsLocalMsg(typ) && peerSends(typ) {
			t.Errorf("%v is node-local but accepted from peers", typ)
		}
		if peerSends(typ) {
			allowed++
		}
	}
	if peerSends(raftpb.MsgProp) || peerSends(raftpb.MsgForgetLeader) || peerSends(raftpb.MsgTransferLeader) {
		t.Error("a type no peer of this store sends is accepted")
	}
	if peerSends(raftpb.MessageType(len(raftpb.MessageType_name) + 5)) {
		t.Error("an unknown type is accepted")
	}
	if allowed != 12 {
		t.Errorf("%d types accepted from peers, want 12", allowed)
	}
}

func TestRejectLog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	steps := []struct {
		reason string
		at     time.Duration
		ok     bool
		held   int
	}{
		{"a", 0, true, 0},
		{"a", time.Second, false, 0},
		{"b", time.Second, true, 0}, // reasons are limited apart
		{"a", 2 * time.Second, false, 0},
		{"a", rejectLogEvery, true, 2},
		{"a", rejectLogEvery + time.Second, false, 0},
		{"a", 3 * rejectLogEvery, true, 1},
		{"b", 3 * rejectLogEvery, true, 0},
	}
	var r rejectLog
	for i, st := range steps {
		ok, held := r.note(st.reason, t0.Add(st.at))
		if ok != st.ok || held != st.held {
			t.Errorf("step %d (%s at %v): note = %v, %d; want %v, %d", i, st.reason, st.at, ok, held, st.ok, st.held)
		}
	}
}

// FuzzReceive feeds Receive random bytes as the message of random groups
// from random senders: it never panics, and a message the door refuses
// never reaches the loop (the store is not started: anything handed to
// raft would sit in its inbox). What the door lets through satisfies
// every rule it stands for.
func FuzzReceive(f *testing.F) {
	w, err := wal.Open(f.TempDir(), wal.Options{Logger: quietLogger, NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer w.Close()
	var counter rejectCounter
	s, err := Open(Config{RaftID: 1, WAL: w, Transport: newTestNet().transport(1), Logger: quietLogger,
		Rejected: counter.hook, Bootstrap: true,
		Groups: []GroupConfig{
			{ID: 1, Peers: []uint64{1, 2, 3}, SM: partition.New(1)},
			{ID: 2, Peers: []uint64{2, 1}, SM: partition.New(2)},
		}})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Stop()
	seed := func(g, from uint64, m *raftpb.Message) {
		f.Add(groupMsg(f, g, m).GetMessage(), g, from)
	}
	seed(1, 2, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(3)), Commit: new(uint64(2))})
	seed(1, 9, &raftpb.Message{Type: raftpb.MsgVote.Enum(), From: new(uint64(9)), To: new(uint64(1)), Term: new(absurdTerm)})
	seed(2, 2, &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(2)), To: new(uint64(1)), Term: new(uint64(2)),
		Index: new(uint64(2)), LogTerm: new(uint64(1)), Entries: []*raftpb.Entry{{Index: new(uint64(3)), Term: new(uint64(2))}}})
	seed(1, 3, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(3)), To: new(uint64(1)), Term: new(uint64(2)),
		Snapshot: &raftpb.Snapshot{Data: snapshotData(1, 7), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(7)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}})
	seed(1, 2, &raftpb.Message{Type: raftpb.MsgHup.Enum(), From: new(uint64(2)), To: new(uint64(1))})
	f.Add([]byte{0xff, 0x01}, uint64(1), uint64(2))
	f.Add([]byte{}, uint64(99), uint64(2))
	f.Fuzz(func(t *testing.T, data []byte, group, from uint64) {
		gm := &internalpb.GroupMessage{Group: group, Message: data}
		before := counter.counts()
		g, m, reason := s.admit(from, gm)
		if (reason == "") == (g == nil) {
			t.Fatalf("admit returned group %v with reason %q", g, reason)
		}
		if reason != "" {
			if err := s.Receive(from, []*internalpb.GroupMessage{gm}); err != nil {
				t.Fatalf("Receive of a refused message: %v", err)
			}
			if n := len(s.inbox); n != 0 {
				t.Fatalf("a message refused for %q reached the loop's inbox", reason)
			}
			after := counter.counts()
			for _, r := range RejectReasons() {
				want := before[r]
				if r == reason {
					want++
				}
				if after[r] != want {
					t.Fatalf("reason %q counted %d more times, want %d", r, after[r]-before[r], want-before[r])
				}
			}
			return
		}
		// Let through: every rule holds.
		var peers []uint64
		if g.id == 1 {
			peers = []uint64{2, 3}
		} else {
			peers = []uint64{2}
		}
		ok := false
		for _, p := range peers {
			ok = ok || p == from
		}
		switch {
		case g.id != group || !ok:
			t.Fatalf("message of group %d from %d let through", group, from)
		case m.GetFrom() != from || m.GetTo() != 1:
			t.Fatalf("message from %d to %d in a batch from %d let through", m.GetFrom(), m.GetTo(), from)
		case raft.IsLocalMsg(m.GetType()) || m.GetType() == raftpb.MsgProp:
			t.Fatalf("%v let through", m.GetType())
		}
		if m.GetType() == raftpb.MsgApp {
			for i, e := range m.GetEntries() {
				if e.GetIndex() != m.GetIndex()+1+uint64(i) {
					t.Fatalf("append's entry %d has index %d after %d", i, e.GetIndex(), m.GetIndex())
				}
			}
		}
	})
}
